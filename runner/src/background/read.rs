//! `read`: a run's output at offsets that count every byte it wrote, dropped ones included
//! ([`super::output`]), and — with `wait_ms` — a read that waits for output, for a text
//! (`until`) or for the run's end, asleep until then ([`super::wait`]).

use std::time::{Duration, Instant};

use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use serde_json::{Map, Value, json};

use super::args::{count, only, run_id};
use super::output::{Bytes, read_bytes};
use super::wait::{Slept, Waker};
use crate::answer::ToolAnswer as Answer;
use crate::call::CallControl;
use crate::config::{Background, Config};
use crate::protocol::Era;

/// The longest `until` text.
pub const UNTIL_BYTES: usize = 1024;
/// How many bytes a waiting read searches at a time for its `until` text.
const SEARCH_CHUNK: u64 = 256 * 1024;

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

/// What a waiting read asked for.
struct Wait {
    /// How long it may wait.
    ms: u64,
    /// The text to wait for, as bytes.
    until: Option<Vec<u8>>,
}

/// What a waiting read found.
struct Waited {
    /// How long it waited.
    ms: u64,
    /// Where the `until` text starts, in the run's offsets, when it was seen.
    match_offset: Option<u64>,
}

impl Wait {
    /// `wait_ms` and `until`; `None` without `wait_ms`.
    fn parse(arguments: &Map<String, Value>, timeout: Duration) -> Result<Option<Wait>, Answer> {
        let ms = count(arguments, "wait_ms")?;
        let until = match arguments.get("until") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) if !text.is_empty() && text.len() <= UNTIL_BYTES => {
                Some(text.clone().into_bytes())
            }
            Some(_) => {
                return Err(Answer::refusal(format!(
                    "`until` must be a text of 1 to {UNTIL_BYTES} bytes: what to wait for in \
                     the output, such as \"listening on\""
                )));
            }
        };
        let Some(ms) = ms else {
            return match until {
                Some(_) => Err(Answer::refusal(
                    "`until` needs `wait_ms`: how long to wait for it, in milliseconds",
                )),
                None => Ok(None),
            };
        };
        let most = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        if ms > most {
            return Err(Answer::refusal(format!(
                "`wait_ms` may be at most {most} (this server's call timeout); wait again \
                 with `offset` set to the answer's `next_offset` to wait longer"
            )));
        }
        Ok(Some(Wait { ms, until }))
    }
}

fn read_checked(
    config: &Config,
    background: &Background,
    arguments: &Map<String, Value>,
    era: &Era,
    control: &CallControl,
) -> Result<Option<Answer>, Answer> {
    only(
        arguments,
        "read",
        &["id", "offset", "limit", "wait_ms", "until"],
    )?;
    let id = run_id(arguments)?;
    let mut offset = count(arguments, "offset")?;
    let limit = count(arguments, "limit")?
        .unwrap_or(config.output)
        .min(config.output);
    let wait = Wait::parse(arguments, config.timeout)?;
    let state = StateDir::new(&background.state);
    let waited = match &wait {
        None => None,
        Some(wait) => {
            // Without an offset, a waiting read looks at what comes after the call began.
            let start = match offset {
                Some(offset) => offset,
                None => read_bytes(&state, &id, None, 0)?.file_end,
            };
            offset = Some(start);
            match wait_for(&state, &id, start, wait, control)? {
                Some(waited) => Some(waited),
                None => return Ok(None),
            }
        }
    };
    let bytes = read_bytes(&state, &id, offset, limit)?;
    Ok(Some(answer(&id, bytes, offset.is_none(), waited, era)))
}

/// Waits, as [`Wait`] asks, for output past `start` (or the `until` text in it), the run's
/// end, or the time; `None` when the call was cancelled.
///
/// The watch is armed before the first look, so nothing written after that look is missed.
/// One pass searches at most the run's output cap (`--background-output`) back from the end of
/// its file, a chunk at a time, minding the deadline and the cancellation between chunks: a
/// file made huge (a sparse one costs its program nothing) costs the read no more than the
/// bytes a run may keep.
fn wait_for(
    state: &StateDir,
    id: &RunId,
    start: u64,
    wait: &Wait,
    control: &CallControl,
) -> Result<Option<Waited>, Answer> {
    let began = Instant::now();
    let deadline = began + Duration::from_millis(wait.ms);
    let mut waker = match Record::load(state, id) {
        Ok(record) => Some(Waker::new(
            &record.launch.files.join("background"),
            state.path(),
            id,
        )),
        // The look below says what is wrong.
        Err(_) => None,
    };
    // Where the search for `until` goes on from.
    let mut search = start;
    let mut phase = WaitPhase::Searching;
    loop {
        if control.is_cancelled() {
            return Ok(None);
        }
        let look = look_once(state, id, start, search, wait)?;
        search = look.next_search;
        if let Some(at) = look.found {
            let matched = wait.until.is_some().then_some(at);
            return Ok(Some(waited(began, matched)));
        }
        phase = match phase {
            // A pass that reached the end after the time was up, or once the run ended, is
            // the last one.
            _ if look.searched_all && (!look.running || phase == WaitPhase::LastPass) => {
                return Ok(Some(waited(began, None)));
            }
            // The time is up in the middle of a pass: what was not searched stays so.
            _ if Instant::now() >= deadline && !look.searched_all => {
                return Ok(Some(waited(began, None)));
            }
            _ if Instant::now() >= deadline => WaitPhase::LastPass,
            _ if !look.searched_all => WaitPhase::Searching,
            _ => {
                let slept = match waker.as_mut() {
                    Some(waker) => waker.sleep(control, deadline),
                    None => {
                        // Armed only now: look once more before sleeping.
                        waker = Some(Waker::new(&look.output_dir, state.path(), id));
                        Slept::Changed
                    }
                };
                match slept {
                    Slept::Cancelled => return Ok(None),
                    Slept::TimeUp => WaitPhase::LastPass,
                    Slept::Changed => WaitPhase::Searching,
                }
            }
        };
    }
}

/// Where a waiting read stands between two looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WaitPhase {
    /// Looking through the output, a chunk at a time, or again after it changed.
    Searching,
    /// The time is up: one last pass through what is there, then the answer.
    LastPass,
}

/// What one look at the output found.
struct ChunkSearch {
    /// Where what was waited for starts, if it was found.
    found: Option<u64>,
    /// Whether the look reached the end of the file (so a pass is over).
    searched_all: bool,
    /// Whether the run was still running.
    running: bool,
    /// Where the next look goes on from.
    next_search: u64,
    /// The run's output folder, for the watch.
    output_dir: std::path::PathBuf,
}

/// Reads a chunk of the output from `search` and looks in it for what `wait` waits for:
/// output past `start`, or its `until` text.
fn look_once(
    state: &StateDir,
    id: &RunId,
    start: u64,
    search: u64,
    wait: &Wait,
) -> Result<ChunkSearch, Answer> {
    let look = read_bytes(state, id, Some(search), SEARCH_CHUNK)?;
    let cap = look.record.launch.limits.output_cap_bytes.max(SEARCH_CHUNK);
    let end = look.from + look.bytes.len() as u64;
    let mut searched_all = end >= look.file_end;
    let mut next_search = search;
    let found = match &wait.until {
        Some(until) => match find(&look.bytes, until) {
            Some(at) => Some(look.from + at as u64),
            None => {
                // A match may straddle what was read and what comes next; and a pass never
                // goes back further than the cap from the file's end.
                let overlap = until.len().saturating_sub(1) as u64;
                let next = end.saturating_sub(overlap).max(search);
                next_search = next.max(look.file_end.saturating_sub(cap)).max(start);
                if !searched_all && next <= look.from {
                    searched_all = true;
                }
                None
            }
        },
        None => (look.file_end > start).then_some(start),
    };
    Ok(ChunkSearch {
        found,
        searched_all,
        running: look.record.status.is_running(),
        next_search,
        output_dir: look.record.launch.files.join("background"),
    })
}

fn waited(began: Instant, match_offset: Option<u64>) -> Waited {
    Waited {
        ms: u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX),
        match_offset,
    }
}

/// Where `needle` first starts in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || haystack.len() < needle.len() {
        return None;
    }
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The answer for the bytes read: the text, and the figures (with a wait's, when it waited).
fn answer(
    id: &RunId,
    read: Bytes,
    from_the_end: bool,
    waited: Option<Waited>,
    era: &Era,
) -> Answer {
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
    let (skip, keep) = utf8_cut(&bytes, from_the_end, from + got == file_end, &record);
    let shown = &bytes[skip..keep];
    let start = if skip > 0 { from + skip as u64 } else { start };
    let next_offset = from + skip as u64 + shown.len() as u64;
    let text = String::from_utf8_lossy(shown).into_owned();
    let mut structured = json!({
        "id": id.as_str(),
        "state": record.status.state().as_str(),
        "text": text,
        "offset": start,
        "next_offset": next_offset,
        "output_bytes": total,
        "dropped_bytes": dropped,
        "skipped": skipped,
    });
    if let Some(waited) = waited {
        structured["waited_ms"] = json!(waited.ms);
        structured["matched"] = json!(waited.match_offset.is_some());
        structured["match_offset"] = json!(waited.match_offset);
        structured["ended"] = json!(!record.status.is_running());
    }
    if let Some(network) = &record.network {
        structured["network"] = crate::net::render::structured(network);
    }
    let mut text = text;
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
