//! Starting a program with an empty signal mask and every signal at its default disposition,
//! whatever the starting process blocks or ignores: a call's or a run's sandbox, a warm
//! sandbox, a detached supervisor or sweep ([`crate::spawn::detached`]).
//!
//! [`spawn`] goes through `posix_spawn` (a `vfork`: no copy of the caller's memory, which a VM
//! makes dear), which returns once the exec happened or failed, so a program that cannot be
//! started is said at once. Not through the standard library's spawn: it hands the child the
//! caller's signal mask, and a reaper blocks SIGHUP, SIGINT, SIGTERM and SIGCHLD to hear them on
//! its signal fd (a supervisor its stop signal). A program that inherited those blocked would
//! never see a graceful stop, and an event loop waiting for SIGCHLD (Node's, for one) would
//! never see its children end. glibc's `posix_spawn` leaves its own two real-time signals
//! ignored; every standard one is at its default.
//!
//! A process that forks and then execs by itself (a sandbox's process that makes cache layers
//! first, the warm stub) gives its program the same with [`reset_signals`].
//!
//! [`InChild`] and [`place_in_child`] are the other way to start a program, for a
//! `std::process::Command`: what its child does between fork and exec (its folder, cache
//! layers, a session, descriptors at fixed numbers, a parent-death signal), each step a system
//! call on values made before the fork.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd, RawFd};

use rustix::process::Pid;

pub mod detached;
mod in_child;
pub mod inherited;
pub mod single_thread;
#[cfg(test)]
mod tests;

pub use in_child::{InChild, place_in_child};

/// Whose process group and session the started program is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leader {
    /// The leader of a new process group, in the caller's session: a sandbox, which its reaper
    /// kills by group.
    Group,
    /// The leader of a new session (and so of a new process group), without a controlling
    /// terminal: a process that must outlive the caller and the signals sent to its group.
    Session,
}

/// A program to start: its path, its arguments (`argv[0]` first), its whole environment
/// (`NAME=value` each), whose group it leads, and the descriptors it gets at fixed numbers.
#[derive(Debug, Clone, Copy)]
pub struct Program<'a> {
    /// The executable, as `execve` takes it (no `PATH` lookup).
    pub path: &'a CStr,
    /// Its arguments, `argv[0]` first.
    pub argv: &'a [CString],
    /// Its environment, `NAME=value` each (empty: none at all).
    pub env: &'a [CString],
    /// The group (or session) it leads.
    pub leader: Leader,
    /// Descriptors it holds at fixed numbers (`(descriptor, number)`), put in place in this
    /// order; every other descriptor of the caller's that is close-on-exec stays out.
    pub place: &'a [(BorrowedFd<'a>, RawFd)],
}

/// Why [`spawn`] started nothing.
#[derive(Debug)]
pub enum Failed {
    /// The spawn could not be set up (its attributes, a copy of a descriptor): nothing was
    /// tried.
    Setup(io::Error),
    /// `posix_spawn` failed with this errno: the exec failed (no such program, not
    /// executable, …) or a descriptor could not be put in place. Nothing ran.
    Spawn(rustix::io::Errno),
}

impl From<Failed> for io::Error {
    fn from(failed: Failed) -> io::Error {
        match failed {
            Failed::Setup(err) => err,
            Failed::Spawn(errno) => errno.into(),
        }
    }
}

/// Starts `program` with an empty signal mask and every signal at its default disposition, in
/// this process's folder, as the leader its [`Program::leader`] says; returns its pid once the
/// exec happened. The caller reaps it.
pub fn spawn(program: &Program<'_>) -> Result<Pid, Failed> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
    use nix::sys::signal::SigSet;
    let setup = |err: nix::errno::Errno| Failed::Setup(io::Error::from(err));
    let mut attr = PosixSpawnAttr::init().map_err(setup)?;
    attr.set_sigmask(&SigSet::empty()).map_err(setup)?;
    attr.set_sigdefault(&SigSet::all()).map_err(setup)?;
    let mut flags =
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF;
    match program.leader {
        Leader::Group => {
            attr.set_pgroup(nix::unistd::Pid::from_raw(0))
                .map_err(setup)?;
            flags |= PosixSpawnFlags::POSIX_SPAWN_SETPGROUP;
        }
        Leader::Session => {
            flags |= PosixSpawnFlags::from_bits_retain(libc::c_int::from(libc::POSIX_SPAWN_SETSID));
        }
    }
    attr.set_flags(flags).map_err(setup)?;
    let mut actions = PosixSpawnFileActions::init().map_err(setup)?;
    let staged = stage(program.place).map_err(Failed::Setup)?;
    for (fd, (_, target)) in staged.iter().zip(program.place) {
        // `dup2` leaves the copy open across the exec; the sources are close-on-exec.
        actions.add_dup2(fd.as_raw_fd(), *target).map_err(setup)?;
    }
    let child = posix_spawn(program.path, &actions, &attr, program.argv, program.env)
        .map_err(|errno| Failed::Spawn(rustix::io::Errno::from_raw_os_error(errno as i32)))?;
    // The copies made for the spawn go once it returned.
    drop(staged);
    Pid::from_raw(child.as_raw())
        .ok_or_else(|| Failed::Setup(io::Error::other("posix_spawn gave no pid")))
}

/// A descriptor to put in place: the caller's own, or a copy of it made for the spawn.
pub(crate) enum Source<'a> {
    Theirs(BorrowedFd<'a>),
    Copy(OwnedFd),
}

impl AsRawFd for Source<'_> {
    fn as_raw_fd(&self) -> RawFd {
        match self {
            Source::Theirs(fd) => fd.as_raw_fd(),
            Source::Copy(fd) => fd.as_raw_fd(),
        }
    }
}

/// The descriptors of `place`, each at a number that is none of the targets: a source at a
/// target's number is copied above them all (close-on-exec), so that putting one in place never
/// closes another before it is placed, and none is `dup2`'d onto itself (which would leave it
/// close-on-exec).
pub(crate) fn stage<'a>(place: &[(BorrowedFd<'a>, RawFd)]) -> io::Result<Vec<Source<'a>>> {
    let Some(above) = place.iter().map(|(_, target)| *target).max() else {
        return Ok(Vec::new());
    };
    place
        .iter()
        .map(|(fd, _)| {
            let raw = fd.as_raw_fd();
            if place.iter().any(|(_, target)| *target == raw) {
                let copy = rustix::io::fcntl_dupfd_cloexec(fd, above.saturating_add(1))?;
                Ok(Source::Copy(copy))
            } else {
                Ok(Source::Theirs(*fd))
            }
        })
        .collect()
}

/// Every signal of the calling process at its default disposition, and none blocked in the
/// calling thread: what [`spawn`] gives its program, for a process that is about to `exec`
/// one by itself (a forked sandbox's process, the warm stub). SIGKILL and SIGSTOP, which
/// refuse, are at their default anyway.
///
/// Dispositions are the whole process's: a process with other threads still running code of
/// its own should not call it (the standard library ignores SIGPIPE for its writes' sake).
/// Async-signal-safe (a system call a signal, on the stack), for a child between fork and exec.
#[allow(unsafe_code)]
pub fn reset_signals() -> io::Result<()> {
    use nix::sys::signal::{SigHandler, SigSet, Signal};
    for signal in Signal::iterator() {
        if matches!(signal, Signal::SIGKILL | Signal::SIGSTOP) {
            continue;
        }
        // SAFETY: `signal` is unsafe because the handler it installs runs at any moment; the
        // default disposition is no handler, so no code of ours can run from it. (The
        // standard library ignores SIGPIPE and an ignored signal stays ignored across exec,
        // which is why this is done at all.)
        unsafe { nix::sys::signal::signal(signal, SigHandler::SigDfl) }?;
    }
    SigSet::empty().thread_set_mask()?;
    Ok(())
}
