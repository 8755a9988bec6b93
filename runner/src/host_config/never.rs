//! The never-list as the line `config` builds keeps to it: [`crate::sandbox_line::never_list::IN_HOME`] (the
//! user's keys, credentials and tokens, browser profiles, shell histories) in the home as named
//! and resolved, cargo's credentials in any `CARGO_HOME`, the agent's keyring and the state
//! folder. A bind is refused when it is one of them, lies
//! inside one, or holds one (an ancestor of `~/.ssh`, such as the home itself, shows it).
//! `config --read` binds one only with `--force`.

use std::path::{Path, PathBuf};

/// Names in a home folder that are secrets by their start: cargo's registry tokens
/// (`credentials`, `credentials.toml`).
const PREFIXES_IN_HOME: &[(&str, &str)] = &[(".cargo", "credentials")];

/// One entry of the list.
#[derive(Debug, Clone)]
enum Never {
    /// This path, and everything in it.
    Path(PathBuf),
    /// Every name in `folder` that starts with `prefix`.
    Prefix { folder: PathBuf, prefix: String },
}

/// The never-list for one user: what is in their home, the agent's keyring, the state folder.
#[derive(Debug, Clone)]
pub struct NeverList {
    entries: Vec<Never>,
}

impl NeverList {
    /// The list for the home (as named and resolved: `homes`), with `extra` paths (the keyring, the state folder, `CARGO_HOME`'s
    /// credentials when it is not `~/.cargo`, …): each entry as named and, where it exists,
    /// resolved, so that a link to it or through it is caught too.
    pub fn new(homes: &[&Path], extra: &[PathBuf], cargo_homes: &[PathBuf]) -> NeverList {
        let mut entries = Vec::new();
        let mut add = |entry: Never| {
            if let Some(resolved) = entry.resolved() {
                entries.push(resolved);
            }
            entries.push(entry);
        };
        for home in homes {
            for rel in crate::sandbox_line::never_list::IN_HOME {
                add(Never::Path(home.join(rel)));
            }
            for (folder, prefix) in PREFIXES_IN_HOME {
                add(Never::Prefix {
                    folder: home.join(folder),
                    prefix: (*prefix).to_owned(),
                });
            }
        }
        for cargo_home in cargo_homes {
            add(Never::Prefix {
                folder: cargo_home.clone(),
                prefix: "credentials".to_owned(),
            });
        }
        for path in extra {
            add(Never::Path(path.clone()));
        }
        NeverList { entries }
    }

    /// What on the list `path` is, lies in, or holds (as named, and resolved where it
    /// exists): `None` when it may be bound.
    pub fn blocks(&self, path: &Path) -> Option<PathBuf> {
        let resolved = path.canonicalize().ok();
        for candidate in std::iter::once(path).chain(resolved.as_deref()) {
            for entry in &self.entries {
                if let Some(hit) = entry.meets(candidate) {
                    return Some(hit);
                }
            }
        }
        None
    }
}

impl Never {
    /// The same entry with its folder resolved, when that differs from the entry as named.
    fn resolved(&self) -> Option<Never> {
        match self {
            Never::Path(path) => {
                let real = path.canonicalize().ok()?;
                (real != *path).then_some(Never::Path(real))
            }
            Never::Prefix { folder, prefix } => {
                let real = folder.canonicalize().ok()?;
                (real != *folder).then(|| Never::Prefix {
                    folder: real,
                    prefix: prefix.clone(),
                })
            }
        }
    }

    /// The entry's path when `path` is it, lies in it, or holds it.
    fn meets(&self, path: &Path) -> Option<PathBuf> {
        match self {
            Never::Path(never) => {
                (path.starts_with(never) || never.starts_with(path)).then(|| never.clone())
            }
            Never::Prefix { folder, prefix } => {
                if folder.starts_with(path) {
                    return Some(folder.join(format!("{prefix}*")));
                }
                let rest = path.strip_prefix(folder).ok()?;
                let first = rest.components().next()?;
                first
                    .as_os_str()
                    .to_str()
                    .is_some_and(|name| name.starts_with(prefix.as_str()))
                    .then(|| folder.join(first))
            }
        }
    }
}

/// The keyring folders Link may use for this user, whether or not a flag names one: the
/// agent's keys are never bound, wherever they are.
pub fn keyrings(home: &Path, var: &dyn Fn(&str) -> Option<std::ffi::OsString>) -> Vec<PathBuf> {
    let mut found = vec![home.join(".config/lnk")];
    if let Some(dir) = var("LNK_KEYRING").filter(|v| !v.is_empty()) {
        found.push(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_CONFIG_HOME").filter(|v| !v.is_empty()) {
        found.push(PathBuf::from(dir).join("lnk"));
    }
    found.retain(|p| p.is_absolute());
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_secret_what_lies_in_it_and_what_holds_it_are_blocked() {
        let list = NeverList::new(&[Path::new("/h")], &[PathBuf::from("/s/state")], &[]);
        for blocked in [
            "/h/.ssh",
            "/h/.ssh/id_ed25519",
            "/h",
            "/",
            "/h/.config",
            "/h/.cargo",
            "/h/.cargo/credentials.toml",
            "/h/.cargo/credentials",
            "/s",
            "/s/state/x",
        ] {
            assert!(list.blocks(Path::new(blocked)).is_some(), "{blocked}");
        }
        for allowed in [
            "/h/.cargo/bin",
            "/h/.cargo/config.toml",
            "/h/.rustup",
            "/h/.config/git/config",
            "/h/.gitconfig",
            "/h/.sshx",
            "/opt/go",
        ] {
            assert_eq!(list.blocks(Path::new(allowed)), None, "{allowed}");
        }
    }

    #[test]
    fn a_link_to_a_secret_is_caught_by_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        std::fs::create_dir(home.join(".ssh")).unwrap();
        std::os::unix::fs::symlink(home.join(".ssh"), home.join("innocent")).unwrap();
        let list = NeverList::new(&[&home], &[], &[]);
        assert_eq!(list.blocks(&home.join("innocent")), Some(home.join(".ssh")));
    }
}
