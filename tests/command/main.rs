//! End-to-end tests of `lnk-link-run serve` and the `command` tool ("What must work"
//! items 2–7), driving the real binaries as processes. Each test body runs twice: through the
//! pass-through prefix `lnk-test-passthrough` (no sandbox) and under bubblewrap (`name::bwrap`,
//! failing when `bwrap` is missing, skipped then with a line on stderr with
//! `LNK_ALLOW_SKIP=1`).
//!
//! Run: `cargo test --workspace --no-run && cargo test -p lnk-tests --test command` (it needs
//! `lnk-link-run` built with the test hooks in the same target folder, as `cargo test` from the
//! root builds it).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Containment (issues 10 and 12): nothing of a call outlives it, however its processes leave
/// its group, and a call killed at any step of its start leaves nothing.
mod contained;
/// Item 4: the `command` tool's `dir` — confined to `--files`, resolved once.
mod dir;
/// Item 2: `serve` and its flags, and each refusal to start.
mod flags;
/// Items 5–7: progress, cancellation, concurrency, shutdown.
mod lifecycle;
/// Item 4: the `command` tool — process groups, time limits, leftovers, bounded output.
mod limits;
/// Item 3: MCP over stdio in both eras, and JSON-RPC errors.
mod protocol;
/// A program against its own reaper and the spares, where it can see them.
mod reaper_stopped;
/// Item 4: the `command` tool — what runs, with what input and environment.
mod tool;
/// Warm sandboxes, started ahead of their calls.
mod warm;
/// A hostile program against the warm sandboxes waiting for later calls.
mod warm_hostile;
