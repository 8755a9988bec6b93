//! The supervisor's loop while the run lives: one `poll`, and no periodic wake-up.
//!
//! It sleeps until one of: a signal to the supervisor, the stop signal
//! ([`lnk_proc::run::wake`]: SIGURG, after which `<id>.stop` is looked at), the gate's reports (the sandbox started, ended, could not be
//! executed; their end is the gate's), the run's output, or the deadline, which is the poll's
//! timeout rather than a tick. At the deadline, a stop or a signal it asks the gate to stop the
//! run (SIGTERM to the gate, which sends SIGTERM to the run and SIGKILL two seconds later); once
//! the gate has ended, everything it held is dead.

use std::fs::File;
use std::io::{self, Read};
use std::time::{Duration, Instant};

use anyhow::Result;
use lnk_common::ProcessId;
use lnk_common::layout::StateDir;
use lnk_common::record::{Record, SandboxGroup};
use lnk_common::status::Exit;
use lnk_proc::poll_until;
use lnk_proc::reaper::hold::{self, Step};
use lnk_proc::reaper::{Event, RUN_STOP_GRACE, Reaper};
use lnk_proc::run::wake::WakeListener;
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::quit::Quit;
use super::stdin::RunStdin;
use crate::output::OutputFile;

/// Bytes read from the pipe at a time.
const READ_CHUNK: usize = 256 * 1024;
/// How long after its stop grace a gate asked to stop may take to end before it is killed
/// itself (a safety net: it ends within the grace).
const GATE_STUCK: Duration = Duration::from_secs(5);
/// Once the gate has ended, how long the output pipe is read for what is still in it.
const LAST_OUTPUT: Duration = Duration::from_secs(1);

/// Why the run ended, as far as the supervisor is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The program ended by itself.
    ByItself,
    /// Its time ran out.
    TimedOut,
    /// `<id>.stop` asked it to stop.
    Stopped,
    /// The supervisor was told to quit.
    Lost,
}

/// Where the watch stands with the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum GatePhase {
    /// The run goes on (or its program ended and the gate kills what it left).
    Running,
    /// The gate was asked to stop the run at `since`.
    Stopping { since: Instant },
    /// The gate did not end in time after it was asked to, and was killed.
    GateKilled,
}

/// What the watch saw.
#[derive(Debug)]
pub struct WatchedRun {
    /// Why it ended.
    pub ending: Ending,
    /// The sandbox process's exit, when the gate reported it.
    pub exit: Option<Exit>,
    /// Why the run could not start, when it could not.
    pub failure: Option<String>,
}

/// What the watch works with.
pub struct Run<'a> {
    pub state: &'a StateDir,
    pub record: &'a mut Record,
    pub quit: &'a Quit,
    pub gate: &'a mut Reaper,
    pub stop: &'a WakeListener,
    pub output: &'a mut OutputFile,
    pub pipe: Option<File>,
    pub deadline: Instant,
    pub stdin: &'a mut RunStdin,
    /// The sandbox program, as `/proc/<pid>/exe` shows it: its processes are not the run's
    /// programs ([`lnk_proc::run::signal::sandbox_exe`]).
    pub sandbox_exe: Option<std::path::PathBuf>,
}

impl Run<'_> {
    /// Watches the run until its gate has ended (everything the gate held is dead then), and
    /// copies what the run writes meanwhile; then reads what is left in the pipe.
    pub fn watch(mut self) -> Result<WatchedRun> {
        let mut pipe = self.pipe.take();
        let mut buf = vec![0u8; READ_CHUNK];
        let mut seen = WatchedRun {
            ending: Ending::ByItself,
            exit: None,
            failure: None,
        };
        let mut phase = GatePhase::Running;
        // A stop asked before the record named this supervisor (so before it could be
        // signalled) is looked for once.
        let mut stop_maybe = true;
        while !self.gate.reports.ended() {
            // Read every time, so that a pending signal (a child's end too) never leaves the
            // descriptor readable for the next poll.
            let quit = self.quit.asked();
            phase = self.next_phase(phase, quit, &mut stop_maybe, &mut seen)?;
            let wake_at = match (phase, seen.exit) {
                (GatePhase::Running, None) => Some(self.deadline),
                (GatePhase::Running, Some(_)) | (GatePhase::GateKilled, _) => None,
                (GatePhase::Stopping { since }, _) => Some(since + RUN_STOP_GRACE + GATE_STUCK),
            };
            // Output dropped for want of room: its counts stored, and room looked for again.
            let wake_at = match (wake_at, self.output.due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };

            let quit_fd = self.quit.fd();
            let mut fds = Vec::with_capacity(5);
            fds.push(PollFd::new(&quit_fd, PollFlags::IN));
            let stop_fd = self.stop.fd();
            fds.push(PollFd::new(&stop_fd, PollFlags::IN));
            fds.push(PollFd::new(&self.gate.reports, PollFlags::IN));
            let pipe_at = pipe.as_ref().map(|pipe| {
                fds.push(PollFd::new(pipe, PollFlags::IN));
                fds.len() - 1
            });
            // An interactive run's channel: `write`'s requests wake the supervisor, nothing else.
            let channel = self.stdin.channel();
            let channel_at = channel.as_ref().map(|channel| {
                fds.push(PollFd::new(channel, PollFlags::IN));
                fds.len() - 1
            });
            let polled = poll_until(&mut fds, wake_at);
            match polled {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
            let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
            drop(fds);
            drop(channel);
            let is_ready =
                |at: Option<usize>| at.and_then(|at| ready.get(at)).copied() == Some(true);
            self.output.tick(self.state, self.record);
            if ready[1] && self.stop.take() {
                stop_maybe = true;
            }
            if is_ready(pipe_at) {
                self.read_once(&mut pipe, &mut buf)?;
            }
            if is_ready(channel_at) {
                let gate = &*self.gate;
                let exe = &self.sandbox_exe;
                self.stdin.serve(&mut |signal| {
                    let signalled = gate.signal_programs(signal, exe.as_deref());
                    tracing::info!(?signal, signalled, "typed on the run's terminal");
                });
            }
            if ready[2] {
                for event in self.gate.reports.read()? {
                    self.heard(event, &mut seen);
                }
            }
        }
        self.read_rest(&mut pipe, &mut buf)?;
        Ok(seen)
    }

    /// The watch's next phase: a stop asked (by the deadline, `<id>.stop` or a quit) is sent
    /// to the gate once; a gate that does not end in time after it is killed.
    fn next_phase(
        &mut self,
        phase: GatePhase,
        quit: bool,
        stop_maybe: &mut bool,
        seen: &mut WatchedRun,
    ) -> Result<GatePhase> {
        let now = Instant::now();
        Ok(match phase {
            GatePhase::Running => {
                let asked = if quit {
                    Some(Ending::Lost)
                } else if seen.exit.is_none() && now >= self.deadline {
                    Some(Ending::TimedOut)
                } else if *stop_maybe && lnk_common::stop::requested(self.state, &self.record.id)? {
                    Some(Ending::Stopped)
                } else {
                    None
                };
                *stop_maybe = false;
                match asked {
                    Some(why) => {
                        // After the program's own end, a stop only kills its leftovers
                        // sooner.
                        if seen.exit.is_none() {
                            seen.ending = why;
                        }
                        tracing::info!(id = %self.record.id, ?why, "stopping the run");
                        self.gate.stop();
                        GatePhase::Stopping { since: now }
                    }
                    None => GatePhase::Running,
                }
            }
            GatePhase::Stopping { since } if now >= since + RUN_STOP_GRACE + GATE_STUCK => {
                tracing::warn!(id = %self.record.id, "the gate did not end after it was asked to; killing it");
                self.gate.kill();
                GatePhase::GateKilled
            }
            other => other,
        })
    }

    /// One report of the gate's.
    fn heard(&mut self, event: Event, seen: &mut WatchedRun) {
        let id = &self.record.id;
        match event {
            // Only a spare reaper says it, and a gate is never one.
            Event::Ready => {}
            // The gate's exit comes next; the run ends with it.
            Event::Done => {}
            Event::Started(pid) => {
                tracing::info!(%id, pid, "the sandbox runs");
                if let Some(path) = hold::path_for(Step::RunStarted) {
                    hold::hold(&path, self.quit.fd());
                }
                self.record_sandbox_group(pid);
            }
            Event::Exited(exit) => {
                tracing::info!(%id, ?exit, "the sandbox process ended");
                seen.exit = Some(exit);
            }
            Event::Leftovers => {
                tracing::info!(%id, "killed what the run left running after its end");
            }
            Event::ExecFailed(errno) => {
                let why = format!(
                    "it could not start: the sandbox could not be executed: {}",
                    io::Error::from_raw_os_error(errno)
                );
                tracing::error!(%id, "{why}");
                seen.failure = Some(why);
            }
            Event::Failed(errno) => {
                let why = format!(
                    "it could not start: the run's gate could not set itself up: {}",
                    io::Error::from_raw_os_error(errno)
                );
                tracing::error!(%id, "{why}");
                seen.failure = Some(why);
            }
            // A run's gate starts its sandbox cold; a report of a warm one's is the gate's
            // failure all the same.
            Event::FolderRefused(_) | Event::StubStuck => {
                let why = format!(
                    "it could not start: the run's gate reported a warm sandbox's failure: {event:?}"
                );
                tracing::error!(%id, "{why}");
                seen.failure = Some(why);
            }
        }
    }

    /// Names the sandbox's own group in the record, for a sweep that finds the gate gone.
    fn record_sandbox_group(&mut self, pid: i32) {
        let Ok(pgid) = ProcessId::new(i64::from(pid)) else {
            return;
        };
        if let Some(sandbox) = &mut self.record.sandbox {
            sandbox.pgid = Some(pgid);
        } else if let Some(group) = self.record.group {
            self.record.sandbox = Some(SandboxGroup {
                session: group.leader_pid,
                pgid: Some(pgid),
                output_pipe: None,
            });
        }
        // The gate holds the run whatever happens to this write; a sweep after a crash of
        // both would find less.
        if let Err(err) = self.record.store(self.state) {
            tracing::warn!(id = %self.record.id, "recording the sandbox's group: {}", lnk_common::Causes(&err));
        }
    }

    fn read_once(&mut self, pipe: &mut Option<File>, buf: &mut [u8]) -> Result<()> {
        let Some(reader) = pipe else { return Ok(()) };
        match reader.read(buf) {
            Ok(0) => *pipe = None,
            Ok(n) => self.output.append(&buf[..n], self.state, self.record)?,
            Err(err)
                if matches!(
                    err.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) => {}
            // A terminal's master once the run has let go of the terminal: its end.
            Err(err) if err.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                *pipe = None;
            }
            Err(err) => {
                tracing::warn!(%err, "reading the run's output failed");
                *pipe = None;
            }
        }
        Ok(())
    }

    /// Reads the pipe to its end, for at most [`LAST_OUTPUT`]: the gate has ended, so every
    /// writer the gate held is dead, and the end comes at once unless something escaped.
    fn read_rest(&mut self, pipe: &mut Option<File>, buf: &mut [u8]) -> Result<()> {
        let until = Instant::now() + LAST_OUTPUT;
        while let Some(reader) = pipe.as_ref() {
            let left = until.saturating_duration_since(Instant::now());
            let mut fds = [PollFd::new(reader, PollFlags::IN)];
            let timeout = Timespec::try_from(left).ok();
            if !matches!(poll(&mut fds, timeout.as_ref()), Ok(n) if n > 0) {
                return Ok(());
            }
            self.read_once(pipe, buf)?;
        }
        Ok(())
    }
}
