//! What is done for a run whose supervisor is gone: its lock is free, its record still says
//! `running`. The run becomes `lost`, and what is left of it is killed — but only what is surely
//! its own:
//!
//! - nothing at all when the record is from another boot, or when the recorded leader's pid
//!   now belongs to another process (another start time);
//! - when the leader (the run's gate) is still the recorded process, it is sent SIGTERM through
//!   a pidfd and given a few seconds to end: a gate that lives stops its run (SIGTERM, SIGKILL
//!   two seconds later) and exits. It usually has begun already: its supervisor's death sent it
//!   SIGTERM;
//! - then, or when the leader is gone, each process still left is signalled only if its own
//!   `/proc/<pid>/stat` proves it the run's: in the recorded session, in the gate's group or
//!   the sandbox's recorded group, and started no earlier than the gate. A group id whose
//!   leader is gone is never killed wholesale: after pid reuse it may be someone else's.
//!
//! Records of older gates (no `sandbox` field: the gate became the sandbox by `exec`) name no
//! session; their group is killed only while its recorded leader still holds its id.

use std::time::Duration;

use lnk_common::layout::StateDir;
use lnk_common::lock::LockGuard;
use lnk_common::proc_info::{self, Liveness};
use lnk_common::reaper::proven;
use lnk_common::record::{Group, Record};
use lnk_common::status::Status;
use lnk_common::time::UnixMs;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, Signal, kill_process_group, pidfd_open, pidfd_send_signal};

/// How long a living gate is given to stop its run and end: its stop grace, and some.
const LEADER_WAIT: Duration = Duration::from_secs(5);

/// Marks a running record `lost` (the caller holds its lock, as `_lock` proves) and kills what
/// is left of the run when it is surely its own. Whether anything was signalled.
pub fn mark_lost(state: &StateDir, record: &mut Record, _lock: &LockGuard) -> anyhow::Result<bool> {
    let killed = kill_run(record);
    // An interactive run's stdin channel, which its supervisor would have removed.
    let channel = state.stdin_channel(&record.id);
    if let Err(err) = std::fs::remove_file(&channel)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(id = %record.id, "removing {}: {err}", channel.display());
    }
    record.status = Status::Lost {
        ended_at_ms: UnixMs::now(),
        exit: None,
    };
    record.store(state)?;
    tracing::info!(id = %record.id, killed, "a run whose supervisor is gone is recorded lost");
    Ok(killed)
}

/// Kills what is left of the run, by the rules of the module docs. Whether anything was
/// signalled.
pub fn kill_run(record: &Record) -> bool {
    let Some(group) = record.group else {
        return false;
    };
    match proc_info::boot_id() {
        Ok(boot) if boot == record.boot_id => {}
        Ok(_) => {
            tracing::info!(id = %record.id, "the record is from another boot; its pids are not its own");
            return false;
        }
        Err(err) => {
            tracing::warn!(id = %record.id, "{err}");
            return false;
        }
    }
    let mut signalled = match proc_info::check_process(group.leader_pid, group.leader_start_time) {
        Ok(Liveness::Same) => stop_leader(&group),
        Ok(Liveness::Gone) => false,
        Ok(Liveness::Other) => {
            tracing::info!(id = %record.id, pid = group.leader_pid.get(), "the leader's pid belongs to another process now");
            return false;
        }
        Err(err) => {
            tracing::warn!(id = %record.id, "{err}");
            return false;
        }
    };
    match record.sandbox {
        Some(sandbox) => {
            let session = sandbox.session.get();
            let groups = [Some(group.pgid.get()), sandbox.pgid.map(|p| p.get())];
            let killed = proven::kill_proven(|stat| {
                stat.session == session
                    && groups.contains(&Some(stat.pgrp))
                    && stat.start_time >= group.leader_start_time
            });
            if killed > 0 {
                tracing::info!(id = %record.id, killed, "killed what was left of the run");
                signalled = true;
            }
        }
        None => {
            // An older gate's group: its id is the run's only while the leader holds it.
            let holds = matches!(
                proc_info::check_process(group.leader_pid, group.leader_start_time),
                Ok(Liveness::Same)
            );
            if holds && let Some(pgid) = Pid::from_raw(group.pgid.get()) {
                signalled |= kill_process_group(pgid, Signal::KILL).is_ok();
            }
        }
    }
    signalled
}

/// Sends the recorded leader SIGTERM and waits, at most [`LEADER_WAIT`], for it to end. The
/// pidfd is taken first and the start time looked at after, so the signal reaches the
/// recorded process or no one. Whether it was signalled.
fn stop_leader(group: &Group) -> bool {
    let Some(pid) = Pid::from_raw(group.leader_pid.get()) else {
        return false;
    };
    let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
        return false;
    };
    if !matches!(
        proc_info::check_process(group.leader_pid, group.leader_start_time),
        Ok(Liveness::Same)
    ) {
        return false;
    }
    if pidfd_send_signal(&pidfd, Signal::TERM).is_err() {
        return false;
    }
    // The pidfd is readable once the process has ended (reaped or not).
    let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
    let timeout = Timespec::try_from(LEADER_WAIT).ok();
    loop {
        match poll(&mut fds, timeout.as_ref()) {
            Err(rustix::io::Errno::INTR) => {}
            _ => return true,
        }
    }
}
