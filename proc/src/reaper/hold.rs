//! Test hooks that stop a call or a run at one step of its start, so that a test can kill a
//! process exactly there (rather than hope a random moment hits it) and check that nothing is
//! left. Inert unless `LNK_HOLD` is set; nothing sets it but the tests.
//!
//! Built only with the `test-hooks` feature, which the tests turn on (`tests/Cargo.toml`) and
//! release builds lack: without it [`path_for`] and [`gate_path`] read nothing and are always
//! `None`, the reaper refuses `--hold-start` and `--hold-exec`, and no binary names the hooks'
//! variables.
//!
//! `LNK_HOLD=<step>=<path>` in the environment of `serve` (for the `call-…` steps) or of a
//! supervisor (for the `run-…` steps; supervisors inherit `serve`'s environment) holds every call
//! or run that reaches `<step>` there for good: the process at that step creates `<path>` and
//! writes its pid and a newline in it (so the test knows it is there, and which process it
//! is: a spare reaper's command line does not name its call) and then waits for a signal,
//! never going on.
//!
//! | step | who holds, and where |
//! |---|---|
//! | `call-reaper` | a call's reaper: set up (signals, subreaper), before it forks the sandbox |
//! | `call-exec` | a call's sandbox process: forked, in its own group, before it execs the sandbox |
//! | `run-reaper` | a run's gate: opened, before it forks the sandbox |
//! | `run-exec` | a run's sandbox process: forked, before it execs the sandbox |
//! | `run-started` | a run's supervisor: the sandbox runs, its group not yet recorded |
//!
//! (`LNK_SUPERVISE_HOLD_GATE=<path>`, older, holds a supervisor between recording the run's
//! group and opening the gate, until `<path>` exists: [`gate_path`].)
//!
//! A reaper has an empty environment, so its parent passes the reaper's steps on as arguments
//! (`--hold-start`, `--hold-exec`).

use std::ffi::CString;
use std::os::fd::BorrowedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::fs::{Mode, OFlags};

/// The environment variable: `<step>=<path>`.
#[cfg(feature = "test-hooks")]
pub const HOLD_ENV: &str = "LNK_HOLD";

/// The supervisor's hook: when set to a path, a supervisor opens its run's gate only once that
/// path exists, so a test can kill it between recording the group and opening the gate.
#[cfg(feature = "test-hooks")]
pub const GATE_ENV: &str = "LNK_SUPERVISE_HOLD_GATE";

/// The steps a start can be held at (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A call's reaper, before it forks the sandbox.
    CallReaper,
    /// A call's sandbox process, before its exec.
    CallExec,
    /// A run's gate, opened, before it forks the sandbox.
    RunReaper,
    /// A run's sandbox process, before its exec.
    RunExec,
    /// A run's supervisor, before it records the sandbox's group.
    RunStarted,
}

impl Step {
    /// The step's name in `LNK_HOLD`.
    pub fn name(self) -> &'static str {
        match self {
            Step::CallReaper => "call-reaper",
            Step::CallExec => "call-exec",
            Step::RunReaper => "run-reaper",
            Step::RunExec => "run-exec",
            Step::RunStarted => "run-started",
        }
    }
}

/// The path `LNK_HOLD` names for `step`, when it names that step.
#[cfg(feature = "test-hooks")]
pub fn path_for(step: Step) -> Option<PathBuf> {
    use std::ffi::OsString;
    let value = std::env::var_os(HOLD_ENV)?;
    let value = value.into_vec();
    let prefix = format!("{}=", step.name());
    let path = value.strip_prefix(prefix.as_bytes())?;
    (!path.is_empty()).then(|| PathBuf::from(OsString::from_vec(path.to_vec())))
}

/// Without the `test-hooks` feature: no step is ever held.
#[cfg(not(feature = "test-hooks"))]
pub fn path_for(_step: Step) -> Option<PathBuf> {
    None
}

/// The path `LNK_SUPERVISE_HOLD_GATE` names, when it is set: the supervisor opens its run's
/// gate only once that path exists.
#[cfg(feature = "test-hooks")]
pub fn gate_path() -> Option<PathBuf> {
    std::env::var_os(GATE_ENV).map(PathBuf::from)
}

/// Without the `test-hooks` feature: the gate is never held.
#[cfg(not(feature = "test-hooks"))]
pub fn gate_path() -> Option<PathBuf> {
    None
}

/// Holds here: creates `path`, then waits until `wake` (a descriptor that a signal makes
/// readable) is readable. The caller then handles the signal as it would at this step.
pub fn hold(path: &Path, wake: BorrowedFd<'_>) {
    announce(path);
    let mut fds = [PollFd::new(&wake, PollFlags::IN)];
    while let Err(rustix::io::Errno::INTR) = poll(&mut fds, None) {}
}

fn announce(path: &Path) {
    // Best effort: a test that cannot see the file fails on its own.
    if let Ok(file) = rustix::fs::open(
        path,
        OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    ) {
        write_pid(&file);
    }
}

/// Writes this process's pid and a newline, in one write. Only system calls on the stack, for
/// a child between fork and exec.
fn write_pid(file: &impl rustix::fd::AsFd) {
    let mut pid = rustix::process::getpid()
        .as_raw_nonzero()
        .get()
        .unsigned_abs();
    let mut digits = [0u8; 12];
    let mut at = digits.len() - 1;
    digits[at] = b'\n';
    loop {
        at -= 1;
        // A digit: the remainder is below 10.
        digits[at] = b'0' + (pid % 10) as u8;
        pid /= 10;
        if pid == 0 || at == 0 {
            break;
        }
    }
    let _ = rustix::io::write(file, &digits[at..]);
}

/// A hold in a child between fork and exec: the path is made ready before the fork.
#[derive(Debug)]
pub struct ChildHold(CString);

impl ChildHold {
    /// Prepares the hold at `path` (a path with a NUL byte holds nothing).
    pub fn new(path: &Path) -> Option<Self> {
        CString::new(path.as_os_str().to_owned().into_vec())
            .ok()
            .map(ChildHold)
    }

    /// In the child: creates the file with its pid, then waits for good (until a signal kills the child).
    /// Only system calls on memory made before the fork.
    pub fn hold_forever(&self) -> ! {
        if let Ok(file) = rustix::fs::open(
            self.0.as_c_str(),
            OFlags::CREATE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            write_pid(&file);
        }
        loop {
            nix::unistd::pause();
        }
    }
}
