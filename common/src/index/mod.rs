//! The state folder's index: what `list`, a sweep and `stop --state` read instead of the whole
//! folder, so that they cost what they return or what is due, not what the folder keeps.
//!
//! Records stay where they always were (`<state>/<id>.json`, found by id in one lookup); the
//! index is a set of names that say everything, under `<state>/index/`. Each is a hard link of
//! the run's lock file (`<id>.lock`), or an empty file of its own when the run has no lock (an
//! older folder being indexed): a link costs a directory entry, where a new file costs an inode,
//! several times as much on some disks. Only the name is ever read, and the age of a `running`
//! name, which is its file's time: the lock's, made by the start.
//!
//! | name | present while |
//! |---|---|
//! | `index/version` | every record of the folder is indexed (written when the folder is made, or once a sweep has indexed an older folder: [`migrate`]); it holds the index's version, `2` ([`VERSION`]; a version-1 folder is read as well, and its first sweep upgrades it: [`upgrade`]) |
//! | `index/running/<id>` | the run may be running: made by `start` before the record, removed once its end is filed |
//! | `index/start-times/<minute>/<tenth>/<started_at_ms>-<id>` | the run exists; `<minute>` is `started_at_ms / 60000` (10 digits), `<tenth>` the tenth of a second within it (3 digits), `<started_at_ms>` 13 digits, so names sort by start time ([`started`](mod@started); version 1 filed them as `index/started/<minute>/<started_at_ms>-<id>`) |
//! | `index/due/<minute>/<id>` | the run has ended: the minute from which a sweep may remove it (its end + its keep) |
//! | `index/untold/<id>` | the run has ended untold, with a way in: a sweep tries to tell it (within the ten minutes) |
//! | `index/looked` | an empty file whose modification time is the state folder's as a sweep last saw it before reading the folder's top level whole, for records no index names, and whose access time is when it did ([`LOOKED_FILE`]; the supervisor's sweep keeps it) |
//!
//! The record is the truth and the index a guide: a name whose record is gone, or says
//! otherwise, is passed over (and tidied by whoever holds the run's lock); what must never
//! happen is a run missing from the index, so each name is made **before** the state it
//! stands for is stored, and removed only after. Every name is a pure function of the record,
//! so making one twice is harmless.
//!
//! * `start` makes `running/<id>` and the `started` name ([`started`](mod@started)) before the record.
//! * Whoever stores an ended record ([`crate::Record::store`]) then files it ([`file_end`]): `due/…/<id>`, makes or removes
//!   `untold/<id>`, then removes `running/<id>` ([`ended`]). A supervisor that dies in between
//!   leaves `running/<id>`, which the next sweep finds with a free lock and files again.
//! * A sweep reads `running/` (each run's lock tried: a free one is a supervisor gone),
//!   `untold/`, and the `due/` minutes that are over (a minute late at most, so that a filing
//!   under way is never missed), removing what is due ([`forget`]).
//! * `list` reads `running/` for `state: running`, else the newest `started` minutes and their
//!   newest tenths down to the page's end, reading at most a bounded number of records for a
//!   page (the runner's `background::list_page`, over [`each_started`]).
//!
//! A folder made before the index (its records are version 1, as today's) has no
//! `index/version`: `list` then reads every record, and the next sweep indexes them all once
//! ([`migrate`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::Error;
use crate::id::RunId;
use crate::layout::StateDir;
use crate::record::{Record, TELL_WINDOW};
use crate::time::UnixMs;

mod names;
pub(crate) mod started;

pub(crate) use names::names_in;
use names::{age_of, ids_in, make_dir, make_dirs, name, remove, remove_empty_dir};

/// The index folder, inside the state folder.
pub const INDEX_DIR: &str = "index";
/// The name, in `index/`, whose modification time is the state folder's as the last look for
/// records no index names saw it, and whose access time is when that look was made.
pub const LOOKED_FILE: &str = "looked";
/// Present when every record is indexed.
pub const VERSION_FILE: &str = "version";
/// What `index/version` holds: version 2 files each run by start time under `start-times/`, in
/// the tenth of a second of its minute ([`started`](mod@started)).
pub const VERSION: &str = "2\n";
/// A `running` name younger than this whose run has no lock and no record may be a start
/// under way; older, it is a start that died, and goes.
pub const START_GRACE: Duration = Duration::from_secs(60);

pub(crate) const MINUTE_MS: u64 = 60_000;

/// The folders of the index, by kind.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Running,
    /// Version 2's names by start time, in tenths of a second ([`started`](mod@started)).
    Started,
    /// Version 1's, straight in their minute, read until a sweep moves them.
    StartedV1,
    Due,
    Untold,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Running => "running",
            Kind::Started => "start-times",
            Kind::StartedV1 => "started",
            Kind::Due => "due",
            Kind::Untold => "untold",
        }
    }
}

pub(crate) fn dir(state: &StateDir, kind: Kind) -> PathBuf {
    state.path().join(INDEX_DIR).join(kind.name())
}

fn minute_name(ms: u64) -> String {
    format!("{:010}", ms / MINUTE_MS)
}

/// When a sweep should first look at an ended run: its end plus its keep (told or not: an
/// untold one found there early is filed again for later).
pub(crate) fn due_at(record: &Record) -> Option<UnixMs> {
    let ended = record.status.ended_at()?;
    Some(UnixMs(ended.0.saturating_add(record.launch.limits.keep_ms)))
}

/// The latest it can become removable: past its keep and past the ten minutes of telling.
fn due_at_latest(record: &Record) -> Option<UnixMs> {
    let ended = record.status.ended_at()?;
    let wait = record
        .launch
        .limits
        .keep_ms
        .max(u64::try_from(TELL_WINDOW.as_millis()).unwrap_or(u64::MAX));
    Some(UnixMs(ended.0.saturating_add(wait).saturating_add(1)))
}

pub(crate) fn due_path(state: &StateDir, at: UnixMs, id: &RunId) -> PathBuf {
    dir(state, Kind::Due)
        .join(minute_name(at.0))
        .join(id.as_str())
}

/// Whether the folder is indexed (`index/version` exists), in either version.
pub fn is_indexed(state: &StateDir) -> bool {
    state.path().join(INDEX_DIR).join(VERSION_FILE).is_file()
}

/// Whether an indexed folder's index is of an older version than [`VERSION`] (readers take it
/// as it is; [`upgrade`] brings it up to date).
pub fn needs_upgrade(state: &StateDir) -> bool {
    let path = state.path().join(INDEX_DIR).join(VERSION_FILE);
    fs::read_to_string(path).is_ok_and(|version| version != VERSION)
}

/// Brings an indexed folder's index up to [`VERSION`] from version 1: its `started` names
/// move into their tenths ([`started::upgrade`]), then `index/version` says 2. Costs the whole
/// `started` tree, once. How many names were moved.
pub fn upgrade(state: &StateDir) -> Result<usize, Error> {
    let moved = started::upgrade(state)?;
    crate::write::write_whole(
        &state.path().join(INDEX_DIR),
        VERSION_FILE,
        VERSION.as_bytes(),
        Default::default(),
    )?;
    Ok(moved)
}

/// Marks a new (empty) state folder indexed.
pub fn init(state: &StateDir) -> Result<(), Error> {
    let index = state.path().join(INDEX_DIR);
    make_dir(&index)?;
    crate::write::write_whole(&index, VERSION_FILE, VERSION.as_bytes(), Default::default())
}

/// Files a run that is about to start: `running/<id>` and its `started` name. Made before the
/// record is written; the caller holds the run's lock.
pub fn started(state: &StateDir, record: &Record) -> Result<(), Error> {
    let id = &record.id;
    name(state, id, &dir(state, Kind::Running).join(id.as_str()))?;
    name(state, id, &started::path(state, record))
}

/// Files a run whose end was just stored (see the module docs). The caller holds its lock.
pub fn ended(state: &StateDir, record: &Record) -> Result<(), Error> {
    let Some(at) = due_at(record) else {
        return Ok(());
    };
    name(state, &record.id, &due_path(state, at, &record.id))?;
    let untold = dir(state, Kind::Untold).join(record.id.as_str());
    if record.tell_due(UnixMs::now()) {
        name(state, &record.id, &untold)?;
    } else {
        remove(&untold)?;
    }
    remove(&dir(state, Kind::Running).join(record.id.as_str()))
}

/// Gives a record found without its names (an older folder, or a record no index names, which
/// the supervisor's sweep looks for) every name its state calls for: its `started` name, and `running/<id>`
/// while it runs, else its `due` name and, while it is to be told, `untold/<id>`.
pub fn file_found(state: &StateDir, record: &Record) -> Result<(), Error> {
    let id = &record.id;
    name(state, id, &started::path(state, record))?;
    if record.status.is_running() {
        name(state, id, &dir(state, Kind::Running).join(id.as_str()))?;
    } else {
        // An ended run may still be untold; the running name (none here) is left alone.
        if let Some(at) = due_at(record) {
            name(state, id, &due_path(state, at, id))?;
        }
        if record.tell_due(UnixMs::now()) {
            name(state, id, &dir(state, Kind::Untold).join(id.as_str()))?;
        }
    }
    Ok(())
}

/// Files run `record`'s end ([`ended`]) once its ended record is stored, as its storer must; a
/// filing that fails is logged, and the next sweep files it (its `running` name is left).
pub fn file_end(state: &StateDir, record: &Record) {
    if let Err(err) = ended(state, record) {
        tracing::warn!(id = %record.id, "{}; a sweep files the run's end", crate::Causes(&err));
    }
}

/// Files an ended run found in a `due` minute before it could be removed where it belongs:
/// its end + keep if it is told or has no one to tell (the current minute: left as it is),
/// else the latest it can become removable. Removes the name `from` if it moved.
pub fn refile(state: &StateDir, record: &Record, from: &Path) -> Result<(), Error> {
    let done_telling = record.telling.told || record.launch.tell_to.is_none();
    let at = if done_telling {
        due_at(record)
    } else {
        due_at_latest(record)
    };
    let Some(at) = at else {
        return Ok(());
    };
    let to = due_path(state, at, &record.id);
    if to == from {
        return Ok(());
    }
    name(state, &record.id, &to)?;
    remove(from)
}

/// Removes every name of a run (it is being removed; the caller holds its lock).
pub fn forget(state: &StateDir, record: &Record) -> Result<(), Error> {
    let found = Found::default();
    if let Some(folder) = forget_names(state, record, &found)? {
        started::remove_folder_if_empty(&folder);
    }
    forget_due(state, record, &found)
}

/// What a sweep found of a run's names when it read the index: the names it did not find are
/// not tried (a name made after that reading, by a supervisor since gone, is tidied by a later
/// sweep, as any name whose run is gone).
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// Whether `running/<id>` may be there.
    pub running: bool,
    /// Whether `untold/<id>` may be there.
    pub untold: bool,
    /// The `due` name the run was found under, if any: then only that one is removed.
    pub due: Option<&'a Path>,
}

impl Default for Found<'_> {
    /// Nothing known: every name is tried.
    fn default() -> Self {
        Self {
            running: true,
            untold: true,
            due: None,
        }
    }
}

/// [`forget`] but for the `due` names ([`forget_due`]), trying only the names `found` says
/// may be there, and leaving the folder of the run's `started` name for the caller to remove
/// once empty ([`remove_minute_if_empty`]): a sweep removing thousands of runs tries each
/// folder once. That folder is returned.
pub fn forget_names(
    state: &StateDir,
    record: &Record,
    found: &Found<'_>,
) -> Result<Option<PathBuf>, Error> {
    if found.running {
        remove(&dir(state, Kind::Running).join(record.id.as_str()))?;
    }
    if found.untold {
        remove(&dir(state, Kind::Untold).join(record.id.as_str()))?;
    }
    started::forget(state, record).map(Some)
}

/// Removes a run's `due` names (the one `found` names, else both it may have): the last step
/// of removing a run, after its lock, so that a removal cut short leaves a name by which the
/// next sweep finds what is left.
pub fn forget_due(state: &StateDir, record: &Record, found: &Found<'_>) -> Result<(), Error> {
    match found.due {
        Some(name) => remove(name),
        None => {
            for at in [due_at(record), due_at_latest(record)]
                .into_iter()
                .flatten()
            {
                remove(&due_path(state, at, &record.id))?;
            }
            Ok(())
        }
    }
}

/// Removes a `started` folder that [`forget_names`] returned, if nothing is left in it, and
/// its minute's folder once that is empty too.
pub fn remove_minute_if_empty(folder: &Path) {
    started::remove_folder_if_empty(folder);
}

/// Hands `visit` each run the `started` names list, newest first by (start time, id), none
/// started after `not_after_ms`, until it breaks: a minute's folder and then a tenth of a
/// second's read at a time, as the walk comes to them, so that a walk that stops early (a `list`
/// page) reads about what it was handed. A run moved into its tenth during the walk (an
/// upgrade of the folder's index) may be handed twice; a name left for another start time (a
/// record rewritten by hand) is handed as it is named.
pub fn each_started(
    state: &StateDir,
    not_after_ms: Option<u64>,
    visit: &mut dyn FnMut(u64, RunId) -> std::ops::ControlFlow<()>,
) -> Result<(), Error> {
    started::each_newest_first(state, not_after_ms, visit)
}

/// The ids that have a `started` name: every run the index knows of. Reads the whole
/// `started` tree.
pub fn started_ids(state: &StateDir) -> Result<std::collections::HashSet<RunId>, Error> {
    started::all_ids(state)
}

/// The ids under `running/`, with the age of each name.
pub fn running(state: &StateDir) -> Result<Vec<(RunId, Duration)>, Error> {
    ids_in(&dir(state, Kind::Running))
}

/// The ids under `running/`, without their ages (one `stat` fewer each).
pub fn running_ids(state: &StateDir) -> Result<Vec<RunId>, Error> {
    Ok(names_in(&dir(state, Kind::Running))?
        .into_iter()
        .filter_map(|(name, _)| RunId::parse(&name).ok())
        .collect())
}

/// The age of `running/<id>`; `None` when it is gone.
pub fn running_age(state: &StateDir, id: &RunId) -> Option<Duration> {
    age_of(&dir(state, Kind::Running).join(id.as_str()))
}

/// The ids under `untold/`.
pub fn untold(state: &StateDir) -> Result<Vec<RunId>, Error> {
    Ok(ids_in(&dir(state, Kind::Untold))?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// Removes `untold/<id>`.
pub fn drop_untold(state: &StateDir, id: &RunId) -> Result<(), Error> {
    remove(&dir(state, Kind::Untold).join(id.as_str()))
}

/// Removes `running/<id>` (a start that died before its record).
pub fn drop_running(state: &StateDir, id: &RunId) -> Result<(), Error> {
    remove(&dir(state, Kind::Running).join(id.as_str()))
}

/// A `due` minute up to the one a sweep runs in ([`due`]): its folder and the ids in it.
#[derive(Debug)]
pub struct DueMinute {
    /// The minute's folder; remove it with [`DueMinute::done`] once every id is dealt with.
    pub dir: PathBuf,
    /// The runs filed there.
    pub ids: Vec<RunId>,
}

impl DueMinute {
    /// The name of `id` in this minute.
    pub fn name_of(&self, id: &RunId) -> PathBuf {
        self.dir.join(id.as_str())
    }

    /// Removes the minute's folder if nothing is left in it.
    pub fn done(&self) {
        remove_empty_dir(&self.dir);
    }
}

/// The `due` minutes up to the one `now` is in, oldest first (a run of the current minute that
/// is not removable yet stays where it is). Costs the minutes kept (a folder name each) and
/// the ids of those returned. A name filed into a minute while a sweep reads it is found by
/// the next one: the minute's folder goes only once empty, and a filing makes it again.
pub fn due(state: &StateDir, now: UnixMs) -> Result<Vec<DueMinute>, Error> {
    let current = now.0 / MINUTE_MS;
    let mut minutes: Vec<(u64, PathBuf)> = names_in(&dir(state, Kind::Due))?
        .into_iter()
        .filter_map(|(name, path)| Some((name.parse::<u64>().ok()?, path)))
        .filter(|(minute, _)| *minute <= current)
        .collect();
    minutes.sort();
    minutes
        .into_iter()
        .map(|(_, dir)| {
            let ids = ids_in(&dir)?.into_iter().map(|(id, _)| id).collect();
            Ok(DueMinute { dir, ids })
        })
        .collect()
}

/// Indexes every record of a folder made before the index, then writes `index/version`. Costs
/// the whole folder, once. Names are pure functions of the records, so a start or a sweep
/// beside it does no harm.
pub fn migrate(state: &StateDir) -> Result<usize, Error> {
    let listing = state.list()?;
    let mut indexed = 0;
    for id in listing.record_ids() {
        let Ok(record) = Record::load(state, id) else {
            continue;
        };
        file_found(state, &record)?;
        indexed += 1;
    }
    init(state)?;
    Ok(indexed)
}
