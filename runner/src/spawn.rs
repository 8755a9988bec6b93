//! Starting a call: the reaper that forks the sandbox and holds all it starts.

use std::ffi::OsString;
use std::io;
use std::os::fd::BorrowedFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use lnk_common::reaper::hold::{self, Step};
use lnk_common::reaper::{LEFTOVER_GRACE, Options, Reports, launch, proven, report};
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process, waitid};

/// The hidden subcommand that makes `lnk-link-run` a call's reaper (see
/// [`lnk_common::reaper`]); `main` takes it before anything else.
pub const REAP: &str = "reap";

/// A call's reaper, started: `serve`'s child, which forks and holds the sandbox.
#[derive(Debug)]
pub struct Reaper {
    /// The reaper process; its stdio are the call's.
    pub child: Child,
    /// What it reports.
    pub reports: Reports,
}

/// Starts `argv` under a reaper of its own, in `cwd`, with piped stdout and stderr, stdin
/// piped when `with_input` (else empty): a spare started ahead of the call when there is one
/// ([`crate::spares`]), else one started now. A spare gets SIGTERM on the death of the
/// `spares` thread, which lives as long as serve; a reaper started now on the death of the
/// calling thread: the caller keeps this thread alive until the reaper is reaped
/// ([`Reaper::finish`]). Either kills the call then.
pub fn spawn(argv: &[OsString], cwd: BorrowedFd<'_>, with_input: bool) -> io::Result<Reaper> {
    if argv.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
    }
    let mut options = Options::new(argv.to_vec(), Duration::ZERO, LEFTOVER_GRACE);
    options.hold_start = hold::path_for(Step::CallReaper);
    options.hold_exec = hold::path_for(Step::CallExec);
    if let Some(reaper) = crate::spares::hand(&options, cwd, with_input) {
        return Ok(reaper);
    }
    start(&options, cwd, with_input)
}

/// Starts a reaper for the call now, on the calling thread, with `options` on its command line.
fn start(options: &Options, cwd: BorrowedFd<'_>, with_input: bool) -> io::Result<Reaper> {
    let (read, write) = report::pipe()?;
    // `/proc/self/exe` is this very executable even when its file was replaced since.
    let mut command = Command::new("/proc/self/exe");
    command
        .arg0("lnk-link-run")
        .arg(REAP)
        .args(options.to_args())
        .stdin(if with_input {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Nothing of serve's environment (API tokens, HOME, LNK_*) reaches the reaper or the
    // sandbox: both are visible from inside a sandbox without a PID namespace, and bwrap's
    // `--clearenv` clears only the program's. `prepare` clears the reaper's, and the reaper
    // execs the sandbox with an empty one. Variables reach programs through `--var` alone.
    launch::prepare(&mut command, Some(cwd), &write);
    let child = command.spawn()?;
    drop(write);
    let reports = match Reports::new(read) {
        Ok(reports) => reports,
        Err(err) => {
            let mut reaper = child;
            let _ = reaper.kill();
            let _ = reaper.wait();
            return Err(err);
        }
    };
    Ok(Reaper { child, reports })
}

impl Reaper {
    fn pid(&self) -> Option<Pid> {
        Pid::from_raw(i32::try_from(self.child.id()).ok()?)
    }

    /// Asks the reaper to kill everything of the call now (SIGTERM).
    pub fn stop(&self) {
        if let Some(pid) = self.pid() {
            // Unreaped, so still ours; an error means it has exited already.
            let _ = kill_process(pid, Signal::TERM);
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
        // A call that ended before its sandbox started did not ask for the next spare yet.
        crate::spares::refill();
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
