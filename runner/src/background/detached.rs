//! Starting `lnk-link-supervise` (a supervisor, a sweep) so that it outlives `serve`, and so
//! that `serve` holds nothing for it: no thread, no child to reap.
//!
//! The child is started through a short-lived middle process: in the child of `spawn`, after
//! std has set up its stdio, `setsid` makes a session of its own (it must outlive `serve` and
//! the signals sent to `serve`'s process group: an MCP client stops its server by signalling
//! its group), then `fork` makes the process that goes on to `exec`, and the middle one exits
//! at once. `spawn` still returns only once that `exec` happened or failed (std's error pipe is
//! inherited by the grandchild), and `serve` reaps the middle process at once; the grandchild,
//! an orphan, is reaped by init (or the nearest child subreaper above `serve`) when it ends.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use lnk_common::Causes;
use lnk_common::layout::StateDir;

/// Starts `command`, detached as the module says, with stdio as the caller set it.
pub fn spawn(command: &mut Command, what: &str) -> std::io::Result<()> {
    detach(command);
    let mut middle = command.spawn()?;
    // The middle process exits right after its fork: this wait is over in microseconds.
    match middle.wait() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(std::io::Error::other(format!(
            "the {what} could not be detached ({status})"
        ))),
        Err(err) => Err(err),
    }
}

/// A log of the state folder as a child's stderr: a process that outlives `serve` must not
/// hold `serve`'s stderr, which is often a pipe of the MCP host.
pub fn log(state: &StateDir, path: &Path) -> Stdio {
    match state.open_log(path) {
        Ok(log) => Stdio::from(log),
        Err(err) => {
            tracing::warn!("{}; that log is lost", Causes(&err));
            Stdio::null()
        }
    }
}

/// Exit code of a middle process whose fork failed.
const FORK_FAILED: i32 = 71;

#[allow(unsafe_code)]
fn detach(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed: `setsid`, `fork` and `_exit` are (POSIX lists all
    // three), and nothing here allocates or takes a lock. The child of `spawn` has one thread,
    // so its `fork` copies no other thread's state; in the grandchild the closure returns and
    // std goes on to `exec` exactly as it would have in the child.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()?;
            match libc::fork() {
                0 => Ok(()),
                -1 => libc::_exit(FORK_FAILED),
                _ => libc::_exit(0),
            }
        });
    }
}
