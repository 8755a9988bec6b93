//! What to bind so that a program's real file runs: its install's root where there is one
//! (`/opt/go` for `/opt/go/bin/go`, `~/.nvm/versions/node/v20.11.0` for its `bin/node`),
//! else its own folder, else the file alone — the first that is neither a folder that holds
//! much besides (the home, `~/.local`, `~/.config`, `/opt`, …) nor anything of the never-list.

use std::path::{Path, PathBuf};

use crate::host_config::never::NeverList;

/// Folders of the home that hold far more than one toolchain: never bound whole.
const WIDE_IN_HOME: &[&str] = &[
    ".local",
    ".local/share",
    ".local/state",
    ".local/lib",
    ".local/bin",
    ".config",
    ".cache",
    ".var",
    "snap",
    "bin",
];

/// The folders the recommended line shows already, read-only, as the host has them.
pub const SYSTEM: &[&str] = &["/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64", "/lib32"];

/// Whether `path` (resolved) is shown by the recommended line's own binds.
pub fn shown_by_system(path: &Path) -> bool {
    SYSTEM.iter().any(|folder| path.starts_with(folder))
}

/// What may be bound read-only for a toolchain, for one user and files folder.
#[derive(Debug)]
pub struct Guard {
    /// The home, resolved.
    pub home: PathBuf,
    /// The files folder, resolved (`None` with `--files-from roots`: each session's own).
    pub files: Option<PathBuf>,
    /// The never-list.
    pub never: NeverList,
}

impl Guard {
    /// Why `path` (resolved) may not be bound for a toolchain, or `None` when it may.
    pub fn refuses(&self, path: &Path) -> Option<String> {
        if let Some(secret) = self.never.blocks(path) {
            return Some(format!("it holds or is {}", secret.display()));
        }
        if let Some(tokens) = cargo_credentials_in(path) {
            return Some(format!(
                "it holds {}, a cargo home's registry tokens",
                tokens.display()
            ));
        }
        if self.home.starts_with(path) {
            return Some("it holds the home folder".to_owned());
        }
        if path.parent().is_none_or(|parent| parent == Path::new("/")) {
            return Some("it is a top-level folder".to_owned());
        }
        if WIDE_IN_HOME.iter().any(|rel| self.home.join(rel) == path) {
            return Some("it holds far more than one toolchain".to_owned());
        }
        None
    }

    /// Whether `path` (resolved) is visible inside without a bind of its own: the system's
    /// folders, and the files folder.
    pub fn shown(&self, path: &Path) -> bool {
        shown_by_system(path)
            || self
                .files
                .as_ref()
                .is_some_and(|files| path.starts_with(files))
    }

    /// What to bind for the real file `real` (resolved): its install's root, its folder, or
    /// itself, the first the guard allows; `None` when it is shown already or nothing may be
    /// bound (then with why).
    pub fn root_of(&self, real: &Path) -> Result<Option<PathBuf>, String> {
        if self.shown(real) {
            return Ok(None);
        }
        let mut why = String::new();
        for candidate in candidates(real) {
            match self.refuses(&candidate) {
                None => return Ok(Some(candidate)),
                Some(reason) => {
                    why = format!("{} is not bound: {reason}", candidate.display());
                }
            }
        }
        Err(why)
    }
}

/// The registry tokens `folder` holds when it is a cargo home (`credentials.toml`, or the
/// older `credentials`): any cargo home, not only the user's own or `CARGO_HOME`, since a
/// program found through a link may live in another one (a shared install's, another user's).
fn cargo_credentials_in(folder: &Path) -> Option<PathBuf> {
    ["credentials.toml", "credentials"]
        .iter()
        .map(|name| folder.join(name))
        .find(|path| std::fs::symlink_metadata(path).is_ok())
}

/// The install's root of `real` (the folder above its `bin`, `sbin` or `libexec`), its own
/// folder, then the file itself.
fn candidates(real: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(folder) = real.parent() {
        let in_bin = folder
            .file_name()
            .is_some_and(|name| name == "bin" || name == "sbin" || name == "libexec");
        if in_bin && let Some(root) = folder.parent() {
            out.push(root.to_path_buf());
        }
        out.push(folder.to_path_buf());
    }
    out.push(real.to_path_buf());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Guard {
        let home = PathBuf::from("/h");
        Guard {
            never: NeverList::new(&[&home], &[], &[]),
            files: Some(home.join("work")),
            home,
        }
    }

    #[test]
    fn the_install_s_root_unless_it_holds_too_much() {
        let g = guard();
        let root = |p: &str| g.root_of(Path::new(p));
        assert_eq!(root("/opt/go/bin/go"), Ok(Some(PathBuf::from("/opt/go"))));
        assert_eq!(
            root("/h/.nvm/versions/node/v20/bin/node"),
            Ok(Some(PathBuf::from("/h/.nvm/versions/node/v20")))
        );
        // `~/.local/bin/x`: not `~/.local`, not `~/.local/bin`: the file.
        assert_eq!(
            root("/h/.local/bin/x"),
            Ok(Some(PathBuf::from("/h/.local/bin/x")))
        );
        // `~/bin/x`: not the home, not `~/bin`: the file.
        assert_eq!(root("/h/bin/x"), Ok(Some(PathBuf::from("/h/bin/x"))));
        // `~/.cargo/bin/rustup`: not `~/.cargo`, which holds credentials.
        assert_eq!(
            root("/h/.cargo/bin/rustup"),
            Ok(Some(PathBuf::from("/h/.cargo/bin")))
        );
        assert_eq!(root("/usr/local/bin/git"), Ok(None));
        assert_eq!(root("/h/work/.venv/bin/python"), Ok(None));
        assert!(root("/h/.ssh/tool").is_err());
        assert!(root("/x").is_err(), "{:?}", root("/x"));
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_cargo_home_elsewhere_is_not_bound_whole() {
        let dir = tempfile::tempdir().unwrap();
        let cargo = dir.path().canonicalize().unwrap().join("opt/cargo");
        std::fs::create_dir_all(cargo.join("bin")).unwrap();
        let g = guard();
        let rustup = cargo.join("bin/rustup");
        assert_eq!(g.root_of(&rustup), Ok(Some(cargo.clone())));
        std::fs::write(cargo.join("credentials.toml"), "token = \"t\"\n").unwrap();
        assert_eq!(g.root_of(&rustup), Ok(Some(cargo.join("bin"))));
    }
}
