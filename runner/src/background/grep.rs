//! `read` with `grep`: the lines of a run's kept output that match a regular expression, each
//! with its offset, as many as `limit` bytes of text hold, and how many matched in all — so that
//! an agent finds the error in a long build log without paging through it.
//!
//! It reads the output kept when it is called, from `offset` (default: the oldest byte still
//! kept) to the end, a chunk at a time at the run's offsets (a rotation meanwhile loses nothing
//! but what it drops), and never more than the run's output cap back from the file's end (a
//! program can make its file huge and sparse at no cost). Lines are split as
//! [`super::lines`] says; the last one, not ended yet, counts as it is.

use std::ops::ControlFlow;

use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use serde_json::{Value, json};

use super::lines::{Matcher, for_each_line};
use super::output::read_bytes;
use crate::mcp::protocol::Era;
use crate::tool_call::answer::ToolAnswer as Answer;

/// How many bytes are read at a time.
const CHUNK: u64 = 256 * 1024;
/// The most bytes of one matching line shown (the rest is cut, with `…`).
const LINE_SHOWN: usize = 1024;

/// The lines of run `id`'s output from `offset` that `matcher` matches, within `limit` bytes.
pub fn grep(
    state: &StateDir,
    id: &RunId,
    matcher: &Matcher,
    offset: Option<u64>,
    limit: u64,
    era: &Era,
) -> Result<Answer, Answer> {
    let first = read_bytes(state, id, None, 0)?;
    let end = first.file_end;
    let cap = first.record.launch.limits.output_cap_bytes.max(CHUNK);
    let asked = offset.unwrap_or(first.dropped);
    let begin = asked.max(end.saturating_sub(cap));
    let budget = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut found = Found::default();
    let mut at = begin;
    let mut skipped = begin.saturating_sub(asked).min(end.saturating_sub(asked));
    let mut last = first;
    while at < end {
        let chunk = read_bytes(state, id, Some(at), CHUNK.min(end - at))?;
        if chunk.bytes.is_empty() {
            break;
        }
        skipped += chunk.from.saturating_sub(at);
        let reached_end = chunk.from + chunk.bytes.len() as u64 >= end;
        let scanned = for_each_line(chunk.from, &chunk.bytes, reached_end, |line| {
            if matcher.is_match(line.bytes) {
                found.add(line.offset, line.bytes, budget);
            }
            ControlFlow::Continue(())
        });
        at = chunk.from + scanned.used as u64;
        last = chunk;
        if scanned.used == 0 {
            break;
        }
    }
    let next_offset = found.first_unshown.unwrap_or(at.max(begin));
    let shown = found.lines.len() as u64;
    let record = &last.record;
    let matches: Vec<Value> = found
        .lines
        .iter()
        .map(|(offset, line)| json!({"offset": offset, "line": line}))
        .collect();
    let structured = json!({
        "id": id.as_str(),
        "state": record.status.state().as_str(),
        "grep": crate::text::escaping::one_line(matcher.pattern()),
        "matches": matches,
        "lines_matched": found.count,
        "offset": begin,
        "next_offset": next_offset,
        "output_bytes": last.total.max(end),
        "dropped_bytes": last.dropped,
        "skipped": skipped,
    });
    let mut text = format!(
        "{count} line{s} of run {id}'s output from byte {from} to {at} match{es} `{pattern}`",
        count = found.count,
        s = if found.count == 1 { "" } else { "s" },
        es = if found.count == 1 { "es" } else { "" },
        from = begin,
        pattern = crate::text::escaping::one_line(matcher.pattern()),
    );
    if shown < found.count {
        text.push_str(&format!(
            "; the first {shown} shown (call again with offset {next_offset} for the next)"
        ));
    }
    text.push('\n');
    for (offset, line) in &found.lines {
        text.push_str(&format!("{offset}: {line}\n"));
    }
    if !era.has_structured_output() {
        text = format!("[{structured}]\n{text}");
    }
    Ok(Answer::ok(text, structured))
}

/// The matching lines found so far.
#[derive(Debug, Default)]
struct Found {
    /// Those shown: offset and text.
    lines: Vec<(u64, String)>,
    /// The bytes they take.
    bytes: usize,
    /// How many matched in all.
    count: u64,
    /// The offset of the first one that did not fit.
    first_unshown: Option<u64>,
}

impl Found {
    fn add(&mut self, offset: u64, line: &[u8], budget: usize) {
        self.count += 1;
        if self.first_unshown.is_some() {
            return;
        }
        let (mut shown, used) = crate::text::escaping::front(line, LINE_SHOWN, false);
        if used < line.len() {
            shown.push('…');
        }
        let size = shown.len() + 1;
        if self.bytes.saturating_add(size) > budget && !self.lines.is_empty() {
            self.first_unshown = Some(offset);
            return;
        }
        self.bytes += size;
        self.lines.push((offset, shown));
    }
}
