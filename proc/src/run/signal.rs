//! A signal to a running run's programs, from outside its supervisor: `stop` with `signal`
//! (a dev server's Ctrl-C, a reload), sent by `serve`.
//!
//! The run's gate is its reaper: everything the run started is below it, whatever session or
//! group it moved to. The gate is proven as a stop proves a supervisor ([`crate::run::wake`]): the
//! record names it (its pid and start time, on the record's boot); a pidfd is taken on that pid,
//! and only if the process there has the recorded start time is it the gate. Its descendants are
//! then pinned and proven one by one ([`crate::reaper::children::descendants_of`]), and each
//! gets the signal through its pidfd, but the sandbox's own processes (those running the
//! sandbox program: bubblewrap and its init), so that the program, not the sandbox, hears it.
//! Nothing else is done: the run ends only if its program does.

use std::path::PathBuf;

use lnk_common::error::Error;
use lnk_common::record::Record;
use rustix::process::{Pid, Signal};

use crate::proc_info;
use crate::reaper::children::{Descendant, signal_programs};

/// What [`signal_run`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signalled {
    /// The signal went to this many of the run's programs' processes (none when the program
    /// has not started yet, or has just ended).
    Sent(usize),
    /// The record names no gate yet: the run is being started.
    NotStarted,
    /// The gate it names is gone (its pid free or another's, or another boot): the run has
    /// ended, or its end is being recorded.
    Gone,
}

/// The sandbox program a run executes, as `/proc/<pid>/exe` shows it (canonical), when it can
/// be found: the processes running it are the sandbox's own.
pub fn sandbox_exe(record: &Record) -> Option<PathBuf> {
    let argv = record.launch.argv();
    std::fs::canonicalize(argv.first()?).ok()
}

/// Sends `signal` to run `record`'s programs, as the module says.
pub fn signal_run(record: &Record, signal: Signal) -> Result<Signalled, Error> {
    let Some(group) = record.group else {
        return Ok(Signalled::NotStarted);
    };
    if record.boot_id != proc_info::boot_id()? {
        return Ok(Signalled::Gone);
    }
    let Some(pid) = Pid::from_raw(group.leader_pid.get()) else {
        return Ok(Signalled::Gone);
    };
    // Pinned first; the start time read after says whether the process pinned is the gate.
    let Some(gate) = Descendant::pin(pid) else {
        return Ok(Signalled::Gone);
    };
    if proc_info::start_time(group.leader_pid)? != Some(group.leader_start_time) {
        return Ok(Signalled::Gone);
    }
    let exe = sandbox_exe(record);
    Ok(Signalled::Sent(signal_programs(
        gate,
        exe.as_deref(),
        signal,
    )))
}
