//! Paths from the command line: absolute, resolved, and the state folder, which may not
//! exist yet.

use std::path::{Path, PathBuf};

use super::refusal::{Refusal, refuse};

/// Paths a host passes must be absolute: hosts start serve without a shell, so nothing expands
/// `~`, and a relative path would land in whatever folder the host happened to start in.
pub(super) fn must_be_absolute(path: &Path, flag: &str) -> Result<(), Refusal> {
    if path.is_absolute() {
        return Ok(());
    }
    let why = if path.as_os_str().as_encoded_bytes().first() == Some(&b'~') {
        "starts with `~`"
    } else {
        "is relative"
    };
    refuse(format!(
        "{flag} {} {why}: MCP hosts pass arguments without a shell, so `~` is not expanded and \
         a relative path would land in whatever folder the host starts in; give an absolute \
         path, like /home/me/work",
        path.display()
    ))
}

/// `path` resolved, which must be a folder.
pub(super) fn canonical_folder(path: &Path, flag: &str) -> Result<PathBuf, Refusal> {
    let canonical = match path.canonicalize() {
        Ok(p) => p,
        Err(e) => return refuse(format!("{flag} {}: {e}", path.display())),
    };
    if !canonical.is_dir() {
        return refuse(format!("{flag} {} is not a folder", path.display()));
    }
    Ok(canonical)
}

/// The state folder as an absolute path with its existing part resolved, so that a state folder
/// that does not exist yet can still be compared with `--files`.
pub(super) fn absolute_state(state: &Path) -> Result<PathBuf, Refusal> {
    let absolute = match std::path::absolute(state) {
        Ok(p) => p,
        Err(e) => return refuse(format!("--state {}: {e}", state.display())),
    };
    let mut existing = absolute.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            if !canonical.is_dir() {
                return refuse(format!("--state {} is not a folder", state.display()));
            }
            let mut out = canonical;
            for part in rest.iter().rev() {
                if *part == ".." {
                    return refuse(format!("--state {} holds `..`", state.display()));
                }
                out.push(part);
            }
            return Ok(out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return refuse(format!("--state {}: no such folder", state.display())),
        }
    }
}

/// `path` made absolute against the folder serve starts in.
pub(super) fn absolute(path: &Path, flag: &str) -> Result<PathBuf, Refusal> {
    std::path::absolute(path).or_else(|e| refuse(format!("{flag} {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::cli::refusal::tests::refusal;

    #[test]
    fn a_path_must_be_absolute_and_says_why_not() {
        assert!(must_be_absolute(Path::new("/a"), "--files").is_ok());
        let err = refusal(must_be_absolute(Path::new("~/work"), "--files"));
        assert!(
            err.starts_with("--files ~/work starts with `~`: MCP hosts pass"),
            "{err}"
        );
        let err = refusal(must_be_absolute(Path::new("work"), "--state"));
        assert!(
            err.starts_with("--state work is relative: MCP hosts pass"),
            "{err}"
        );
    }

    #[test]
    fn a_folder_is_resolved_and_must_be_one() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::create_dir(real.join("a")).unwrap();
        std::fs::write(real.join("file"), b"").unwrap();
        assert_eq!(
            canonical_folder(&real.join("a/../a"), "--files").map_err(|e| e.to_string()),
            Ok(real.join("a"))
        );
        let err = refusal(canonical_folder(&real.join("file"), "--files"));
        assert_eq!(
            err,
            format!("--files {} is not a folder", real.join("file").display())
        );
        let err = refusal(canonical_folder(&real.join("missing"), "--files"));
        assert!(
            err.starts_with(&format!("--files {}: ", real.join("missing").display())),
            "{err}"
        );
    }

    #[test]
    fn a_state_folder_may_not_exist_yet_but_may_not_climb() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        std::fs::write(real.join("file"), b"").unwrap();
        assert_eq!(
            absolute_state(&real.join("new/state")).map_err(|e| e.to_string()),
            Ok(real.join("new/state"))
        );
        // `..` is resolved where the folder exists, and refused past a missing one.
        std::fs::create_dir(real.join("old")).unwrap();
        assert_eq!(
            absolute_state(&real.join("old/../new")).map_err(|e| e.to_string()),
            Ok(real.join("new"))
        );
        let climbing = real.join("new/../x");
        let err = refusal(absolute_state(&climbing));
        assert_eq!(
            err,
            format!("--state {}: no such folder", climbing.display())
        );
        let err = refusal(absolute_state(&real.join("file")));
        assert_eq!(
            err,
            format!("--state {} is not a folder", real.join("file").display())
        );
    }
}
