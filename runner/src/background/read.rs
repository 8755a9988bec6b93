//! `read`: a run's output at offsets that count every byte it wrote, dropped ones included.
//!
//! The output file holds bytes `[dropped_bytes, dropped_bytes + length)`. The record names the
//! file (device and inode) its `dropped_bytes` is for; when the file opened is another one, a
//! rotation happened in between, and the record is read again; it is read once more after the
//! bytes, since a newer file may have been given the old one's inode number.

use std::os::unix::fs::FileExt;

use lnk_common::Causes;
use lnk_common::layout::StateDir;
use lnk_common::record::{FileId, Record};
use lnk_common::safe_open::FilesDir;
use serde_json::{Map, Value, json};

use super::args::{count, only, run_id};
use crate::answer::ToolAnswer as Answer;
use crate::config::{Background, Config};
use crate::protocol::Era;

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

/// The `read` tool.
pub fn read(
    config: &Config,
    background: &Background,
    arguments: &Map<String, Value>,
    era: &Era,
) -> Answer {
    match read_checked(config, background, arguments, era) {
        Ok(answer) | Err(answer) => answer,
    }
}

fn read_checked(
    config: &Config,
    background: &Background,
    arguments: &Map<String, Value>,
    era: &Era,
) -> Result<Answer, Answer> {
    only(arguments, "read", &["id", "offset", "limit"])?;
    let id = run_id(arguments)?;
    let offset = count(arguments, "offset")?;
    let limit = count(arguments, "limit")?
        .unwrap_or(config.output)
        .min(config.output);
    let state = StateDir::new(&background.state);
    for attempt in 0..RELOADS {
        let record = match Record::load(&state, &id) {
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
            Ok(Some(dir)) => dir.open_output_for_read(&id),
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
                lnk_common::layout::output_relative_path(&id).display()
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
        let (skip, keep) = utf8_cut(
            &bytes,
            offset.is_none(),
            from + got as u64 == total,
            &record,
        );
        let bytes = &bytes[skip..keep];
        let start = if skip > 0 { from + skip as u64 } else { start };
        let from = from + skip as u64;
        let got = bytes.len();
        // Inode numbers are reused: the name may lead to a newer file that happens to have
        // the record's old identity. Rotations write the record before they rename, and each
        // adds to `dropped_bytes`, so a record unchanged after the read proves it was the
        // record of the file read.
        match Record::load(&state, &id) {
            Ok(again)
                if again.output.file == record.output.file
                    && again.output.dropped_bytes == dropped => {}
            _ => {
                pause(attempt);
                continue;
            }
        }
        let next_offset = from + got as u64;
        let text = String::from_utf8_lossy(bytes).into_owned();
        let structured = json!({
            "id": id.as_str(),
            "state": record.status.state().as_str(),
            "text": text,
            "offset": start,
            "next_offset": next_offset,
            "output_bytes": total.max(record.output.written_bytes),
            "dropped_bytes": dropped,
            "skipped": skipped,
        });
        let mut text = text;
        if !era.has_structured_output() {
            // Without a structured value, the figures ride in the text.
            text = format!("[{structured}]\n{text}");
        }
        return Ok(Answer::ok(text, structured));
    }
    Err(Answer::refusal(format!(
        "run {id}'s output file keeps changing under the reader; try again"
    )))
}

/// Where to cut the bytes read so that no character is split: how many to skip at the front
/// and where to stop. A read at a chosen offset starts where it was asked; one without an
/// offset (the last bytes) starts at the next character. At the back, a character cut short
/// is left for the next read (`next_offset` points at its first byte) — unless these are the
/// last bytes of a run that has ended, which will never be completed, or a `limit` too small
/// for one character, which must still move the reader on.
fn utf8_cut(
    bytes: &[u8],
    start_at_a_character: bool,
    at_the_end: bool,
    record: &Record,
) -> (usize, usize) {
    let skip = if start_at_a_character {
        crate::utf8::continuation_prefix(bytes)
    } else {
        0
    };
    let whole = bytes.len() - crate::utf8::incomplete_suffix(bytes);
    let never_completed = at_the_end && !record.status.is_running();
    let keep = if never_completed || whole <= skip {
        bytes.len()
    } else {
        whole
    };
    (skip.min(keep), keep)
}
