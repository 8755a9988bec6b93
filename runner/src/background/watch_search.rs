//! What a watch does while it waits: it looks through the run's output, line by line
//! ([`super::lines`]), from where it began, for a line its pattern matches, until one does, the
//! run ends, or its time is up — asleep between looks, woken only when its run's output file or
//! record changes ([`super::wait`]), or (for a watch that is a task) when someone else ends it.
//!
//! The output is read at the run's offsets ([`super::output`]), so a rotation of the output file
//! loses nothing but bytes already dropped (counted as `skipped`), and one look reads at most
//! [`CHUNK`]; a pass never goes back further than the run's output cap from the end of its file
//! (a program can make its file huge and sparse at no cost). No lock is taken. A watch that
//! waits for the run's end alone reads no output at all.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::watch::{WatchEnding, WatchId};

use super::lines::{LINE_MAX, Matcher, for_each_line};
use super::output::read_bytes;
use super::wait::{Slept, Waker};
use crate::call::CallControl;
use crate::tool_call::answer::ToolAnswer as Answer;

/// How many bytes one look reads.
const CHUNK: u64 = 256 * 1024;

/// What a watch waits for.
pub struct Target<'a> {
    /// The run.
    pub run: &'a RunId,
    /// What a line must match; none: the run's end alone.
    pub matcher: Option<&'a Matcher>,
    /// The run's offset from which lines are looked at.
    pub from: u64,
    /// When the wait ends at the latest.
    pub deadline: Instant,
    /// The watch, when it is a task: its ending, written by someone else (a `tasks/cancel`),
    /// ends the wait.
    pub watch: Option<&'a WatchId>,
}

/// The line that matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The run's offset of its first byte.
    pub offset: u64,
    /// Its bytes (without its newline), at most [`LINE_MAX`].
    pub line: Vec<u8>,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// A line matched.
    Matched(Found),
    /// The run ended first (and no line of what it wrote matched).
    RunEnded,
    /// The time was up first.
    TimedOut,
    /// Someone else ended the watch (its task was cancelled).
    EndedElsewhere,
}

/// What a wait saw.
pub struct Outcome {
    /// How it ended.
    pub ending: Ending,
    /// Where to read on: just past the matching line, else as far as the output was looked at.
    pub next: u64,
    /// Bytes from where the watch began that were dropped before it could look at them.
    pub skipped: u64,
    /// The run's record, as of the last look.
    pub record: Record,
    /// How long it waited.
    pub waited: Duration,
}

/// Where a look stood.
struct Look {
    record: Record,
    found: Option<Found>,
    /// Whether it reached the end of the output file.
    at_the_end: bool,
}

/// Waits for `target`; `None` when `control`'s call was cancelled. A refusal when the run or
/// its output cannot be read.
pub fn search(
    state: &StateDir,
    target: &Target<'_>,
    control: &CallControl,
) -> Result<Option<Outcome>, Answer> {
    let began = Instant::now();
    let run = target.run;
    let record = Record::load(state, run).map_err(|e| super::output::record_refusal(run, &e))?;
    let also = target
        .watch
        .map(|watch| (watch.dir(state), watch.ending_name()));
    // Armed before the first look: nothing written after it is missed.
    let mut waker = Waker::with(
        &record.launch.files.join("background"),
        state.path(),
        run,
        also,
    );
    let mut next = target.from;
    let mut skipped = 0;
    let mut time_up = false;
    loop {
        if control.is_cancelled() {
            return Ok(None);
        }
        let outcome = |ending, next, skipped, record| Outcome {
            ending,
            next,
            skipped,
            record,
            waited: began.elapsed(),
        };
        if let Some(watch) = target.watch
            && matches!(WatchEnding::load(state, watch), Ok(Some(_)))
        {
            let record = Record::load(state, run).unwrap_or(record.clone());
            return Ok(Some(outcome(Ending::EndedElsewhere, next, skipped, record)));
        }
        let look = look_once(state, target, &mut next, &mut skipped)?;
        if let Some(found) = look.found {
            return Ok(Some(outcome(
                Ending::Matched(found),
                next,
                skipped,
                look.record,
            )));
        }
        let running = look.record.status.is_running();
        if look.at_the_end && !running {
            return Ok(Some(outcome(Ending::RunEnded, next, skipped, look.record)));
        }
        if time_up && look.at_the_end {
            return Ok(Some(outcome(Ending::TimedOut, next, skipped, look.record)));
        }
        let now = Instant::now();
        if now >= target.deadline {
            if !look.at_the_end {
                // The time is up in the middle of a pass: what was not looked at stays so.
                return Ok(Some(outcome(Ending::TimedOut, next, skipped, look.record)));
            }
            time_up = true;
            continue;
        }
        if !look.at_the_end {
            continue;
        }
        match waker.sleep(control, target.deadline) {
            Slept::Cancelled => return Ok(None),
            // One last look through what is there, then the answer.
            Slept::TimeUp => time_up = true,
            Slept::Changed => {}
        }
    }
}

/// Looks through the output from `next` (moved on past what was looked at), a chunk at most.
fn look_once(
    state: &StateDir,
    target: &Target<'_>,
    next: &mut u64,
    skipped: &mut u64,
) -> Result<Look, Answer> {
    let Some(matcher) = target.matcher else {
        // The end alone: no output is read.
        let look = read_bytes(state, target.run, None, 0)?;
        *next = (*next).max(look.file_end);
        return Ok(Look {
            record: look.record,
            found: None,
            at_the_end: true,
        });
    };
    let mut look = read_bytes(state, target.run, Some(*next), CHUNK)?;
    let cap = look.record.launch.limits.output_cap_bytes.max(CHUNK);
    let oldest = look.file_end.saturating_sub(cap);
    if look.from < oldest {
        // A file made larger than a run keeps: only its last cap is looked at.
        look = read_bytes(state, target.run, Some(oldest), CHUNK)?;
    }
    *skipped += look.from.saturating_sub(*next);
    let end = look.from + look.bytes.len() as u64;
    let at_the_end = end >= look.file_end;
    // The last bytes, not ended by a newline, are a line once the run has ended.
    let last = at_the_end && !look.record.status.is_running();
    let mut found = None;
    let scanned = for_each_line(look.from, &look.bytes, last, |line| {
        if matcher.is_match(line.bytes) {
            found = Some(Found {
                offset: line.offset,
                line: line.bytes[..line.bytes.len().min(LINE_MAX)].to_vec(),
            });
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    });
    *next = look.from + scanned.used as u64;
    Ok(Look {
        record: look.record,
        found,
        // (A chunk always holds a whole line or a piece of one: one that moved nothing on
        // was the end.)
        at_the_end: at_the_end || scanned.used == 0,
    })
}
