//! What a reaper tells its parent, over a pipe that is the reaper's fd 3: one line per event.
//!
//! | line | event |
//! |---|---|
//! | `ready` | a spare reaper is set up and waits for its call (see [`super::spare`]) |
//! | `started <pid>` | the sandbox process runs, as this pid (the leader of its own group) |
//! | `exited code <n>` / `exited signal <n>` | the sandbox process ended so |
//! | `leftovers` | processes of the sandbox were still running after it ended (or when it was stopped after its end) and were killed |
//! | `done` | everything the reaper started is dead and reaped: only the reaper's own exit is left |
//! | `exec-failed <errno>` | the sandbox could not be executed; nothing ran |
//! | `failed <errno>` | the reaper itself could not set up (before anything ran) |
//! | `folder-refused <errno>` | the warm sandbox's stub refused the call's working folder, which changed after the call arrived; nothing ran |
//! | `stub-stuck` | the warm sandbox's stub did not confirm the program's start in time (it was stopped, or starved); it was killed |
//!
//! `done`, or the pipe's end (EOF: the reaper has exited), means everything it started is dead;
//! a parent may answer for the call at `done`, and reap the reaper after.
//! The write end is close-on-exec in the reaper, so no process of the sandbox holds it.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;

use lnk_common::status::Exit;

pub use super::fds::REPORT_FD;

/// One event a reaper reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A spare reaper is set up (signals, child subreaper) and waits for its call.
    Ready,
    /// The sandbox process runs with this pid.
    Started(i32),
    /// The sandbox process ended.
    Exited(Exit),
    /// Leftovers were killed after the sandbox process ended.
    Leftovers,
    /// Everything the reaper started is dead and reaped; it exits next.
    Done,
    /// The sandbox could not be executed (the errno); nothing ran.
    ExecFailed(i32),
    /// The reaper could not set itself up (the errno); nothing ran.
    Failed(i32),
    /// The stub of the call's warm sandbox refused its working folder (the errno): it changed
    /// after the call arrived. Nothing ran.
    FolderRefused(i32),
    /// The stub of the call's warm sandbox did not confirm the program's start within
    /// [`super::HAND_OFF_LIMIT`]; it was killed (most likely before it ran anything).
    StubStuck,
}

impl Event {
    /// The event as its line (with the newline).
    pub fn line(&self) -> String {
        match self {
            Event::Ready => "ready\n".to_owned(),
            Event::Started(pid) => format!("started {pid}\n"),
            Event::Exited(Exit::Code(code)) => format!("exited code {code}\n"),
            Event::Exited(Exit::Signal(signal)) => format!("exited signal {signal}\n"),
            Event::Leftovers => "leftovers\n".to_owned(),
            Event::Done => "done\n".to_owned(),
            Event::ExecFailed(errno) => format!("exec-failed {errno}\n"),
            Event::Failed(errno) => format!("failed {errno}\n"),
            Event::FolderRefused(errno) => format!("folder-refused {errno}\n"),
            Event::StubStuck => "stub-stuck\n".to_owned(),
        }
    }

    /// Parses a line (without its newline); `None` for a line this build does not know.
    pub fn parse(line: &str) -> Option<Event> {
        let mut words = line.split(' ');
        let event = match (words.next()?, words.next(), words.next()) {
            ("ready", None, None) => Event::Ready,
            ("started", Some(pid), None) => Event::Started(pid.parse().ok()?),
            ("exited", Some("code"), Some(code)) => Event::Exited(Exit::Code(code.parse().ok()?)),
            ("exited", Some("signal"), Some(signal)) => {
                Event::Exited(Exit::Signal(signal.parse().ok()?))
            }
            ("leftovers", None, None) => Event::Leftovers,
            ("done", None, None) => Event::Done,
            ("exec-failed", Some(errno), None) => Event::ExecFailed(errno.parse().ok()?),
            ("failed", Some(errno), None) => Event::Failed(errno.parse().ok()?),
            ("folder-refused", Some(errno), None) => Event::FolderRefused(errno.parse().ok()?),
            ("stub-stuck", None, None) => Event::StubStuck,
            _ => return None,
        };
        words.next().is_none().then_some(event)
    }
}

/// The reaper's end: writes events to fd 3 (or nowhere, when fd 3 was not given).
#[derive(Debug)]
pub struct Reporter {
    fd: Option<OwnedFd>,
}

impl Reporter {
    /// Takes fd 3 over, making it close-on-exec so that the sandbox does not inherit it. Without
    /// a pipe at fd 3 (a reaper started by hand), reports go nowhere.
    pub fn from_fd3() -> Self {
        use crate::spawn::inherited::{self, Kind, OnExec};
        // By the launch contract, this process's report pipe.
        let fd = inherited::take(REPORT_FD, Kind::Pipe, OnExec::Close).ok();
        Self { fd }
    }

    /// Reports an event. A parent that is gone (EPIPE) no longer needs to hear.
    pub fn send(&self, event: Event) {
        self.send_all(&[event]);
    }

    /// Reports events in one write, so that the parent wakes once for all of them.
    pub fn send_all(&self, events: &[Event]) {
        let Some(fd) = &self.fd else { return };
        let lines: String = events.iter().map(Event::line).collect();
        // Under PIPE_BUF (a few short lines): one write, whole.
        let _ = rustix::io::retry_on_intr(|| rustix::io::write(fd, lines.as_bytes()));
    }
}

/// The parent's end: events read as they come, without blocking.
#[derive(Debug)]
pub struct Reports {
    fd: OwnedFd,
    pending: Vec<u8>,
    ended: bool,
}

impl Reports {
    /// The parent's read end of a report pipe (made non-blocking here).
    pub fn new(fd: OwnedFd) -> io::Result<Self> {
        rustix::io::ioctl_fionbio(&fd, true)?;
        Ok(Self {
            fd,
            pending: Vec::new(),
            ended: false,
        })
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether the pipe ended: the reaper has exited.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// Reads what is there; the whole events it completes, in order.
    pub fn read(&mut self) -> io::Result<Vec<Event>> {
        let mut buf = [0u8; 512];
        loop {
            match rustix::io::read(&self.fd, &mut buf) {
                Ok(0) => {
                    self.ended = true;
                    break;
                }
                Ok(n) => self.pending.extend_from_slice(&buf[..n]),
                Err(Errno::INTR) => {}
                Err(Errno::AGAIN) => break,
                Err(err) => return Err(err.into()),
            }
        }
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line[..end]);
            // A line this build does not know (a newer reaper's) is skipped.
            events.extend(Event::parse(&text));
        }
        Ok(events)
    }
}

impl AsFd for Reports {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A new report pipe: the parent's read end and the write end to hand to the reaper (at
/// descriptor 3 or above, so that placing it at 3 in the child never clobbers stdio).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let write = if rustix::fd::AsRawFd::as_raw_fd(&write) < REPORT_FD {
        rustix::io::fcntl_dupfd_cloexec(&write, REPORT_FD)?
    } else {
        write
    };
    Ok((read, write))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn each_event_reads_back_as_itself() {
        for event in [
            Event::Ready,
            Event::Started(4321),
            Event::Exited(Exit::Code(0)),
            Event::Exited(Exit::Code(-1)),
            Event::Exited(Exit::Signal(9)),
            Event::Leftovers,
            Event::Done,
            Event::ExecFailed(2),
            Event::Failed(24),
            Event::FolderRefused(40),
            Event::StubStuck,
        ] {
            let line = event.line();
            assert!(line.ends_with('\n'));
            assert_eq!(Event::parse(line.trim_end()), Some(event), "{line}");
        }
    }

    #[test]
    fn unknown_or_malformed_lines_are_none() {
        for line in [
            "",
            "started",
            "started x",
            "started 1 2",
            "exited code",
            "exited sig 9",
            "leftovers now",
            "ready now",
            "hello",
        ] {
            assert_eq!(Event::parse(line), None, "{line:?}");
        }
    }

    #[test]
    fn reports_come_whole_and_in_order_then_the_end() {
        let (read, write) = pipe().unwrap();
        assert!(rustix::fd::AsRawFd::as_raw_fd(&write) >= REPORT_FD);
        let mut reports = Reports::new(read).unwrap();
        assert_eq!(reports.read().unwrap(), []);
        rustix::io::write(&write, b"started 12\nexited co").unwrap();
        assert_eq!(reports.read().unwrap(), [Event::Started(12)]);
        rustix::io::write(&write, b"de 3\nleftovers\n").unwrap();
        drop(write);
        assert_eq!(
            reports.read().unwrap(),
            [Event::Exited(Exit::Code(3)), Event::Leftovers]
        );
        assert!(reports.ended());
    }
}
