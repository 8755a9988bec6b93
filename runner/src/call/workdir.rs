//! A call's working folder: `dir`, relative to the files folder, which it may not leave.
//!
//! `dir` is resolved (links inside the files folder are fine) and checked to stay inside;
//! then the folder is opened from the files folder's handle one component at a time without
//! following any link, and the call starts in that handle (`fchdir`), never in a path
//! resolved again — so a link swapped in meanwhile cannot move it outside.

use crate::mcp::protocol::cut_short;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use lnk_common::safe_open::FilesDir;

/// Why a `dir` is refused.
#[derive(Debug, thiserror::Error)]
pub enum DirRefusal {
    /// An absolute path.
    #[error("`dir` must be relative to the files folder, not absolute: `{0}`")]
    Absolute(String),
    /// A `..` component.
    #[error("`dir` may not hold `..`: `{0}`; give a folder inside the files folder")]
    Parent(String),
    /// Not there, or not reachable.
    #[error("there is no folder `{dir}` in the files folder ({cause})")]
    Missing {
        /// The `dir` asked for.
        dir: String,
        /// What failed.
        cause: std::io::Error,
    },
    /// It leads outside the files folder (through a symbolic link).
    #[error("`dir` `{0}` leads outside the files folder (through a symbolic link)")]
    Outside(String),
    /// Not a folder.
    #[error("`dir` `{0}` is not a folder")]
    NotAFolder(String),
    /// It may not be entered (no search permission).
    #[error("`dir` `{dir}` cannot be entered ({cause}); give a folder the programs may use")]
    Forbidden {
        /// The `dir` asked for.
        dir: String,
        /// What failed.
        cause: std::io::Error,
    },
    /// It changed while it was opened (a link put in its place), or cannot be entered.
    #[error("`dir` `{dir}` cannot be entered: {cause}")]
    Unopenable {
        /// The `dir` asked for.
        dir: String,
        /// What failed, with its cause.
        cause: String,
    },
}

/// A call's working folder: its canonical path, and a handle on it to start the call in.
#[derive(Debug)]
pub struct WorkDir {
    /// The canonical path (for messages and for records).
    pub path: PathBuf,
    /// The folder, opened without following links.
    pub handle: OwnedFd,
}

/// The working folder for `dir` inside `files` (itself canonical), opened.
pub fn open(files: &Path, dir: &str) -> Result<WorkDir, DirRefusal> {
    let path = resolve(files, dir)?;
    let relative = path.strip_prefix(files).unwrap_or(Path::new(""));
    let handle = FilesDir::open(files)
        .and_then(|files| files.open_dir_beneath(relative))
        .map_err(|cause| DirRefusal::Unopenable {
            dir: cut_short(dir),
            cause: with_causes(&cause),
        })?;
    // Entering it needs search permission; without it the call could not start there.
    if let Err(e) = rustix::fs::accessat(
        &handle,
        ".",
        rustix::fs::Access::EXEC_OK,
        rustix::fs::AtFlags::empty(),
    ) {
        return Err(DirRefusal::Forbidden {
            dir: cut_short(dir),
            cause: e.into(),
        });
    }
    Ok(WorkDir { path, handle })
}

/// An error with the causes behind it, for a message.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The canonical working folder for `dir` inside `files` (itself canonical).
pub fn resolve(files: &Path, dir: &str) -> Result<PathBuf, DirRefusal> {
    let relative = Path::new(dir);
    if relative.is_absolute() {
        return Err(DirRefusal::Absolute(cut_short(dir)));
    }
    if relative.components().any(|c| c == Component::ParentDir) {
        return Err(DirRefusal::Parent(cut_short(dir)));
    }
    let canonical = files
        .join(relative)
        .canonicalize()
        .map_err(|cause| DirRefusal::Missing {
            dir: cut_short(dir),
            cause,
        })?;
    if !canonical.starts_with(files) {
        return Err(DirRefusal::Outside(cut_short(dir)));
    }
    if !canonical.is_dir() {
        return Err(DirRefusal::NotAFolder(cut_short(dir)));
    }
    Ok(canonical)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn confines_dir_to_the_files_folder() {
        let root = tempfile::tempdir().unwrap();
        let files = root.path().join("files");
        std::fs::create_dir_all(files.join("sub")).unwrap();
        std::fs::write(files.join("file"), "x").unwrap();
        std::os::unix::fs::symlink(root.path(), files.join("out")).unwrap();
        std::os::unix::fs::symlink(files.join("sub"), files.join("in")).unwrap();
        let files = files.canonicalize().unwrap();

        assert_eq!(resolve(&files, ".").unwrap(), files);
        assert_eq!(resolve(&files, "").unwrap(), files);
        assert_eq!(resolve(&files, "sub").unwrap(), files.join("sub"));
        assert_eq!(resolve(&files, "in").unwrap(), files.join("sub"));
        assert!(matches!(
            resolve(&files, "/tmp"),
            Err(DirRefusal::Absolute(_))
        ));
        assert!(matches!(
            resolve(&files, "sub/../.."),
            Err(DirRefusal::Parent(_))
        ));
        assert!(matches!(
            resolve(&files, "out"),
            Err(DirRefusal::Outside(_))
        ));
        assert!(matches!(
            resolve(&files, "file"),
            Err(DirRefusal::NotAFolder(_))
        ));
        assert!(matches!(
            resolve(&files, "nope"),
            Err(DirRefusal::Missing { .. })
        ));
    }
}
