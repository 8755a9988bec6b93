//! SIGTERM, SIGINT and SIGHUP to the supervisor: a request to quit, which it remembers.
//!
//! The signals are read from the common reaper's signalfd (SIGCHLD with them): blocked, so a
//! signal never interrupts a record's write, and readable in the same `poll` as everything else.

use std::cell::Cell;
use std::io;
use std::os::fd::BorrowedFd;

use lnk_proc::reaper::BlockedSignals;

/// Whether the supervisor was asked to quit.
#[derive(Debug)]
pub struct Quit {
    signals: BlockedSignals,
    asked: Cell<bool>,
}

impl Quit {
    /// Blocks the signals and opens their descriptor.
    pub fn new() -> io::Result<Self> {
        Ok(Self {
            signals: BlockedSignals::new()?,
            asked: Cell::new(false),
        })
    }

    /// Readable when a signal is pending (a child's end among them).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.signals.fd()
    }

    /// Whether SIGTERM, SIGINT or SIGHUP came, now or before.
    pub fn asked(&self) -> bool {
        if self.signals.take().stop {
            self.asked.set(true);
        }
        self.asked.get()
    }
}
