//! End-to-end tests of background runs: `serve --state` with the
//! `start`, `list`, `read` and `stop` tools, and `lnk-link-supervise` running each run, driven as
//! real processes. Each test body runs twice: through the pass-through prefix
//! `lnk-test-passthrough` (no sandbox) and under bubblewrap (`name::bwrap`, failing when `bwrap`
//! is missing, skipped then with a line on stderr with `LNK_ALLOW_SKIP=1`).
//!
//! Processes are found in `/proc`: a run's program by a unique marker among its arguments, its
//! supervisor by the run id in its command line, its group by the record's `group.pgid`. Every
//! test stops its runs, and a guard kills whatever a failed test left behind.
//!
//! Run: `cargo test --workspace --no-run && cargo test -p lnk-tests --test background` (it needs
//! `lnk-link-run` and `lnk-link-supervise` built in the same target folder; `cargo test` from the
//! root builds both).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// The caps: `--background` under racing starts, `--background-timeout`,
/// `--background-output` with rotation, and the refusals (no thread, `--hops`).
mod caps;
/// Containment and graceful stops (issues 9, 10 and 12): nothing of a run outlives it,
/// however its processes leave its group and whenever its supervisor dies; a stop lets the
/// program clean up; an idle supervisor sleeps.
mod contained;
/// Supervisors that die: SIGTERM, SIGINT or SIGHUP records `lost`, SIGKILL before the gate opens
/// runs nothing; and the lock is never inherited by the run.
mod crashes;
/// `read` with `grep`: lines among 100,000, within `limit`, counted; refusals.
mod grep;
/// Output made harmless for the host: escape sequences, C0/C1 controls and bidirectional
/// overrides arrive escaped in every tool's answer; `read` with `raw` gives the bytes.
mod harmless;
/// A hostile files folder: `background` and the output file made links or FIFOs.
mod hostile;
/// A run's life: it outlives `serve`; `list`, `read` and `stop`; leftovers; bad ids.
mod lifecycle;
/// A sandbox still being made when both of its run's reapers die: the sweep finds what goes
/// on to run, outside the recorded session, by the run's output pipe.
mod made;
mod output_cut;
/// `list` a page at a time: order, `before`/`next`, the state filter, refusals.
mod pages;
/// Nothing per run in serve; a start never refused because a lock is being tested; more
/// supervisors than a user has inotify instances.
mod scale;
/// `stop` with a signal: each reaches a program that traps it, through the sandbox; KILL; and
/// Ctrl-\ and Ctrl-Z on a terminal, CONT after it.
mod signals;
/// A run's stdin: `input`, interactive runs driven with `write`, the refusals, and
/// who can reach a run's stdin channel.
mod stdin;
/// Background runs as MCP tasks: a declared `start` answers a task, `tasks/get` follows it to
/// its end, `tasks/cancel` stops it; never a task unless asked.
mod tasks;
/// Runs on a terminal of their own (`tty`): isatty, the size, a prompt, Ctrl-C.
mod tty;
/// `read` that waits: for a text, for output, for the end or its time; asleep meanwhile.
mod waiting;
/// How a stop reaches a supervisor: `<id>.stop`, then SIGURG to the proven supervisor.
mod wake;
/// `watch` as a task: its line, a regular expression, the run's end, its timeout, cancelled,
/// ten at once, 10 MB asleep and through rotations, outliving its serve.
mod watch;
/// `watch` without tasks (a call that waits), its description, its refusals, and watch ids
/// among task ids.
mod watch_calls;
