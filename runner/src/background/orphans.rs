//! Runs that lost their supervisor: the record says `running`, but the run's lock is free.
//!
//! A supervisor holds its run's lock for its whole life, and the kernel frees it however the
//! supervisor dies, so a free lock under a `running` record means the supervisor is gone (a
//! lock can look held for an instant when another process forks, never free). Only a sweep
//! may write such a record, so `list` and `stop` start one and wait a little for it, rather
//! than show a run as running when nothing supervises it.

use std::time::{Duration, Instant};

use lnk_common::layout::StateDir;
use lnk_common::lock::{self, LockState};
use lnk_common::record::Record;

use crate::config::Background;

/// How long `list` and `stop` wait for a sweep to record orphaned runs.
const SWEEP_WAIT: Duration = Duration::from_secs(3);
/// How often the records are looked at meanwhile.
const SWEEP_POLL: Duration = Duration::from_millis(20);

/// Starts a sweep when one of `records` is orphaned, and waits up to [`SWEEP_WAIT`] for the
/// orphans' records to show their end; `records` are updated in place.
pub fn sweep_orphans(background: &Background, records: &mut [Record]) {
    let state = StateDir::new(&background.state);
    let orphans: Vec<usize> = records
        .iter()
        .enumerate()
        .filter(|(_, record)| record.status.is_running())
        .filter(|(_, record)| {
            // Taking the lock for an instant is harmless: it is dropped at once.
            matches!(
                lock::try_lock_existing(&state, &record.id),
                Ok(LockState::Free(_))
            )
        })
        .map(|(i, _)| i)
        .collect();
    if !orphans.is_empty() {
        sweep_and_wait(background, &state, records, orphans);
    }
    // An end its supervisor could not record (a full disk) is kept in the run's lock file:
    // shown as it was kept, rather than `running` — whether the supervisor is gone, or still
    // alive and trying, or a sweep holds the lock for a moment.
    for record in records.iter_mut().filter(|r| r.status.is_running()) {
        if let Ok(Some(kept)) = lnk_common::record_store::kept_end(&state, &record.id) {
            record.status = kept.status;
            record.output = kept.output;
        }
    }
}

/// [`sweep_orphans`] for one run, without waiting, for a task's poll (which the client repeats
/// anyway): when `record` says running and its lock is free, a sweep is started and `true`
/// answered; the next poll finds the run's end recorded. An end kept in the lock file is
/// shown as [`sweep_orphans`] shows it.
pub fn notice_orphan(background: &Background, record: &mut Record) -> bool {
    if !record.status.is_running() {
        return false;
    }
    let state = StateDir::new(&background.state);
    let orphaned = matches!(
        lock::try_lock_existing(&state, &record.id),
        Ok(LockState::Free(_))
    );
    if orphaned && sweep_due() {
        tracing::info!(id = %record.id, "a task's run whose supervisor is gone; sweeping");
        super::sweep_thread::start_sweep(background);
    }
    if let Ok(Some(kept)) = lnk_common::record_store::kept_end(&state, &record.id) {
        record.status = kept.status;
        record.output = kept.output;
    }
    orphaned && record.status.is_running()
}

/// The least time between two sweeps that tasks' polls start: a client polls every 250 ms at
/// most, and a sweep that could not record a run's end would otherwise be started at each.
const TASK_SWEEP_EVERY: Duration = Duration::from_secs(5);

/// Whether a task's poll may start a sweep now (at most one per [`TASK_SWEEP_EVERY`] for this
/// server).
fn sweep_due() -> bool {
    static LAST: std::sync::Mutex<Option<Instant>> = std::sync::Mutex::new(None);
    let mut last = crate::sync::lock(&LAST);
    let due = last.is_none_or(|at| at.elapsed() >= TASK_SWEEP_EVERY);
    if due {
        *last = Some(Instant::now());
    }
    due
}

/// Starts a sweep for the orphans (indexes into `records`) and waits up to [`SWEEP_WAIT`] for
/// their records to show their end.
fn sweep_and_wait(
    background: &Background,
    state: &StateDir,
    records: &mut [Record],
    orphans: Vec<usize>,
) {
    tracing::info!(
        runs = orphans.len(),
        "runs whose supervisor is gone; sweeping"
    );
    super::sweep_thread::start_sweep(background);
    let start = Instant::now();
    let mut waiting = orphans;
    while !waiting.is_empty() && start.elapsed() < SWEEP_WAIT {
        std::thread::sleep(SWEEP_POLL);
        waiting.retain(|&i| match Record::load(state, &records[i].id) {
            Ok(fresh) => {
                let still = fresh.status.is_running();
                records[i] = fresh;
                still
            }
            Err(_) => true,
        });
    }
}
