//! `sweep <state>`: cleans up after whatever died. Run by the bridge at its start and by
//! `serve` at each start; safe beside running supervisors and other sweeps, since it touches
//! a run only while holding its lock, which it takes without waiting.
//!
//! For each run: lock held → its supervisor lives, skip. Lock free → a `running` record
//! becomes `lost` (its group killed when surely its own); an ended, untold run is told while
//! its end is at most ten minutes old; a run ended more than its keep ago and told (or past
//! the ten minutes, or with no one to tell) is removed with its output file. Temporary files
//! older than a minute are removed. A damaged record is reported and moved aside, found through
//! the index or among the folder's names ([`unindexed`]: a routine sweep, `serve`'s, looks there
//! only when the folder changed and the last look is ten minutes old; one asked for by a person
//! or a bridge looks every time).

use std::path::Path;
use std::time::SystemTime;

use anyhow::Result;
use lnk_common::id::RunId;
use lnk_common::index;
use lnk_common::layout::{StateDir, TEMP_DIR, TEMP_GRACE, is_temp_name};
use lnk_common::time::UnixMs;

pub(crate) mod one_run;
mod unindexed;

use one_run::{RecordSeen, Report, Seen, Tidy, sweep_one, tidy_gone};
pub(crate) use unindexed::Asked;

/// Sweeps the state folder at `path` and each of its projects' state folders
/// ([`StateDir::with_projects`]): what `sweep <state>` does. A folder that cannot be swept is
/// said in the log, and the others are swept all the same; the first failure is the answer.
pub fn run_every(path: &Path, asked: Asked) -> Result<Report> {
    let mut report = Report::default();
    let state = match StateDir::open(path) {
        Ok(state) => state,
        Err(e) if e.is_not_found() => return Ok(report),
        Err(e) => return Err(e.into()),
    };
    let mut failed = None;
    for folder in state.with_projects()? {
        match run(folder.path(), asked) {
            Ok(swept) => report.add(&swept),
            Err(err) => {
                tracing::warn!(folder = %folder.path().display(), "{}", lnk_common::Causes(err.as_ref()));
                failed.get_or_insert(err);
            }
        }
    }
    failed.map_or(Ok(report), Err)
}

/// Sweeps the state folder at `path` (nothing to do when it does not exist).
///
/// An indexed folder ([`index`]) is swept from its index: the runs that may be running, the
/// untold ones, and the `due` minutes that are over — what is due, whatever the folder keeps.
/// Records no index names are looked for as `asked` says ([`unindexed::look`]). A folder made
/// before the index is swept whole, then indexed; one of an older index version is upgraded
/// ([`index::upgrade`]).
pub fn run(path: &Path, asked: Asked) -> Result<Report> {
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
        // First: what it indexes is swept now.
        unindexed::look(&state, asked, &mut report, &mut tidy);
        sweep_indexed(&state, &mut report, &mut tidy)
    } else {
        sweep_whole(&state, &mut report, &mut tidy)
    };
    tidy.finish();
    swept?;
    if indexed && index::needs_upgrade(&state) {
        // Once: an older version's index is read as it is meanwhile.
        match index::upgrade(&state) {
            Ok(moved) => tracing::info!(moved, "the state folder's index is upgraded"),
            Err(err) => tracing::warn!(
                "upgrading the state folder's index (it is read as it is): {}",
                lnk_common::Causes(&err)
            ),
        }
    }
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
        let record = if files.record {
            RecordSeen::Present
        } else {
            RecordSeen::Absent
        };
        sweep_one(state, id, record, index::Found::default(), report, tidy);
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
        if sweep_one(
            state,
            id,
            RecordSeen::NotLookedAt,
            listed.found(id, None),
            report,
            tidy,
        ) == Seen::Nothing
        {
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
        sweep_one(
            state,
            id,
            RecordSeen::Present,
            listed.found(id, None),
            report,
            tidy,
        );
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
            RecordSeen::Present,
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
        tidy.absorb(their_tidy);
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

fn is_older_than_grace(path: &Path) -> bool {
    std::fs::symlink_metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|modified| SystemTime::now().duration_since(modified).ok())
        .is_some_and(|age| age > TEMP_GRACE)
}
