//! `sweep <state>`: cleans up after whatever died. Run by the bridge at its start and by
//! `serve` at each start; safe beside running supervisors and other sweeps, since it touches
//! a run only while holding its lock, which it takes without waiting.
//!
//! For each run: lock held → its supervisor lives, skip. Lock free → a `running` record
//! becomes `lost` (its group killed when surely its own); an ended, untold run is told while
//! its end is at most ten minutes old; a run ended more than its keep ago and told (or past
//! the ten minutes, or with no one to tell) is removed with its output file. Temporary files
//! older than a minute are removed. A damaged record is reported and moved aside, found through
//! the index or, when the folder changed since the last look, among its names ([`strays`]).

use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;
use lnk_common::error::Error;
use lnk_common::id::RunId;
use lnk_common::index;
use lnk_common::layout::{StateDir, TEMP_DIR, TEMP_GRACE, is_temp_name};
use lnk_common::lock::{self, LockGuard, LockState};
use lnk_common::record::Record;
use lnk_common::safe_open::{BackgroundDir, FilesDir};
use lnk_common::time::UnixMs;

use crate::{reclaim, strays, tell};

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
    fn add(&mut self, other: &Report) {
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
                    .map_err(|err| err.to_string())
            });
        match opened {
            Ok(background) => background.as_ref(),
            Err(err) => {
                tracing::warn!(id = %record.id, "the output file stays: {err}");
                None
            }
        }
    }

    /// Removes the minute folders left empty.
    fn finish(self) {
        for minute in &self.minutes {
            index::remove_minute_if_empty(minute);
        }
    }
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
    let indexed = index::is_indexed(&state);
    let mut tidy = Tidy::default();
    let swept = if indexed {
        strays::look(&state, &mut report, &mut tidy); // First: what it indexes is swept now.
        sweep_indexed(&state, &mut report, &mut tidy)
    } else {
        sweep_whole(&state, &mut report, &mut tidy)
    };
    tidy.finish();
    swept?;
    if !indexed {
        let records = index::migrate(&state)?;
        tracing::info!(records, "the state folder is indexed");
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
fn sweep_whole(state: &StateDir, report: &mut Report, tidy: &mut Tidy) -> Result<()> {
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
        sweep_one(
            state,
            id,
            Some(files.record),
            index::Found::default(),
            report,
            tidy,
        );
    }
    Ok(())
}

/// The runs the index says need looking at.
fn sweep_indexed(state: &StateDir, report: &mut Report, tidy: &mut Tidy) -> Result<()> {
    let running = index::running_ids(state)?;
    let untold = index::untold(state)?;
    let listed = Listed {
        running: running.iter().collect(),
        untold: untold.iter().collect(),
    };
    for id in &running {
        // The lock first: a run whose supervisor lives costs one `open` and one `flock`.
        if sweep_one(state, id, None, listed.found(id, None), report, tidy) == Seen::Nothing {
            // No lock, no record: a start under way, or one that died before its lock; the
            // name goes once old.
            if index::running_age(state, id).is_some_and(|age| age > index::START_GRACE) {
                index::drop_running(state, id)?;
            }
        }
    }
    for id in &untold {
        if !state.record(id).exists() {
            index::drop_untold(state, id)?;
            continue;
        }
        sweep_one(state, id, Some(true), listed.found(id, None), report, tidy);
    }
    let minutes = index::due(state, UnixMs::now())?;
    let due: Vec<(&index::DueMinute, &RunId)> = minutes
        .iter()
        .flat_map(|minute| minute.ids.iter().map(move |id| (minute, id)))
        .collect();
    let one = |(minute, id): (&index::DueMinute, &RunId), report: &mut Report, tidy: &mut Tidy| {
        let name = minute.name_of(id);
        if !state.record(id).exists() {
            tidy_gone(state, id);
            std::fs::remove_file(&name).ok();
            return;
        }
        sweep_one(
            state,
            id,
            Some(true),
            listed.found(id, Some(&name)),
            report,
            tidy,
        );
    };
    // Removing a run waits on the disk (freeing its blocks; on a disk that discards, for the
    // device): several at once keep the disk and both cores busy. This thread is one of the
    // removers, so the work is done even when no other thread can be made.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let work = |report: &mut Report, tidy: &mut Tidy| {
        loop {
            let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(&run) = due.get(at) else {
                break;
            };
            one(run, report, tidy);
        }
    };
    let helpers = REMOVERS
        .min(due.len() / REMOVALS_PER_REMOVER)
        .saturating_sub(1);
    let done: Vec<(Report, Tidy)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..helpers)
            .map_while(|_| {
                std::thread::Builder::new()
                    .name("remover".into())
                    .spawn_scoped(scope, || {
                        let (mut report, mut tidy) = (Report::default(), Tidy::default());
                        work(&mut report, &mut tidy);
                        (report, tidy)
                    })
                    .inspect_err(|err| tracing::info!("one remover fewer: {err}"))
                    .ok()
            })
            .collect();
        work(report, tidy);
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    for (theirs, their_tidy) in done {
        report.add(&theirs);
        tidy.minutes.extend(their_tidy.minutes);
    }
    for minute in &minutes {
        minute.done();
    }
    Ok(())
}

/// How many threads remove due runs at once, at most.
const REMOVERS: usize = 8;
/// The fewest due runs per thread worth a thread of its own.
const REMOVALS_PER_REMOVER: usize = 32;

/// The ids the index's `running/` and `untold/` held when the sweep read them.
struct Listed<'a> {
    running: std::collections::HashSet<&'a RunId>,
    untold: std::collections::HashSet<&'a RunId>,
}

impl Listed<'_> {
    /// The names of `id` that may be there, `due` the one it was found under.
    fn found<'n>(&self, id: &RunId, due: Option<&'n Path>) -> index::Found<'n> {
        index::Found {
            running: self.running.contains(id),
            untold: self.untold.contains(id),
            due,
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

/// One run: its lock tried without waiting, and [`sweep_run`] when it was free. `has_record`:
/// whether its record exists, when the caller knows (else looked at only when needed).
/// `names`: what the index said of it (among them the name under which it was due).
pub(crate) fn sweep_one(
    state: &StateDir,
    id: &RunId,
    has_record: Option<bool>,
    names: index::Found<'_>,
    report: &mut Report,
    tidy: &mut Tidy,
) -> Seen {
    let has_record = || has_record.unwrap_or_else(|| state.record(id).exists());
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
            tracing::error!(%id, "{err}; the run is damaged and set aside");
            set_aside_damaged(state, id, has_record());
            report.damaged += 1;
            return Seen::Something;
        }
        Err(err) => {
            tracing::warn!(%id, "{err}");
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
        Err(err) => tracing::warn!(id = %record.id, "{err}; the run is recorded lost"),
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
        tracing::warn!(%id, "moving the record aside: {err}");
    }
    if let Err(err) = remove_if_there(&state.lock(id)) {
        tracing::warn!(%id, "removing the damaged lock: {err}");
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
fn tidy_gone(state: &StateDir, id: &RunId) {
    if state.damaged(id).exists() {
        return;
    }
    if let Ok(LockState::Free(lock)) = lock::try_lock_existing(state, id)
        && !state.record(id).exists()
    {
        lock.release_reserve();
        if let Err(err) = lock.remove() {
            tracing::warn!(%id, "{err}");
        }
    }
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
