//! The names by start time: every run by when it started, in folders small enough that a
//! `list` page reads about what it returns, however the runs were started.
//!
//! Version 2 of the index (`index/version` holds `2`) files a run as
//! `start-times/<minute>/<tenth>/<ms>-<id>`: `<minute>` is `started_at_ms / 60000` (10 digits),
//! `<tenth>` the tenth of a second within that minute (`started_at_ms % 60000 / 100`, 3 digits,
//! `000` to `599`) and `<ms>` `started_at_ms` (13 digits), so names sort by start time. A page
//! reads a minute's folder (at most 600 names), then its newest tenths, one at a time, until it
//! has its runs: a tenth holds the runs started within that tenth of a second, a few dozen at
//! the fastest a machine starts them, whatever the folder keeps or the minute holds.
//!
//! Version 1 put the names straight into the minute's folder, under `started/`
//! (`started/<minute>/<ms>-<id>`), so a page read every name of the minute it began in:
//! 100,000 when that many runs started within the minute. Readers take both trees, even a
//! minute in both, so a folder of either version works; the first sweep of a version-1 folder
//! moves its names into the new tree ([`upgrade`]), removes the old one's folders as they
//! empty, and then writes version 2. (A tree of its own, not tenths made inside the old
//! minutes: a folder that once held 100,000 names keeps its size on most file systems, and
//! every page would read it.) A name is moved by a link into its tenth before the old one goes,
//! so a reader never misses a run (it may see one twice, and shows it once).

use std::collections::HashSet;
use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use rustix::fs::AtFlags;
use rustix::io::Errno;

use super::{Kind, MINUTE_MS, dir, make_dirs, names_in, remove};
use crate::error::{Error, Op};
use crate::id::RunId;
use crate::layout::StateDir;
use crate::record::Record;
use std::ffi::OsStr;

/// Milliseconds in a tenth of a second: the span of one `started` folder.
const TENTH_MS: u64 = 100;

fn minute_name(ms: u64) -> String {
    format!("{:010}", ms / MINUTE_MS)
}

fn tenth_name(ms: u64) -> String {
    format!("{:03}", ms % MINUTE_MS / TENTH_MS)
}

fn run_name(ms: u64, id: &RunId) -> String {
    format!("{ms:013}-{id}")
}

/// Run `record`'s name by start time: `start-times/<minute>/<tenth>/<ms>-<id>`.
pub(crate) fn path(state: &StateDir, record: &Record) -> PathBuf {
    let ms = record.started_at_ms.0;
    dir(state, Kind::Started)
        .join(minute_name(ms))
        .join(tenth_name(ms))
        .join(run_name(ms, &record.id))
}

/// Where version 1 filed it: `started/<minute>/<ms>-<id>`.
fn path_v1(state: &StateDir, record: &Record) -> PathBuf {
    let ms = record.started_at_ms.0;
    dir(state, Kind::StartedV1)
        .join(minute_name(ms))
        .join(run_name(ms, &record.id))
}

/// Removes run `record`'s `started` name, wherever a version filed it; the folder it was in
/// (its tenth's, or for a version-1 name its minute's), to remove once empty
/// ([`remove_folder_if_empty`]).
pub(crate) fn forget(state: &StateDir, record: &Record) -> Result<PathBuf, Error> {
    let name = path(state, record);
    match fs::remove_file(&name) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {
            let old = path_v1(state, record);
            if remove_existing(&old)? {
                return Ok(parent(&old));
            }
        }
        Err(e) => return Err(Error::io(Op::Remove, &name, e)),
    }
    Ok(parent(&name))
}

fn parent(path: &Path) -> PathBuf {
    path.parent().map(Path::to_owned).unwrap_or_default()
}

/// Removes `path`; whether it was there.
fn remove_existing(path: &Path) -> Result<bool, Error> {
    match fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io(Op::Remove, path, e)),
    }
}

/// Removes a folder [`forget`] returned if nothing is left in it, and then, for a tenth's
/// folder, its minute's if that is empty too (a start filing into either meanwhile makes it
/// again).
pub(crate) fn remove_folder_if_empty(folder: &Path) {
    if fs::remove_dir(folder).is_err() {
        return;
    }
    let Some(minute) = folder.parent() else {
        return;
    };
    // A tenth's folder lies in a minute's, which lies in `start-times` itself; a version-1
    // minute's lies in `started`.
    if minute.parent().and_then(Path::file_name) == Some(OsStr::new(Kind::Started.name())) {
        let _ = fs::remove_dir(minute);
    }
}

/// A minute of the names by start time: its folder in either tree, and its number.
pub(crate) struct Minute {
    /// `started_at_ms / 60000` of the runs in it.
    pub(crate) number: u64,
    /// Its folder of tenths (version 2).
    tenths: Option<PathBuf>,
    /// Its folder of names (version 1, until a sweep moves them).
    flat: Option<PathBuf>,
}

/// The minutes of either tree, newest first, leaving out those after the minute of
/// `not_after_ms`.
pub(crate) fn minutes(state: &StateDir, not_after_ms: Option<u64>) -> Result<Vec<Minute>, Error> {
    let mut by_number: std::collections::BTreeMap<u64, Minute> = Default::default();
    for (kind, v2) in [(Kind::Started, true), (Kind::StartedV1, false)] {
        for (name, path) in names_in(&dir(state, kind))? {
            let Ok(number) = name.parse::<u64>() else {
                continue;
            };
            if not_after_ms.is_some_and(|ms| number > ms / MINUTE_MS) {
                continue;
            }
            let minute = by_number.entry(number).or_insert(Minute {
                number,
                tenths: None,
                flat: None,
            });
            if v2 {
                minute.tenths = Some(path);
            } else {
                minute.flat = Some(path);
            }
        }
    }
    Ok(by_number.into_values().rev().collect())
}

/// Runs named in one folder: (start time, id).
pub(crate) type Named = Vec<(u64, RunId)>;

/// A part of a minute that a page reads at once.
pub(crate) enum Part {
    /// A tenth of a second's folder, read when its turn comes.
    Tenth(PathBuf),
    /// Names already read: a version-1 minute's, with those of the minute's tenths beside
    /// them (a minute in both trees, until the sweep that moves them).
    Read(Named),
}

impl Part {
    /// Its runs, newest first.
    pub(crate) fn runs(self) -> Result<Named, Error> {
        let mut runs = match self {
            Part::Tenth(path) => runs_in(&path)?,
            Part::Read(runs) => runs,
        };
        runs.sort_by(|a, b| (b.0, b.1.as_str()).cmp(&(a.0, a.1.as_str())));
        Ok(runs)
    }
}

impl Minute {
    /// The minute's parts, newest first, leaving out the tenths after that of `not_after_ms`.
    /// A minute that version 1's tree holds too is one part, read whole.
    pub(crate) fn parts(&self, not_after_ms: Option<u64>) -> Result<Vec<Part>, Error> {
        let mut tenths: Vec<(u64, PathBuf)> = match &self.tenths {
            Some(folder) => names_in(folder)?
                .into_iter()
                .filter_map(|(name, path)| Some((name.parse::<u64>().ok()?, path)))
                .collect(),
            None => Vec::new(),
        };
        let last = not_after_ms
            .filter(|ms| ms / MINUTE_MS == self.number)
            .map(|ms| ms % MINUTE_MS / TENTH_MS);
        tenths.retain(|(tenth, _)| last.is_none_or(|last| *tenth <= last));
        tenths.sort_by_key(|t| std::cmp::Reverse(t.0));
        let Some(flat) = &self.flat else {
            return Ok(tenths.into_iter().map(|(_, p)| Part::Tenth(p)).collect());
        };
        let mut runs = runs_in(flat)?;
        for (_, path) in tenths {
            runs.extend(runs_in(&path)?);
        }
        Ok(vec![Part::Read(runs)])
    }
}

/// Hands `visit` the runs of either tree newest first, none after `not_after_ms`, until it
/// breaks ([`super::each_started`]).
pub(crate) fn each_newest_first(
    state: &StateDir,
    not_after_ms: Option<u64>,
    visit: &mut dyn FnMut(u64, RunId) -> std::ops::ControlFlow<()>,
) -> Result<(), Error> {
    for minute in minutes(state, not_after_ms)? {
        for part in minute.parts(not_after_ms)? {
            for (ms, id) in part.runs()? {
                if visit(ms, id).is_break() {
                    return Ok(());
                }
            }
        }
    }
    Ok(())
}

/// `<ms>-<id>` as (start time, id).
fn parse_run(name: &str) -> Option<(u64, RunId)> {
    let (ms, id) = name.split_once('-')?;
    Some((ms.parse().ok()?, RunId::parse(id).ok()?))
}

/// The runs named in `folder`.
fn runs_in(folder: &Path) -> Result<Named, Error> {
    Ok(names_in(folder)?
        .into_iter()
        .filter_map(|(name, _)| parse_run(&name))
        .collect())
}

/// Every id that has a `started` name, in either version's place: every run the index knows
/// of. Reads the whole `started` tree.
pub(crate) fn all_ids(state: &StateDir) -> Result<HashSet<RunId>, Error> {
    let mut ids = HashSet::new();
    for minute in minutes(state, None)? {
        for part in minute.parts(None)? {
            ids.extend(part.runs()?.into_iter().map(|(_, id)| id));
        }
    }
    Ok(ids)
}

/// Moves version 1's names into the tree by tenths (a link made, then the old name removed; a
/// name whose record went meanwhile, its run removed by a sweep that did not see the new
/// name, goes too), removing version 1's folders as they empty. How many were moved. Costs the
/// whole tree, once; a start or a sweep beside it does no harm.
pub(crate) fn upgrade(state: &StateDir) -> Result<usize, Error> {
    let mut moved = 0;
    let old_tree = dir(state, Kind::StartedV1);
    for (minute, folder) in names_in(&old_tree)? {
        if minute.parse::<u64>().is_err() {
            continue;
        }
        for (name, old) in names_in(&folder)? {
            let Some((ms, id)) = parse_run(&name) else {
                continue;
            };
            let tenth = dir(state, Kind::Started)
                .join(minute_name(ms))
                .join(tenth_name(ms));
            let new = tenth.join(&name);
            let link = || {
                rustix::fs::linkat(
                    rustix::fs::CWD,
                    &old,
                    rustix::fs::CWD,
                    &new,
                    AtFlags::empty(),
                )
            };
            let linked = match link() {
                Ok(()) | Err(Errno::EXIST) => true,
                Err(Errno::NOENT) if !tenth.exists() => {
                    make_dirs(&tenth)?;
                    match link() {
                        Ok(()) | Err(Errno::EXIST) => true,
                        // Removed meanwhile: nothing to move.
                        Err(Errno::NOENT) => false,
                        Err(e) => return Err(Error::io(Op::Create, &new, e)),
                    }
                }
                // Removed meanwhile.
                Err(Errno::NOENT) => false,
                Err(e) => return Err(Error::io(Op::Create, &new, e)),
            };
            if !linked {
                continue;
            }
            remove(&old)?;
            if !state.record(&id).exists() {
                remove(&new)?;
            }
            moved += 1;
        }
        let _ = fs::remove_dir(&folder);
    }
    let _ = fs::remove_dir(&old_tree);
    Ok(moved)
}

#[cfg(test)]
mod tests;
