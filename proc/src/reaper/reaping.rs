//! The reaper's watch over a started sandbox: until the sandbox process has ended and nothing
//! it started is left, through the phases [`ReapPhase`] names.

use std::ffi::{CStr, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};

use super::blocked_signals::BlockedSignals;
use super::children::{self, reap_if_dead, signal_child};
use super::options::Options;
use super::report::{Event, Reporter};
use super::sandbox_start::{EXEC_PIPE_BYTES, Sandbox, Spawn, exec_pipe_message};
use crate::poll::poll_until;
use lnk_common::status::Exit;

/// While killing, how long to wait for a child's end before looking again anyway (a safety
/// net: every end of a child wakes the reaper at once).
const KILL_RECHECK: Duration = Duration::from_millis(50);

/// Where the reaper is in ending the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ReapPhase {
    /// The sandbox runs; nothing to do but wait.
    Running,
    /// The sandbox process ended and left processes behind: they may end by themselves until
    /// then.
    Leftovers { until: Instant },
    /// Asked to stop: SIGTERM was sent; SIGKILL follows then.
    Stopping { kill_at: Instant },
    /// SIGKILL to everything until nothing is left.
    Killing,
}

pub(super) struct Reaping<'a> {
    options: &'a Options,
    report: &'a Reporter,
    signals: &'a BlockedSignals,
    sandbox: Sandbox,
    phase: ReapPhase,
    /// The sandbox process's end, once seen (it stays unreaped until the very end, so that its
    /// group id cannot be reused while this process signals the group).
    exit: Option<Exit>,
    /// Whether the sandbox's end was reported. It waits to go out with `done` in one write
    /// when nothing else is left, so that the parent wakes once for both.
    exit_reported: bool,
    exec_failed: bool,
    leftovers: bool,
    /// Descendants sent SIGTERM while stopping.
    termed: Vec<Pid>,
    /// The sandbox program's file, canonical: processes still running it are the sandbox's
    /// own, not the programs inside. Looked up at the first stop that needs it.
    sandbox_exe: std::cell::OnceCell<Option<std::path::PathBuf>>,
    /// The sandbox program's path, as executed.
    sandbox_path: &'a CStr,
}

impl<'a> Reaping<'a> {
    /// The watch over `sandbox`, just started from the program at `sandbox_path`.
    pub(super) fn new(
        options: &'a Options,
        report: &'a Reporter,
        signals: &'a BlockedSignals,
        sandbox: Sandbox,
        sandbox_path: &'a CStr,
    ) -> Self {
        Reaping {
            options,
            report,
            signals,
            sandbox,
            phase: ReapPhase::Running,
            exit: None,
            exit_reported: false,
            exec_failed: false,
            leftovers: false,
            termed: Vec::new(),
            sandbox_exe: std::cell::OnceCell::new(),
            sandbox_path,
        }
    }

    /// Whether the sandbox could not be executed (nothing ran).
    pub(super) fn exec_failed(&self) -> bool {
        self.exec_failed
    }

    /// Runs until the sandbox process has ended and nothing it started is left.
    pub(super) fn live(&mut self) {
        loop {
            let arrived = self.signals.take();
            self.read_exec_pipe();
            if arrived.stop {
                self.stop();
            }
            // The leader's end first: its children are reparented here before it becomes a
            // zombie, so a list read after it is seen dead holds them.
            self.see_leader_end();
            let others = self.other_children();
            let now = Instant::now();
            let ended = self.exit.is_some();
            if ended
                && !others.is_empty()
                && let Some(exited) = self.exit_to_report()
            {
                // The leftover grace runs from the sandbox's end: its parent hears of it now.
                self.report.send(exited);
            }
            match self.phase {
                ReapPhase::Running if ended && others.is_empty() => break,
                ReapPhase::Running if ended => {
                    self.phase = ReapPhase::Leftovers {
                        until: now + self.options.leftover_grace,
                    };
                    continue;
                }
                ReapPhase::Running => {}
                ReapPhase::Leftovers { .. } | ReapPhase::Stopping { .. } | ReapPhase::Killing
                    if ended && others.is_empty() =>
                {
                    break;
                }
                ReapPhase::Leftovers { until } if now >= until => {
                    self.leftovers = true;
                    self.phase = ReapPhase::Killing;
                    continue;
                }
                ReapPhase::Leftovers { .. } => {}
                ReapPhase::Stopping { kill_at } if now >= kill_at => {
                    self.phase = ReapPhase::Killing;
                    continue;
                }
                ReapPhase::Stopping { .. } => self.term_new(),
                ReapPhase::Killing => self.kill(&others),
            }
            let wake_at = match self.phase {
                ReapPhase::Running => None,
                ReapPhase::Leftovers { until } => Some(until),
                ReapPhase::Stopping { kill_at } => Some(kill_at),
                ReapPhase::Killing => Some(now + KILL_RECHECK),
            };
            self.wait(wake_at);
        }
        // Everything else is gone: the leader may go too.
        let _ = waitid(WaitId::Pid(self.sandbox.pid), WaitIdOptions::EXITED);
        // As far as `/proc`'s list of children says. The kernel's own count decides: a child
        // the list skipped would outlive this reaper, reparented to init.
        if children::kill_all_children().is_ok_and(|killed| killed > 0) {
            self.leftovers = true;
        }
        // Nothing is left to kill: from here a parent's death needs no clean-up, and SIGKILL
        // ends even a reaper a program stopped (a stopped one would keep a SIGTERM pending).
        let _ = rustix::process::set_parent_process_death_signal(Some(Signal::KILL));
        let mut last: Vec<Event> = self.exit_to_report().into_iter().collect();
        if self.leftovers {
            last.push(Event::Leftovers);
        }
        last.push(Event::Done);
        self.report.send_all(&last);
    }

    /// The report of the sandbox's end, once it ended, the first time only, and not when its
    /// exec failed (reported as such).
    fn exit_to_report(&mut self) -> Option<Event> {
        let exit = self.exit?;
        if self.exit_reported || self.exec_failed {
            return None;
        }
        self.exit_reported = true;
        Some(Event::Exited(exit))
    }

    /// A stop was asked for.
    fn stop(&mut self) {
        match self.phase {
            ReapPhase::Running if !self.options.stop_grace.is_zero() => {
                self.term_new();
                self.phase = ReapPhase::Stopping {
                    kill_at: Instant::now() + self.options.stop_grace,
                };
            }
            ReapPhase::Running | ReapPhase::Stopping { .. } => self.phase = ReapPhase::Killing,
            ReapPhase::Leftovers { .. } => {
                // What the program left is still there: it is killed as leftovers.
                self.leftovers = true;
                self.phase = ReapPhase::Killing;
            }
            ReapPhase::Killing => {}
        }
    }

    fn sandbox_exe(&self) -> &Option<std::path::PathBuf> {
        self.sandbox_exe.get_or_init(|| {
            std::fs::canonicalize(OsStr::from_bytes(self.sandbox_path.to_bytes())).ok()
        })
    }

    /// SIGTERM (and SIGCONT) to every descendant not sent one yet, but the sandbox's own processes (those
    /// still running the sandbox program): a sandbox that dies of SIGTERM ends what runs
    /// inside it at once (bubblewrap does, and its `--die-with-parent` and PID namespace then
    /// SIGKILL the rest), so the programs would get no chance to clean up. They get SIGTERM;
    /// the sandbox ends when they do, or gets SIGKILL with the rest after the grace.
    fn term_new(&mut self) {
        for descendant in children::descendants() {
            if self.termed.contains(&descendant.pid) {
                continue;
            }
            let exe = descendant.exe();
            if exe.is_some() && exe == *self.sandbox_exe() {
                continue;
            }
            descendant.signal(Signal::TERM);
            // A program stopped (Ctrl-Z on its terminal, SIGSTOP) would hold the SIGTERM
            // pending until SIGKILL: it is woken to act on it, as `kill -TERM` then `-CONT`.
            descendant.signal(Signal::CONT);
            self.termed.push(descendant.pid);
        }
    }

    fn kill(&self, others: &[Pid]) {
        self.signal_all(Signal::KILL, others);
    }

    /// `signal` to the sandbox's group (its id stays the sandbox's: the leader is not reaped)
    /// and to each of `others`, this process's other children.
    fn signal_all(&self, signal: Signal, others: &[Pid]) {
        // No member left is the only way this fails.
        let _ = kill_process_group(self.sandbox.pid, signal);
        if self.exit.is_none() {
            signal_child(self.sandbox.pid, signal);
        }
        for child in others {
            signal_child(*child, signal);
        }
    }

    /// This process's children other than the sandbox's leader, the dead ones reaped. The list
    /// is read again after each reaping: a child that died after it was read has had its own
    /// children reparented here, and only a read that reaps nothing shows them all.
    fn other_children(&self) -> Vec<Pid> {
        loop {
            // Without /proc there is nothing to do but go on with the group alone.
            let mut others = children::children().unwrap_or_default();
            others.retain(|pid| *pid != self.sandbox.pid);
            let before = others.len();
            others.retain(|pid| !reap_if_dead(*pid));
            if others.len() == before {
                return others;
            }
        }
    }

    /// Notes the leader's end (without reaping it) and reports it.
    fn see_leader_end(&mut self) {
        if self.exit.is_some() {
            return;
        }
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        let Ok(Some(status)) = waitid(WaitId::Pid(self.sandbox.pid), options) else {
            return;
        };
        let exit = match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            // WEXITED reports only exits and deaths by signal.
            (None, None) => return,
        };
        // The exec pipe is read before the end is looked at, so a failed exec is known here.
        self.read_exec_pipe();
        self.exit = Some(exit);
    }

    /// Reads the exec pipe: a message means the exec failed (or the cache layers could not be
    /// made); its end, that it happened.
    fn read_exec_pipe(&mut self) {
        let Some(pipe) = &self.sandbox.exec_pipe else {
            return;
        };
        let mut said = [0u8; EXEC_PIPE_BYTES];
        match rustix::io::read(pipe, &mut said) {
            Ok(EXEC_PIPE_BYTES) => {
                self.exec_failed = true;
                let event = match exec_pipe_message(said) {
                    Spawn::Exec(errno) => Event::ExecFailed(errno),
                    Spawn::Layer(failure) => Event::Failed(failure.errno.raw_os_error()),
                    Spawn::Setup(err) => Event::Failed(err.raw_os_error().unwrap_or(0)),
                };
                self.report.send(event);
                self.sandbox.exec_pipe = None;
            }
            Err(Errno::AGAIN | Errno::INTR) => {}
            // The end (the exec happened, or the child died before it), or a short read that
            // cannot happen for so few bytes on a pipe.
            _ => self.sandbox.exec_pipe = None,
        }
    }

    /// Waits for a signal (a child's end, a stop) or the exec pipe, until `wake_at` at the
    /// latest.
    fn wait(&self, wake_at: Option<Instant>) {
        let signals = self.signals.fd();
        let mut fds = Vec::with_capacity(2);
        fds.push(PollFd::new(&signals, PollFlags::IN));
        if let Some(pipe) = &self.sandbox.exec_pipe {
            fds.push(PollFd::new(pipe, PollFlags::IN));
        }
        // EINTR or a failure: the loop looks again.
        let _ = poll_until(&mut fds, wake_at);
    }
}
