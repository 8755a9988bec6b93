//! End-to-end tests of telling, sweeping and stopping: a run's end
//! told through the way in, exactly once and signed; `lnk-link-supervise sweep` after crashes
//! (lost runs, the pid-reuse guard, the ten minutes of retries, the keep); `stop --state` and
//! `remove --state`; a bad keyring. Each test body runs through the pass-through prefix and
//! under bubblewrap (`name::bwrap`, failing when `bwrap` is missing,
//! skipped then with a line on stderr with `LNK_ALLOW_SKIP=1`).
//!
//! The way in is a stand-in written here ([`wayin`]): a Unix socket in the test's folder that
//! verifies each message's ed25519 signature against the agent's `.pub` (made by
//! `lnk-link-supervise keygen`) and records what it got.
//!
//! Run: `cargo test --workspace --no-run && cargo test -p lnk-tests --test telling` (it needs
//! `lnk-link-run` and `lnk-link-supervise` built in the same target folder; `cargo test` from the
//! root builds both).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The tests' side of the state folder: a keyring, `sweep`/`stop`/`remove`, records edited
/// under their lock, decoy processes.
mod disk;
/// The stand-in way in and key pairs.
mod wayin;

/// A full state folder: refusals and logs say so, and no run's end is lost.
mod full_disk;
/// The index: version-1 folders swept, indexed and read; sweeps that look only at what is due.
mod index;
/// A bad keyring: missing, 0644, a link, not hex.
mod keyring;
/// `stop --state` and `remove --state`.
mod state_folder;
/// Records that no index names: found by the sweep when the folder changed, indexed or moved
/// aside.
mod strays;
/// Sweeps: lost runs, the pid-reuse guard, the ten minutes, the keep.
mod sweeps;
/// Told once; the way in down, then up; an error answer; keygen.
mod told;
/// A state folder, record, lock, stop request or way in that is not the user's alone.
mod trust;
