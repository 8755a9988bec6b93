//! End-to-end tests of `lnk-link-run serve` and the `command` tool (issue 2, "What must work"
//! items 2–7), driving the real binaries as processes. Each test body runs twice: through the
//! pass-through prefix `lnk-test-passthrough` (no sandbox) and under bubblewrap (`name::bwrap`,
//! failing when `bwrap` is missing, skipped then with a line on stderr with
//! `LNK_ALLOW_SKIP=1`).
//!
//! Run: `cargo test -p lnk-tests --test command` (it needs `lnk-link-run` built in the same
//! target folder: `cargo test` from the root, or `cargo build -p lnk-link-run` first).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Containment (issues 10 and 12): nothing of a call outlives it, however its processes leave
/// its group, and a call killed at any step of its start leaves nothing.
#[path = "command/containment.rs"]
mod contained;
/// Item 4: the `command` tool's `dir` — confined to `--files`, resolved once.
#[path = "command/dir.rs"]
mod dir;
/// Item 2: `serve` and its flags, and each refusal to start.
#[path = "command/flags.rs"]
mod flags;
/// Items 5–7: progress, cancellation, concurrency, shutdown.
#[path = "command/lifecycle.rs"]
mod lifecycle;
/// Item 4: the `command` tool — process groups, time limits, leftovers, bounded output.
#[path = "command/limits.rs"]
mod limits;
/// Item 3: MCP over stdio in both eras, and JSON-RPC errors.
#[path = "command/protocol.rs"]
mod protocol;
/// Issue 22: a program against its own reaper and the spares, where it can see them.
#[path = "command/reaper_stopped.rs"]
mod reaper_stopped;
/// Item 4: the `command` tool — what runs, with what input and environment.
#[path = "command/tool.rs"]
mod tool;
/// Issue 22: warm sandboxes, started ahead of their calls.
#[path = "command/warm.rs"]
mod warm;
/// Issue 22: a hostile program against the warm sandboxes waiting for later calls.
#[path = "command/warm_hostile.rs"]
mod warm_hostile;
