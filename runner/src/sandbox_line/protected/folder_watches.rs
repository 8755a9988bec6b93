//! The folders a search for protected paths looked in, watched (inotify) from before it looked
//! in each: while none of them has seen a change, the search would find the same again, so
//! `serve` takes what it found for the next sandbox instead of searching again ([`super::kept_search`]).
//!
//! Each folder is watched through the very handle the search opened (`/proc/self/fd/<n>`,
//! never its path again), before anything in it is looked up, for what can change what a
//! search finds there: a name made, removed or renamed in it (`IN_CREATE`, `IN_DELETE`,
//! `IN_MOVED_FROM`, `IN_MOVED_TO`), a file's or folder's mode, owner or link count
//! (`IN_ATTRIB`), the folder itself removed or renamed (`IN_DELETE_SELF`, `IN_MOVE_SELF`). A
//! git folder (a path with a `.git` in it) is watched for writes too (`IN_MODIFY`,
//! `IN_CLOSE_WRITE`): the search reads its `config`. The kernel queues an event before the
//! system call that caused it returns, so a program's change is seen by the first look after
//! that program's call. Any event at all, a full queue, or a read that fails counts as a
//! change. A folder that cannot be watched (a watch limit reached, a folder this user may not
//! read) makes the whole search one that is not kept.

use std::cell::Cell;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::io::Errno;

/// The most folders one search may watch; past it the search is not kept (a files folder
/// with that many folders within three levels is searched afresh for each sandbox, as before).
pub const MAX_WATCHED: usize = 8192;

/// The folders one search looked in, and their watches.
#[derive(Debug)]
pub struct Watches {
    inotify: OwnedFd,
    watched: Cell<usize>,
    /// A folder could not be watched: what the search found is not kept.
    broken: Cell<bool>,
}

impl Watches {
    /// A new set of watches; `None` when inotify cannot be had (too many instances).
    pub fn new() -> Option<Watches> {
        match inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK) {
            Ok(inotify) => Some(Watches {
                inotify,
                watched: Cell::new(0),
                broken: Cell::new(false),
            }),
            Err(err) => {
                tracing::debug!("protected paths are searched for each sandbox: inotify: {err}");
                None
            }
        }
    }

    /// Watches the folder `dir` (a handle the search opened, at `rel` in the files folder),
    /// before the search looks in it. A failure breaks the set.
    pub fn add(&self, dir: BorrowedFd<'_>, rel: &Path) {
        if self.broken.get() {
            return;
        }
        if self.watched.get() >= MAX_WATCHED {
            self.broken.set(true);
            return;
        }
        let mut flags = WatchFlags::CREATE
            | WatchFlags::DELETE
            | WatchFlags::MOVED_FROM
            | WatchFlags::MOVED_TO
            | WatchFlags::ATTRIB
            | WatchFlags::DELETE_SELF
            | WatchFlags::MOVE_SELF
            | WatchFlags::ONLYDIR
            // A folder watched twice (as a folder, then as a git folder) keeps both.
            | WatchFlags::MASK_ADD;
        if in_git_folder(rel) {
            flags |= WatchFlags::MODIFY | WatchFlags::CLOSE_WRITE;
        }
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        match inotify::add_watch(&self.inotify, path, flags) {
            Ok(_) => self.watched.set(self.watched.get() + 1),
            Err(err) => {
                tracing::debug!(
                    folder = %rel.display(),
                    "protected paths are searched for each sandbox: cannot watch a folder: {err}"
                );
                self.broken.set(true);
            }
        }
    }

    /// Whether every folder looked in is watched.
    pub fn whole(&self) -> bool {
        !self.broken.get()
    }

    /// Whether anything happened in a watched folder since it was watched (or the watches
    /// can no longer say).
    pub fn changed(&self) -> bool {
        let mut buf = [0u8; 256];
        match rustix::io::read(self.inotify.as_fd(), &mut buf) {
            Err(Errno::AGAIN) => false,
            Err(Errno::INTR) => self.changed(),
            // An event, an overflow, or an error: search again.
            Ok(_) | Err(_) => true,
        }
    }
}

/// Whether `rel` lies in a git folder (has a `.git` among its components).
fn in_git_folder(rel: &Path) -> bool {
    rel.components()
        .any(|c| matches!(c, Component::Normal(name) if name == super::names::GIT))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn open(path: &Path) -> OwnedFd {
        rustix::fs::open(
            path,
            rustix::fs::OFlags::PATH | rustix::fs::OFlags::DIRECTORY,
            rustix::fs::Mode::empty(),
        )
        .unwrap()
    }

    #[test]
    fn a_name_made_in_a_watched_folder_is_a_change_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let watches = Watches::new().unwrap();
        let fd = open(dir.path());
        watches.add(fd.as_fd(), Path::new(""));
        assert!(watches.whole());
        assert!(!watches.changed());
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(watches.changed());
    }

    #[test]
    fn a_write_counts_in_a_git_folder_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("notes"), "a").unwrap();
        std::fs::write(dir.path().join(".git/config"), "a").unwrap();
        let watches = Watches::new().unwrap();
        watches.add(open(dir.path()).as_fd(), Path::new(""));
        std::fs::write(dir.path().join("notes"), "b").unwrap();
        assert!(!watches.changed(), "a file's text in a plain folder");
        watches.add(open(&dir.path().join(".git")).as_fd(), Path::new(".git"));
        std::fs::write(dir.path().join(".git/config"), "b").unwrap();
        assert!(watches.changed(), "the git folder's config");
    }
}
