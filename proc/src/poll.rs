//! Sleeping in `poll` until a deadline.

use std::time::Instant;

use rustix::event::{PollFd, Timespec};

/// Polls `fds` until one is ready or `wake_at` passes (none: no deadline).
pub fn poll_until(fds: &mut [PollFd<'_>], wake_at: Option<Instant>) -> rustix::io::Result<usize> {
    rustix::event::poll(fds, timeout_until(wake_at).as_ref())
}

/// The time from now until `wake_at`, as `poll` takes it (none past what it can hold).
fn timeout_until(wake_at: Option<Instant>) -> Option<Timespec> {
    wake_at.and_then(|at| Timespec::try_from(at.saturating_duration_since(Instant::now())).ok())
}
