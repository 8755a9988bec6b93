//! A call's reaper once started: `serve`'s child, which forks the sandbox and holds all it
//! starts (see [`lnk_proc::reaper`]), and what serve does with it: stop it, kill it, reap it.
//! Both ways of starting one ([`crate::call::spawn`], [`crate::call::spares`]) give this.

use std::io;
use std::process::Child;
use std::time::{Duration, Instant};

use lnk_proc::poll::poll_until;
use lnk_proc::reaper::{Reports, proven};
use rustix::event::{PollFd, PollFlags};
use rustix::process::{Pid, PidfdFlags, Signal, WaitId, WaitIdOptions, kill_process, waitid};

/// How long a reaper asked to stop may take to end before it is killed itself (a safety net:
/// it ends at once, its sandbox killed).
pub const REAPER_STUCK: Duration = Duration::from_secs(10);

/// The hidden subcommand that makes `lnk-link-run` a call's reaper (see
/// [`lnk_proc::reaper`]); `main` takes it before anything else.
pub const REAP: &str = "reap";

/// A call's reaper, started: `serve`'s child, which forks and holds the sandbox.
#[derive(Debug)]
pub struct Reaper {
    /// The reaper process; its stdio are the call's.
    pub child: Child,
    /// What it reports.
    pub reports: Reports,
}

impl Reaper {
    fn pid(&self) -> Option<Pid> {
        Pid::from_raw(i32::try_from(self.child.id()).ok()?)
    }

    /// Asks the reaper to kill everything of the call now (SIGTERM), and wakes it should a
    /// program of the call have stopped it (SIGCONT): a sandbox that shares serve's PID
    /// namespace lets a program SIGSTOP its own reaper, whose SIGTERM would then wait.
    pub fn stop(&self) {
        if let Some(pid) = self.pid() {
            // Unreaped, so still ours; an error means it has exited already.
            let _ = kill_process(pid, Signal::TERM);
            let _ = kill_process(pid, Signal::CONT);
        }
    }

    /// Kills the reaper itself (SIGKILL), for one that does not end when asked.
    pub fn kill(&self) {
        if let Some(pid) = self.pid() {
            let _ = kill_process(pid, Signal::KILL);
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
