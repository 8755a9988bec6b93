//! How a waiting `read` sleeps: in one `poll` of an inotify instance that watches the run's
//! output folder and the state folder, and of the call's cancellation, until its deadline.
//! It wakes when the run's output file is written or replaced (a rotation) or its record is
//! (its end) — events for other files are read and slept through — not on a clock tick, and
//! takes no lock. Each waiting read has its own inotify instance, closed when it answers;
//! where none can be had (a user has 128 by default, shared with every program they run), it
//! looks again every [`FALLBACK_TICK`] instead, and logs so once per read.

use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::time::Instant;

use lnk_common::id::RunId;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::call::CallControl;

/// How often a read without an inotify instance looks again.
pub const FALLBACK_TICK: std::time::Duration = std::time::Duration::from_millis(100);

/// How a sleep ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slept {
    /// The run's output or record changed (or may have: look again).
    Changed,
    /// The call was cancelled.
    Cancelled,
    /// The deadline passed.
    TimeUp,
}

/// The waker of one waiting read.
pub struct Waker {
    inotify: Option<OwnedFd>,
    /// `<id>.out` and `<id>.json`: the names whose events wake.
    names: [CString; 2],
}

impl Waker {
    /// Watches `output_dir` (the files folder's `background/`) and `state` for run `id`.
    pub fn new(output_dir: &Path, state: &Path, id: &RunId) -> Waker {
        let names = [
            CString::new(format!("{id}.out")).unwrap_or_default(),
            CString::new(format!("{id}.json")).unwrap_or_default(),
        ];
        let inotify = match watch(output_dir, state) {
            Ok(fd) => Some(fd),
            Err(err) => {
                tracing::warn!(
                    %id,
                    "a waiting read has no inotify instance ({err}); it looks again every {} ms",
                    FALLBACK_TICK.as_millis()
                );
                None
            }
        };
        Waker { inotify, names }
    }

    /// Sleeps until the run's output or record changes, the call is cancelled, or `deadline`.
    pub fn sleep(&self, control: &CallControl, deadline: Instant) -> Slept {
        loop {
            if control.is_cancelled() {
                return Slept::Cancelled;
            }
            let now = Instant::now();
            if now >= deadline {
                return Slept::TimeUp;
            }
            let mut wait = deadline - now;
            if self.inotify.is_none() {
                wait = wait.min(FALLBACK_TICK);
            }
            let timeout = Timespec::try_from(wait).ok();
            let wake = control.wake_fd();
            let (inotify_ready, woke) = {
                let mut fds = vec![PollFd::new(&wake, PollFlags::IN)];
                if let Some(fd) = &self.inotify {
                    fds.push(PollFd::new(fd, PollFlags::IN));
                }
                let woke = matches!(poll(&mut fds, timeout.as_ref()), Ok(n) if n > 0);
                let ready = fds.get(1).is_some_and(|fd| !fd.revents().is_empty());
                (ready, woke)
            };
            if control.is_cancelled() {
                return Slept::Cancelled;
            }
            if self.inotify.is_none() {
                return Slept::Changed;
            }
            if inotify_ready && self.drain() {
                return Slept::Changed;
            }
            if !woke && Instant::now() >= deadline {
                return Slept::TimeUp;
            }
        }
    }

    /// Reads the pending events; whether any is about this run (or may be: an overflow, a
    /// watched folder gone).
    fn drain(&self) -> bool {
        let Some(fd) = &self.inotify else {
            return true;
        };
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        let mut reader = inotify::Reader::new(fd.as_fd(), &mut buf);
        let mut relevant = false;
        loop {
            match reader.next() {
                Ok(event) => {
                    let flags = event.events();
                    if flags.intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::IGNORED) {
                        relevant = true;
                    }
                    if let Some(name) = event.file_name()
                        && self.names.iter().any(|ours| ours.as_c_str() == name)
                    {
                        relevant = true;
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                // Nothing more pending (EAGAIN), or a read that cannot go on: look again.
                Err(rustix::io::Errno::AGAIN) => return relevant,
                Err(_) => return true,
            }
        }
    }
}

/// An inotify instance watching both folders, never through a link.
fn watch(output_dir: &Path, state: &Path) -> rustix::io::Result<OwnedFd> {
    let fd = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
    let flags = WatchFlags::MODIFY
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::MOVED_TO
        | WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::DONT_FOLLOW
        | WatchFlags::ONLYDIR;
    inotify::add_watch(&fd, output_dir, flags)?;
    inotify::add_watch(&fd, state, flags)?;
    Ok(fd)
}
