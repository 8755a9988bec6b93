//! A run's output file, `<files>/background/<id>.out`, written by its supervisor and read by
//! `read`, `list` and a task: both sides of the file's protocol.
//!
//! The file holds the bytes `[dropped_bytes, dropped_bytes + length)` of everything the run
//! wrote. **The writer** replaces it by a new version ([`NextOutput`]) when it passes its cap
//! (a rotation keeps the newest half, [`rotate`]) or when output could not be written for want
//! of room (the new file begins with a line that says so): the new version is made beside the
//! file, the record is stored with the new `dropped_bytes` and the new file's identity
//! (`output.file`), and only then does the new file take the old one's name.
//!
//! **The reader** ([`read_at_offsets`]) opens the file and compares its identity with the
//! record's: another one means a replacement is under way or happened in between, and the
//! record is read again. Inode numbers are reused, so a newer file may carry an older one's
//! identity: after reading, the record is read once more, and only a record with the same
//! `output.file` and `dropped_bytes` (each replacement raises it) proves the bytes were read at
//! the right offsets. So a reader never reads at stale offsets, whatever the writer does.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use crate::error::{Error, Op};
use crate::id::RunId;
use crate::layout::{StateDir, output_relative_path};
use crate::record::{FileId, Record};
use crate::safe_open::{BackgroundDir, FilesDir, RotationTemp};
use crate::write::Durability;

/// A new version of a run's output file, made beside it, not yet in its place.
#[derive(Debug)]
pub struct NextOutput {
    temp: RotationTemp,
}

/// Why a new version of the output file did not take the old one's place.
#[derive(Debug, thiserror::Error)]
pub enum ReplaceError {
    /// The new version could not be made or filled.
    #[error("making the output file's next version")]
    Make(#[source] Error),
    /// The new version could not be filled.
    #[error("filling the output file's next version")]
    Fill(#[source] io::Error),
    /// The record naming it could not be stored: the old file stays, and so does the record.
    #[error("storing the record of the output file's next version")]
    Store(#[source] Error),
    /// The new file could not take the old one's name; the record names it already.
    #[error("putting the output file's next version in place")]
    Install(#[source] Error),
}

impl ReplaceError {
    /// The error of the file system under it, if any: whether there was no room is read there.
    pub fn io_cause(&self) -> Option<&io::Error> {
        match self {
            ReplaceError::Fill(e) => Some(e),
            ReplaceError::Make(e) | ReplaceError::Store(e) | ReplaceError::Install(e) => match e {
                Error::Io { cause, .. } | Error::Rename { cause, .. } => Some(cause),
                _ => None,
            },
        }
    }
}

impl NextOutput {
    /// Begins run `id`'s next output file, empty, in `background`.
    pub fn begin(background: &BackgroundDir, id: &RunId) -> Result<Self, ReplaceError> {
        background
            .create_rotation_temp(id)
            .map(|temp| NextOutput { temp })
            .map_err(ReplaceError::Make)
    }

    /// The new file, to fill (at its end).
    pub fn file(&mut self) -> &mut File {
        &mut self.temp.file
    }

    /// Puts the new file in the old one's place, as the module says: `record.output` gets
    /// `dropped_bytes` and the new file's identity and is stored, then the new file is renamed
    /// over the old name. The new file, open, for appending. Should the record not be stored,
    /// `record.output` is as it was and the new file is gone.
    pub fn install(
        self,
        state: &StateDir,
        background: &BackgroundDir,
        record: &mut Record,
        dropped_bytes: u64,
    ) -> Result<File, ReplaceError> {
        let before = record.output;
        let file_id = match FileId::of(&self.temp.file) {
            Ok(id) => id,
            Err(e) => {
                let _ = background.remove_rotation_leftovers(&record.id);
                return Err(ReplaceError::Make(e));
            }
        };
        record.output.dropped_bytes = dropped_bytes;
        record.output.file = Some(file_id);
        // Replacements are frequent under a fast writer; the record only has to be whole for
        // readers here, and the run's end is written durably.
        if let Err(err) = record.store_with(state, Durability::Atomic) {
            record.output = before;
            let _ = background.remove_rotation_leftovers(&record.id);
            return Err(ReplaceError::Store(err));
        }
        background
            .install_rotation(self.temp, &record.id)
            .map_err(ReplaceError::Install)
    }

    /// Gives up the new version: its file is removed.
    pub fn abandon(self, background: &BackgroundDir, id: &RunId) {
        let _ = background.remove_rotation_leftovers(id);
    }
}

/// Keeps the newest `keep` bytes of `file` (which is `len` bytes long) in a new output file put
/// in its place; the new file, for appending.
pub fn rotate(
    state: &StateDir,
    background: &BackgroundDir,
    record: &mut Record,
    file: &File,
    len: u64,
    keep: u64,
) -> Result<File, ReplaceError> {
    let keep = keep.min(len);
    let mut next = NextOutput::begin(background, &record.id)?;
    if let Err(e) = copy_range(file, len - keep, next.file(), keep) {
        next.abandon(background, &record.id);
        return Err(ReplaceError::Fill(e));
    }
    let dropped = record.output.dropped_bytes + (len - keep);
    next.install(state, background, record, dropped)
}

/// Copies `len` bytes of `from` at `offset` to the end of `to`, in the kernel where it can.
fn copy_range(from: &File, offset: u64, to: &File, len: u64) -> io::Result<()> {
    let mut offset = offset;
    let mut left = len;
    while left > 0 {
        let chunk = usize::try_from(left).unwrap_or(usize::MAX).min(1 << 30);
        let mut at = offset;
        match rustix::fs::copy_file_range(from.as_fd(), Some(&mut at), to.as_fd(), None, chunk) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the output file is shorter than its count",
                ));
            }
            Ok(n) => {
                offset += n as u64;
                left -= n as u64;
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::XDEV | rustix::io::Errno::NOSYS | rustix::io::Errno::INVAL) => {
                return copy_range_by_hand(from, offset, to, left);
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// [`copy_range`] through a buffer, for file systems without `copy_file_range`.
fn copy_range_by_hand(from: &File, offset: u64, mut to: &File, len: u64) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut offset = offset;
    let mut left = len;
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = from.read_at(&mut buf[..want], offset)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        to.write_all(&buf[..n])?;
        offset += n as u64;
        left -= n as u64;
    }
    Ok(())
}

/// How many times the record is read again when the output file keeps changing under the
/// reader (a small cap and a fast writer replace it often): the first tries at once, then a
/// little apart.
const RELOADS: usize = 200;
/// Tries made at once before pausing between them.
const EAGER_RELOADS: usize = 20;

fn pause(attempt: usize) {
    if attempt >= EAGER_RELOADS {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Bytes of a run's output, and where they stand.
#[derive(Debug)]
pub struct OutputBytes {
    /// The run's record, as of the read.
    pub record: Record,
    /// The bytes read.
    pub bytes: Vec<u8>,
    /// The run's offset of the first byte read.
    pub from: u64,
    /// Where the read was asked to start (the last `limit` bytes when no offset was given).
    pub start: u64,
    /// Where the output file ends, in the run's offsets.
    pub file_end: u64,
    /// Everything the run wrote so far, dropped bytes included (at least `file_end`). Past
    /// `file_end`: bytes the run wrote that could not be written to the file (no room; the
    /// record counts them), which no read will find.
    pub total: u64,
    /// Bytes cut from the file's start by replacements.
    pub dropped: u64,
    /// How many of the bytes asked for were already dropped.
    pub skipped: u64,
}

/// Why a run's output could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The run's record could not be read (a missing one: [`Error::is_not_found`]).
    #[error("reading the run's record")]
    Record(#[source] Error),
    /// The run's files folder could not be opened.
    #[error("opening the files folder")]
    FilesFolder(#[source] Error),
    /// The output file could not be opened or read.
    #[error("reading the output file")]
    File(#[source] Error),
    /// The output file is gone.
    #[error("the output file is gone")]
    Gone,
    /// The file kept changing under the reader (or is not the run's: the agent replaced it).
    #[error("the output file keeps changing under the reader")]
    KeepsChanging,
}

/// Up to `limit` bytes of run `id`'s output from `offset` (without one, the last `limit`),
/// never at stale offsets (see the module docs).
pub fn read_at_offsets(
    state: &StateDir,
    id: &RunId,
    offset: Option<u64>,
    limit: u64,
) -> Result<OutputBytes, ReadError> {
    for attempt in 0..RELOADS {
        let record = Record::load(state, id).map_err(ReadError::Record)?;
        let files = FilesDir::open(&record.launch.files).map_err(ReadError::FilesFolder)?;
        let file = match files.open_background_dir() {
            Ok(Some(dir)) => dir.open_output_for_read(id),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        };
        let file = match file {
            Ok(Some(file)) => file,
            Ok(None) => return Err(ReadError::Gone),
            // Opened just as a replacement renamed a new file over it: read again.
            Err(Error::HardLinked { links: 0, .. }) => {
                pause(attempt);
                continue;
            }
            Err(e) => return Err(ReadError::File(e)),
        };
        if record.output.file != Some(FileId::of(&file).map_err(ReadError::File)?) {
            // Replaced since the record was read (or not yet named in it): read it again.
            pause(attempt);
            continue;
        }
        let len = file
            .metadata()
            .map_err(|e| ReadError::File(Error::io(Op::Stat, output_relative_path(id), e)))?
            .len();
        let dropped = record.output.dropped_bytes;
        let file_end = dropped.saturating_add(len);
        // Without an offset, the last bytes the file holds: what the run wrote past its end
        // could not be written (for want of room) and is nowhere to be read.
        let start = offset.unwrap_or_else(|| file_end.saturating_sub(limit).max(dropped));
        let end = start.saturating_add(limit);
        let skipped = dropped.saturating_sub(start).min(limit);
        let from = start.max(dropped).min(file_end);
        let to = end.min(file_end).max(from);
        let mut bytes = vec![0u8; usize::try_from(to - from).unwrap_or(0)];
        let mut got = 0;
        while got < bytes.len() {
            match file.read_at(&mut bytes[got..], from - dropped + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let path = output_relative_path(id);
                    return Err(ReadError::File(Error::io(Op::Read, path, e)));
                }
            }
        }
        bytes.truncate(got);
        match Record::load(state, id) {
            Ok(again)
                if again.output.file == record.output.file
                    && again.output.dropped_bytes == dropped => {}
            _ => {
                pause(attempt);
                continue;
            }
        }
        return Ok(OutputBytes {
            total: file_end.max(record.output.written_bytes),
            record,
            bytes,
            from,
            start,
            file_end,
            dropped,
            skipped,
        });
    }
    Err(ReadError::KeepsChanging)
}

#[cfg(test)]
mod tests;
