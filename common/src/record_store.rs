//! How a record is read from and written to the state folder: `<id>.json` replaced whole by
//! rename, never edited in place, read only as a regular file of the user's; and the end a
//! supervisor keeps in the run's lock file when the record cannot be written ([`KeptEnd`]).
//! The record's fields and their meaning are [`crate::record`]'s.

use std::fs;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Op, RecordProblem};
use crate::id::RunId;
use crate::layout::{StateDir, record_file_name};
use crate::record::{Output, Record};
use crate::status::Status;
use crate::write::{Durability, write_whole_via};

impl Record {
    /// Reads and checks `<state>/<id>.json`.
    pub fn load(state: &StateDir, id: &RunId) -> Result<Self, Error> {
        let path = state.record(id);
        let bytes = read_regular(&path)?;
        let record = Self::from_json(&bytes, &path)?;
        if record.id != *id {
            return Err(Error::RecordInvalid {
                path,
                problem: RecordProblem::IdMismatch {
                    expected: id.clone(),
                    found: record.id,
                },
            });
        }
        Ok(record)
    }

    /// Writes `<state>/<id>.json` whole and durably. The caller must hold the run's lock.
    pub fn store(&self, state: &StateDir) -> Result<(), Error> {
        self.store_with(state, Durability::Durable)
    }

    /// [`store`](Self::store) with a choice of durability. Only the record is written: an
    /// ended run's names in the index are its storer's to file next ([`crate::index::ended`]).
    pub fn store_with(&self, state: &StateDir, durability: Durability) -> Result<(), Error> {
        let bytes = self.to_json()?;
        write_whole_via(
            &state.temp_dir()?,
            state.path(),
            &record_file_name(&self.id),
            &bytes,
            durability,
        )?;
        Ok(())
    }

    /// Stores a record whose run just ended, as its supervisor does, so that a full disk loses
    /// nothing. When the record cannot be stored, the end (status and output counters) is kept
    /// in the run's lock file, in space `start` reserved there
    /// ([`crate::lock::KEPT_END_SPACE`]), which needs no new block, and the record is tried
    /// again every [`STORE_RETRY`], [`STORE_RETRIES`] tries in all (a disk that fills up is
    /// often freed soon).
    /// Given up, the error says why (ENOSPC included), and a sweep finds the end kept in the
    /// lock file once the supervisor is gone ([`kept_end`]): the run is then recorded as it
    /// ended, never `lost`. The caller holds the run's lock.
    pub fn store_ended(&self, state: &StateDir) -> Result<(), Error> {
        let first = match self.store(state) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let kept = self.keep_end(state);
        if !matches!(first, Error::Io { .. } | Error::Rename { .. }) {
            return Err(first);
        }
        tracing::warn!(
            id = %self.id,
            kept = kept.is_ok(),
            "{}; the run's end is tried again every {} s for {} s",
            crate::Causes(&first),
            STORE_RETRY.as_secs(),
            STORE_RETRY.as_secs() * u64::from(STORE_RETRIES)
        );
        let mut tries = 1;
        loop {
            std::thread::sleep(STORE_RETRY);
            match self.store(state) {
                Ok(()) => return Ok(()),
                Err(e)
                    if tries + 1 >= STORE_RETRIES
                        || !matches!(e, Error::Io { .. } | Error::Rename { .. }) =>
                {
                    return Err(match kept {
                        Ok(()) => e,
                        // Nothing kept either: say both.
                        Err(kept) => Error::EndNotKept {
                            stored: Box::new(e),
                            kept: Box::new(kept),
                        },
                    });
                }
                Err(_) => tries += 1,
            }
        }
    }

    /// Writes the end into the run's lock file (see [`store_ended`](Self::store_ended)).
    fn keep_end(&self, state: &StateDir) -> Result<(), Error> {
        let path = state.lock(&self.id);
        let kept = KeptEnd {
            status: self.status,
            output: self.output,
        };
        let mut bytes = serde_json::to_vec(&kept).map_err(|source| Error::RecordSerialize {
            id: self.id.clone(),
            source,
        })?;
        bytes.push(b'\n');
        let fd = open_owned(&path, rustix::fs::OFlags::WRONLY)?;
        let written =
            rustix::io::pwrite(&fd, &bytes, 0).map_err(|e| Error::io(Op::Write, &path, e))?;
        if written != bytes.len() {
            return Err(Error::io(
                Op::Write,
                &path,
                std::io::Error::from(std::io::ErrorKind::WriteZero),
            ));
        }
        Ok(())
    }
}

/// The bytes of a regular file of the user's ([`crate::trust`]), opened without following a
/// link and without blocking (a FIFO put in a record's place must not hang a reader), at most
/// [`MAX_RECORD`] of them.
fn read_regular(path: &Path) -> Result<Vec<u8>, Error> {
    read_regular_within(path, MAX_RECORD)
}

/// The bytes of `path`, a regular file of the user's (never through a link), at most `max`.
pub(crate) fn read_regular_within(path: &Path, max: u64) -> Result<Vec<u8>, Error> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let fd =
        rustix::fs::open(path, flags, Mode::empty()).map_err(|e| Error::io(Op::Open, path, e))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| Error::io(Op::Stat, path, e))?;
    // A record of another user's would have a sweep kill, sign and tell for them.
    crate::trust::check_owned_regular(&stat, path)?;
    // Sized from the stat, so a record is read in one `read` (and one more that finds the end).
    let size = usize::try_from(stat.st_size)
        .unwrap_or(0)
        .min(usize::try_from(max).unwrap_or(usize::MAX));
    let mut bytes = Vec::with_capacity(size.saturating_add(1));
    fs::File::from(fd)
        .take(max)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(Op::Read, path, e))?;
    Ok(bytes)
}

/// How long [`Record::store_ended`] waits between two tries.
pub const STORE_RETRY: Duration = Duration::from_secs(1);
/// How many times [`Record::store_ended`] tries in all (about a minute).
pub const STORE_RETRIES: u32 = 60;

/// A run's end as its supervisor kept it in the run's lock file when the record could not be
/// written: one line of JSON, `{"status": {...}, "output": {...}}`, at the file's start. An
/// empty lock file keeps nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptEnd {
    /// How the run ended.
    pub status: Status,
    /// The output counters at the end.
    pub output: Output,
}

/// The end kept in run `id`'s lock file, if any; read by the holder of the lock (a sweep that
/// found it free while the record still says `running`).
pub fn kept_end(state: &StateDir, id: &RunId) -> Result<Option<KeptEnd>, Error> {
    use std::io::Read;
    let path = state.lock(id);
    let fd = match open_owned(&path, rustix::fs::OFlags::RDONLY) {
        Ok(fd) => fd,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    fs::File::from(fd)
        .take(crate::lock::KEPT_END_SPACE)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(Op::Read, &path, e))?;
    let Some(end) = bytes.iter().position(|b| *b == b'\n') else {
        return Ok(None);
    };
    let kept: KeptEnd =
        serde_json::from_slice(&bytes[..end]).map_err(|source| Error::RecordParse {
            path: path.clone(),
            source,
        })?;
    Ok((!kept.status.is_running()).then_some(kept))
}

/// Opens a file of the state folder without following a link or blocking, and checks it is
/// the user's regular file.
fn open_owned(path: &Path, flags: rustix::fs::OFlags) -> Result<rustix::fd::OwnedFd, Error> {
    use rustix::fs::{Mode, OFlags};
    let fd = rustix::fs::open(
        path,
        flags | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| Error::io(Op::Open, path, e))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| Error::io(Op::Stat, path, e))?;
    crate::trust::check_owned_regular(&stat, path)?;
    Ok(fd)
}

/// The largest record read: real ones are a few KiB (a long command line at most).
const MAX_RECORD: u64 = 16 * 1024 * 1024;
