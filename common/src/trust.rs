//! What the state folder and its files must be before anything in them is believed.
//!
//! A record tells a sweep which process group to kill, which socket to tell and which key to
//! sign with. A state folder that another user made first, or may write, could plant records
//! that the victim's own sweep would then sign, tell and kill for. So:
//!
//! * **the folder** must be a folder owned by the user Link Run runs as (the effective uid)
//!   with no group or other write bit ([`check_state_folder`]); `serve`, the supervisor,
//!   `sweep`, `stop --state` and `remove --state` refuse any other. New ones are made 0700.
//! * **its files** (a record, a lock, a stop request, a log) must be regular files owned by
//!   that user ([`check_owned_regular`]), checked on the open descriptor (`fstat`) or, for a
//!   stop request, on the name without following it (`lstat`). Anything else is *damaged*:
//!   refused with [`Error::Foreign`] or [`Error::NotRegularFile`], never followed or believed.
//!
//! The check is of the folder itself: its parents are the user's to keep (as for ssh's files).
//! The supervisor's side canonicalizes the folder's path once ([`crate::StateDir::open`]), so a
//! link swapped in after the check cannot move it elsewhere.

use std::path::Path;

use rustix::fs::{FileType, Stat};

use crate::error::{Error, FileKind, Op};

/// Mode bits that let someone other than the owner write (group, others).
const WRITABLE_BY_OTHERS: u32 = 0o022;

/// The user Link Run runs as: the effective uid.
pub fn user() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Checks that `path` is a folder owned by [`user`] that no one else may write.
pub fn check_state_folder(path: &Path) -> Result<(), Error> {
    let stat = rustix::fs::stat(path).map_err(|e| Error::io(Op::Stat, path, e))?;
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::Directory {
        return Err(Error::NotDirectory {
            path: path.to_owned(),
        });
    }
    check_owner(&stat, path)?;
    let mode = stat.st_mode & 0o7777;
    if mode & WRITABLE_BY_OTHERS != 0 {
        return Err(Error::OpenToOthers {
            path: path.to_owned(),
            mode,
        });
    }
    Ok(())
}

/// Checks that `stat` (of a file in the state folder) is a regular file owned by [`user`].
pub fn check_owned_regular(stat: &Stat, path: &Path) -> Result<(), Error> {
    let kind = FileType::from_raw_mode(stat.st_mode);
    if kind != FileType::RegularFile {
        return Err(Error::NotRegularFile {
            path: path.to_owned(),
            kind: FileKind::from_file_type(kind),
        });
    }
    check_owner(stat, path)
}

fn check_owner(stat: &Stat, path: &Path) -> Result<(), Error> {
    let me = user();
    if stat.st_uid != me {
        return Err(Error::Foreign {
            path: path.to_owned(),
            owner: stat.st_uid,
            user: me,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_private_folder_passes_and_an_open_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        check_state_folder(dir.path()).unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        check_state_folder(dir.path()).unwrap();
        for mode in [0o775, 0o757, 0o1777] {
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
            let err = check_state_folder(dir.path()).unwrap_err();
            assert!(matches!(err, Error::OpenToOthers { .. }), "{mode:o}: {err}");
            assert!(err.to_string().contains("chmod 700"), "{err}");
        }
    }

    #[test]
    fn a_file_is_not_a_folder() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"").unwrap();
        assert!(matches!(
            check_state_folder(&file),
            Err(Error::NotDirectory { .. })
        ));
        let stat = rustix::fs::stat(&file).unwrap();
        check_owned_regular(&stat, &file).unwrap();
        let stat = rustix::fs::stat(dir.path()).unwrap();
        assert!(matches!(
            check_owned_regular(&stat, dir.path()),
            Err(Error::NotRegularFile { .. })
        ));
    }
}
