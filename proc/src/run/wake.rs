//! Waking a run's supervisor to a stop request, with no one polling and no kernel object per
//! run of the kinds a user may hold only a few of. The request itself is `<id>.stop`
//! (`lnk_common::stop`); this is how the one who asks makes the supervisor look at it now.
//!
//! **Asking** ([`request_stop`]): create `<id>.stop` (`lnk_common::stop::request`), then
//! [`wake`] the run's supervisor: send it [`WAKE`] (SIGURG) once it is proven to be that
//! supervisor. The record names it (`supervisor`: its pid and start time, on the record's
//! boot); a pidfd is opened on that pid, and only if the process at the pid then has the
//! recorded start time is the signal sent, through that pidfd. So the signal reaches the
//! supervisor or, if it ended meanwhile, no one: never a process that got the pid since. A
//! record that names no supervisor yet is not signalled; its supervisor looks for itself.
//!
//! **Hearing** ([`WakeListener`]): the supervisor blocks SIGURG before anything else and reads it
//! from a signalfd, in the one `poll` it sleeps in (with its deadline, its program's output and
//! end, and its other signals). Only then does it name itself in the record, and after that it
//! looks at `<id>.stop` once: a stop asked before the record named the supervisor is seen by
//! that look; one asked after finds the record naming it and signals it. At each SIGURG it asks
//! `lnk_common::stop::requested`, which counts only a regular `<id>.stop` of the user's, so a
//! stray SIGURG stops nothing.
//!
//! SIGURG, because its default action is to be ignored: should the proof ever fail (a pid reused
//! within one clock tick of the supervisor's start), the process reached is not harmed. A
//! signalfd is a plain descriptor; an inotify instance per supervisor, as before, capped a user
//! at `fs.inotify.max_user_instances` (128 by default) live runs. A signal mask is inherited
//! across `exec`: the run's gate does not keep the supervisor's ([`crate::reaper::launch`] sets
//! it). The one who asks and the supervisor must see the same pids (one pid namespace), as a
//! sweep's kill rule assumes: from another namespace nothing is proven and nothing signalled.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::PathBuf;

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::SignalFd;
use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags};

use lnk_common::error::{Error, Op};
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::{Record, Supervisor};
use lnk_common::{cancel, stop};

use crate::proc_info;

/// The signal that tells a supervisor to look at its `<id>.stop`.
pub const WAKE: Signal = Signal::SIGURG;

fn wake_set() -> SigSet {
    let mut set = SigSet::empty();
    set.add(WAKE);
    set
}

/// A supervisor's ear for [`WAKE`]: the signal blocked, and readable from a descriptor.
#[derive(Debug)]
pub struct WakeListener {
    fd: SignalFd,
}

impl WakeListener {
    /// Blocks [`WAKE`] in the calling thread (a supervisor has no other) and opens its
    /// signalfd. From here on a wake-up waits in the descriptor until [`take`](Self::take).
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            fd: crate::reaper::blocked_signals::blocked_fd(&wake_set())?,
        })
    }

    /// The descriptor to poll: readable once a stop may have been asked.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Takes the pending wake-ups; whether there were any.
    pub fn take(&self) -> bool {
        let mut any = false;
        // Non-blocking: "nothing pending" ends the reading; no other error can come from a
        // signalfd of ours.
        while let Ok(Some(_)) = self.fd.read_signal() {
            any = true;
        }
        any
    }
}

/// Asks run `id` to stop (`lnk_common::stop::request`), then wakes its supervisor. The
/// signal is best effort: `<id>.stop` is the request, and a supervisor not named yet looks at
/// it by itself; a failure to signal is logged.
pub fn request_stop(state: &StateDir, id: &RunId) -> Result<(), Error> {
    stop::request(state, id)?;
    wake_logged(state, id);
    Ok(())
}

/// Asks run `id` to stop on behalf of its task's client (`lnk_common::cancel`), then wakes its
/// supervisor as [`request_stop`] does.
pub fn request_cancel(state: &StateDir, id: &RunId) -> Result<(), Error> {
    cancel::request_cancel(state, id)?;
    wake_logged(state, id);
    Ok(())
}

fn wake_logged(state: &StateDir, id: &RunId) {
    if let Err(err) = wake(state, id) {
        tracing::warn!(%id, "{}; its supervisor was not signalled and sees the stop only when it next wakes", lnk_common::Causes(&err));
    }
}

/// What [`wake`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Woken {
    /// The run's supervisor was sent [`WAKE`].
    Signalled,
    /// The record names no supervisor (not yet, or written on another boot, or by an older
    /// supervisor): no one is signalled.
    NotNamed,
    /// The supervisor it names is gone: its pid is free, or another process's.
    Gone,
}

/// Wakes run `id`'s supervisor, as the module says. A missing record names no one.
pub fn wake(state: &StateDir, id: &RunId) -> Result<Woken, Error> {
    let record = match Record::load(state, id) {
        Ok(record) => record,
        Err(e) if e.is_not_found() => return Ok(Woken::NotNamed),
        Err(e) => return Err(e),
    };
    match record.supervisor {
        Some(supervisor) => signal_supervisor(supervisor, &record.boot_id),
        None => Ok(Woken::NotNamed),
    }
}

/// Sends [`WAKE`] to `supervisor`, recorded on boot `boot_id`, once it is proven to be that
/// process (see the module docs).
pub fn signal_supervisor(supervisor: Supervisor, boot_id: &str) -> Result<Woken, Error> {
    if boot_id != proc_info::boot_id()? {
        return Ok(Woken::NotNamed);
    }
    let path = || PathBuf::from(format!("/proc/{}", supervisor.pid));
    let Some(pid) = Pid::from_raw(supervisor.pid.get()) else {
        return Ok(Woken::NotNamed);
    };
    // The pidfd holds whichever process has the pid now; the start time read after it says
    // whether that one is the supervisor.
    let pidfd = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => Some(fd),
        Err(Errno::SRCH) => return Ok(Woken::Gone),
        // Kernels before 5.3: the pid itself, proven just before (the signal is harmless to
        // anyone else).
        Err(Errno::NOSYS) => None,
        Err(e) => return Err(Error::io(Op::Signal, path(), e)),
    };
    if proc_info::start_time(supervisor.pid)? != Some(supervisor.start_time) {
        return Ok(Woken::Gone);
    }
    // One signal, named once ([`WAKE`]): the one the listener blocks is the one sent.
    let Some(signal) = rustix::process::Signal::from_named_raw(WAKE as i32) else {
        return Err(Error::io(Op::Signal, path(), Errno::INVAL));
    };
    let sent = match &pidfd {
        Some(fd) => rustix::process::pidfd_send_signal(fd, signal),
        None => rustix::process::kill_process(pid, signal),
    };
    match sent {
        Ok(()) => Ok(Woken::Signalled),
        Err(Errno::SRCH) => Ok(Woken::Gone),
        Err(e) => Err(Error::io(Op::Signal, path(), e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use lnk_common::ProcessId;

    fn child() -> (std::process::Child, Supervisor) {
        let child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = ProcessId::new(i64::from(child.id())).unwrap();
        let start_time = proc_info::start_time(pid).unwrap().unwrap();
        (child, Supervisor { pid, start_time })
    }

    #[test]
    fn only_the_recorded_process_of_this_boot_is_signalled() {
        let boot = proc_info::boot_id().unwrap();
        let (mut child, supervisor) = child();
        assert_eq!(
            signal_supervisor(supervisor, &boot).unwrap(),
            Woken::Signalled
        );
        // SIGURG's default action is to be ignored: the process reached lives on.
        assert!(child.try_wait().unwrap().is_none(), "SIGURG killed it");
        let other = Supervisor {
            start_time: supervisor.start_time + 1,
            ..supervisor
        };
        assert_eq!(signal_supervisor(other, &boot).unwrap(), Woken::Gone);
        assert_eq!(
            signal_supervisor(supervisor, "another-boot").unwrap(),
            Woken::NotNamed
        );
        child.kill().unwrap();
        child.wait().unwrap();
        // Reaped: its pid is free (or someone else's, with another start time).
        assert_eq!(signal_supervisor(supervisor, &boot).unwrap(), Woken::Gone);
    }
}
