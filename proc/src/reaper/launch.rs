//! Starting a reaper, from its parent: `serve` for a call, the supervisor for a run.
//!
//! The reaper must hold the call's or the run's processes before any of them runs, and must
//! die with its parent without losing that hold, so everything that could open a window is
//! done in the reaper's child between fork and exec, before it runs a single instruction of its
//! own: its folder, a session of its own, its signals blocked (a stop asked for now waits for it
//! as a pending signal), SIGTERM at its parent's death, and its report pipe at fd 3. It gets an
//! empty environment: without a PID namespace the sandbox can read the reaper's
//! `/proc/<pid>/environ`.

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::io::FdFlags;
use rustix::process::{Signal, getpid, getppid, set_parent_process_death_signal, setsid};

use super::fds::{CONTROL_FD, NET_FD, REPORT_FD};
use super::signals;

/// Arranges `command` (its program, arguments and stdio already given) to start as a reaper:
/// an empty environment; in the folder `cwd` is a handle on (`fchdir`, no path resolved again),
/// if given; the leader of a new session (so of a new process group too) without a controlling
/// terminal; the reaper's signals blocked; SIGTERM when the **thread** that spawns it dies; and
/// `report` (a report pipe's write end, from [`super::report::pipe`]) as its fd 3.
///
/// The caller keeps `cwd` and `report` open until `spawn` returns, then closes `report`, and
/// keeps the spawning thread alive until the reaper is reaped (the parent-death signal fires at
/// the thread's end).
pub fn prepare(command: &mut Command, cwd: Option<BorrowedFd<'_>>, report: &OwnedFd) {
    prepare_with(command, cwd, report, None, None);
}

/// Arranges `command` to start as a call's reaper, as [`prepare`], with `net` (the sandbox's
/// end of the call's proxy channel, from [`crate::net::channel::pair`], at fd 6 or above) as
/// its fd [`NET_FD`] when given. The caller closes `net` once `spawn` returned.
pub fn prepare_call(
    command: &mut Command,
    cwd: Option<BorrowedFd<'_>>,
    report: &OwnedFd,
    net: Option<&OwnedFd>,
) {
    prepare_with(command, cwd, report, None, net);
}

/// Arranges `command` to start as a run's gate: as [`prepare`], and with `run_stdin` (the
/// program's stdin: a pipe or a terminal, a descriptor above 4) as its fd 4, which the gate
/// makes the sandbox's stdin once opened ([`super::Options::run_stdin`]), and `net` (the
/// sandbox's end of the run's proxy channel, at fd 6 or above) as its fd [`NET_FD`]. The
/// caller closes both once `spawn` returned.
pub fn prepare_gate(
    command: &mut Command,
    cwd: Option<BorrowedFd<'_>>,
    report: &OwnedFd,
    run_stdin: Option<&OwnedFd>,
    net: Option<&OwnedFd>,
) {
    prepare_with(command, cwd, report, run_stdin, net);
}

/// Arranges `command` to start as a spare reaper ([`super::spare`]): as [`prepare`] without a
/// folder (the call sends its own), and with `control` (the spare's end of a control socket
/// pair, from [`super::spare::pair`]) as its fd 4. The caller closes `control` once `spawn`
/// returned, as it does `report`.
pub fn prepare_spare(command: &mut Command, report: &OwnedFd, control: &OwnedFd) {
    prepare_with(command, None, report, Some(control), None);
}

#[allow(unsafe_code)]
fn prepare_with(
    command: &mut Command,
    cwd: Option<BorrowedFd<'_>>,
    report: &OwnedFd,
    control: Option<&OwnedFd>,
    net: Option<&OwnedFd>,
) {
    command.env_clear();
    let parent = getpid();
    let cwd = cwd.map(|fd| fd.as_raw_fd());
    let report = report.as_raw_fd();
    let control = control.map(AsRawFd::as_raw_fd);
    let net = net.map(AsRawFd::as_raw_fd);
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed. It makes system calls only (fchdir, setsid,
    // sigprocmask, prctl, getppid, fcntl or dup2) on values copied in before the fork, and
    // builds `io::Error`s from raw errnos, which does not allocate; it takes no lock. `cwd`,
    // `report`, `control` and `net` are descriptors the caller keeps open until `spawn`
    // returns, so they are open in the child (close-on-exec closes them only at the exec).
    unsafe {
        command.pre_exec(move || {
            if let Some(cwd) = cwd {
                rustix::process::fchdir(BorrowedFd::borrow_raw(cwd))?;
            }
            setsid()?;
            signals::block_in_child()?;
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
                // fd 3 may or may not be open here; dup2 replaces it either way, and the
                // `OwnedFd` standing for it is never dropped (never closed).
                let mut target = ManuallyDrop::new(OwnedFd::from_raw_fd(REPORT_FD));
                rustix::io::dup2(BorrowedFd::borrow_raw(report), &mut target)?;
            }
            // The control socket is above fd 4 (`spare::pair`), and so is a gate's run stdin
            // (`prepare_gate`), so neither dup2 clobbers the other's source.
            if let Some(control) = control {
                let mut target = ManuallyDrop::new(OwnedFd::from_raw_fd(CONTROL_FD));
                rustix::io::dup2(BorrowedFd::borrow_raw(control), &mut target)?;
            }
            // The proxy channel's end is at fd 6 or above (`net::channel::pair`): placing it
            // at 5, after the one at 4, clobbers no source still to be placed.
            if let Some(net) = net {
                let mut target = ManuallyDrop::new(OwnedFd::from_raw_fd(NET_FD));
                rustix::io::dup2(BorrowedFd::borrow_raw(net), &mut target)?;
            }
            Ok(())
        });
    }
}
