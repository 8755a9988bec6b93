//! A reaper once started ([`super::Launch`]), from its parent's side: `serve`'s child for a
//! call, the supervisor's for a run (its gate). What the parent does with it: hear it, stop
//! it, kill it, signal the programs below it, reap it.

use std::io;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions, kill_process, waitid};

use super::children::{Descendant, signal_programs};
use super::proven;
use super::report::Reports;
use crate::poll::poll_until;

/// How long a reaper asked to stop may take to end before it is killed itself (a safety net:
/// it ends at once, its sandbox killed).
pub const REAPER_STUCK: Duration = Duration::from_secs(10);

/// A reaper, started: its parent's child, which forks and holds the sandbox.
#[derive(Debug)]
pub struct Reaper {
    /// The reaper process; its stdio are the call's (for a gate: the open byte's pipe, and the
    /// run's output).
    pub child: Child,
    /// What it reports.
    pub reports: Reports,
}

impl Reaper {
    /// The reaper's pid (a gate's leads the run's session and group). Unreaped, so still the
    /// reaper's.
    pub fn pid(&self) -> Option<Pid> {
        Pid::from_raw(i32::try_from(self.child.id()).ok()?)
    }

    /// Asks the reaper to kill everything it holds (SIGTERM: at once for a call, after the
    /// stop grace for a run), and wakes it should a program it holds have stopped it
    /// (SIGCONT): a sandbox that shares its parent's PID namespace lets a program SIGSTOP its
    /// own reaper, whose SIGTERM would then wait.
    pub fn stop(&self) {
        self.signal(Signal::TERM);
        self.signal(Signal::CONT);
    }

    /// Kills the reaper itself (SIGKILL), for one that does not end when asked (what it held
    /// is then left to its parent: serve kills what is left in its session, [`Reaper::finish`];
    /// the supervisor, a child subreaper, what is reparented to it).
    pub fn kill(&self) {
        self.signal(Signal::KILL);
    }

    /// Sends `signal` to the programs it holds, every process below it but the sandbox's own,
    /// those running `sandbox_exe` (Ctrl-C, Ctrl-\ or Ctrl-Z typed on a run's terminal):
    /// [`super::children::signal_programs`]. How many were signalled.
    pub fn signal_programs(&self, signal: Signal, sandbox_exe: Option<&Path>) -> usize {
        // Not reaped yet, so its pid is still the reaper's.
        match self.pid().and_then(Descendant::pin) {
            Some(reaper) => signal_programs(reaper, sandbox_exe, signal),
            None => 0,
        }
    }

    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            // Unreaped, so still ours; an error means it has exited already.
            let _ = kill_process(pid, signal);
        }
    }

    /// Asks the reaper to stop ([`Reaper::stop`], which wakes one a program stopped), kills it
    /// should it not end within [`REAPER_STUCK`], and reaps it ([`Reaper::finish`]): bounded,
    /// whatever a program did to it. For a reaper that said `done` (a stop then does nothing
    /// more) and for a spare thrown away.
    pub fn stop_and_finish(self) -> io::Result<()> {
        self.stop();
        if !exits_within(&self.child, REAPER_STUCK) {
            tracing::warn!("a reaper did not end when asked to; killing it");
            self.kill();
        }
        self.finish().map(drop)
    }

    /// Waits for the reaper's end and reaps it. A reaper that did not end by itself (it was
    /// killed) may have left processes behind: those still in its session, whose id cannot
    /// have been reused while the reaper is unreaped, are killed first. How many were.
    pub fn finish(mut self) -> io::Result<usize> {
        let Some(pid) = self.pid() else {
            return self.child.wait().map(|_| 0);
        };
        let status = loop {
            match waitid(
                WaitId::Pid(pid),
                WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
            ) {
                Err(rustix::io::Errno::INTR) => {}
                other => break other?,
            }
        };
        let mut killed = 0;
        if status.as_ref().is_some_and(|s| !s.exited()) {
            killed = proven::kill_session(pid);
            tracing::warn!(
                killed,
                "a call's reaper was killed; what was left in its session was killed"
            );
        }
        self.child.wait().map(|_| killed)
    }
}

/// Whether `child` (unreaped) has ended, or ends within `limit`.
fn exits_within(child: &Child, limit: Duration) -> bool {
    let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
        return true;
    };
    let Ok(pidfd) = rustix::process::pidfd_open(pid, PidfdFlags::empty()) else {
        // Only a pid that is gone (reaped) cannot be opened: it has ended.
        return true;
    };
    let deadline = Instant::now() + limit;
    let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
    loop {
        match poll_until(&mut fds, Some(deadline)) {
            Ok(0) => return false,
            Ok(_) => return true,
            Err(rustix::io::Errno::INTR) if Instant::now() < deadline => {}
            Err(_) => return false,
        }
    }
}
