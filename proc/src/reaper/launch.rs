//! Starting a reaper, from its parent: `serve` for a call or a spare, the supervisor for a run
//! (its gate). One way for all of them, [`Launch`], which gives a [`Reaper`].
//!
//! The reaper must hold the call's or the run's processes before any of them runs, and must
//! die with its parent without losing that hold, so everything that could open a window is
//! done in the reaper's child between fork and exec, before it runs a single instruction of its
//! own: its folder, a session of its own, its signals blocked (a stop asked for now waits for it
//! as a pending signal), SIGTERM at its parent's death, its report pipe at fd 3, and the
//! descriptors it is handed at theirs ([`super::fds`]). It gets an empty environment: without a
//! PID namespace the sandbox can read the reaper's `/proc/<pid>/environ`.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use rustix::io::FdFlags;
use rustix::process::{Signal, getpid, getppid, set_parent_process_death_signal, setsid};

use super::fds::{CONTROL_FD, NET_FD, PASSED_FDS_FROM, REPORT_FD};
use super::handle::Reaper;
use super::report::{self, Reports};
use super::{blocked_signals, spare};

/// How to start a reaper: this very executable (`/proc/self/exe`, even when its file was
/// replaced since) under a name and a subcommand of the binary's, its arguments, its stdio, its
/// folder, and the descriptors it is handed. [`Launch::spawn`] starts it as the leader of a new
/// session (so of a new process group too) without a controlling terminal, with an empty
/// environment, the reaper's signals blocked, and SIGTERM when the **thread** that spawns it
/// dies: the caller keeps that thread alive until the reaper is reaped.
#[derive(Debug)]
pub struct Launch<'a> {
    command: Command,
    cwd: Option<BorrowedFd<'a>>,
    run_stdin: Option<BorrowedFd<'a>>,
    net: Option<BorrowedFd<'a>>,
    passed: Vec<BorrowedFd<'a>>,
}

/// Why a reaper could not be started: at which step, and the system's error as it came.
#[derive(Debug)]
pub struct LaunchFailed {
    /// The step that failed.
    pub step: LaunchStep,
    /// The system's error.
    pub error: io::Error,
}

/// The steps of a reaper's start, for a failure's context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaunchStep {
    /// Making its report pipe, a spare's control socket, or the copies of the descriptors it
    /// is handed.
    Descriptors,
    /// Spawning it.
    Spawn,
    /// Reading its reports (it was killed and reaped).
    Reports,
}

impl fmt::Display for LaunchFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let step = match self.step {
            LaunchStep::Descriptors => "making a reaper's descriptors",
            LaunchStep::Spawn => "starting a reaper",
            LaunchStep::Reports => "reading a reaper's reports",
        };
        write!(f, "{step}: {}", self.error)
    }
}

impl std::error::Error for LaunchFailed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

impl From<LaunchFailed> for io::Error {
    /// The system's error, as it came (an `E2BIG` stays one).
    fn from(failed: LaunchFailed) -> io::Error {
        failed.error
    }
}

fn at(step: LaunchStep) -> impl FnOnce(io::Error) -> LaunchFailed {
    move |error| LaunchFailed { step, error }
}

impl<'a> Launch<'a> {
    /// This executable named `arg0`, with `subcommand` as its first argument (the binary's
    /// `main` takes it and runs [`super::main`] or a gate's [`super::run`](fn@super::run)); stdio inherited
    /// until [`Launch::stdio`] says otherwise.
    pub fn new(arg0: &str, subcommand: &str) -> Self {
        let mut command = Command::new("/proc/self/exe");
        command.arg0(arg0).arg(subcommand);
        Launch {
            command,
            cwd: None,
            run_stdin: None,
            net: None,
            passed: Vec::new(),
        }
    }

    /// Adds `args` to its command line (after the subcommand): a reaper's options
    /// ([`super::Options::to_args`]), or a spare's arguments ([`spare::args`]).
    pub fn args<S: AsRef<OsStr>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.command.args(args);
        self
    }

    /// Its stdin, stdout and stderr.
    pub fn stdio(mut self, stdin: Stdio, stdout: Stdio, stderr: Stdio) -> Self {
        self.command.stdin(stdin).stdout(stdout).stderr(stderr);
        self
    }

    /// Starts it in the folder `cwd` is a handle on (`fchdir`, no path resolved again). A spare
    /// has none: its call sends its own.
    pub fn cwd(mut self, cwd: BorrowedFd<'a>) -> Self {
        self.cwd = Some(cwd);
        self
    }

    /// A gate's run stdin (a pipe or a terminal, a descriptor above 4), as its fd 4, which the
    /// gate makes the sandbox's stdin once opened (`--run-stdin`,
    /// [`super::Options::run_stdin`]).
    pub fn run_stdin(mut self, run_stdin: Option<BorrowedFd<'a>>) -> Self {
        self.run_stdin = run_stdin;
        self
    }

    /// The sandbox's end of the call's or the run's proxy channel (from
    /// [`crate::net::channel::pair`], at fd 6 or above), as its fd 5 (`--net`).
    pub fn net(mut self, net: Option<BorrowedFd<'a>>) -> Self {
        self.net = net;
        self
    }

    /// The descriptors its sandbox's words bind (`--bind-fd <n> <path>`), the `i`th at
    /// [`PASSED_FDS_FROM`]` + i`, placed after all the others; the reaper keeps them open for
    /// its sandbox ([`super::passed_fds`]).
    pub fn passed(mut self, fds: impl IntoIterator<Item = BorrowedFd<'a>>) -> Self {
        self.passed.extend(fds);
        self
    }

    /// Starts it. Its reports are read from here on; should that fail, it is killed and reaped.
    pub fn spawn(self) -> Result<Reaper, LaunchFailed> {
        self.start(None)
    }

    /// Starts it as a spare ([`super::spare`]): with a control socket as its fd 4, whose other
    /// end, `serve`'s, comes with it. Its command line names it one ([`spare::args`]).
    pub fn spawn_spare(self) -> Result<(Reaper, OwnedFd), LaunchFailed> {
        let (control, theirs) = spare::pair().map_err(at(LaunchStep::Descriptors))?;
        let reaper = self.start(Some(theirs.as_fd()))?;
        drop(theirs);
        Ok((reaper, control))
    }

    fn start(mut self, control: Option<BorrowedFd<'_>>) -> Result<Reaper, LaunchFailed> {
        let (read, write) = report::pipe().map_err(at(LaunchStep::Descriptors))?;
        let fd4 = control.or(self.run_stdin);
        prepare(&mut self.command, self.cwd, &write, fd4, self.net);
        // The passed descriptors at theirs, once fds 3 to 5 are in place (the copies
        // `place_in_child` makes are the command's, closed when it goes).
        let place: Vec<(BorrowedFd<'_>, RawFd)> = self
            .passed
            .iter()
            .zip(PASSED_FDS_FROM..)
            .map(|(fd, number)| (*fd, number))
            .collect();
        crate::spawn::place_in_child(&mut self.command, &place)
            .map_err(at(LaunchStep::Descriptors))?;
        let mut child = self.command.spawn().map_err(at(LaunchStep::Spawn))?;
        drop(write);
        match Reports::new(read) {
            Ok(reports) => Ok(Reaper { child, reports }),
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(at(LaunchStep::Reports)(err))
            }
        }
    }
}

/// Arranges `command` to start as a reaper (see [`Launch`]), with `report` (a report pipe's
/// write end, from [`report::pipe`]) as its fd 3, `fd4` (a spare's control socket, from
/// [`spare::pair`], or a gate's run stdin, each above fd 4) as its fd 4, and `net` (at fd 6 or
/// above) as its fd 5. The caller keeps them all open until `spawn` returns.
#[allow(unsafe_code)]
fn prepare(
    command: &mut Command,
    cwd: Option<BorrowedFd<'_>>,
    report: &OwnedFd,
    fd4: Option<BorrowedFd<'_>>,
    net: Option<BorrowedFd<'_>>,
) {
    command.env_clear();
    let parent = getpid();
    let cwd = cwd.map(|fd| fd.as_raw_fd());
    let report = report.as_raw_fd();
    let fd4 = fd4.map(|fd| fd.as_raw_fd());
    let net = net.map(|fd| fd.as_raw_fd());
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed. It makes system calls only (fchdir, setsid,
    // sigprocmask, prctl, getppid, fcntl or dup2) on values copied in before the fork, and
    // builds `io::Error`s from raw errnos, which does not allocate; it takes no lock. `cwd`,
    // `report`, `fd4` and `net` are descriptors the caller keeps open until `spawn` returns, so
    // they are open in the child (close-on-exec closes them only at the exec).
    unsafe {
        command.pre_exec(move || {
            // dup2(source, target): the target may or may not be open; dup2 replaces it either
            // way, and the `OwnedFd` standing for it is never dropped (never closed).
            let place = |source: RawFd, target: RawFd| -> io::Result<()> {
                let mut target = ManuallyDrop::new(OwnedFd::from_raw_fd(target));
                rustix::io::dup2(BorrowedFd::borrow_raw(source), &mut target)?;
                Ok(())
            };
            if let Some(cwd) = cwd {
                rustix::process::fchdir(BorrowedFd::borrow_raw(cwd))?;
            }
            setsid()?;
            blocked_signals::block_in_child()?;
            set_parent_process_death_signal(Some(Signal::TERM))?;
            // The parent may have died between fork and prctl: then no signal would come.
            if getppid() != Some(parent) {
                return Err(io::Error::from_raw_os_error(
                    rustix::io::Errno::SRCH.raw_os_error(),
                ));
            }
            if report == REPORT_FD {
                rustix::io::fcntl_setfd(BorrowedFd::borrow_raw(report), FdFlags::empty())?;
            } else {
                place(report, REPORT_FD)?;
            }
            // The control socket is above fd 4 (`spare::pair`), and so is a gate's run stdin,
            // so neither dup2 clobbers the other's source.
            if let Some(fd4) = fd4 {
                place(fd4, CONTROL_FD)?;
            }
            // The proxy channel's end is at fd 6 or above (`net::channel::pair`): placing it
            // at 5, after the one at 4, clobbers no source still to be placed.
            if let Some(net) = net {
                place(net, NET_FD)?;
            }
            Ok(())
        });
    }
}
