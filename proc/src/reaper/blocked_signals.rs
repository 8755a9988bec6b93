//! The reaper's signals: SIGCHLD, SIGTERM, SIGINT and SIGHUP, blocked and read from a signalfd,
//! so that none is missed and none runs a handler at a bad moment.
//!
//! The parent blocks them already in the reaper's child, between fork and exec
//! ([`block_in_child`]), so that a stop asked for before the reaper has set anything up (its
//! parent's death included) waits for it as a pending signal instead of being lost or killing
//! it half-way. The sandbox gets an empty mask and every signal at its default again:
//! `sandbox_start::spawn_sandbox` asks [`crate::spawn`] for both (the standard library's spawn
//! would hand it this process's mask).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};

/// The signals a reaper reads: a child's end, and the three that ask it to stop.
const HANDLED: [Signal; 4] = [
    Signal::SIGCHLD,
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
];

fn handled() -> SigSet {
    let mut set = SigSet::empty();
    for signal in HANDLED {
        set.add(signal);
    }
    set
}

/// Makes the reaper's signals the calling thread's whole mask: they are blocked, and nothing
/// its parent blocked is (a mask is inherited across `exec`; a supervisor blocks its stop
/// signal, [`crate::run::wake::WAKE`], which is none of its gate's business). Async-signal-safe (one
/// `sigprocmask`, on a set built on the stack), for a child between fork and exec.
pub fn block_in_child() -> io::Result<()> {
    handled().thread_set_mask().map_err(io::Error::from)
}

/// What arrived since the last look.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Arrived {
    /// A child ended (or several: standard signals coalesce).
    pub child: bool,
    /// A stop was asked for (SIGTERM, SIGINT or SIGHUP).
    pub stop: bool,
}

/// Blocks `set` in the calling thread and opens a non-blocking, close-on-exec signalfd for
/// it: from then on those signals wait in the descriptor. (The reaper's, and the supervisor's
/// stop signal, [`crate::run::wake::WakeListener`].)
pub fn blocked_fd(set: &SigSet) -> io::Result<SignalFd> {
    set.thread_block().map_err(io::Error::from)?;
    SignalFd::with_flags(set, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)
        .map_err(io::Error::from)
}

/// The reaper's signals, blocked, as a readable descriptor.
#[derive(Debug)]
pub struct BlockedSignals {
    fd: SignalFd,
}

impl BlockedSignals {
    /// Blocks the signals (again: the parent blocked them already) and opens their signalfd.
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            fd: blocked_fd(&handled())?,
        })
    }

    /// The descriptor to poll: readable while a signal is pending.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Takes every pending signal.
    pub fn take(&self) -> Arrived {
        let mut arrived = Arrived::default();
        // A read error other than "nothing pending" cannot happen on a signalfd of ours; it
        // ends the reading like an empty queue.
        while let Ok(Some(info)) = self.fd.read_signal() {
            match i32::try_from(info.ssi_signo).ok() {
                Some(libc_chld) if libc_chld == Signal::SIGCHLD as i32 => arrived.child = true,
                Some(_) => arrived.stop = true,
                None => {}
            }
        }
        arrived
    }
}
