//! The stop protocol, asked and heard, with no one polling.
//!
//! **Asking** ([`StateDir::request_stop`](crate::layout::StateDir::request_stop)): create
//! `<id>.stop` (safely: never through a link, replaced if it is not a regular file of the
//! user's), then open `<id>.lock` for writing and close it, writing nothing. Nothing else opens
//! a live run's lock for writing (the lock protocol opens locks read-only; the supervisor
//! writes a kept end there only after it stopped watching), so that close is this run's stop
//! and only this run's.
//!
//! **Hearing** ([`Watch`]): the run's supervisor watches the very inode it holds locked,
//! through its own descriptor (`/proc/self/fd/<n>`), with inotify `IN_CLOSE_WRITE`. It sleeps in
//! `poll` until that event (or its deadline, its program's output or end, a signal), then asks
//! [`StateDir::stop_requested`](crate::layout::StateDir::stop_requested), which counts only a
//! regular `<id>.stop` of the user's. A watch on the state folder itself would wake every
//! supervisor at every record written by any run; this one wakes only the run asked to stop.
//! A supervisor looks once right after it starts watching, for a stop asked before.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};

use crate::error::{Error, Op};

/// A watch on a run's lock file for the close that asks the run to stop.
#[derive(Debug)]
pub struct Watch {
    inotify: OwnedFd,
}

impl Watch {
    /// Watches the file `lock` is open on (the supervisor's locked `<id>.lock`).
    pub fn new(lock: &impl AsFd) -> Result<Self, Error> {
        let path = format!("/proc/self/fd/{}", lock.as_fd().as_raw_fd());
        let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)
            .map_err(|e| Error::io(Op::Open, "inotify", e))?;
        inotify::add_watch(&inotify, &path, WatchFlags::CLOSE_WRITE)
            .map_err(|e| Error::io(Op::Open, &path, e))?;
        Ok(Self { inotify })
    }

    /// The descriptor to poll: readable once a stop may have been asked.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }

    /// Reads the events that came; whether there were any.
    pub fn take(&self) -> bool {
        let mut buf = [0u8; 1024];
        let mut any = false;
        // Non-blocking: EAGAIN ends the reading once the queue is empty.
        while let Ok(n) = rustix::io::read(&self.inotify, &mut buf) {
            if n == 0 {
                break;
            }
            any = true;
        }
        any
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_close_after_writing_access_is_heard_and_a_read_only_open_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.lock");
        std::fs::write(&path, b"").unwrap();
        let held = std::fs::File::open(&path).unwrap();
        let watch = Watch::new(&held).unwrap();
        assert!(!watch.take());
        drop(std::fs::File::open(&path).unwrap());
        assert!(
            !watch.take(),
            "a read-only open (a lock test) is not a stop"
        );
        drop(std::fs::OpenOptions::new().write(true).open(&path).unwrap());
        assert!(watch.take());
        assert!(!watch.take());
    }
}
