//! serve's command line for a host's entry: paths made absolute here, in the person's shell
//! (a host passes arguments without one, and serve refuses what is not absolute), and the
//! sandbox given after `--` or, without one, the recommended bubblewrap line for this machine.

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use super::machine::MachinePart;

/// The flags whose value is a path that serve needs absolute.
const PATH_FLAGS: [&str; 5] = ["--files", "--state", "--keyring", "--way-in", "--cache"];

/// The README's recommended line after the bubblewrap program, with `FILES` for `--files`.
const RECOMMENDED: &[&str] = &[
    "--ro-bind",
    "/usr",
    "/usr",
    "--ro-bind",
    "/etc",
    "/etc",
    "--ro-bind-try",
    "/bin",
    "/bin",
    "--ro-bind-try",
    "/sbin",
    "/sbin",
    "--ro-bind-try",
    "/lib",
    "/lib",
    "--ro-bind-try",
    "/lib64",
    "/lib64",
    "--ro-bind-try",
    "/lib32",
    "/lib32",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--tmpfs",
    "/tmp",
    "--bind",
    FILES,
    FILES,
    "{protected}",
    "--unshare-all",
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
];
const FILES: &str = "{files}";

/// serve's arguments, `serve` first, with the paths absolute and a sandbox after `--`.
#[derive(Debug)]
pub struct ServeLine {
    /// `serve`, the flags, `--`, the sandbox.
    pub argv: Vec<OsString>,
    /// Whether the sandbox is the recommended line this made.
    pub recommended: bool,
}

impl ServeLine {
    /// Adds the machine's part of the recommended line: its `--var`s after the person's
    /// flags, its words right before the files folder's bind (the home's tmpfs and what is
    /// shown of it go under the files folder, which may lie in the home).
    pub fn add_machine(&mut self, part: &MachinePart, files: &Path) -> Result<(), String> {
        let separator = self
            .argv
            .iter()
            .position(|w| w == "--")
            .unwrap_or(self.argv.len());
        let vars = part
            .vars
            .iter()
            .flat_map(|(name, value)| ["--var".into(), OsString::from(format!("{name}={value}"))]);
        self.argv.splice(separator..separator, vars);
        let files = files.as_os_str();
        let bind = self
            .argv
            .windows(2)
            .rposition(|pair| pair[0] == "--bind" && (pair[1] == files || pair[1] == FILES))
            .ok_or("the recommended line does not bind the files folder")?;
        self.argv
            .splice(bind..bind, part.words.iter().map(OsString::from));
        Ok(())
    }
}

/// `path` as the person's shell would mean it: `~` and `~/…` in `home`, relative ones in the
/// folder `config` runs in.
pub fn expanded(path: &Path, home: &Path) -> Result<PathBuf, String> {
    absolute("--read", path.as_os_str(), home).map(PathBuf::from)
}

/// The person's home, which `~` stands for.
pub fn home() -> Result<PathBuf, String> {
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        // A home written with `.` or `..` in it is resolved, so that what lies in it is told
        // from what lies in the files folder by the paths themselves; one written plainly is
        // kept as it is (a home reached through a link keeps the paths its owner's PATH uses).
        Some(home) if Path::new(&home).is_absolute() => {
            let home = PathBuf::from(home);
            let plain = home
                .components()
                .all(|c| !matches!(c, Component::CurDir | Component::ParentDir));
            if plain {
                return Ok(home);
            }
            std::fs::canonicalize(&home)
                .map_err(|e| format!("HOME {}: {}", home.display(), lnk_common::Causes(&e)))
        }
        Some(home) => Err(format!(
            "HOME {} is not an absolute path",
            Path::new(&home).display()
        )),
        None => Err("HOME is not set, so `~` and the host's own files cannot be found".into()),
    }
}

/// `path` as the person's shell would mean it: `~` and `~/…` in `home`, relative ones in the
/// folder `config` runs in; `--files` resolved as serve resolves it.
fn absolute(flag: &str, path: &OsStr, home: &Path) -> Result<OsString, String> {
    let text = Path::new(path);
    let expanded = if text == Path::new("~") {
        home.to_path_buf()
    } else if let Ok(rest) = text.strip_prefix("~") {
        home.join(rest)
    } else {
        text.to_path_buf()
    };
    let absolute =
        std::path::absolute(&expanded).map_err(|e| format!("{flag} {}: {e}", text.display()))?;
    if flag == "--files" {
        // serve canonicalizes it; the entry and the sandbox's bind name the same folder.
        return absolute
            .canonicalize()
            .map(PathBuf::into_os_string)
            .map_err(|e| format!("--files {}: {e}", absolute.display()));
    }
    Ok(absolute.into_os_string())
}

/// bubblewrap on this machine: `bwrap` in the absolute folders of `PATH`, as serve finds a
/// bare sandbox program (`/usr/bin/bwrap` where it is installed as a package).
pub fn find_bwrap(path: Option<&OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path.unwrap_or_default())
        .filter(|folder| folder.is_absolute())
        .map(|folder| folder.join("bwrap"))
        .find(|candidate| crate::program::is_executable_file(candidate))
}

/// What to say when bubblewrap is not there.
pub fn install_bubblewrap() -> String {
    "bubblewrap (`bwrap`) is not installed, and without a sandbox line after `--` the entry uses \
     the recommended bubblewrap line: install it (Debian, Ubuntu: `sudo apt-get install \
     bubblewrap`; Fedora, RHEL: `sudo dnf install bubblewrap`; Arch: `sudo pacman -S \
     bubblewrap`), or give a sandbox line of your own after `--`; nothing was written"
        .to_owned()
}

/// serve's command line from the person's `args` (flags as two words, then `--` and the
/// sandbox, if any).
pub fn serve_line(args: &[OsString], home: &Path) -> Result<ServeLine, String> {
    let mut argv = vec![OsString::from("serve")];
    let mut files: Option<OsString> = None;
    let mut words = args.iter();
    let mut sandbox: Option<Vec<OsString>> = None;
    while let Some(word) = words.next() {
        if word == "--" {
            sandbox = Some(words.by_ref().cloned().collect());
            break;
        }
        argv.push(word.clone());
        let Some(flag) = word.to_str().filter(|w| PATH_FLAGS.contains(w)) else {
            continue;
        };
        if let Some(value) = words.next() {
            let value = absolute(flag, value, home)?;
            if flag == "--files" {
                files = Some(value.clone());
            }
            argv.push(value);
        }
    }
    // A lone `--`, or `--` alone after the sandbox's own: no sandbox given.
    let given = sandbox.filter(|words| words.iter().any(|w| w != "--"));
    let recommended = given.is_none();
    // With --files-from roots the line keeps the word {files}, which serve fills in with each
    // session's project folder.
    if files.is_none() && argv.iter().any(|w| w == "--files-from") {
        files = Some(OsString::from(FILES));
    }
    let sandbox = match given {
        Some(words) => words,
        None => {
            let Some(files) = files else {
                return Err(
                    "--files is required: the folder the calls work in (the recommended \
                     sandbox line binds it)"
                        .into(),
                );
            };
            let bwrap =
                find_bwrap(std::env::var_os("PATH").as_deref()).ok_or_else(install_bubblewrap)?;
            let mut line: Vec<OsString> = std::iter::once(bwrap.into_os_string())
                .chain(RECOMMENDED.iter().map(|word| {
                    if *word == FILES {
                        files.clone()
                    } else {
                        OsString::from(word)
                    }
                }))
                .collect();
            // This machine's caches: `--cache` flags, and `{caches}` after the files' bind.
            super::caches::add(&mut argv, &mut line, home, Path::new(&files));
            line
        }
    };
    argv.push(OsString::from("--"));
    argv.extend(sandbox);
    Ok(ServeLine { argv, recommended })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testing::words;

    #[test]
    fn paths_are_made_absolute_as_the_shell_means_them() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let home = real.join("home");
        std::fs::create_dir_all(home.join("work")).unwrap();
        let line = serve_line(
            &words(&[
                "--files",
                "~/work",
                "--state",
                "~/state",
                "--timeout",
                "4m",
                "--",
                "/usr/bin/env",
            ]),
            &home,
        )
        .unwrap();
        let expected = [
            "serve".into(),
            "--files".into(),
            home.join("work").into_os_string(),
            "--state".into(),
            home.join("state").into_os_string(),
            "--timeout".into(),
            "4m".into(),
            "--".into(),
            "/usr/bin/env".into(),
        ];
        assert_eq!(line.argv, expected);
        assert!(!line.recommended);
    }

    #[test]
    fn without_a_sandbox_the_recommended_line_binds_the_files_folder() {
        if find_bwrap(std::env::var_os("PATH").as_deref()).is_none() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let line = serve_line(&words(&["--files", real.to_str().unwrap(), "--"]), &real).unwrap();
        assert!(line.recommended);
        let files = real.into_os_string();
        let at = line.argv.iter().position(|w| w == "--bind").unwrap();
        assert_eq!(line.argv[at + 1..at + 3], [files.clone(), files]);
        assert_eq!(line.argv.last().unwrap(), "--clearenv");
    }
}
