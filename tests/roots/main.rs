//! `serve --files-from roots`: one entry serves every project. A raw client that
//! declares MCP roots gives the folder it was started in — by answering `roots/list` (handshake
//! era) or in its retry of a call answered `input_required` (2026-07-28) — and calls run there;
//! a client without roots gets the folder serve was started in; a root that may not be a
//! project's folder is refused, call by call; two sessions on two folders with one state folder
//! never see, read, stop nor cancel each other's runs, while sweeps, `stop --state` and
//! `remove --state` of the state folder cover every project's. Each body runs under the
//! pass-through prefix and under the recommended bubblewrap line, warm and cold.
//!
//! Run: `cargo test -p lnk-tests --test roots`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Calls run in the client's first root, or in the folder serve was started in.
mod chosen;
/// Two projects, one state folder: each session's runs are its own; sweeps and `stop`/`remove
/// --state` cover them all.
mod projects;
/// Roots that may not be a project's folder, a client that does not answer, a root that
/// changes.
mod refused;
/// The official Python SDK's client gives its roots, in both eras.
mod sdk;
