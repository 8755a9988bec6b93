//! What is done for a run whose supervisor is gone: its lock is free, its record still says
//! `running`. The run becomes `lost`, and what is left of its group is killed — but only when
//! the group is surely its own: the same boot, and its leader either the recorded process
//! (same start time) or gone. A leader pid now held by another process, or a record from
//! another boot, means the pid is someone else's, and nothing is signalled.

use lnk_common::layout::StateDir;
use lnk_common::lock::LockGuard;
use lnk_common::proc_info::{self, Liveness};
use lnk_common::record::Record;
use lnk_common::status::Status;
use lnk_common::time::UnixMs;

use crate::group::Group;

/// Marks a running record `lost` (the caller holds its lock, as `_lock` proves) and kills its
/// group when it is surely its own. Whether the group was signalled.
pub fn mark_lost(state: &StateDir, record: &mut Record, _lock: &LockGuard) -> anyhow::Result<bool> {
    let killed = match surely_own_group(record) {
        Some(group) => {
            group.kill();
            true
        }
        None => false,
    };
    record.status = Status::Lost {
        ended_at_ms: UnixMs::now(),
        exit: None,
    };
    record.store(state)?;
    tracing::info!(id = %record.id, killed, "a run whose supervisor is gone is recorded lost");
    Ok(killed)
}

/// The run's group, when signalling it cannot reach anyone else's processes.
pub fn surely_own_group(record: &Record) -> Option<Group> {
    let group = record.group.as_ref()?;
    let boot = proc_info::boot_id().ok()?;
    if boot != record.boot_id {
        tracing::info!(id = %record.id, "the record is from another boot; its pids are not its own");
        return None;
    }
    match proc_info::check_process(group.leader_pid, group.leader_start_time) {
        Ok(Liveness::Same | Liveness::Gone) => Some(Group::of(group.pgid)),
        Ok(Liveness::Other) => {
            tracing::info!(id = %record.id, pid = group.leader_pid.get(), "the leader's pid belongs to another process now");
            None
        }
        Err(err) => {
            tracing::warn!(id = %record.id, "{err}");
            None
        }
    }
}
