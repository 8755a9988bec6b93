//! The `started` names: every run by its start time, in folders small enough that a `list`
//! page reads about what it returns, however the runs were started.
//!
//! Version 2 of the index (`index/version` holds `2`) files a run as
//! `started/<minute>/<tenth>/<ms>-<id>`: `<minute>` is `started_at_ms / 60000` (10 digits),
//! `<tenth>` the tenth of a second within that minute (`started_at_ms % 60000 / 100`, 3 digits,
//! `000` to `599`) and `<ms>` `started_at_ms` (13 digits), so names sort by start time. A page
//! reads a minute's folder (at most 600 names), then its newest tenths, one at a time, until it
//! has its runs: a tenth holds the runs started within that tenth of a second, a few dozen at
//! the fastest a machine starts them, whatever the folder keeps or the minute holds.
//!
//! Version 1 put the names straight into the minute's folder (`started/<minute>/<ms>-<id>`),
//! so a page read every name of the minute it began in: 50,000 when that many runs started
//! within the minute. Readers take both forms, even side by side in one minute, so a folder of
//! either version works; the first sweep of a version-1 folder moves its names into their
//! tenths ([`upgrade`]) and then writes version 2. A name is moved by a link into its tenth
//! before the old one goes, so a reader never misses a run (it may see one twice, and shows it
//! once).

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

/// Run `record`'s `started` name: `started/<minute>/<tenth>/<ms>-<id>`.
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
    dir(state, Kind::Started)
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

/// Removes a folder [`forget`] returned if nothing is left in it, and then its minute's folder
/// if that is empty too (a start filing into either meanwhile makes it again).
pub(crate) fn remove_folder_if_empty(folder: &Path) {
    if fs::remove_dir(folder).is_err() {
        return;
    }
    let Some(minute) = folder.parent() else {
        return;
    };
    // A tenth's folder lies in a minute's; a minute's lies in `started` itself.
    if minute.parent().and_then(Path::file_name) == Some(std::ffi::OsStr::new(INDEX_MINUTES)) {
        let _ = fs::remove_dir(minute);
    }
}

/// The name of the folder that holds the minutes.
const INDEX_MINUTES: &str = "started";

/// A `started` minute's folder and its number.
pub(crate) struct Minute {
    /// `started_at_ms / 60000` of the runs in it.
    pub(crate) number: u64,
    path: PathBuf,
}

/// The `started` minutes, newest first, leaving out those after the minute of `not_after_ms`.
pub(crate) fn minutes(state: &StateDir, not_after_ms: Option<u64>) -> Result<Vec<Minute>, Error> {
    let mut minutes: Vec<Minute> = names_in(&dir(state, Kind::Started))?
        .into_iter()
        .filter_map(|(name, path)| {
            Some(Minute {
                number: name.parse().ok()?,
                path,
            })
        })
        .filter(|m| not_after_ms.is_none_or(|ms| m.number <= ms / MINUTE_MS))
        .collect();
    minutes.sort_by_key(|m| std::cmp::Reverse(m.number));
    Ok(minutes)
}

/// Runs named in one folder: (start time, id).
pub(crate) type Named = Vec<(u64, RunId)>;

/// A part of a minute that a page reads at once.
pub(crate) enum Part {
    /// A tenth of a second's folder, read when its turn comes.
    Tenth(PathBuf),
    /// Names already read: those version 1 left in the minute's own folder, with those of
    /// every tenth beside them (a minute that holds both, until its folder is upgraded).
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
    /// A minute whose own folder holds version-1 names is one part, read whole.
    pub(crate) fn parts(&self, not_after_ms: Option<u64>) -> Result<Vec<Part>, Error> {
        let mut tenths: Vec<(u64, PathBuf)> = Vec::new();
        let mut flat: Named = Vec::new();
        for (name, path) in names_in(&self.path)? {
            if let Some(run) = parse_run(&name) {
                flat.push(run);
            } else if let Ok(tenth) = name.parse::<u64>() {
                tenths.push((tenth, path));
            }
        }
        let last = not_after_ms
            .filter(|ms| ms / MINUTE_MS == self.number)
            .map(|ms| ms % MINUTE_MS / TENTH_MS);
        tenths.retain(|(tenth, _)| last.is_none_or(|last| *tenth <= last));
        tenths.sort_by_key(|t| std::cmp::Reverse(t.0));
        if flat.is_empty() {
            return Ok(tenths.into_iter().map(|(_, p)| Part::Tenth(p)).collect());
        }
        for (_, path) in tenths {
            flat.extend(runs_in(&path)?);
        }
        Ok(vec![Part::Read(flat)])
    }
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

/// Moves the names version 1 left in the minutes' own folders into their tenths (a link made,
/// then the old name removed; a name whose record went meanwhile, its run removed by a sweep
/// that did not see the new name, goes too). How many were moved. Costs the whole `started`
/// tree, once; a start or a sweep beside it does no harm.
pub(crate) fn upgrade(state: &StateDir) -> Result<usize, Error> {
    let mut moved = 0;
    for minute in minutes(state, None)? {
        for (name, old) in names_in(&minute.path)? {
            let Some((ms, id)) = parse_run(&name) else {
                continue;
            };
            let tenth = minute.path.join(tenth_name(ms));
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
            match link() {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(Errno::NOENT) if !tenth.exists() => {
                    make_dirs(&tenth)?;
                    match link() {
                        Ok(()) | Err(Errno::EXIST) => {}
                        // Removed meanwhile: nothing to move.
                        Err(Errno::NOENT) => continue,
                        Err(e) => return Err(Error::io(Op::Create, &new, e)),
                    }
                }
                // Removed meanwhile.
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(Error::io(Op::Create, &new, e)),
            }
            remove(&old)?;
            if !state.record(&id).exists() {
                remove(&new)?;
            }
            moved += 1;
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests;
