//! The names of things: the state folder's files and the output file under the files folder.
//!
//! ```text
//! <state>/start.lock            flock held while a start counts running runs and writes a record
//! <state>/<id>.json             the record (see crate::record), replaced whole by rename
//! <state>/<id>.lock             flock held by the run's supervisor for its whole life
//! <state>/<id>.stop             present: the run is asked to stop (`tasks/cancel\n`: by its task's client)
//! <state>/<id>.damaged          a record a sweep could not read, moved aside for a person
//! <state>/<id>.log              the run's supervisor's log (its stderr), removed with the run
//! <state>/<id>.in               an interactive run's stdin channel (a socket, see crate::stdin)
//! <state>/sweep.log             the log of the sweeps serve starts
//! <state>/tmp/.tmp-<random>     a temporary file (record being written, lock being created)
//! <state>/slots/<k>             the cap's slots (see crate::slot)
//! <state>/index/…               the index (see crate::index)
//! <files>/background/<id>.out   the run's output (stdout and stderr together)
//! <files>/background/.tmp-<id>-next   the output's next version (see crate::output_file)
//! ```
//!
//! Anything else in the state folder is reported by [`StateDir::list`] as malformed and left
//! alone. Temporary files are recognised by their [`TEMP_PREFIX`]; one older than [`TEMP_GRACE`]
//! is a crash's leftover and may be removed — a younger one may still be in use (a write or a lock
//! creation takes microseconds, so the grace is generous).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, DirBuilder};
use std::io::ErrorKind;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::Mode;
use rustix::io::Errno;

use crate::error::{Error, Op};
use crate::id::{RunId, random_token};
use crate::trust;

/// The state folder's start lock.
pub const START_LOCK: &str = "start.lock";
/// Suffix of a record: `<id>.json`.
pub const RECORD_SUFFIX: &str = ".json";
/// Suffix of a run's lock file: `<id>.lock`.
pub const LOCK_SUFFIX: &str = ".lock";
/// Suffix of a run's stop request: `<id>.stop`.
pub const STOP_SUFFIX: &str = ".stop";
/// Suffix of a record moved aside by a sweep: `<id>.damaged`.
pub const DAMAGED_SUFFIX: &str = ".damaged";
/// Suffix of a run's supervisor log: `<id>.log`.
pub const LOG_SUFFIX: &str = ".log";
/// Suffix of an interactive run's stdin channel: `<id>.in` (a Unix socket, [`crate::stdin`]).
pub const STDIN_SUFFIX: &str = ".in";
/// The sweeps' log, shared by every sweep of the folder.
pub const SWEEP_LOG: &str = "sweep.log";
/// The folder of temporaries, inside the state folder.
pub const TEMP_DIR: &str = "tmp";
/// Prefix of every temporary file, in the state folder and in `background/`.
pub const TEMP_PREFIX: &str = ".tmp-";
/// Age after which a temporary file is surely a leftover.
pub const TEMP_GRACE: Duration = Duration::from_secs(60);
/// The folder under the files folder that holds output files.
pub const BACKGROUND_DIR: &str = "background";
/// Suffix of an output file: `<id>.out`.
pub const OUTPUT_SUFFIX: &str = ".out";

/// Length of the random part of temporary names.
const TEMP_RANDOM_LEN: usize = 20;

/// The state folder: where records, locks and stop requests live.
///
/// It must be on a local file system: `flock` over NFS may hang or not exclude at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    path: PathBuf,
}

impl StateDir {
    /// Names a state folder (nothing is checked or created).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        StateDir { path: path.into() }
    }

    /// Creates the folder (and its parents) if missing — a new state folder gets mode 0700 —
    /// then checks it as `trust::check_state_folder` does: a folder of another user's, or
    /// one others may write, is refused. Whether the folder is empty (new): whoever makes it
    /// then marks it indexed ([`crate::index::init`]); an older one is indexed by the next
    /// sweep.
    pub fn create(&self) -> Result<bool, Error> {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.path)
            .map_err(|e| Error::io(Op::MakeDir, &self.path, e))?;
        trust::check_state_folder(&self.path)?;
        let empty = fs::read_dir(&self.path)
            .map_err(|e| Error::io(Op::List, &self.path, e))?
            .next()
            .is_none();
        Ok(empty)
    }

    /// Names an existing state folder after resolving its path once (so a link swapped in
    /// later cannot move it) and checking it (`trust::check_state_folder`). A missing folder
    /// is an error for which [`Error::is_not_found`] holds.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let canonical = path
            .canonicalize()
            .map_err(|e| Error::io(Op::Open, path, e))?;
        trust::check_state_folder(&canonical)?;
        Ok(StateDir { path: canonical })
    }

    /// The folder's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `<state>/start.lock`.
    pub fn start_lock(&self) -> PathBuf {
        self.path.join(START_LOCK)
    }

    /// `<state>/<id>.json`.
    pub fn record(&self, id: &RunId) -> PathBuf {
        self.path.join(record_file_name(id))
    }

    /// `<state>/<id>.lock`.
    pub fn lock(&self, id: &RunId) -> PathBuf {
        self.path.join(format!("{id}{LOCK_SUFFIX}"))
    }

    /// `<state>/<id>.stop`.
    pub fn stop(&self, id: &RunId) -> PathBuf {
        self.path.join(format!("{id}{STOP_SUFFIX}"))
    }

    /// `<state>/<id>.damaged`.
    pub fn damaged(&self, id: &RunId) -> PathBuf {
        self.path.join(format!("{id}{DAMAGED_SUFFIX}"))
    }

    /// `<state>/<id>.log`: the run's supervisor writes its log (its stderr) here.
    pub fn log(&self, id: &RunId) -> PathBuf {
        self.path.join(format!("{id}{LOG_SUFFIX}"))
    }

    /// `<state>/<id>.in`: an interactive run's stdin channel ([`crate::stdin`]).
    pub fn stdin_channel(&self, id: &RunId) -> PathBuf {
        self.path.join(format!("{id}{STDIN_SUFFIX}"))
    }

    /// `<state>/sweep.log`: where sweeps started by `serve` write their log.
    pub fn sweep_log(&self) -> PathBuf {
        self.path.join(SWEEP_LOG)
    }

    /// A fresh temporary path, `<state>/tmp/.tmp-<random>`.
    pub fn temp(&self) -> Result<PathBuf, Error> {
        Ok(self.temp_dir()?.join(temp_name()?))
    }

    /// `<state>/tmp`, where temporaries are made (0700, made if missing): a sweep finds a
    /// crash's leftovers there without reading the whole folder.
    pub fn temp_dir(&self) -> Result<PathBuf, Error> {
        let dir = self.path.join(TEMP_DIR);
        match rustix::fs::mkdir(&dir, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(Errno::EXIST) => Ok(dir),
            Err(e) => Err(Error::io(Op::MakeDir, dir, e)),
        }
    }

    /// What the folder holds, by run. Never builds a path from a name that is not a valid id.
    pub fn list(&self) -> Result<Listing, Error> {
        let entries = fs::read_dir(&self.path).map_err(|e| Error::io(Op::List, &self.path, e))?;
        let mut listing = Listing::default();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io(Op::List, &self.path, e))?;
            listing.add(&self.path, entry.file_name());
        }
        Ok(listing)
    }
}

/// The contents of a state folder, sorted into runs, temporaries and names that fit no rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    /// Every run that has at least one file, by id.
    pub runs: BTreeMap<RunId, RunFiles>,
    /// Temporary files (full paths): in use if young, leftovers if older than [`TEMP_GRACE`].
    pub temporaries: Vec<PathBuf>,
    /// Names that fit no rule (full paths); reported, never touched.
    pub malformed: Vec<PathBuf>,
    /// Whether `start.lock` exists.
    pub start_lock: bool,
    /// Whether `sweep.log` exists.
    pub sweep_log: bool,
}

/// Which of a run's files exist in the state folder.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunFiles {
    /// `<id>.json`.
    pub record: bool,
    /// `<id>.lock`.
    pub lock: bool,
    /// `<id>.stop`.
    pub stop: bool,
    /// `<id>.damaged`.
    pub damaged: bool,
    /// `<id>.log`.
    pub log: bool,
    /// `<id>.in`.
    pub stdin: bool,
}

impl Listing {
    /// The ids that have a record, in id order.
    pub fn record_ids(&self) -> impl Iterator<Item = &RunId> {
        self.runs
            .iter()
            .filter(|(_, files)| files.record)
            .map(|(id, _)| id)
    }

    fn add(&mut self, dir: &Path, name: OsString) {
        let path = dir.join(&name);
        let Some(text) = name.to_str() else {
            self.malformed.push(path);
            return;
        };
        if text == START_LOCK {
            self.start_lock = true;
            return;
        }
        if text == SWEEP_LOG {
            self.sweep_log = true;
            return;
        }
        if is_temp_name(&name) {
            self.temporaries.push(path);
            return;
        }
        let sorted = [
            (RECORD_SUFFIX, Role::Record),
            (LOCK_SUFFIX, Role::Lock),
            (STOP_SUFFIX, Role::Stop),
            (DAMAGED_SUFFIX, Role::Damaged),
            (LOG_SUFFIX, Role::Log),
            (STDIN_SUFFIX, Role::Stdin),
        ]
        .into_iter()
        .find_map(|(suffix, role)| {
            let id = RunId::parse(text.strip_suffix(suffix)?).ok()?;
            Some((id, role))
        });
        let Some((id, role)) = sorted else {
            self.malformed.push(path);
            return;
        };
        let files = self.runs.entry(id).or_default();
        match role {
            Role::Record => files.record = true,
            Role::Lock => files.lock = true,
            Role::Stop => files.stop = true,
            Role::Damaged => files.damaged = true,
            Role::Log => files.log = true,
            Role::Stdin => files.stdin = true,
        }
    }
}

/// Which of a run's files a name is.
#[derive(Clone, Copy)]
enum Role {
    Record,
    Lock,
    Stop,
    Damaged,
    Log,
    Stdin,
}

/// `<id>.json`.
pub fn record_file_name(id: &RunId) -> String {
    format!("{id}{RECORD_SUFFIX}")
}

/// `<id>.out`, the output file's name inside `background/`.
pub fn output_file_name(id: &RunId) -> String {
    format!("{id}{OUTPUT_SUFFIX}")
}

/// `background/<id>.out`, the output file relative to the files folder (what `start` answers).
pub fn output_relative_path(id: &RunId) -> PathBuf {
    Path::new(BACKGROUND_DIR).join(output_file_name(id))
}

/// Removes a damaged name (never following it): a file, a link, or an empty folder.
pub(crate) fn remove_damaged(path: &Path) -> Result<(), Error> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e)
            if e.kind() == ErrorKind::IsADirectory
                || e.raw_os_error() == Some(Errno::ISDIR.raw_os_error()) =>
        {
            fs::remove_dir(path).map_err(|e| Error::io(Op::Remove, path, e))
        }
        Err(e) => Err(Error::io(Op::Remove, path, e)),
    }
}

/// A fresh temporary name, `.tmp-<random>`.
pub fn temp_name() -> Result<String, Error> {
    Ok(format!("{TEMP_PREFIX}{}", random_token(TEMP_RANDOM_LEN)?))
}

/// The name of a rotation's temporary file in `background/`: `.tmp-<id>-next`. One per run
/// (only the run's supervisor rotates), so that removing a run removes it by name, without
/// reading the folder (which holds every run's output).
pub fn rotation_temp_name(id: &RunId) -> Result<String, Error> {
    Ok(format!("{}-next", rotation_temp_prefix(id)))
}

/// `.tmp-<id>`: what every rotation temporary of run `id` starts with (followed by `-`).
pub fn rotation_temp_prefix(id: &RunId) -> String {
    format!("{TEMP_PREFIX}{id}")
}

/// Whether `name` is a temporary file's name.
pub fn is_temp_name(name: &OsStr) -> bool {
    name.as_encoded_bytes().starts_with(TEMP_PREFIX.as_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn names() {
        let id = RunId::parse("abcdefghijkl").unwrap();
        let state = StateDir::new("/s");
        assert_eq!(state.record(&id), Path::new("/s/abcdefghijkl.json"));
        assert_eq!(state.lock(&id), Path::new("/s/abcdefghijkl.lock"));
        assert_eq!(state.stop(&id), Path::new("/s/abcdefghijkl.stop"));
        assert_eq!(state.damaged(&id), Path::new("/s/abcdefghijkl.damaged"));
        assert_eq!(state.start_lock(), Path::new("/s/start.lock"));
        assert_eq!(
            output_relative_path(&id),
            Path::new("background/abcdefghijkl.out")
        );
        let temp = temp_name().unwrap();
        assert!(is_temp_name(OsStr::new(&temp)), "{temp}");
        assert_eq!(temp.len(), TEMP_PREFIX.len() + TEMP_RANDOM_LEN);
        let rot = rotation_temp_name(&id).unwrap();
        assert!(rot.starts_with(".tmp-abcdefghijkl-"), "{rot}");
        assert!(is_temp_name(OsStr::new(&rot)));
    }

    #[test]
    fn lists_runs_temporaries_and_malformed_names() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        for name in [
            "start.lock",
            "aaaaaaaaaaaa.json",
            "aaaaaaaaaaaa.lock",
            "bbbbbbbbbbbb.lock",
            "bbbbbbbbbbbb.stop",
            "cccccccccccc.damaged",
            "cccccccccccc.log",
            "cccccccccccc.in",
            "sweep.log",
            ".tmp-xyz",
            "notes.txt",
            "AAAAAAAAAAAA.json",
            "../x.json",
            "short.json",
        ] {
            if name.contains('/') {
                continue;
            }
            fs::write(dir.path().join(name), b"").unwrap();
        }
        let listing = state.list().unwrap();
        let a = RunId::parse("aaaaaaaaaaaa").unwrap();
        let b = RunId::parse("bbbbbbbbbbbb").unwrap();
        let c = RunId::parse("cccccccccccc").unwrap();
        assert!(listing.start_lock);
        assert_eq!(
            listing.runs[&a],
            RunFiles {
                record: true,
                lock: true,
                ..RunFiles::default()
            }
        );
        assert_eq!(
            listing.runs[&b],
            RunFiles {
                lock: true,
                stop: true,
                ..RunFiles::default()
            }
        );
        assert!(listing.runs[&c].damaged && listing.runs[&c].log && listing.runs[&c].stdin);
        assert!(listing.sweep_log);
        assert_eq!(listing.record_ids().collect::<Vec<_>>(), vec![&a]);
        assert_eq!(listing.temporaries, vec![dir.path().join(".tmp-xyz")]);
        let mut malformed = listing.malformed.clone();
        malformed.sort();
        assert_eq!(
            malformed,
            vec![
                dir.path().join("AAAAAAAAAAAA.json"),
                dir.path().join("notes.txt"),
                dir.path().join("short.json"),
            ]
        );
    }
}
