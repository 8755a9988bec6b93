//! One sandbox's proxy state, shared by its connections' threads: its allow-list, its
//! figures, its deadline, its stop, and the bounds on its connections (open at once, in all,
//! and open in this whole process).

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, eventfd};

use super::allow::AllowList;
use super::figures::Figures;
use super::why::Why;

/// The most connections one sandbox may have open at once.
pub const MAX_OPEN: usize = 128;
/// The most connections one sandbox may make in all.
pub const MAX_IN_ALL: usize = 16_384;
/// The most connections open at once for every sandbox of this process.
pub const MAX_OPEN_IN_PROCESS: usize = 256;

/// Connections open now in this process.
static OPEN_IN_PROCESS: AtomicUsize = AtomicUsize::new(0);

/// A sandbox's proxy.
#[derive(Debug)]
pub(super) struct SandboxNet {
    /// What it opens.
    pub(super) allow: Arc<AllowList>,
    /// What it counted.
    pub(super) figures: Figures,
    /// When every connection ends at the latest (the call's or the run's own time limit).
    pub(super) deadline: Instant,
    stop: OwnedFd,
    stopped: AtomicBool,
    open: Mutex<usize>,
    drained: Condvar,
    in_all: AtomicUsize,
}

/// A connection counted as open until dropped.
#[derive(Debug)]
pub(super) struct Open {
    net: Arc<SandboxNet>,
}

impl SandboxNet {
    /// A sandbox's proxy for `allow`, whose connections end `lifetime` from now at the latest.
    pub(super) fn new(allow: Arc<AllowList>, lifetime: Duration) -> io::Result<Self> {
        let now = Instant::now();
        Ok(SandboxNet {
            allow,
            figures: Figures::default(),
            deadline: now
                .checked_add(lifetime)
                .unwrap_or(now + Duration::from_secs(1 << 30)),
            stop: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
            stopped: AtomicBool::new(false),
            open: Mutex::new(0),
            drained: Condvar::new(),
            in_all: AtomicUsize::new(0),
        })
    }

    /// Readable once stopped: every connection's `poll` has it.
    pub(super) fn stop_fd(&self) -> BorrowedFd<'_> {
        self.stop.as_fd()
    }

    /// Whether it was stopped: nothing may go out any more.
    pub(super) fn stopped(&self) -> bool {
        self.stopped.load(Ordering::SeqCst)
    }

    /// Stops every connection (each sees the stop in its `poll`, or before it connects).
    pub(super) fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Never read: it stays readable for every poll from now on.
        let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
    }

    /// Counts a new connection as open, or says which bound it would pass.
    pub(super) fn admit(self: &Arc<Self>) -> Result<Open, Why> {
        if self.in_all.fetch_add(1, Ordering::SeqCst) >= MAX_IN_ALL {
            self.in_all.fetch_sub(1, Ordering::SeqCst);
            return Err(Why::TooManyInAll(MAX_IN_ALL));
        }
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if *open >= MAX_OPEN {
            return Err(Why::TooManyOpen(MAX_OPEN));
        }
        if OPEN_IN_PROCESS.fetch_add(1, Ordering::SeqCst) >= MAX_OPEN_IN_PROCESS {
            OPEN_IN_PROCESS.fetch_sub(1, Ordering::SeqCst);
            return Err(Why::Busy(MAX_OPEN_IN_PROCESS));
        }
        *open += 1;
        Ok(Open {
            net: Arc::clone(self),
        })
    }

    /// Waits until no connection is open, for at most `within`: whether none is. (A thread
    /// still resolving a name cannot be interrupted; it sees the stop before it connects.)
    pub(super) fn wait_drained(&self, within: Duration) -> bool {
        let open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let (open, _) = self
            .drained
            .wait_timeout_while(open, within, |open| *open > 0)
            .unwrap_or_else(|e| e.into_inner());
        *open == 0
    }
}

impl Open {
    /// The sandbox it belongs to.
    pub(super) fn net(&self) -> &SandboxNet {
        &self.net
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        OPEN_IN_PROCESS.fetch_sub(1, Ordering::SeqCst);
        let mut open = self.net.open.lock().unwrap_or_else(|e| e.into_inner());
        *open = open.saturating_sub(1);
        if *open == 0 {
            self.net.drained.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn open_connections_are_bounded_and_counted_back() {
        let net = Arc::new(SandboxNet::new(Arc::default(), Duration::from_secs(5)).unwrap());
        let open: Vec<Open> = (0..MAX_OPEN).map(|_| net.admit().unwrap()).collect();
        assert_eq!(net.admit().unwrap_err(), Why::TooManyOpen(MAX_OPEN));
        assert!(!net.wait_drained(Duration::from_millis(10)));
        drop(open);
        assert!(net.wait_drained(Duration::ZERO));
        assert!(net.admit().is_ok());
        assert!(!net.stopped());
        net.stop();
        assert!(net.stopped());
    }
}
