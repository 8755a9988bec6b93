//! A run's output at the run's offsets, read as bytes: what `read` shows and what a waiting
//! `read` searches.
//!
//! The output file holds bytes `[dropped_bytes, dropped_bytes + length)`. The record names the
//! file (device and inode) its `dropped_bytes` is for; when the file opened is another one, a
//! rotation happened in between, and the record is read again; it is read once more after the
//! bytes, since a newer file may have been given the old one's inode number.

use std::os::unix::fs::FileExt;

use lnk_common::Causes;
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::{FileId, Record};
use lnk_common::safe_open::FilesDir;

use crate::answer::ToolAnswer as Answer;

/// How many times the record is read again when the output file keeps changing under us (a
/// small cap and a fast writer rotate often): the first tries at once, then a little apart.
const RELOADS: usize = 200;
/// Tries made at once before pausing between them.
const EAGER_RELOADS: usize = 20;

fn pause(attempt: usize) {
    if attempt >= EAGER_RELOADS {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Bytes of a run's output, and where they stand.
pub struct Bytes {
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
    /// Everything the run wrote so far, dropped bytes included (at least `file_end`).
    pub total: u64,
    /// Bytes cut from the file's start by rotations.
    pub dropped: u64,
    /// How many of the bytes asked for were already dropped.
    pub skipped: u64,
}

/// Up to `limit` bytes of run `id`'s output from `offset` (without one, the last `limit`),
/// never at stale offsets; a refusal that says why when the run or its file cannot be read.
pub fn read_bytes(
    state: &StateDir,
    id: &RunId,
    offset: Option<u64>,
    limit: u64,
) -> Result<Bytes, Answer> {
    for attempt in 0..RELOADS {
        let record = match Record::load(state, id) {
            Ok(record) => record,
            Err(e) if e.is_not_found() => {
                return Err(Answer::refusal(format!(
                    "there is no run {id}; `list` shows the runs"
                )));
            }
            Err(e) => {
                return Err(Answer::refusal(format!(
                    "run {id} cannot be read: {}",
                    Causes(&e)
                )));
            }
        };
        let files = FilesDir::open(&record.launch.files).map_err(|e| {
            Answer::refusal(format!("the files folder cannot be opened: {}", Causes(&e)))
        })?;
        let file = match files.open_background_dir() {
            Ok(Some(dir)) => dir.open_output_for_read(id),
            Ok(None) => Ok(None),
            Err(e) => Err(e),
        };
        let file = match file {
            Ok(file) => file,
            // Opened just as a rotation renamed a new file over it: read again.
            Err(lnk_common::error::Error::HardLinked { links: 0, .. }) => {
                pause(attempt);
                continue;
            }
            Err(e) => {
                return Err(Answer::refusal(format!(
                    "run {id}'s output file cannot be read: {}",
                    Causes(&e)
                )));
            }
        };
        let Some(file) = file else {
            return Err(Answer::refusal(format!(
                "run {id}'s output file {} is gone",
                lnk_common::layout::output_relative_path(id).display()
            )));
        };
        let file_id = FileId::of(&file)
            .map_err(|e| Answer::refusal(format!("run {id}'s output file: {}", Causes(&e))))?;
        if record.output.file != Some(file_id) {
            // Rotated since the record was read (or not yet named in it): read it again.
            pause(attempt);
            continue;
        }
        let len = file
            .metadata()
            .map_err(|e| Answer::refusal(format!("run {id}'s output file: {}", Causes(&e))))?
            .len();
        let dropped = record.output.dropped_bytes;
        let total = dropped.saturating_add(len);
        let start = offset.unwrap_or_else(|| total.saturating_sub(limit).max(dropped));
        let end = start.saturating_add(limit);
        let skipped = dropped.saturating_sub(start).min(limit);
        let from = start.max(dropped).min(total);
        let to = end.min(total).max(from);
        let mut bytes = vec![0u8; usize::try_from(to - from).unwrap_or(0)];
        let mut got = 0;
        while got < bytes.len() {
            match file.read_at(&mut bytes[got..], from - dropped + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Answer::refusal(format!(
                        "reading run {id}'s output: {}",
                        Causes(&e)
                    )));
                }
            }
        }
        bytes.truncate(got);
        // Inode numbers are reused: the name may lead to a newer file that happens to have
        // the record's old identity. Rotations write the record before they rename, and each
        // adds to `dropped_bytes`, so a record unchanged after the read proves it was the
        // record of the file read.
        match Record::load(state, id) {
            Ok(again)
                if again.output.file == record.output.file
                    && again.output.dropped_bytes == dropped => {}
            _ => {
                pause(attempt);
                continue;
            }
        }
        return Ok(Bytes {
            total: total.max(record.output.written_bytes),
            record,
            bytes,
            from,
            start,
            file_end: total,
            dropped,
            skipped,
        });
    }
    Err(Answer::refusal(format!(
        "run {id}'s output file keeps changing under the reader; try again"
    )))
}
