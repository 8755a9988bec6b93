//! Real work under the line `lnk-link-run config` builds for this machine: real projects of
//! each kind (a Rust crate with a path dependency, C with a Makefile, Python with `unittest`
//! and a venv, Node with `node --test` and `npm test`, a git repository with commits) run
//! under it as they run directly on a copy; and secrets planted in a home (every path of the
//! never-list) cannot be read, listed or found from inside, as root and as `nobody`, while
//! the check passes, calls start warm and background runs get the same line.
//!
//! Run: `cargo test -p lnk-tests --test real_work` (needs bubblewrap, and the toolchains on
//! `PATH`: cargo, git, make and cc, python3, node and npm).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// A home of the test's own, `config` run in it, its entry started.
mod machine;
/// The projects, inside and directly.
mod projects;
/// Secrets planted in a home, looked for from inside.
mod secrets;
