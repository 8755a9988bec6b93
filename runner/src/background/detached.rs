//! Starting `lnk-link-supervise` (a supervisor, a sweep) so that it outlives `serve`, and so
//! that `serve` holds nothing for it: no thread, no child to reap. Both halves of `--detached`
//! are [`lnk_proc::spawn::detached`]'s; here is what `serve` hands the program.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use lnk_common::Causes;
use lnk_common::layout::StateDir;

/// What the child's stdin, stdout and stderr are: a descriptor each, or `/dev/null`.
#[derive(Debug, Default)]
pub struct Stdio {
    /// Its stdin.
    pub stdin: Option<OwnedFd>,
    /// Its stdout.
    pub stdout: Option<OwnedFd>,
    /// Its stderr.
    pub stderr: Option<OwnedFd>,
    /// Its fd 3, if any (a run's input).
    pub input: Option<OwnedFd>,
    /// Descriptors the run's sandbox line names, at their numbers
    /// ([`crate::sandbox_line::pass`]): the supervisor holds them, and its gate hands them on.
    pub passed: crate::sandbox_line::pass::Passed,
}

/// Starts `program args… --detached`, detached as [`lnk_proc::spawn::detached`] says, with `stdio`,
/// in this process's environment and folder.
pub fn spawn(program: &Path, args: &[&OsStr], stdio: Stdio, what: &str) -> std::io::Result<()> {
    let passed = stdio.passed.place();
    let held = lnk_proc::spawn::detached::Stdio {
        stdin: stdio.stdin.as_ref().map(AsFd::as_fd),
        stdout: stdio.stdout.as_ref().map(AsFd::as_fd),
        stderr: stdio.stderr.as_ref().map(AsFd::as_fd),
        input: stdio.input.as_ref().map(AsFd::as_fd),
        more: &passed,
    };
    lnk_proc::spawn::detached::start(program, args, held, what)
}

/// A log of the state folder as a child's stderr: a process that outlives `serve` must not
/// hold `serve`'s stderr, which is often a pipe of the MCP host.
pub fn log(state: &StateDir, path: &Path) -> Option<OwnedFd> {
    match state.open_log(path) {
        Ok(log) => Some(OwnedFd::from(log)),
        Err(err) => {
            tracing::warn!("{}; that log is lost", Causes(&err));
            None
        }
    }
}
