//! A sweep after pid reuse. A run whose supervisor and gate were SIGKILLed
//! leaves its session and group ids free once nothing of it is left; when the pid counter comes
//! round, another program's daemon that calls `setsid` gets the same id as its session and group,
//! forks and exits. Its child is then "in the recorded session and the recorded group, started
//! after the run": the sweep must leave it running, and say so.
//!
//! The pids are cycled for real: `/proc/sys/kernel/ns_last_pid` is set to the id before it (as
//! root), else processes are started until the counter reaches it; where neither can be done the
//! test fails, or with `LNK_ALLOW_SKIP=1` says `skipped:` on stderr. This process is made a
//! child subreaper, so that the run's processes are reaped here once killed (an init that does
//! not reap would keep their ids taken), which is why the test is a binary of its own.
//!
//! Run: `cargo test --workspace --no-run && cargo test -p lnk-tests --test reuse`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The test itself.
mod daemon;
