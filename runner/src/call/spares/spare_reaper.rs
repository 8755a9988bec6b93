//! One spare reaper: started (`lnk-link-run reap --spare`, with its warm sandbox or the
//! descriptors of a cold one's line), heard saying `ready`, handed its call, or disposed of.

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Stdio;
use std::time::{Duration, Instant};
use std::{io, path::Path};

use lnk_common::record::FileId;
use lnk_proc::reaper::spare::{self, SparePrefix};
use lnk_proc::reaper::{Event, Reaper};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::{READY_WITHIN, Settings};
use crate::sandbox_line::{Expanded, Protected};

/// A spare reaper, started: its process (stdio piped) and its reports, `serve`'s end of its
/// control socket, and for a warm one the files folder's identity when it started.
#[derive(Debug)]
pub struct Spare {
    reaper: Reaper,
    control: OwnedFd,
    pub(super) files_id: Option<(u64, u64)>,
    /// A warm one's sandbox prefix, as expanded for it.
    prefix: Vec<OsString>,
    /// What its sandbox (warm, or for a cold one, the line it holds descriptors for) protects.
    pub(super) protected: Protected,
    /// How many descriptors it holds for its sandbox.
    pub(super) passes: usize,
    /// Whether it said `ready` (only ready ones are handed calls).
    ready: bool,
}

/// The device and inode of the folder at `path`.
pub fn folder_id(path: &Path) -> Option<(u64, u64)> {
    FileId::of_path(path).map(|id| (id.dev, id.ino))
}

impl Spare {
    /// Starts a spare: `lnk-link-run reap --spare [--cache <folder>]… [--warm <sandbox>…]`,
    /// with piped stdio, its report pipe at fd 3 and its control socket at fd 4.
    pub fn start(settings: &Settings) -> io::Result<Spare> {
        // Before the sandbox is started: a folder replaced after this is another folder.
        let files_id = match &settings.warm {
            Some(_) => Some(
                folder_id(&settings.files)
                    .ok_or_else(|| io::Error::other("the files folder cannot be looked at"))?,
            ),
            None => None,
        };
        // Expanded for this sandbox: the protected paths found now, placeholders made.
        let line = match settings.warm.as_ref().or(settings.cold.as_ref()) {
            Some(prefix) => crate::sandbox_line::expand(prefix, &settings.files, &settings.caches)
                .map_err(io::Error::other)?,
            None => Expanded::default(),
        };
        let args = if settings.warm.is_some() {
            let warm = SparePrefix::Warm(line.words.clone());
            spare::args(&settings.caches.layers(), Some(&warm))
        } else if settings.cold.is_some() {
            spare::args(&[], Some(&SparePrefix::Cold(line.words.clone())))
        } else {
            spare::args(&[], None)
        };
        // An empty environment, a session of its own, its signals blocked, SIGTERM at the death
        // of this thread (which lives as long as serve): as every call's reaper.
        let (reaper, control) = crate::call::reaper_launch::launch()
            .args(args)
            .stdio(Stdio::piped(), Stdio::piped(), Stdio::piped())
            .passed(line.passed.fds())
            .spawn_spare()?;
        Ok(Spare {
            reaper,
            control,
            files_id,
            passes: line.passed.len(),
            prefix: line.words,
            protected: line.protected,
            ready: false,
        })
    }

    /// Gives the spare its call: waits for its `ready` (at once for one from the pool, which
    /// holds ready ones only), sends the spec with the working folder (and `net`, the call's
    /// proxy channel's sandbox end, for a call with one), and closes the control socket. The
    /// spare is killed and reaped on any failure.
    pub fn hand(
        mut self,
        spec: &[u8],
        cwd: BorrowedFd<'_>,
        with_input: bool,
        net: Option<BorrowedFd<'_>>,
    ) -> io::Result<Reaper> {
        let handed = self
            .await_ready(READY_WITHIN)
            .and_then(|()| spare::send(self.control.as_fd(), spec, cwd, net));
        if let Err(err) = handed {
            self.dispose();
            return Err(err);
        }
        let Spare {
            mut reaper,
            control,
            ..
        } = self;
        drop(control);
        if !with_input {
            // The spare puts /dev/null in place of its stdin pipe (`--null-stdin`).
            reaper.child.stdin = None;
        }
        Ok(reaper)
    }

    /// The sandbox prefix a warm spare runs, as expanded for it (empty for a cold one).
    pub fn prefix(&self) -> &[OsString] {
        &self.prefix
    }

    /// Waits until the spare has said `ready`, at most `within` (the `spares` thread does,
    /// before the spare is offered to calls; a call never waits for it).
    pub fn await_ready(&mut self, within: Duration) -> io::Result<()> {
        let deadline = Instant::now() + within;
        while !self.ready {
            let events = self.reaper.reports.read()?;
            if let Some(event) = events.iter().find(|e| **e != Event::Ready) {
                return Err(io::Error::other(format!(
                    "the spare reaper reported {event:?} while waiting"
                )));
            }
            if self.reaper.reports.ended() {
                return Err(io::Error::other("the spare reaper ended"));
            }
            if !events.is_empty() {
                self.ready = true;
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::other("the spare reaper was not ready in time"));
            }
            let timeout = Timespec::try_from(left).ok();
            let mut fds = [PollFd::new(&self.reaper.reports, PollFlags::IN)];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(())
    }

    /// Stops and reaps a spare that will not run a call. It has run nothing (it runs a call
    /// only once the spec is whole, and a spec that was sent whole is not taken back); asked to
    /// stop, it kills its warm sandbox, if any, before it ends. One a program stopped (which a
    /// sandbox without a PID namespace allows) is woken, and one that does not end is killed
    /// ([`Reaper::stop_and_finish`]).
    pub fn dispose(self) {
        let Spare {
            reaper, control, ..
        } = self;
        drop(control);
        let _ = reaper.stop_and_finish();
    }
}
