//! Starting `lnk-link-supervise` (a supervisor, a sweep) so that it outlives `serve`.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use lnk_common::layout::StateDir;

/// Starts `command` in a session of its own, with stdin and stdout as the caller set them,
/// and reaps it on a thread when it ends first. A session of its own: it must outlive
/// `serve` and the signals sent to `serve`'s process group (an MCP client stops its server by
/// signalling its group).
pub fn spawn(command: &mut Command, what: &str) -> std::io::Result<()> {
    new_session(command);
    let mut child = command.spawn()?;
    let spawned = std::thread::Builder::new()
        .name(format!("{what} reaper"))
        .spawn(move || {
            let _ = child.wait();
        });
    if let Err(err) = spawned {
        // Not reaped by us, it is reaped by whoever inherits it once serve ends.
        tracing::warn!(%err, "no thread to reap the {what}");
    }
    Ok(())
}

/// A log of the state folder as a child's stderr: a process that outlives `serve` must not
/// hold `serve`'s stderr, which is often a pipe of the MCP host.
pub fn log(state: &StateDir, path: &Path) -> Stdio {
    match state.open_log(path) {
        Ok(log) => Stdio::from(log),
        Err(err) => {
            tracing::warn!("{err}; that log is lost");
            Stdio::null()
        }
    }
}

#[allow(unsafe_code)]
fn new_session(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec; it makes one system call
    // (setsid), which is async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
}
