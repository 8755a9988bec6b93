//! What a watch answers once it has ended: one line saying how (a line matched, the run ended,
//! the time was up), the matching line and its offset, and a few lines around it — or, when
//! nothing matched, the output's last lines — in the text and in the structured value alike,
//! everything shown escaped ([`crate::text::escaping`]). The same answer completes a watch's task and
//! answers a `watch` call of a host that does not follow tasks.

use std::ops::ControlFlow;

use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::watch::WatchId;
use serde_json::{Value, json};

use super::lines::{Matcher, for_each_line};
use super::output::read_bytes;
use super::watch_search::{Ending, Found, Outcome};
use crate::text::escaping;
use crate::tool_call::answer::ToolAnswer;

/// Lines shown before the matching one, and after it (those written by then).
const AROUND: usize = 3;
/// Lines shown of the output's end when nothing matched.
const LAST_LINES: usize = 5;
/// The most bytes of one line shown (the rest is cut, with `…`).
const LINE_SHOWN: usize = 512;
/// The most bytes of the matching line shown.
const MATCH_SHOWN: usize = 4096;
/// How far around the match (and back from the end) lines are looked for.
const WINDOW: u64 = 4096;

/// What was watched.
pub struct Watched<'a> {
    /// The run.
    pub run: &'a RunId,
    /// The watch, when it is a task.
    pub watch: Option<&'a WatchId>,
    /// What a line had to match; none: the run's end alone.
    pub matcher: Option<&'a Matcher>,
    /// Where it began looking.
    pub from: u64,
}

/// The answer for a watch that ended as `outcome` says.
pub fn answer(state: &StateDir, watched: &Watched<'_>, outcome: &Outcome) -> ToolAnswer {
    let record = &outcome.record;
    let summary = summary(watched, outcome);
    let (line, match_offset, around) = match &outcome.ending {
        Ending::Matched(found) => {
            let (line, _) = shown_line(&found.line, MATCH_SHOWN);
            (
                Some(line),
                Some(found.offset),
                lines_around(state, watched.run, found),
            )
        }
        _ => (None, None, last_lines(state, watched.run)),
    };
    let run = super::list::live_summary(record);
    let structured = json!({
        "id": watched.run.as_str(),
        "watch": watched.watch.map(ToString::to_string),
        "state": record.status.state().as_str(),
        "matched": line.is_some(),
        "line": line,
        "match_offset": match_offset,
        "text": around,
        "offset": watched.from,
        "next_offset": outcome.next,
        "ended": !record.status.is_running(),
        "timed_out": outcome.ending == Ending::TimedOut,
        "waited_ms": u64::try_from(outcome.waited.as_millis()).unwrap_or(u64::MAX),
        "output_bytes": run.output_bytes,
        "dropped_bytes": run.dropped_bytes,
        "skipped": outcome.skipped,
        "exit_code": run.exit_code,
        "signal": run.signal,
        "summary": summary,
    });
    let mut text = format!("{summary}\n");
    if let (Some(line), Some(at)) = (&line, match_offset) {
        text.push_str(&format!("--- the line, at byte {at} ---\n{line}\n"));
        text.push_str("--- around it ---\n");
    } else {
        text.push_str("--- the output's last lines ---\n");
    }
    text.push_str(&around);
    if !around.is_empty() && !around.ends_with('\n') {
        text.push('\n');
    }
    ToolAnswer::ok(text, structured)
}

/// One line: how the watch ended.
fn summary(watched: &Watched<'_>, outcome: &Outcome) -> String {
    let record = &outcome.record;
    let command = super::task_result::command_line(record);
    let run = watched.run;
    let what = match watched.matcher {
        Some(matcher) if matcher.is_regex() => format!(
            "a line matching /{}/",
            escaping::one_line(matcher.pattern())
        ),
        Some(matcher) => format!(
            "a line holding \"{}\"",
            escaping::one_line(matcher.pattern())
        ),
        None => "its end".to_owned(),
    };
    let waited = super::task_result::took(outcome.waited);
    match &outcome.ending {
        Ending::Matched(found) => format!(
            "run {run} ({command}) wrote {what} at byte {}, {waited} after the watch began",
            found.offset
        ),
        Ending::RunEnded if watched.matcher.is_none() => {
            super::task_result::how_it_ended(record, false)
        }
        Ending::RunEnded => format!(
            "{}; it wrote no {} after the watch began",
            super::task_result::how_it_ended(record, false),
            what.trim_start_matches("a ")
        ),
        Ending::TimedOut => format!(
            "run {run} ({command}) is still running: the watch waited {waited} for {what} and \
             its time is up"
        ),
        Ending::EndedElsewhere => format!(
            "the watch of run {run} ({command}) for {what} was cancelled after {waited}; the \
             run goes on"
        ),
    }
}

/// A line as shown: escaped, cut to `most` bytes with `…`; and whether it was cut.
fn shown_line(line: &[u8], most: usize) -> (String, bool) {
    let (mut shown, used) = escaping::front(line, most, false);
    let cut = used < line.len();
    if cut {
        shown.push('…');
    }
    (shown, cut)
}

/// The whole lines of the output between `from` and `from + len` (the first one dropped when
/// the window may begin inside it).
fn lines_in(state: &StateDir, run: &RunId, from: Option<u64>, len: u64) -> Vec<(u64, Vec<u8>)> {
    let Ok(read) = read_bytes(state, run, from, len) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    let at_the_end = read.from + read.bytes.len() as u64 >= read.file_end;
    for_each_line(read.from, &read.bytes, at_the_end, |line| {
        lines.push((line.offset, line.bytes.to_vec()));
        ControlFlow::Continue(())
    });
    if read.from > read.dropped && !lines.is_empty() {
        lines.remove(0);
    }
    lines
}

/// Up to [`AROUND`] lines before `found` and after it, the line itself among them, as text.
fn lines_around(state: &StateDir, run: &RunId, found: &Found) -> String {
    let from = found.offset.saturating_sub(WINDOW);
    let len = (found.offset - from) + found.line.len() as u64 + 1 + WINDOW;
    let lines = lines_in(state, run, Some(from), len);
    let at = lines.iter().position(|(offset, _)| *offset == found.offset);
    let shown: Vec<&(u64, Vec<u8>)> = match at {
        Some(at) => lines[at.saturating_sub(AROUND)..lines.len().min(at + AROUND + 1)]
            .iter()
            .collect(),
        None => Vec::new(),
    };
    joined(&shown)
}

/// The output's last [`LAST_LINES`] lines, as text.
fn last_lines(state: &StateDir, run: &RunId) -> String {
    let lines = lines_in(state, run, None, WINDOW);
    let first = lines.len().saturating_sub(LAST_LINES);
    joined(&lines[first..].iter().collect::<Vec<_>>())
}

fn joined(lines: &[&(u64, Vec<u8>)]) -> String {
    let mut text = String::new();
    for (_, line) in lines {
        text.push_str(&shown_line(line, LINE_SHOWN).0);
        text.push('\n');
    }
    text
}

/// The structured value's schema (the `watch` tool's `outputSchema`).
pub fn schema() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    let nullable_count = json!({"type": ["integer", "null"], "minimum": 0});
    let nullable_int = json!({"type": ["integer", "null"]});
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The run watched."},
            "watch": {"type": ["string", "null"], "description": "The watch's task id; null when it was no task."},
            "state": {"type": "string", "enum": ["running", "exited", "timed_out", "stopped", "lost"], "description": "The run's state."},
            "matched": {"type": "boolean", "description": "Whether a line matched `until`."},
            "line": {"type": ["string", "null"], "description": "The matching line."},
            "match_offset": nullable_count.clone(),
            "text": {"type": "string", "description": "A few lines around the matching one (it among them), or the output's last lines when none matched."},
            "offset": count.clone(),
            "next_offset": count.clone(),
            "ended": {"type": "boolean", "description": "Whether the run has ended."},
            "timed_out": {"type": "boolean", "description": "Whether the watch's time was up."},
            "waited_ms": count.clone(),
            "output_bytes": count.clone(),
            "dropped_bytes": count.clone(),
            "skipped": count,
            "exit_code": nullable_int.clone(),
            "signal": nullable_int,
            "summary": {"type": "string", "description": "How the watch ended, in one line."}
        },
        "required": ["id", "watch", "state", "matched", "line", "match_offset", "text", "offset", "next_offset", "ended", "timed_out", "waited_ms", "output_bytes", "dropped_bytes", "skipped", "exit_code", "signal", "summary"],
        "additionalProperties": false
    })
}
