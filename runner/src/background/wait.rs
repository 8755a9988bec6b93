//! How a waiting `read` (or a watch) sleeps: in one `poll` of its place among the server's waiting reads
//! ([`super::watcher`], one inotify instance for the whole server) and of the call's
//! cancellation, until its deadline. It wakes when the run's output file is written or
//! replaced (a rotation) or its record is (its end), not on a clock tick and not for other
//! runs' files, and takes no lock. Where the server has no inotify instance, it looks again
//! every [`FALLBACK_TICK`] instead.

use std::path::{Path, PathBuf};
use std::time::Instant;

use lnk_common::id::RunId;
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::watcher::{self, Registration};
use crate::call::CallControl;

/// How often a read looks again when the server has no inotify instance.
pub const FALLBACK_TICK: std::time::Duration = std::time::Duration::from_millis(250);

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

/// The waker of one waiting read (or watch).
pub struct Waker {
    output_dir: PathBuf,
    state: PathBuf,
    /// `<id>.out` (in the output folder) and `<id>.json` (in the state folder).
    names: [String; 2],
    /// A file more, in a folder of its own: a watch's ending (`watches/<id>/<tag>.done`),
    /// which ends the wait of whoever waits for the watch.
    also: Option<(PathBuf, String)>,
    registration: Option<Registration>,
}

impl Waker {
    /// Watches `output_dir` (the files folder's `background/`) and `state` for run `id`, from
    /// now on: what changes after this is never missed.
    pub fn new(output_dir: &Path, state: &Path, id: &RunId) -> Waker {
        Waker::with(output_dir, state, id, None)
    }

    /// [`Waker::new`], and the file `also` (a folder and a name) too.
    pub fn with(
        output_dir: &Path,
        state: &Path,
        id: &RunId,
        also: Option<(PathBuf, String)>,
    ) -> Waker {
        let mut waker = Waker {
            output_dir: output_dir.to_path_buf(),
            state: state.to_path_buf(),
            names: [format!("{id}.out"), format!("{id}.json")],
            also,
            registration: None,
        };
        waker.register();
        waker
    }

    /// Takes (again) the read's place among the waiting: after a folder was replaced, the new
    /// one is watched.
    fn register(&mut self) {
        let Some(watcher) = watcher::shared() else {
            return;
        };
        let [output, record] = &self.names;
        let output = std::slice::from_ref(output);
        let record = std::slice::from_ref(record);
        let mut folders = vec![
            (self.output_dir.as_path(), output),
            (self.state.as_path(), record),
        ];
        if let Some((folder, name)) = &self.also {
            folders.push((folder.as_path(), std::slice::from_ref(name)));
        }
        // The new place is taken before the old one is given back, so a folder that stays
        // watched is never unwatched in between.
        match watcher.register(&folders) {
            Ok(registration) => self.registration = Some(registration),
            // `background/` gone or not a folder: the next look says so; until then, a tick.
            Err(err) => {
                tracing::debug!(
                    "a waiting read watches nothing: {}",
                    lnk_common::Causes(&err)
                );
                self.registration = None;
            }
        }
    }

    /// Sleeps until the run's output or record changes, the call is cancelled, or `deadline`.
    pub fn sleep(&mut self, control: &CallControl, deadline: Instant) -> Slept {
        if control.is_cancelled() {
            return Slept::Cancelled;
        }
        let now = Instant::now();
        if now >= deadline {
            return Slept::TimeUp;
        }
        let mut wait = deadline - now;
        if self.registration.is_none() {
            wait = wait.min(FALLBACK_TICK);
        }
        let timeout = Timespec::try_from(wait).ok();
        let wake = control.wake_fd();
        let changed = {
            let mut fds = vec![PollFd::new(&wake, PollFlags::IN)];
            let event = self.registration.as_ref().map(Registration::fd);
            if let Some(event) = &event {
                fds.push(PollFd::new(event, PollFlags::IN));
            }
            let _ = poll(&mut fds, timeout.as_ref());
            fds.get(1).is_some_and(|fd| !fd.revents().is_empty())
        };
        if control.is_cancelled() {
            return Slept::Cancelled;
        }
        if changed {
            self.register();
            return Slept::Changed;
        }
        if self.registration.is_none() {
            self.register();
            return Slept::Changed;
        }
        if Instant::now() >= deadline {
            Slept::TimeUp
        } else {
            // Woken by a signal: the caller looks again, which costs one look.
            Slept::Changed
        }
    }
}
