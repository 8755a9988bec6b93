//! Protected paths: nothing the agent's programs plant in the files folder runs outside the
//! sandbox later. Under the README's recommended line (`{protected}` after the files
//! folder's bind), each protected path is refused every way in, warm and cold, as root and as
//! `nobody`; the user's own git runs nothing of the agent's after a hostile call; a host's entry
//! in the project stays the real serve; and `config --write` refuses the links the agent made.
//!
//! Run: `cargo test --workspace --no-run && cargo test -p lnk-tests --test protected`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// `config --write` and links the agent made.
mod config_links;
/// The user's git and the host's entry after a hostile call.
mod git_after;
/// The agent's project, its protected paths, and attacks run as calls.
mod project;
/// Every protected path, every way in.
mod ways_in;
/// The test folder of an agent, for root or `nobody`.
use lnk_tests::world;
