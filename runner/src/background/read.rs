//! `read`: a run's output at offsets that count every byte it wrote, dropped ones included
//! ([`super::output`]), shown escaped ([`crate::text::escaping`]) or, with `raw`, as the bytes
//! themselves (base64); with `wait_ms`, a read that waits for output, for a text (`until`) or
//! for the run's end ([`super::read_wait`]); with `grep`, the lines that match
//! ([`super::grep`]).

use base64::Engine;
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use serde_json::{Map, Value, json};

use super::args::{count, flag, only, run_id};
use super::lines::Matcher;
use super::output::{Bytes, read_bytes};
use super::read_wait::{Wait, Waited, wait_for};
use crate::call::CallControl;
use crate::config::{Background, Config};
use crate::mcp::protocol::Era;
use crate::tool_call::answer::ToolAnswer as Answer;

pub use super::read_wait::UNTIL_BYTES;

/// The arguments `read` takes.
const ARGUMENTS: [&str; 7] = ["id", "offset", "limit", "wait_ms", "until", "raw", "grep"];

/// The `read` tool. `None` when the call was cancelled while it waited: nothing is answered.
pub fn read(
    config: &Config,
    background: &Background,
    arguments: &Map<String, Value>,
    era: &Era,
    control: &CallControl,
) -> Option<Answer> {
    match read_checked(config, background, arguments, era, control) {
        Ok(answer) => answer,
        Err(answer) => Some(answer),
    }
}

fn read_checked(
    config: &Config,
    background: &Background,
    arguments: &Map<String, Value>,
    era: &Era,
    control: &CallControl,
) -> Result<Option<Answer>, Answer> {
    only(arguments, "read", &ARGUMENTS)?;
    let id = run_id(arguments)?;
    let mut offset = count(arguments, "offset")?;
    let limit = count(arguments, "limit")?
        .unwrap_or(config.output)
        .min(config.output);
    let raw = flag(arguments, "raw")?;
    let wait = Wait::parse(arguments, config.timeout)?;
    let state = StateDir::new(&background.state);
    if let Some(grep) = arguments.get("grep").filter(|g| !g.is_null()) {
        let Value::String(pattern) = grep else {
            return Err(Answer::refusal(
                "`grep` must be a string: a regular expression to find lines by",
            ));
        };
        if wait.is_some() || raw {
            return Err(Answer::refusal(
                "`grep` reads the output kept now, as text: it takes `offset` and `limit`, \
                 not `wait_ms`, `until` or `raw`",
            ));
        }
        let matcher = Matcher::new(pattern, true, "grep").map_err(Answer::refusal)?;
        return super::grep::grep(&state, &id, &matcher, offset, limit, era).map(Some);
    }
    let waited = match &wait {
        None => None,
        Some(wait) => {
            // Without an offset, a waiting read looks at what comes after the call began
            // (past what could not be written, if the files folder is full).
            let start = match offset {
                Some(offset) => offset,
                None => read_bytes(&state, &id, None, 0)?.total,
            };
            offset = Some(start);
            match wait_for(&state, &id, start, wait, control)? {
                Some(waited) => Some(waited),
                None => return Ok(None),
            }
        }
    };
    let bytes = read_bytes(&state, &id, offset, limit)?;
    let shown = Shown {
        from_the_end: offset.is_none(),
        raw,
        limit,
    };
    Ok(Some(answer(&id, bytes, shown, waited, era)))
}

/// How the bytes read are shown.
#[derive(Debug, Clone, Copy)]
struct Shown {
    /// Read without an offset: the last bytes, so a cut keeps the end.
    from_the_end: bool,
    /// The bytes themselves, in base64.
    raw: bool,
    /// The most bytes of text shown (escapes included).
    limit: u64,
}

/// The answer for the bytes read: the text (escaped, within the limit) or the raw bytes, and
/// the figures (with a wait's, when it waited).
fn answer(id: &RunId, read: Bytes, shown: Shown, waited: Option<Waited>, era: &Era) -> Answer {
    let Bytes {
        record,
        bytes,
        from,
        start,
        file_end,
        total,
        dropped,
        skipped,
    } = read;
    let got = bytes.len() as u64;
    let at_file_end = from + got == file_end;
    // What the run wrote past the file's end could not be written (no room): it never comes.
    let unwritten_tail = total.saturating_sub(file_end);
    let budget = usize::try_from(shown.limit).unwrap_or(usize::MAX);
    let (text, start, mut next_offset) = if shown.raw {
        let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        (encoded, start, from + got)
    } else {
        let (skip, keep) = utf8_cut(
            &bytes,
            shown.from_the_end,
            at_file_end,
            unwritten_tail > 0,
            &record,
        );
        let cut = &bytes[skip..keep];
        let skip = skip as u64;
        if shown.from_the_end {
            // The last bytes: a text too long once escaped keeps its end.
            let (text, left) = crate::text::escaping::back(cut, budget, true);
            let start = if skip > 0 || left > 0 {
                from + skip + left as u64
            } else {
                start
            };
            (text, start, from + keep as u64)
        } else {
            let (text, used) = crate::text::escaping::front(cut, budget, true);
            let start = if skip > 0 { from + skip } else { start };
            (text, start, from + skip + used as u64)
        }
    };
    let mut skipped = skipped;
    // A read that showed everything up to the file's end goes on past the bytes that were never
    // written, so that `next_offset` never points at offsets that hold nothing.
    let passed = (unwritten_tail > 0 && at_file_end && next_offset == from + got)
        .then(|| (start.max(file_end), total.max(start)));
    if let Some((past_from, past_to)) = passed {
        skipped += past_to.saturating_sub(past_from);
        next_offset = past_to;
    }
    let mut structured = json!({
        "id": id.as_str(),
        "state": record.status.state().as_str(),
        "offset": start,
        "next_offset": next_offset,
        "output_bytes": total,
        "dropped_bytes": dropped,
        "skipped": skipped,
    });
    let key = if shown.raw { "base64" } else { "text" };
    structured[key] = json!(text);
    let summary = record.summary();
    if summary.unwritten_bytes > 0 {
        structured["unwritten_bytes"] = json!(summary.unwritten_bytes);
        structured["unwritten_why"] = json!(summary.unwritten_why);
    }
    if let Some(waited) = waited {
        structured["waited_ms"] = json!(waited.ms);
        structured["matched"] = json!(waited.match_offset.is_some());
        structured["match_offset"] = json!(waited.match_offset);
        structured["ended"] = json!(!record.status.is_running());
    }
    if let Some(network) = &record.network {
        structured["network"] = crate::net::render::structured(network);
    }
    let mut text = if shown.raw {
        format!(
            "bytes {start} to {} of run {id}'s output, as they are, in base64:\n{text}",
            from + got
        )
    } else {
        text
    };
    if let Some((past_from, past_to)) = passed.filter(|(a, b)| a < b) {
        // The text says it too: the bytes stop here, and why.
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let why = match (summary.unwritten_bytes > 0, &summary.unwritten_why) {
            (true, Some(why)) => why.clone(),
            (true, None) => "there was no room for them".to_owned(),
            (false, _) => "they are missing from the output file".to_owned(),
        };
        text.push_str(&format!(
            "[{} bytes of output, offsets {past_from} to {past_to}, could not be written: {why}; \
             read on from offset {past_to}]\n",
            past_to - past_from
        ));
    }
    if !era.has_structured_output() {
        // Without a structured value, the figures ride in the text.
        text = format!("[{structured}]\n{text}");
    }
    Answer::ok(text, structured)
}

/// Where to cut the bytes read so that no character is split: how many to skip at the front
/// and where to stop. A read at a chosen offset starts where it was asked; one without an
/// offset (the last bytes) starts at the next character. At the back, a character cut short
/// is left for the next read (`next_offset` points at its first byte) — unless these are the
/// last bytes of a run that has ended, or of a file whose next bytes could not be written,
/// which will never be completed, or a `limit` too small for one character, which must still
/// move the reader on.
fn utf8_cut(
    bytes: &[u8],
    start_at_a_character: bool,
    at_the_end: bool,
    cut_off: bool,
    record: &Record,
) -> (usize, usize) {
    let skip = if start_at_a_character {
        crate::text::utf8::continuation_prefix(bytes)
    } else {
        0
    };
    let whole = bytes.len() - crate::text::utf8::incomplete_suffix(bytes);
    // The last bytes of a run that ended, or of a file past whose end the run's output could
    // not be written (`cut_off`), are never completed.
    let never_completed = at_the_end && (cut_off || !record.status.is_running());
    let keep = if never_completed || whole <= skip {
        bytes.len()
    } else {
        whole
    };
    (skip.min(keep), keep)
}
