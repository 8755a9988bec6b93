//! A stop that a task's client asked for (`tasks/cancel`), told apart from any other stop.
//!
//! The MCP Tasks extension ends a task that its client cancelled as `cancelled`, while a run
//! stopped by the `stop` tool, by `stop --state` or by `remove --state` stays an ordinary
//! stopped run (a task `completed` with state `stopped`). Both are the same request on disk,
//! `<id>.stop`; a cancel writes [`CANCELLED_BY_TASK`] into it **before** the run is asked to
//! stop, so that by the time the supervisor records the run `stopped`, the file already says
//! who asked. Other stops leave the file empty, and a stop asked after a cancel keeps what the
//! cancel wrote (nothing truncates it). The file lives until the run is removed, as before;
//! the supervisor never reads its content.

use std::path::Path;

use rustix::fs::OFlags;
use rustix::io::Errno;

use crate::error::{Error, Op};
use crate::id::RunId;
use crate::layout::StateDir;
use crate::stop;

/// What `<id>.stop` holds when the run's task was cancelled by its client.
pub const CANCELLED_BY_TASK: &[u8] = b"tasks/cancel\n";

/// Asks run `id` to stop on behalf of its task's client: `<id>.stop` says
/// [`CANCELLED_BY_TASK`], as a [`stop::request`] does; the caller then wakes the supervisor.
pub fn request_cancel(state: &StateDir, id: &RunId) -> Result<(), Error> {
    let path = state.stop(id);
    // Anything but a regular file of the user's under that name (a link, a folder) is not
    // written through; `stop::request` replaces it, and the mark is written after.
    let marked = mark(&path)?;
    stop::request(state, id)?;
    if !marked {
        mark(&path)?;
    }
    Ok(())
}

/// Whether run `id`'s stop was asked by its task's client: `<id>.stop` is a regular file of
/// the user's that holds [`CANCELLED_BY_TASK`].
pub fn cancelled_by_task(state: &StateDir, id: &RunId) -> Result<bool, Error> {
    let path = state.stop(id);
    let Some(fd) = stop::open_request(&path, OFlags::RDONLY)? else {
        return Ok(false);
    };
    let mut buf = [0u8; 32];
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::read(&fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(Error::io(Op::Read, &path, e)),
        }
    }
    Ok(&buf[..got] == CANCELLED_BY_TASK)
}

/// Writes [`CANCELLED_BY_TASK`] at the start of `path`, creating it; `false` when what is
/// there is not a regular file of the user's (nothing is written then).
fn mark(path: &Path) -> Result<bool, Error> {
    let Some(fd) = stop::open_request(path, OFlags::WRONLY | OFlags::CREATE)? else {
        return Ok(false);
    };
    let mut written = 0;
    while written < CANCELLED_BY_TASK.len() {
        match rustix::io::pwrite(&fd, &CANCELLED_BY_TASK[written..], written as u64) {
            Ok(n) => written += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(Error::io(Op::Write, path, e)),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn state() -> (tempfile::TempDir, StateDir, RunId) {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path().join("state"));
        state.create().unwrap();
        (dir, state, RunId::parse("abcdefghijkl").unwrap())
    }

    #[test]
    fn a_cancel_is_told_apart_from_a_stop() {
        let (_dir, state, id) = state();
        assert!(!cancelled_by_task(&state, &id).unwrap());
        stop::request(&state, &id).unwrap();
        assert!(stop::requested(&state, &id).unwrap());
        assert!(!cancelled_by_task(&state, &id).unwrap(), "a plain stop");
        request_cancel(&state, &id).unwrap();
        assert!(cancelled_by_task(&state, &id).unwrap());
        // A stop asked after the cancel keeps what it says.
        stop::request(&state, &id).unwrap();
        assert!(cancelled_by_task(&state, &id).unwrap());
    }

    #[test]
    fn a_link_in_place_of_the_request_is_never_written_through() {
        let (dir, state, id) = state();
        let target = dir.path().join("elsewhere");
        std::fs::write(&target, b"kept").unwrap();
        std::os::unix::fs::symlink(&target, state.stop(&id)).unwrap();
        assert!(!cancelled_by_task(&state, &id).unwrap());
        request_cancel(&state, &id).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"kept");
        assert!(cancelled_by_task(&state, &id).unwrap());
    }
}
