//! Watches: waits, in the background, for a line in a run's output or for its end, each an MCP
//! task of its own — their ids and their files in the state folder.
//!
//! # Ids
//!
//! A watch's id is `<run id>-<tag>`: the run it watches, a `-`, and a tag of 8 to 16 characters
//! of `[a-z0-9]` (new ones: 12, random). No run id holds a `-`, so a watch's id is never a run's,
//! and tasks of both kinds share `tasks/get`; [`WatchId::parse`] checks both parts before any
//! path is built from them.
//!
//! # Files
//!
//! | name | what |
//! |---|---|
//! | `watches/<run id>/<tag>.json` | the watch ([`WatchSpec`]): what it waits for, from which offset, until when. Written once, whole, before the watch is answered; never replaced, so a flock on it stays put: the one who waits for the watch holds it exclusively ([`WatchSpec::lock`]), and a free lock means no one waits (the `serve` that waited is gone) |
//! | `watches/<run id>/<tag>.done` | how it ended ([`WatchEnding`]): written once, by whoever ends it first (the waiter that saw the line, the run's end or the time; a `tasks/cancel`), made under a temporary name and linked into place, which fails when one is there already |
//!
//! A run's watches go with the run: removing a run removes its `watches/<run id>/`
//! ([`remove_run`]). Both files must be regular files of the user's, as everything in the state
//! folder.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use rustix::fs::{FlockOperation, Mode, OFlags};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Op};
use crate::id::{IdError, RunId, random_token};
use crate::layout::StateDir;
use crate::time::UnixMs;
use crate::write::{Durability, write_whole_via};

/// The folder of the state folder that holds the watches.
pub const WATCHES_DIR: &str = "watches";
/// The shortest tag accepted.
const TAG_MIN: usize = 8;
/// The longest tag accepted.
const TAG_MAX: usize = 16;
/// The length of new tags (about 62 random bits: one run's watches never meet).
const TAG_GENERATED: usize = 12;
/// The most bytes a watch's files are read to.
const MAX_FILE: u64 = 1 << 20;
/// The format's version.
pub const VERSION: u32 = 1;

/// A watch's id: `<run id>-<tag>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WatchId {
    run: RunId,
    tag: String,
}

impl WatchId {
    /// A new watch of run `run`, with a random tag.
    pub fn generate(run: &RunId) -> Result<WatchId, IdError> {
        Ok(WatchId {
            run: run.clone(),
            tag: random_token(TAG_GENERATED)?,
        })
    }

    /// Checks `text`: a run id, `-`, and a tag of 8 to 16 characters of `[a-z0-9]`; `None`
    /// otherwise (nothing was built from it).
    pub fn parse(text: &str) -> Option<WatchId> {
        let (run, tag) = text.split_once('-')?;
        let run = RunId::parse(run).ok()?;
        let tag_ok = (TAG_MIN..=TAG_MAX).contains(&tag.len())
            && tag
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
        tag_ok.then(|| WatchId {
            run,
            tag: tag.to_owned(),
        })
    }

    /// The run it watches.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// `<state>/watches/<run id>/`.
    pub fn dir(&self, state: &StateDir) -> PathBuf {
        run_dir(state, &self.run)
    }

    /// `<tag>.json`.
    pub fn spec_name(&self) -> String {
        format!("{}.json", self.tag)
    }

    /// `<tag>.done`.
    pub fn ending_name(&self) -> String {
        format!("{}.done", self.tag)
    }
}

impl fmt::Display for WatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.run, self.tag)
    }
}

impl Serialize for WatchId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WatchId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        WatchId::parse(&text).ok_or_else(|| serde::de::Error::custom("not a watch id"))
    }
}

/// `<state>/watches/<run>/`: where run `run`'s watches are.
pub fn run_dir(state: &StateDir, run: &RunId) -> PathBuf {
    state.path().join(WATCHES_DIR).join(run.as_str())
}

/// A watch: what it waits for, and from when to when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchSpec {
    /// [`VERSION`].
    pub version: u32,
    /// Its id.
    pub id: WatchId,
    /// The text (or with `regex` the regular expression) a line must hold; none: the run's end
    /// alone is waited for.
    pub until: Option<String>,
    /// Whether `until` is a regular expression.
    pub regex: bool,
    /// The run's offset from which lines are looked at (where the output stood when the watch
    /// began, unless it was asked to look from further back).
    pub from: u64,
    /// When it began.
    pub created_at_ms: UnixMs,
    /// When it ends at the latest.
    pub deadline_ms: UnixMs,
}

impl WatchSpec {
    /// Writes the watch's file, whole (its run's folder of watches made if missing). Atomic but
    /// not flushed: a watch lost to a power cut was waiting for a `serve` that is gone too.
    pub fn create(&self, state: &StateDir) -> Result<(), Error> {
        let dir = self.id.dir(state);
        std::fs::DirBuilder::new()
            .recursive(true)
            .create(&dir)
            .map_err(|e| Error::io(Op::MakeDir, &dir, e))?;
        let bytes = serde_json::to_vec(self).map_err(|e| Error::io(Op::Write, &dir, e))?;
        write_whole_via(
            &state.temp_dir()?,
            &dir,
            &self.id.spec_name(),
            &bytes,
            Durability::Atomic,
        )
    }

    /// Watch `id`, as its file says. A missing one is an error for which
    /// [`Error::is_not_found`] holds.
    pub fn load(state: &StateDir, id: &WatchId) -> Result<WatchSpec, Error> {
        let path = id.dir(state).join(id.spec_name());
        let bytes = crate::record_store::read_regular_within(&path, MAX_FILE)?;
        let spec: WatchSpec =
            serde_json::from_slice(&bytes).map_err(|e| Error::io(Op::Read, &path, e))?;
        if spec.id != *id {
            return Err(Error::io(
                Op::Read,
                &path,
                io::Error::other("it names another watch"),
            ));
        }
        Ok(spec)
    }

    /// Takes watch `id`'s lock (exclusive, without waiting): `None` when someone holds it, that
    /// is, waits for it. Held as long as the returned file is open.
    pub fn lock(state: &StateDir, id: &WatchId) -> Result<Option<File>, Error> {
        let path = id.dir(state).join(id.spec_name());
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
        let fd = rustix::fs::open(&path, flags, Mode::empty())
            .map_err(|e| Error::io(Op::Open, &path, e))?;
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(File::from(fd))),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(Error::io(Op::Lock, &path, e)),
        }
    }
}

/// How a watch ended: its task's status and message, and the tool result it completed with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchEnding {
    /// `completed` or `cancelled`.
    pub status: String,
    /// When.
    pub ended_at_ms: UnixMs,
    /// One line: how it ended.
    pub message: String,
    /// The `CallToolResult` of a completed watch (none for a cancelled one).
    pub result: Option<serde_json::Value>,
}

impl WatchEnding {
    /// Stores watch `id`'s ending unless it has one: whether this one was stored (the first
    /// one stays).
    pub fn store_first(&self, state: &StateDir, id: &WatchId) -> Result<bool, Error> {
        let dir = id.dir(state);
        let target = dir.join(id.ending_name());
        let bytes = serde_json::to_vec(self).map_err(|e| Error::io(Op::Write, &target, e))?;
        let temp = state.temp()?;
        write_new(&temp, &bytes)?;
        // A link fails when the name is there: whoever linked first ended the watch.
        let linked = std::fs::hard_link(&temp, &target);
        let _ = std::fs::remove_file(&temp);
        match linked {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(Error::io(Op::Create, &target, e)),
        }
    }

    /// Watch `id`'s ending, if it has one.
    pub fn load(state: &StateDir, id: &WatchId) -> Result<Option<WatchEnding>, Error> {
        let path = id.dir(state).join(id.ending_name());
        match crate::record_store::read_regular_within(&path, MAX_FILE) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| Error::io(Op::Read, &path, e)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// Writes `bytes` into a new file `path` of mode 0600.
fn write_new(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io(Op::Create, path, e))?;
    file.write_all(bytes)
        .map_err(|e| Error::io(Op::Write, path, e))
}

/// Removes run `run`'s watches (with the run).
pub fn remove_run(state: &StateDir, run: &RunId) -> Result<(), Error> {
    remove_tree(&run_dir(state, run))
}

/// Removes the folder of every watch (with the state folder).
pub fn remove_all(state: &StateDir) -> Result<(), Error> {
    remove_tree(&state.path().join(WATCHES_DIR))
}

fn remove_tree(dir: &Path) -> Result<(), Error> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(Error::io(Op::Remove, dir, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn watch_ids_are_never_run_ids_and_are_checked() {
        let run = RunId::parse("abcdefghijkl").unwrap();
        let id = WatchId::generate(&run).unwrap();
        let text = id.to_string();
        assert!(RunId::parse(&text).is_err(), "{text}");
        assert_eq!(WatchId::parse(&text), Some(id.clone()));
        assert_eq!(id.run(), &run);
        for bad in [
            "abcdefghijkl",
            "abcdefghijkl-",
            "abcdefghijkl-short",
            "abcdefghijkl-ABCDEFGHIJ",
            "abcdefghijkl-abcdefgh/..",
            "../etc-abcdefghij",
            "abcdefghijkl-abcdefghij-x",
            "abcdefghijkl-abcdefghijklmnopq",
        ] {
            assert_eq!(WatchId::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_watch_is_written_locked_ended_once_and_removed_with_its_run() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let run = RunId::parse("abcdefghijkl").unwrap();
        let id = WatchId::generate(&run).unwrap();
        let spec = WatchSpec {
            version: VERSION,
            id: id.clone(),
            until: Some("ready".into()),
            regex: false,
            from: 12,
            created_at_ms: UnixMs(1),
            deadline_ms: UnixMs(2),
        };
        spec.create(&state).unwrap();
        assert_eq!(WatchSpec::load(&state, &id).unwrap(), spec);
        let held = WatchSpec::lock(&state, &id).unwrap();
        assert!(held.is_some());
        assert!(WatchSpec::lock(&state, &id).unwrap().is_none());
        drop(held);
        assert!(WatchSpec::lock(&state, &id).unwrap().is_some());
        assert_eq!(WatchEnding::load(&state, &id).unwrap(), None);
        let ending = |status: &str| WatchEnding {
            status: status.into(),
            ended_at_ms: UnixMs(3),
            message: status.into(),
            result: None,
        };
        assert!(ending("completed").store_first(&state, &id).unwrap());
        assert!(!ending("cancelled").store_first(&state, &id).unwrap());
        assert_eq!(
            WatchEnding::load(&state, &id).unwrap().map(|e| e.status),
            Some("completed".to_owned())
        );
        remove_run(&state, &run).unwrap();
        assert!(WatchSpec::load(&state, &id).unwrap_err().is_not_found());
        remove_run(&state, &run).unwrap();
    }
}
