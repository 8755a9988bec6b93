//! A call's reaper once started: `serve`'s child, which forks the sandbox and holds all it
//! starts (see [`lnk_proc::reaper`]), and what serve does with it: stop it, kill it, reap it.
//! Both ways of starting one ([`crate::spawn`], [`crate::spares`]) give this.

use std::io;
use std::process::Child;

use lnk_proc::reaper::{Reports, proven};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process, waitid};

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

    /// Waits for the reaper's end and reaps it. A reaper that did not end by itself (it was
    /// killed) may have left processes behind: those still in its session, whose id cannot
    /// have been reused while the reaper is unreaped, are killed first.
    pub fn finish(mut self) -> io::Result<()> {
        let Some(pid) = self.pid() else {
            return self.child.wait().map(drop);
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
        if status.as_ref().is_some_and(|s| !s.exited()) {
            let killed = proven::kill_session(pid);
            tracing::warn!(
                killed,
                "a call's reaper was killed; what was left in its session was killed"
            );
        }
        self.child.wait().map(drop)
    }
}
