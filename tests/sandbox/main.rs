//! The sandbox's side of Link Run against a hostile agent: what serve does itself (it
//! resolves the sandbox program once, through absolute `PATH` folders only, and starts the
//! sandbox with an empty environment), and, each attack first reproduced as a real process, that
//! it now fails. Each test body runs through the pass-through prefix and under bubblewrap with the
//! README's recommended line (`name::bwrap`, failing when `bwrap` is
//! missing, skipped then with a line on stderr with `LNK_ALLOW_SKIP=1`).
//!
//! Run: `cargo test --workspace --no-run && cargo test -p lnk-tests --test sandbox`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The sandbox check: `lnk-link-run check`, serve's refusals and warnings.
mod check;
/// Nothing of serve's environment reaches a call's or a run's sandbox.
mod environment;
/// Hostile payloads under the README's recommended line, as root and as nobody.
mod hostile;
/// The sandbox program is found once, never in the agent's folder.
mod lookup;
/// Every host entry of the README uses the recommended line as written.
mod readme_lines;
/// A program starts with no signal blocked or ignored.
mod signals;
/// The test folder of an agent: files, state, keyring and a way in, for root or `nobody`.
use lnk_tests::world;
