//! `stop --state <dir>` and `remove --state <dir>`: stop every run of a state folder and wait
//! until each has ended and its lock is free; `remove` then removes everything, the folder
//! included. Both are safe to run twice, and beside a sweep or a `serve`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use lnk_common::layout::StateDir;
use lnk_common::lock::{self, LockGuard, StartLock};
use lnk_common::record::Record;

use crate::{reclaim, sweep};

/// How long a supervisor has to record its run's end after being asked to stop.
const ASKED_WAIT: Duration = Duration::from_secs(5);
/// How long after its group was killed by us a supervisor still has to end.
const KILLED_WAIT: Duration = Duration::from_secs(5);
/// How long after the lock's holders were killed the lock has to become free.
const HOLDERS_WAIT: Duration = Duration::from_secs(5);
/// How long to wait for `start.lock`, so no run starts while we stop them all.
const START_LOCK_WAIT: Duration = Duration::from_secs(15);

/// Stops every run and waits for each; returns how many were stopped.
pub fn stop(path: &Path) -> Result<usize> {
    let state = StateDir::new(path);
    if !path.exists() {
        return Ok(0);
    }
    let _start = StartLock::take_within(&state, START_LOCK_WAIT)?;
    let guards = stop_holding(&state)?;
    Ok(guards.len())
}

/// Stops every run, then removes every record, lock, stop request and output file, and the
/// state folder.
pub fn remove(path: &Path) -> Result<()> {
    let state = StateDir::new(path);
    if !path.exists() {
        return Ok(());
    }
    let start = StartLock::take_within(&state, START_LOCK_WAIT)?;
    let guards = stop_holding(&state)?;
    for guard in guards {
        let id = guard.0;
        match Record::load(&state, &id) {
            Ok(record) => sweep::remove_run(&state, &record, guard.1)?,
            Err(e) if e.is_not_found() => guard.1.remove()?,
            Err(e) => {
                tracing::warn!(%id, "{e}; the record is removed without its output file");
                std::fs::remove_file(state.record(&id)).ok();
                guard.1.remove()?;
            }
        }
    }
    let listing = state.list()?;
    for temp in &listing.temporaries {
        std::fs::remove_file(temp).ok();
    }
    for (id, files) in &listing.runs {
        if files.damaged {
            std::fs::remove_file(state.damaged(id)).ok();
        }
        if files.stop {
            std::fs::remove_file(state.stop(id)).ok();
        }
        if files.log {
            std::fs::remove_file(state.log(id)).ok();
        }
    }
    std::fs::remove_file(state.sweep_log()).ok();
    std::fs::remove_file(state.start_lock()).ok();
    drop(start);
    match std::fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| {
            format!(
                "removing {} (it holds files that are not Link Run's)",
                path.display()
            )
        }),
    }
}

/// Asks every running run to stop, then takes every run's lock, killing the group of a run
/// whose supervisor does not end in time. Returns the locks, held.
fn stop_holding(state: &StateDir) -> Result<Vec<(lnk_common::id::RunId, LockGuard)>> {
    let listing = state.list()?;
    for id in listing.record_ids() {
        if let Ok(record) = Record::load(state, id)
            && record.status.is_running()
        {
            state.request_stop(id)?;
        }
    }
    let mut held = Vec::new();
    for (id, files) in &listing.runs {
        if !files.lock && !files.record {
            continue;
        }
        let guard = match lock::lock_blocking(state, id, ASKED_WAIT) {
            Ok(Some(guard)) => Some(guard),
            Ok(None) => None,
            Err(_) => {
                // The supervisor did not end: kill the run's group ourselves; the supervisor
                // then sees its run end, records it, and lets go of the lock.
                if let Ok(record) = Record::load(state, id)
                    && record.status.is_running()
                    && let Some(group) = reclaim::surely_own_group(&record)
                {
                    group.kill();
                }
                match lock::lock_blocking(state, id, KILLED_WAIT) {
                    Ok(guard) => guard,
                    Err(_) => {
                        // The supervisor does not answer at all (stopped, or stuck): the lock's
                        // holders are found by the lock file itself, never by name, and killed.
                        kill_lock_holders(&state.lock(id));
                        match lock::lock_blocking(state, id, HOLDERS_WAIT) {
                            Ok(guard) => guard,
                            Err(e) => bail!("run {id} did not end: {e}"),
                        }
                    }
                }
            }
        };
        let guard = match guard {
            Some(guard) => guard,
            None if files.record => match lock::create_locked(state, id) {
                Ok(guard) => guard,
                Err(e) => bail!("run {id}: {e}"),
            },
            None => continue,
        };
        if let Ok(mut record) = Record::load(state, id)
            && record.status.is_running()
        {
            reclaim::mark_lost(state, &mut record, &guard)?;
        }
        held.push((id.clone(), guard));
    }
    Ok(held)
}

/// Kills every process that has the lock file `path` open (a supervisor that does not end),
/// found through `/proc/<pid>/fd` by the file's device and inode.
fn kill_lock_holders(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(lock) = std::fs::symlink_metadata(path) else {
        return;
    };
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if pid as u32 == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::metadata(fd.path())
                .is_ok_and(|m| m.dev() == lock.dev() && m.ino() == lock.ino())
        });
        if holds && let Some(pid) = rustix::process::Pid::from_raw(pid) {
            tracing::warn!(pid = pid.as_raw_nonzero().get(), lock = %path.display(), "killing a holder of the lock that does not answer");
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
}
