//! Containment: the reaper, the one process both binaries put between themselves and a sandbox,
//! so that nothing a call or a run starts outlives it, with or without a PID namespace.
//!
//! A process group alone does not hold a call: a program that calls `setsid`, a daemon that
//! double-forks, or a sandbox's own `--new-session` leaves it, and without a PID namespace
//! nothing else ties those processes to the call. So each call (`lnk-link-run reap …`, started
//! by `serve`) and each run (`lnk-link-supervise gate …`, started by the run's supervisor) gets a
//! **reaper** of its own:
//!
//! - it is a **child subreaper** (`PR_SET_CHILD_SUBREAPER`): whatever its descendants leave
//!   behind is reparented to it, not to init, so everything the sandbox starts stays below it;
//! - it forks the sandbox as the leader of a **process group of its own**, with an empty
//!   environment, and keeps that leader **unreaped** until everything else is dead, so the group
//!   id stays the sandbox's for as long as it signals the group;
//! - it reads its signals (SIGCHLD, SIGTERM, SIGINT, SIGHUP) from a signalfd, blocked since before
//!   its own exec ([`launch`]), so none is missed, not even at its parent's death, which sends it
//!   SIGTERM (`PR_SET_PDEATHSIG`);
//! - it reaps every adopted orphan as it dies, so no zombies pile up;
//! - **stopping** (SIGTERM, SIGINT or SIGHUP to the reaper, its parent's death among them) is
//!   SIGTERM to the sandbox's group and to every child of the reaper, then SIGKILL after the
//!   stop grace (2 s for runs; none for calls, whose timeout is an immediate SIGKILL), again and
//!   again as killed processes' children are reparented to it, until it has no child left;
//! - once the sandbox process has ended, what it left (in its group, or adopted) may go on for
//!   the **leftover grace** (1 s), then is killed the same way and reported as leftovers;
//! - it reports to its parent over a pipe ([`report`]): the sandbox's pid, its exit, leftovers
//!   killed, an exec that failed, told as such, and `done` once everything is dead and reaped
//!   (its parent may answer for the call then, and reap the reaper after);
//! - it signals only its own children (pids that cannot be reused before it reaps them) and the
//!   group of its unreaped leader: never a pid it merely read from `/proc`.
//!
//! A call's reaper is usually started ahead of the call, a **spare** that waits for the call's
//! spec ([`spare`]), so that a call does not wait for a process to start; and a spare may have
//! started the call's sandbox too, a stub of the runner's waiting inside for the program to
//! `exec` ([`warm`]).
//!
//! A run's reaper is its gate: it also waits for the supervisor's open byte on stdin
//! ([`OPEN`], `--wait-open`) before it starts anything, and leads the run's session and group,
//! which the record names.
//!
//! What is not caught: without a PID namespace, the sandbox's programs run as the same user and
//! can see their reaper. A program that kills its reaper (SIGKILL) and has left its session
//! escapes: its processes are reparented above the reaper. (`serve` then kills what is left in
//! the reaper's session, the supervisor what is reparented to it; see the README.)

pub(crate) mod blocked_signals;
pub(crate) mod children;
pub(crate) mod fds;
pub(crate) mod hand_off;
pub(crate) mod handle;
pub mod hold;
pub(crate) mod launch;
pub mod layers;
pub(crate) mod options;
pub(crate) mod proven;
mod reaping;
pub(crate) mod report;
mod run;
mod run_stdin;
mod sandbox_start;
pub mod spare;
pub(crate) mod warm;
mod warm_sandbox;

pub use crate::stub::wire::Place;
pub use blocked_signals::BlockedSignals;
pub use children::{become_subreaper, kill_all_children};
pub use fds::PASSED_FDS_FROM;
pub use hand_off::HAND_OFF_LIMIT;
pub use handle::{REAPER_STUCK, Reaper};
pub use launch::{Launch, LaunchFailed, LaunchStep};
pub use options::Options;
pub use proven::kill_proven;
pub use report::{Event, Reports};
pub use run::{main, passed_fds, run};

use std::time::Duration;

/// The largest spec a spare reads. A call whose spec is larger starts a reaper of its own, as
/// before spares, so that the kernel's own limit on a command line stays the one that counts.
pub const MAX_SPEC: usize = 8 << 20;
const _: () = assert!(MAX_SPEC == crate::stub::wire::MAX_STUB_SPEC);

/// The byte a supervisor writes on a gate's stdin to open it.
pub const OPEN: u8 = b'g';

/// The reaper's exit code when nothing ran: the gate was closed (its supervisor went away), a
/// spare's control socket ended before its call came, or a stop came before the sandbox was
/// started.
pub const CLOSED_EXIT: u8 = 125;
/// The reaper's exit code when it could not set itself up; nothing ran.
pub const FAILED_EXIT: u8 = 126;
/// The reaper's exit code when the sandbox could not be executed; nothing ran.
pub const EXEC_FAILED_EXIT: u8 = 127;
/// The reaper's exit code for a command line it does not understand.
pub const USAGE_EXIT: u8 = 2;

/// A call's leftovers and a run's may go on this long after the sandbox process ends.
pub const LEFTOVER_GRACE: Duration = Duration::from_secs(1);
/// A run is stopped with SIGTERM, then SIGKILL this long after.
pub const RUN_STOP_GRACE: Duration = Duration::from_secs(2);
