//! The never-list: what of a person's home no sandbox line of Link Run's shows, whatever a
//! program asks (SPEC, "Real work in the sandbox"): keys, credentials, tokens, browser
//! profiles, shell histories. Paths are relative to the home; the agent's keyring and the
//! state folder are on it too, and are given by the caller.

use std::path::{Path, PathBuf};

/// Relative to the home: each is never bound, nor a folder that holds it. The SPEC's list
/// first, then other well-known places of secrets; `config`'s line and `--cache` both keep to
/// it (docs/sandbox.md lists it for a person).
pub const IN_HOME: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".config/gh",
    ".git-credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    // Browser profiles.
    ".mozilla",
    ".librewolf",
    ".waterfox",
    ".thunderbird",
    ".config/google-chrome",
    ".config/google-chrome-beta",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    "snap/firefox",
    "snap/chromium",
    ".var/app",
    // Shell and interpreter histories.
    ".bash_history",
    ".zsh_history",
    ".zhistory",
    ".histfile",
    ".sh_history",
    ".history",
    ".local/share/fish",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".irb_history",
    ".lesshst",
    ".rediscli_history",
    // Other stores of secrets and tokens.
    ".config/git/credentials",
    ".git-credential-cache",
    ".password-store",
    ".local/share/keyrings",
    ".pki",
    ".config/op",
    ".vault-token",
    ".terraform.d",
    ".config/hub",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".boto",
    ".oci",
    ".config/containers/auth.json",
    ".config/rclone",
    ".config/doctl",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    // The agents' own hosts: their logins and tokens.
    ".claude",
    ".claude.json",
    ".codex",
    ".gemini",
    ".config/Claude",
    ".config/github-copilot",
];

/// Whether one of `a` and `b` is the other or lies inside it.
pub fn overlap(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// The never-list entry `path` is, lies in or holds, if any: the home's entries (`home`, when
/// known) and `others` (the keyring, the state folder), each named for a person.
pub fn touches(path: &Path, home: Option<&Path>, others: &[(&str, &Path)]) -> Option<String> {
    if let Some(home) = home {
        for entry in IN_HOME {
            let never = home.join(entry);
            if overlap(path, &never) {
                return Some(format!("~/{entry}"));
            }
        }
    }
    others
        .iter()
        .find(|(_, never)| overlap(path, never))
        .map(|(what, never)| format!("{what} {}", never.display()))
}

/// The person's home: `HOME` when it is an absolute path.
pub fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|home| home.is_absolute())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_touches_what_it_is_in_or_holds() {
        let home = Path::new("/home/me");
        let touches = |p: &str| touches(Path::new(p), Some(home), &[]);
        assert_eq!(touches("/home/me/.ssh"), Some("~/.ssh".to_owned()));
        assert_eq!(touches("/home/me/.ssh/keys"), Some("~/.ssh".to_owned()));
        assert_eq!(
            touches("/home/me/.config"),
            Some("~/.config/gcloud".to_owned())
        );
        assert_eq!(
            touches("/home/me/.cargo"),
            Some("~/.cargo/credentials".to_owned())
        );
        assert_eq!(touches("/home/me/.cargo/registry"), None);
        assert_eq!(touches("/home/me/.npm"), None);
        assert_eq!(touches("/home/me/.sshd"), None);
        let state = Path::new("/home/me/.local/state/lnk");
        assert_eq!(
            super::touches(
                Path::new("/home/me/.local"),
                None,
                &[("the state folder", state)]
            ),
            Some("the state folder /home/me/.local/state/lnk".to_owned())
        );
    }
}
