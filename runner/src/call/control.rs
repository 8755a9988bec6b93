//! A call's cancellation: what another thread holds to end a call in flight (a `cancel`, the
//! server's shutdown, a task's cancel), and the descriptor that wakes the call's `poll`.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::event::{EventfdFlags, eventfd};

/// What another thread holds to cancel a call in flight.
#[derive(Debug)]
pub struct CallControl {
    cancelled: AtomicBool,
    /// Readable once cancelled; the call's own `poll` waits on it.
    pub(super) wake: OwnedFd,
}

impl CallControl {
    /// A control with its wake-up eventfd.
    pub fn new() -> io::Result<Self> {
        let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self {
            cancelled: AtomicBool::new(false),
            wake,
        })
    }

    /// Asks the call to kill everything at once and end without an answer.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        // A full counter (impossible here) or a closed fd only means a wake-up is pending.
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }

    /// Whether [`CallControl::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// The descriptor that becomes readable when the call is cancelled, for a call that
    /// sleeps in a `poll` of its own (a waiting `read`).
    pub fn wake_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.wake.as_fd()
    }
}
