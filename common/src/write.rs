//! Writing a file whole, so a reader sees the old content or the new, never a torn mix.
//!
//! The protocol (what a third party writing a record must do too):
//!
//! 1. create `<folder>/.tmp-<random>` with `O_CREAT|O_EXCL|O_CLOEXEC`, mode 0600 — in the same
//!    folder, so the rename cannot cross file systems;
//! 2. write every byte;
//! 3. `fsync` the file (with [`Durability::Durable`]);
//! 4. `rename` it over the final name — atomic for readers;
//! 5. `fsync` the folder, so the rename itself survives a power cut (with
//!    [`Durability::Durable`]).
//!
//! If any step fails the temporary is removed (best effort; a sweep removes what a crash leaves).
//! [`Durability::Atomic`] skips the two `fsync`s: readers still never see a torn file, but a power
//! cut may lose the latest version — for a writer that rewrites often (the output counters at each
//! rotation) and will write a durable version at the end.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Op};
use crate::layout::temp_name;

/// How hard [`write_whole`] works to survive a power cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// Atomic for readers and durable: `fsync` of the file before the rename, of the folder after.
    #[default]
    Durable,
    /// Atomic for readers only: no `fsync`.
    Atomic,
}

/// Replaces `<dir>/<name>` with `bytes`, atomically (see the module docs).
///
/// `name` must be a plain file name; the caller builds it from checked parts.
pub fn write_whole(
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), Error> {
    write_whole_via(dir, dir, name, bytes, durability)
}

/// [`write_whole`] with the temporary made in `temp_dir` (on the same file system as `dir`).
pub fn write_whole_via(
    temp_dir: &Path,
    dir: &Path,
    name: &str,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), Error> {
    let target = dir.join(name);
    let temp = temp_dir.join(temp_name()?);
    let result = write_temp_then_rename(&temp, &target, bytes, durability);
    if result.is_err() {
        // Best effort: a sweep removes whatever this leaves behind.
        let _ = std::fs::remove_file(&temp);
        return result;
    }
    if durability == Durability::Durable {
        sync_dir(dir)?;
    }
    Ok(())
}

fn write_temp_then_rename(
    temp: &Path,
    target: &Path,
    bytes: &[u8],
    durability: Durability,
) -> Result<(), Error> {
    // std opens every file with O_CLOEXEC; create_new is O_CREAT|O_EXCL, which never follows a
    // symbolic link.
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(temp)
        .map_err(|e| Error::io(Op::Create, temp, e))?;
    file.write_all(bytes)
        .map_err(|e| Error::io(Op::Write, temp, e))?;
    if durability == Durability::Durable {
        file.sync_all().map_err(|e| Error::io(Op::Sync, temp, e))?;
    }
    drop(file);
    std::fs::rename(temp, target).map_err(|cause| Error::Rename {
        from: temp.to_owned(),
        to: target.to_owned(),
        cause,
    })
}

/// `fsync` of a folder: makes the names created, renamed or removed in it durable.
pub fn sync_dir(dir: &Path) -> Result<(), Error> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(Op::Sync, dir, e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replaces_whole_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        write_whole(dir.path(), "r.json", b"first", Durability::Durable).unwrap();
        write_whole(dir.path(), "r.json", b"second", Durability::Atomic).unwrap();
        assert_eq!(std::fs::read(dir.path().join("r.json")).unwrap(), b"second");
        assert_eq!(names(dir.path()), vec!["r.json"]);
        let mode = std::fs::metadata(dir.path().join("r.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_failed_rename_removes_the_temporary() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("taken")).unwrap();
        std::fs::write(dir.path().join("taken/inside"), b"x").unwrap();
        let err = write_whole(dir.path(), "taken", b"data", Durability::Durable).unwrap_err();
        assert!(matches!(err, Error::Rename { .. }), "{err:?}");
        assert_eq!(names(dir.path()), vec!["taken"]);
    }

    #[test]
    fn a_missing_folder_is_an_error_with_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let err = write_whole(&gone, "r.json", b"x", Durability::Durable).unwrap_err();
        assert!(err.is_not_found(), "{err:?}");
        assert!(err.to_string().starts_with("creating "), "{err}");
    }
}
