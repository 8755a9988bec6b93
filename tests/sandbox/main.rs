//! The sandbox's side of Link Run against a hostile agent (issue 8): what serve does itself (it
//! resolves the sandbox program once, through absolute `PATH` folders only, and starts the
//! sandbox with an empty environment), and, each attack first reproduced as a real process, that
//! it now fails. Each test body runs through the pass-through prefix and under bubblewrap with the
//! README's recommended line (`name::bwrap`, failing when `bwrap` is
//! missing, skipped then with a line on stderr with `LNK_ALLOW_SKIP=1`).
//!
//! Run: `cargo build --workspace && cargo test -p lnk-tests --test sandbox`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The sandbox check: `lnk-link-run check`, serve's refusals and warnings.
#[path = "sandbox/check.rs"]
mod check;
/// Nothing of serve's environment reaches a call's or a run's sandbox.
#[path = "sandbox/environment.rs"]
mod environment;
/// Hostile payloads under the README's recommended line, as root and as nobody.
#[path = "sandbox/hostile.rs"]
mod hostile;
/// The sandbox program is found once, never in the agent's folder.
#[path = "sandbox/lookup.rs"]
mod lookup;
/// Every host entry of the README uses the recommended line as written.
#[path = "sandbox/readme_lines.rs"]
mod readme_lines;
/// A program starts with no signal blocked or ignored.
#[path = "sandbox/signals.rs"]
mod signals;
/// The test folder of an agent: files, state, keyring and a way in, for root or `nobody`.
#[path = "sandbox/world.rs"]
mod world;
