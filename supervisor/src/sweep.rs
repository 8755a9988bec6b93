//! `sweep <state>`: cleans up after whatever died. Run by the bridge at its start and by
//! `serve` at each start; safe beside running supervisors and other sweeps, since it touches
//! a run only while holding its lock, which it takes without waiting.
//!
//! For each run: lock held → its supervisor lives, skip. Lock free → a `running` record
//! becomes `lost` (its group killed when surely its own); an ended, untold run is told while
//! its end is at most ten minutes old; a run ended more than its keep ago and told (or past
//! the ten minutes, or with no one to tell) is removed with its output file. Temporary files
//! older than a minute are removed. A damaged record is reported and moved aside.

use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;
use lnk_common::error::Error;
use lnk_common::id::RunId;
use lnk_common::index;
use lnk_common::layout::{StateDir, TEMP_DIR, TEMP_GRACE, is_temp_name};
use lnk_common::lock::{self, LockGuard, LockState};
use lnk_common::record::Record;
use lnk_common::safe_open::FilesDir;
use lnk_common::time::UnixMs;

use crate::{reclaim, tell};

/// What a sweep did.
#[derive(Debug, Default)]
pub struct Report {
    /// Runs skipped because their supervisor lives.
    pub live: usize,
    /// Runs recorded lost.
    pub lost: usize,
    /// Runs told.
    pub told: usize,
    /// Runs removed.
    pub removed: usize,
    /// Records moved aside as damaged.
    pub damaged: usize,
    /// Temporary files removed.
    pub temporaries: usize,
}

/// Sweeps the state folder at `path` (nothing to do when it does not exist).
///
/// An indexed folder ([`index`]) is swept from its index: the runs that may be running, the
/// untold ones, and the `due` minutes that are over — what is due, whatever the folder keeps.
/// A folder made before the index is swept whole, then indexed.
pub fn run(path: &Path) -> Result<Report> {
    let mut report = Report::default();
    let state = match StateDir::open(path) {
        Ok(state) => state,
        Err(e) if e.is_not_found() => return Ok(report),
        Err(e) => return Err(e.into()),
    };
    remove_old_temporaries(&state.path().join(TEMP_DIR), &mut report);
    if index::is_indexed(&state) {
        sweep_indexed(&state, &mut report)?;
    } else {
        sweep_whole(&state, &mut report)?;
        let indexed = index::migrate(&state)?;
        tracing::info!(records = indexed, "the state folder is indexed");
    }
    Ok(report)
}

fn remove_old_temporaries(dir: &Path, report: &mut Report) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if is_temp_name(&entry.file_name())
            && is_older_than_grace(&path)
            && std::fs::remove_file(&path).is_ok()
        {
            report.temporaries += 1;
        }
    }
}

/// Every run of the folder, found by reading it whole.
fn sweep_whole(state: &StateDir, report: &mut Report) -> Result<()> {
    let listing = match state.list() {
        Ok(listing) => listing,
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    for temp in &listing.temporaries {
        if is_older_than_grace(temp) && std::fs::remove_file(temp).is_ok() {
            report.temporaries += 1;
        }
    }
    for path in &listing.malformed {
        tracing::warn!(path = %path.display(), "a file the state folder should not hold; left alone");
    }
    for (id, files) in &listing.runs {
        if !files.record && !files.lock {
            continue;
        }
        sweep_one(state, id, files.record, None, report);
    }
    Ok(())
}

/// The runs the index says need looking at.
fn sweep_indexed(state: &StateDir, report: &mut Report) -> Result<()> {
    for (id, age) in index::running(state)? {
        let has_record = state.record(&id).exists();
        if !has_record && !state.lock(&id).exists() {
            // A start under way, or one that died before its lock: the name goes once old.
            if age > index::START_GRACE {
                index::drop_running(state, &id)?;
            }
            continue;
        }
        sweep_one(state, &id, has_record, None, report);
    }
    for id in index::untold(state)? {
        if !state.record(&id).exists() {
            index::drop_untold(state, &id)?;
            continue;
        }
        sweep_one(state, &id, true, None, report);
    }
    for minute in index::due(state, UnixMs::now())? {
        for id in &minute.ids {
            let name = minute.name_of(id);
            if !state.record(id).exists() {
                std::fs::remove_file(&name).ok();
                continue;
            }
            sweep_one(state, id, true, Some(&name), report);
        }
        minute.done();
    }
    Ok(())
}

/// One run: its lock tried without waiting, and [`sweep_run`] when it was free. `due`: the
/// name under which the index said the run was due.
fn sweep_one(
    state: &StateDir,
    id: &RunId,
    has_record: bool,
    due: Option<&Path>,
    report: &mut Report,
) {
    let lock = match lock::try_lock_existing(state, id) {
        Ok(LockState::Held) => {
            report.live += 1;
            return;
        }
        Ok(LockState::Free(guard)) => guard,
        Ok(LockState::Missing) if has_record => match lock::create_locked(state, id) {
            Ok(guard) => guard,
            // Another sweep made it first: it deals with the run.
            Err(_) => return,
        },
        Ok(LockState::Missing) => return,
        Err(err @ (Error::Foreign { .. } | Error::NotRegularFile { .. })) => {
            // A lock that is not the user's regular file says nothing true about the run:
            // the run is damaged.
            tracing::error!(%id, "{err}; the run is damaged and set aside");
            set_aside_damaged(state, id, has_record);
            report.damaged += 1;
            return;
        }
        Err(err) => {
            tracing::warn!(%id, "{err}");
            return;
        }
    };
    if let Err(err) = sweep_run(state, id, lock, due, report) {
        tracing::warn!(%id, "{err:#}");
    }
}

/// One run whose lock this sweep holds.
fn sweep_run(
    state: &StateDir,
    id: &RunId,
    lock: LockGuard,
    due: Option<&Path>,
    report: &mut Report,
) -> Result<()> {
    let mut record = match Record::load(state, id) {
        Ok(record) => record,
        Err(e) if e.is_not_found() => {
            // A lock with no record: a start that died before writing it, or a removal cut
            // short. Nothing can run without a record; the lock goes.
            if state.damaged(id).exists() {
                return Ok(());
            }
            lock.remove()?;
            return Ok(());
        }
        Err(e) => {
            tracing::error!(%id, "damaged record, moved aside to {}: {e}", state.damaged(id).display());
            std::fs::rename(state.record(id), state.damaged(id))?;
            report.damaged += 1;
            // Nothing runs without a record: the lock goes, the damaged record stays for a
            // person to look at.
            lock.remove()?;
            return Ok(());
        }
    };
    if record.status.is_running() && !record_end_of_gone(state, &mut record, &lock)? {
        report.lost += 1;
    }
    let now = UnixMs::now();
    if record.tell_due(now) {
        tell::tell_if_due(state, &mut record);
        if record.telling.told {
            report.told += 1;
        }
    }
    if record.removable(UnixMs::now()) {
        remove_run(state, &record, lock)?;
        report.removed += 1;
    } else if !record.status.is_running() {
        // Filed again where it belongs: an ended run whose supervisor died before filing it,
        // or one found due before it can go (untold within its ten minutes, or later this
        // minute).
        match due {
            Some(name) => index::refile(state, &record, name)?,
            None => index::ended(state, &record)?,
        }
    }
    Ok(())
}

/// A `running` record whose supervisor is gone (the caller holds its free lock): the end the
/// supervisor kept in the lock file when it could not store the record (a full disk) is
/// recorded — the run ended as it says, not `lost` — else the run is recorded lost, what is
/// left of it killed when surely its own. Whether the run's own end was found.
pub fn record_end_of_gone(state: &StateDir, record: &mut Record, lock: &LockGuard) -> Result<bool> {
    match lnk_common::record::kept_end(state, &record.id) {
        Ok(Some(kept)) => {
            // Its supervisor killed what was left before keeping the end; whatever is still
            // there that is surely the run's goes all the same.
            reclaim::kill_run(record);
            record.status = kept.status;
            record.output = kept.output;
            record.store(state)?;
            tracing::info!(id = %record.id, state = %record.status.state(), "the end the supervisor kept is recorded");
            return Ok(true);
        }
        Ok(None) => {}
        Err(err) => tracing::warn!(id = %record.id, "{err}; the run is recorded lost"),
    }
    reclaim::mark_lost(state, record, lock)?;
    Ok(false)
}

/// Sets a run whose lock is damaged aside: its record (if any) becomes `<id>.damaged`, and
/// the name of the lock goes (a name is removed without following it).
fn set_aside_damaged(state: &StateDir, id: &RunId, has_record: bool) {
    if has_record && let Err(err) = std::fs::rename(state.record(id), state.damaged(id)) {
        tracing::warn!(%id, "moving the record aside: {err}");
    }
    if let Err(err) = remove_if_there(&state.lock(id)) {
        tracing::warn!(%id, "removing the damaged lock: {err}");
    }
}

/// Removes a run: its output file (through the files folder's handle), its stop request, its
/// log, its record, and last its lock, which the caller holds.
pub fn remove_run(state: &StateDir, record: &Record, lock: LockGuard) -> Result<()> {
    match FilesDir::open(&record.launch.files).and_then(|files| files.open_background_dir()) {
        Ok(Some(background)) => {
            if let Err(err) = background.remove_output(&record.id) {
                tracing::warn!(id = %record.id, "the output file stays: {err}");
            }
        }
        Ok(None) => {}
        Err(err) => tracing::warn!(id = %record.id, "the output file stays: {err}"),
    }
    remove_if_there(&state.stop(&record.id))?;
    remove_if_there(&state.log(&record.id))?;
    remove_if_there(&state.record(&record.id))?;
    index::forget(state, record)?;
    lock.remove()?;
    Ok(())
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn is_older_than_grace(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age > TEMP_GRACE)
}
