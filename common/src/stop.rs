//! Asking a run to stop, on disk: `<id>.stop`.
//!
//! The request is the file: [`request`] creates it (safely: never through a link, replaced if
//! it is not a regular file of the user's), and a run's supervisor counts only a regular
//! `<id>.stop` of the user's ([`requested`]), so nothing else under that name stops anything.
//! Whoever asks then wakes the run's supervisor, so that it looks at the file without polling:
//! that is process machinery (a proven pid and a signal, `lnk_proc::run::wake`), not part of this
//! contract; a supervisor not woken sees the request when it next looks (at its start, at its
//! next wake-up). A request that holds `tasks/cancel\n` was its task's client's ([`crate::cancel`]).

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Op};
use crate::id::RunId;
use crate::layout::{StateDir, remove_damaged};
use crate::trust;

/// Asks run `id` to stop by creating `<id>.stop` (already present is fine), never through a
/// link: a link, or anything but a regular file of the user's, in its place is removed first
/// (it is damaged, and means nothing). The caller then wakes the run's supervisor.
pub fn request(state: &StateDir, id: &RunId) -> Result<(), Error> {
    let path = state.stop(id);
    if open_request(&path, OFlags::WRONLY | OFlags::CREATE)?.is_none() {
        remove_damaged(&path)?;
        open_request(&path, OFlags::WRONLY | OFlags::CREATE)?;
    }
    Ok(())
}

/// Opens a stop request, `<id>.stop` at `path`, with `flags` (with `CREATE`: made 0600 when
/// missing), never through a link and without blocking. `None` when what is there is no
/// request: a link, a folder, a FIFO or socket, anything but a regular file of the user's, or,
/// opened without `CREATE`, nothing.
pub(crate) fn open_request(path: &Path, flags: OFlags) -> Result<Option<OwnedFd>, Error> {
    let creating = flags.contains(OFlags::CREATE);
    let fd = match rustix::fs::open(
        path,
        flags | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::from_raw_mode(0o600),
    ) {
        Ok(fd) => fd,
        Err(Errno::LOOP | Errno::ISDIR | Errno::NXIO | Errno::OPNOTSUPP) => return Ok(None),
        Err(Errno::NOENT) if !creating => return Ok(None),
        Err(e) => {
            let op = if creating { Op::Create } else { Op::Open };
            return Err(Error::io(op, path, e));
        }
    };
    let stat = rustix::fs::fstat(&fd).map_err(|e| Error::io(Op::Stat, path, e))?;
    Ok(trust::check_owned_regular(&stat, path)
        .is_ok()
        .then_some(fd))
}

/// Whether run `id` is asked to stop: `<id>.stop` exists as a regular file of the user's
/// (looked at without following a link). Anything else under that name is damaged and does
/// not count (a [`request`] replaces it; removing the run removes it).
pub fn requested(state: &StateDir, id: &RunId) -> Result<bool, Error> {
    let path = state.stop(id);
    match rustix::fs::lstat(&path) {
        Ok(stat) => Ok(trust::check_owned_regular(&stat, &path).is_ok()),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(Error::io(Op::Stat, path, e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn stop_requests() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("nested/state"));
        state.create().unwrap();
        let id = RunId::generate().unwrap();
        assert!(!requested(&state, &id).unwrap());
        request(&state, &id).unwrap();
        request(&state, &id).unwrap();
        assert!(requested(&state, &id).unwrap());
    }

    #[test]
    fn a_link_in_place_of_a_request_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("state"));
        state.create().unwrap();
        let id = RunId::generate().unwrap();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"").unwrap();
        std::os::unix::fs::symlink(&target, state.stop(&id)).unwrap();
        assert!(!requested(&state, &id).unwrap(), "a link is no request");
        request(&state, &id).unwrap();
        assert!(requested(&state, &id).unwrap());
        assert!(
            !std::fs::symlink_metadata(state.stop(&id))
                .unwrap()
                .file_type()
                .is_symlink(),
            "the link was replaced by a file of its own"
        );
    }
}
