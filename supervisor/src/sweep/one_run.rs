//! A sweep's work on one run, under its lock: a run whose supervisor is gone recorded lost (or
//! ended as the lock file kept), an untold end told, a run past its keep removed, a damaged
//! record or lock set aside. [`sweep_one`] is what both the sweep of the index
//! ([`crate::sweep`]) and the look for records no index names ([`super::unindexed`]) call.

use std::path::Path;

use anyhow::Result;
use lnk_common::error::Error;
use lnk_common::id::RunId;
use lnk_common::index;
use lnk_common::layout::StateDir;
use lnk_common::lock::{self, LockGuard, LockState};
use lnk_common::record::Record;
use lnk_common::safe_open::{BackgroundDir, FilesDir};
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
    /// Records that no index named, indexed.
    pub indexed: usize,
}

impl Report {
    /// Adds `other`'s counts to these.
    pub(crate) fn add(&mut self, other: &Report) {
        self.live += other.live;
        self.lost += other.lost;
        self.told += other.told;
        self.removed += other.removed;
        self.damaged += other.damaged;
        self.temporaries += other.temporaries;
        self.indexed += other.indexed;
    }
}

/// What a sweep keeps from one removal to the next, so that removing thousands of runs costs
/// what each run's own files cost: each files folder opened once, each `started` minute folder
/// tried once at the end.
#[derive(Default)]
pub struct Tidy {
    /// Each files folder's `background/` (`None`: it has none), or why it could not be opened.
    outputs: std::collections::HashMap<std::path::PathBuf, Result<Option<BackgroundDir>, String>>,
    /// The `started` minute folders runs were removed from.
    minutes: std::collections::BTreeSet<std::path::PathBuf>,
}

impl Tidy {
    /// The `background/` folder of `record`'s files folder, if it has one; a folder that could
    /// not be opened is said for each run whose output therefore stays.
    fn outputs_of(&mut self, record: &Record) -> Option<&BackgroundDir> {
        let opened = self
            .outputs
            .entry(record.launch.files.clone())
            .or_insert_with(|| {
                FilesDir::open(&record.launch.files)
                    .and_then(|files| files.open_background_dir())
                    .map_err(|err| lnk_common::Causes(&err).to_string())
            });
        match opened {
            Ok(background) => background.as_ref(),
            Err(err) => {
                tracing::warn!(id = %record.id, "the output file stays: {err}");
                None
            }
        }
    }

    /// Takes in what another remover's [`Tidy`] has left to finish.
    pub(crate) fn absorb(&mut self, other: Tidy) {
        self.minutes.extend(other.minutes);
    }

    /// Removes the minute folders left empty.
    pub(crate) fn finish(self) {
        for minute in &self.minutes {
            index::remove_minute_if_empty(minute);
        }
    }
}

/// What [`sweep_one`] saw of a run.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    /// Its lock, its record, or both.
    Something,
    /// Neither its lock nor its record.
    Nothing,
}

/// Whether a run's record exists, as the caller of [`sweep_one`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RecordSeen {
    /// It was there (the folder's listing named it, or the caller looked).
    Present,
    /// The folder's listing did not name it.
    Absent,
    /// The caller did not look: [`sweep_one`] looks when it needs to know.
    NotLookedAt,
}

/// One run: its lock tried without waiting, and [`sweep_run`] when it was free. `record`:
/// whether its record exists, as the caller saw it. `names`: what the index said of it (among
/// them the name under which it was due).
pub(crate) fn sweep_one(
    state: &StateDir,
    id: &RunId,
    record: RecordSeen,
    names: index::Found<'_>,
    report: &mut Report,
    tidy: &mut Tidy,
) -> Seen {
    let has_record = || match record {
        RecordSeen::Present => true,
        RecordSeen::Absent => false,
        RecordSeen::NotLookedAt => state.record(id).exists(),
    };
    let lock = match lock::try_lock_existing(state, id) {
        Ok(LockState::Held) => {
            report.live += 1;
            return Seen::Something;
        }
        Ok(LockState::Free(guard)) => guard,
        Ok(LockState::Missing) if has_record() => match lock::create_locked(state, id) {
            Ok(guard) => guard,
            // Another sweep made it first: it deals with the run.
            Err(_) => return Seen::Something,
        },
        Ok(LockState::Missing) => return Seen::Nothing,
        Err(err @ (Error::Foreign { .. } | Error::NotRegularFile { .. })) => {
            // A lock that is not the user's regular file says nothing true about the run:
            // the run is damaged.
            tracing::error!(%id, "{}; the run is damaged and set aside", lnk_common::Causes(&err));
            set_aside_damaged(state, id, has_record());
            report.damaged += 1;
            return Seen::Something;
        }
        Err(err) => {
            tracing::warn!(%id, "{}", lnk_common::Causes(&err));
            return Seen::Something;
        }
    };
    if let Err(err) = sweep_run(state, id, lock, names, report, tidy) {
        tracing::warn!(%id, "{err:#}");
    }
    Seen::Something
}

/// One run whose lock this sweep holds.
fn sweep_run(
    state: &StateDir,
    id: &RunId,
    lock: LockGuard,
    names: index::Found<'_>,
    report: &mut Report,
    tidy: &mut Tidy,
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
    if record.status.is_running() {
        if !record_end_of_gone(state, &mut record, &lock)? {
            report.lost += 1;
        }
        // A supervisor killed within a rotation leaves the record naming the new file, not yet
        // in place: it is put there, so the output stays readable.
        if let (Some(named), Some(background)) = (record.output.file, tidy.outputs_of(&record)) {
            match background.finish_cut_rotation(&record.id, named) {
                Ok(true) => tracing::info!(%id, "a rotation cut short is finished"),
                Ok(false) => {}
                Err(err) => tracing::warn!(%id, "finishing a rotation cut short: {err}"),
            }
        }
    }
    let now = UnixMs::now();
    if record.tell_due(now) {
        tell::tell_if_due(state, &mut record);
        if record.telling.told {
            report.told += 1;
        }
    }
    if record.removable(UnixMs::now()) {
        remove_run_with(state, &record, lock, &names, tidy)?;
        report.removed += 1;
    } else if !record.status.is_running() {
        // Filed again where it belongs: an ended run whose supervisor died before filing it,
        // or one found due before it can go (untold within its ten minutes, or later this
        // minute).
        match names.due {
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
    match lnk_common::record_store::kept_end(state, &record.id) {
        Ok(Some(kept)) => {
            // Its supervisor killed what was left before keeping the end; whatever is still
            // there that is surely the run's goes all the same.
            let left = reclaim::kill_run(record).left_running();
            record.left_running = left.or(record.left_running.take());
            record.status = kept.status;
            record.output = kept.output;
            record.store(state)?;
            lnk_common::index::file_end(state, record);
            release_reservations(state, record, lock);
            tracing::info!(id = %record.id, state = %record.status.state(), "the end the supervisor kept is recorded");
            return Ok(true);
        }
        Ok(None) => {}
        Err(err) => {
            tracing::warn!(id = %record.id, "{}; the run is recorded lost", lnk_common::Causes(&err))
        }
    }
    reclaim::mark_lost(state, record, lock)?;
    release_reservations(state, record, lock);
    Ok(false)
}

/// Once a run's end is in its record: the room its lock and its log kept for a full disk is
/// given back, as its supervisor does when it stores the end itself.
fn release_reservations(state: &StateDir, record: &Record, lock: &LockGuard) {
    lock.release_reserve();
    state.trim_log(&record.id);
}

/// Sets a run whose lock is damaged aside: its record (if any) becomes `<id>.damaged`, and
/// the name of the lock goes (a name is removed without following it).
fn set_aside_damaged(state: &StateDir, id: &RunId, has_record: bool) {
    if has_record && let Err(err) = std::fs::rename(state.record(id), state.damaged(id)) {
        tracing::warn!(%id, "moving the record aside: {}", lnk_common::Causes(&err));
    }
    if let Err(err) = remove_if_there(&state.lock(id)) {
        tracing::warn!(%id, "removing the damaged lock: {}", lnk_common::Causes(&err));
    }
}

/// Removes a run, holding its lock, as `lnk_common::run_files::remove` says.
pub fn remove_run(state: &StateDir, record: &Record, lock: LockGuard) -> Result<()> {
    let mut tidy = Tidy::default();
    let removed = remove_run_with(state, record, lock, &index::Found::default(), &mut tidy);
    tidy.finish();
    removed
}

/// [`remove_run`] within a sweep's [`Tidy`].
fn remove_run_with(
    state: &StateDir,
    record: &Record,
    lock: LockGuard,
    names: &index::Found<'_>,
    tidy: &mut Tidy,
) -> Result<()> {
    let output_dir = tidy.outputs_of(record);
    let minute = lnk_common::run_files::remove(state, record, lock, output_dir, names)?;
    tidy.minutes.extend(minute);
    Ok(())
}

/// A `due` name whose record is gone: a removal cut short (or a name left by hand). Its lock,
/// if free, goes too, its reserved room first (other names of the run may still link it).
pub(crate) fn tidy_gone(state: &StateDir, id: &RunId) {
    if state.damaged(id).exists() {
        return;
    }
    if let Ok(LockState::Free(lock)) = lock::try_lock_existing(state, id)
        && !state.record(id).exists()
    {
        lock.release_reserve();
        if let Err(err) = lock.remove() {
            tracing::warn!(%id, "{}", lnk_common::Causes(&err));
        }
    }
}

fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
