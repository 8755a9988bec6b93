//! A `read` that waits (`wait_ms`): for output past its offset, for a text (`until`) or for
//! the run's end, asleep until then ([`super::wait`]), searching the output at the run's offsets
//! so that a rotation loses nothing but bytes already dropped.

use std::time::{Duration, Instant};

use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use serde_json::{Map, Value};

use super::args::count;
use super::output::read_bytes;
use super::wait::{Slept, Waker};
use crate::call::CallControl;
use crate::tool_call::answer::ToolAnswer as Answer;

/// The longest `until` text.
pub const UNTIL_BYTES: usize = 1024;
/// How many bytes a waiting read searches at a time for its `until` text.
const SEARCH_CHUNK: u64 = 256 * 1024;

/// What a waiting read asked for.
pub struct Wait {
    /// How long it may wait.
    ms: u64,
    /// The text to wait for, as bytes.
    until: Option<Vec<u8>>,
}

/// What a waiting read found.
pub struct Waited {
    /// How long it waited.
    pub ms: u64,
    /// Where the `until` text starts, in the run's offsets, when it was seen.
    pub match_offset: Option<u64>,
}

impl Wait {
    /// `wait_ms` and `until`; `None` without `wait_ms`.
    pub fn parse(
        arguments: &Map<String, Value>,
        timeout: Duration,
    ) -> Result<Option<Wait>, Answer> {
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

/// Waits, as [`Wait`] asks, for output past `start` (or the `until` text in it), the run's
/// end, or the time; `None` when the call was cancelled.
///
/// The watch is armed before the first look, so nothing written after that look is missed.
/// One pass searches at most the run's output cap (`--background-output`) back from the end of
/// its file, a chunk at a time, minding the deadline and the cancellation between chunks: a
/// file made huge (a sparse one costs its program nothing) costs the read no more than the
/// bytes a run may keep.
pub fn wait_for(
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
