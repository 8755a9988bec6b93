//! `list`: a page of the state folder's runs, newest first (by start time), filtered by state.
//!
//! A page holds at most `limit` runs (20 unless asked, 200 at most) and at most
//! [`PAGE_BYTES`] of answer, so it stays small however many runs the state folder keeps and
//! however long their arguments are; `next`, when more runs match, is the `before` of the next
//! page, whichever of the two ended it. A run's arguments are
//! shortened to [`lnk_common::summary::ARGS_SHOWN`] characters in all, and so is its `dir`.

use lnk_common::Causes;
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::safe_open::FilesDir;
use lnk_common::status::State;
use lnk_common::summary::RunSummary;
use serde_json::{Map, Value, json};

use super::args::{count, only};
use crate::config::Background;
use crate::tool_call::answer::ToolAnswer as Answer;

/// A page's runs unless `limit` says otherwise.
pub const DEFAULT_LIMIT: u64 = 20;
/// The most runs a page may hold.
pub const MAX_LIMIT: u64 = 200;
/// The most bytes of runs a page holds, its text lines and structured runs together: a page
/// ends at `limit` runs or here, whichever comes first (always at least one run).
pub const PAGE_BYTES: usize = 96 * 1024;
/// The characters of a run's `dir` its text line shows.
const DIR_IN_LINE: usize = 60;

/// Which runs a page holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// Every run.
    All,
    /// Runs that have ended, however.
    Ended,
    /// Runs in this state.
    Only(State),
}

impl Filter {
    /// The `state` argument: `running`, `ended` or a state's name.
    pub fn parse(text: &str) -> Option<Filter> {
        Some(match text {
            "ended" => Filter::Ended,
            "running" => Filter::Only(State::Running),
            "exited" => Filter::Only(State::Exited),
            "timed_out" => Filter::Only(State::TimedOut),
            "stopped" => Filter::Only(State::Stopped),
            "lost" => Filter::Only(State::Lost),
            _ => return None,
        })
    }

    /// Whether a run in `state` is on the page.
    pub fn admits(self, state: State) -> bool {
        match self {
            Filter::All => true,
            Filter::Ended => state != State::Running,
            Filter::Only(only) => state == only,
        }
    }
}

/// Where a page starts: just after the run that ended the page before (runs are ordered by
/// start time, newest first, then by id). As text, `<started_at_ms>-<id>`; agents pass it
/// back as they got it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The start time of the last run of the page before.
    pub started_at_ms: u64,
    /// Its id.
    pub id: RunId,
}

impl Cursor {
    /// The cursor after `record`.
    pub fn after(record: &Record) -> Cursor {
        Cursor {
            started_at_ms: record.started_at_ms.0,
            id: record.id.clone(),
        }
    }

    /// Reads a cursor `next` gave.
    pub fn parse(text: &str) -> Option<Cursor> {
        let (ms, id) = text.split_once('-')?;
        if ms.is_empty() || !ms.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(Cursor {
            started_at_ms: ms.parse().ok()?,
            id: RunId::parse(id).ok()?,
        })
    }

    /// Whether `record` comes after this cursor, newest first.
    pub fn admits(&self, record: &Record) -> bool {
        (record.started_at_ms.0, record.id.as_str()) < (self.started_at_ms, self.id.as_str())
    }
}

impl std::fmt::Display for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.started_at_ms, self.id)
    }
}

/// A `list` call's arguments, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// Which runs.
    pub filter: Filter,
    /// At most this many.
    pub limit: usize,
    /// After this run.
    pub before: Option<Cursor>,
}

impl Query {
    /// Reads `state`, `limit` and `before`; the refusal says what to pass instead.
    pub fn parse(arguments: &Map<String, Value>) -> Result<Query, Answer> {
        only(arguments, "list", &["state", "limit", "before"])?;
        let filter = match arguments.get("state") {
            None | Some(Value::Null) => Filter::All,
            Some(Value::String(text)) => Filter::parse(text).ok_or_else(|| {
                Answer::refusal(format!(
                    "`state` `{}` is not one of running, ended, exited, timed_out, stopped, lost",
                    crate::mcp::protocol::cut_short(text)
                ))
            })?,
            Some(_) => {
                return Err(Answer::refusal(
                    "`state` must be a string: running, ended, exited, timed_out, stopped or lost",
                ));
            }
        };
        let limit = count(arguments, "limit")?.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Answer::refusal(format!(
                "`limit` must be from 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})"
            )));
        }
        let before = match arguments.get("before") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(Cursor::parse(text).ok_or_else(|| {
                Answer::refusal(format!(
                    "`before` `{}` is not a value `list` gave as `next`; leave it out for the newest runs",
                    crate::mcp::protocol::cut_short(text)
                ))
            })?),
            Some(_) => {
                return Err(Answer::refusal(
                    "`before` must be a string: the `next` of the page before",
                ));
            }
        };
        Ok(Query {
            filter,
            limit: usize::try_from(limit).unwrap_or(usize::MAX),
            before,
        })
    }
}

/// The `list` tool.
pub fn list(background: &Background, arguments: &Map<String, Value>) -> Answer {
    let query = match Query::parse(arguments) {
        Ok(query) => query,
        Err(answer) => return answer,
    };
    let state = StateDir::new(&background.state);
    let (mut page, more, scanned_to) = match page(&state, &query) {
        Ok(page) => page,
        Err(e) => return Answer::refusal(format!("the runs cannot be listed: {}", Causes(&e))),
    };
    super::orphans::sweep_orphans(background, &mut page);
    // A run a sweep just found lost may have left the filter: it is left out, not shown wrong.
    page.retain(|record| query.filter.admits(record.status.state()));
    let (runs, mut lines) = within_budget(&page);
    let cut_by_bytes = runs.len() < page.len();
    page.truncate(runs.len());
    // A page that read its most records goes on after the last one it read, unless the byte
    // budget ended it before that: then it goes on after the last one it shows.
    let scanned_to = scanned_to.filter(|_| !cut_by_bytes);
    let next = match (more || cut_by_bytes, scanned_to, page.last()) {
        (true, Some((started_at_ms, id)), _) => Some(Cursor { started_at_ms, id }.to_string()),
        (true, None, Some(last)) => Some(Cursor::after(last).to_string()),
        _ => None,
    };
    if lines.is_empty() && next.is_some() {
        lines.push(format!(
            "no matching runs among the {} newest looked at",
            super::list_page::PAGE_SCAN
        ));
    } else if lines.is_empty() {
        lines.push("no background runs".to_owned());
    }
    if let Some(next) = &next {
        lines.push(format!(
            "more runs: call `list` with before \"{next}\" for the next page"
        ));
    }
    match serde_json::to_value(&runs) {
        Ok(runs) => Answer::ok(lines.join("\n"), json!({"runs": runs, "next": next})),
        Err(e) => Answer::refusal(format!("the runs cannot be shown: {}", Causes(&e))),
    }
}

/// The first runs of `page` as shown, and their lines: as many as [`PAGE_BYTES`] holds (at
/// least one).
fn within_budget(page: &[Record]) -> (Vec<RunSummary>, Vec<String>) {
    let mut runs = Vec::with_capacity(page.len());
    let mut lines = Vec::with_capacity(page.len());
    let mut bytes = 0usize;
    for record in page {
        let run = live_summary(record);
        let text = line(&run);
        let size = text.len() + serde_json::to_vec(&run).map_or(0, |json| json.len());
        if !runs.is_empty() && bytes.saturating_add(size) > PAGE_BYTES {
            break;
        }
        bytes = bytes.saturating_add(size);
        runs.push(run);
        lines.push(text);
    }
    (runs, lines)
}

/// A page's records, newest first; whether more runs may match after it; and, when the page
/// ended at the most records it may read, the last one read.
type ListedPage = (Vec<Record>, bool, Option<(u64, RunId)>);

/// The records of one page, newest first, and whether more runs match after it.
fn page(state: &StateDir, query: &Query) -> Result<ListedPage, lnk_common::Error> {
    // The index costs the page; a folder not indexed yet (made by an older version, until a
    // sweep indexes it) is read whole.
    let filter = query.filter;
    let running_only = filter == Filter::Only(State::Running);
    let before = query
        .before
        .as_ref()
        .map(|cursor| (cursor.started_at_ms, &cursor.id));
    let indexed = super::list_page::page(
        state,
        &|state| filter.admits(state),
        running_only,
        query.limit,
        before,
    )?;
    if let Some(page) = indexed {
        return Ok((page.records, page.more, page.scanned_to));
    }
    let listing = state.list()?;
    let mut records: Vec<Record> = listing
        .record_ids()
        .filter_map(|id| match Record::load(state, id) {
            Ok(record) => Some(record),
            Err(e) => {
                // Removed since the listing (a sweep), or damaged: a sweep reports and moves it.
                if !e.is_not_found() {
                    tracing::warn!(%id, "{}", Causes(&e));
                }
                None
            }
        })
        .filter(|record| query.filter.admits(record.status.state()))
        .filter(|record| {
            query
                .before
                .as_ref()
                .is_none_or(|cursor| cursor.admits(record))
        })
        .collect();
    records.sort_by(|a, b| {
        b.started_at_ms
            .cmp(&a.started_at_ms)
            .then_with(|| b.id.as_str().cmp(a.id.as_str()))
    });
    let more = records.len() > query.limit;
    records.truncate(query.limit);
    Ok((records, more, None))
}

/// One line a person can read: id, state, exit, command, times, output.
fn line(run: &RunSummary) -> String {
    let mut command = run.program.clone();
    for arg in &run.args {
        command.push(' ');
        command.push_str(arg);
    }
    if command.chars().count() > 80 {
        command = command.chars().take(79).collect::<String>() + "…";
    }
    let exit = match (run.exit_code, run.signal) {
        (Some(code), _) => format!(" (code {code})"),
        (None, Some(signal)) => format!(" (signal {signal})"),
        (None, None) => String::new(),
    };
    let ended = run
        .ended_at
        .as_deref()
        .map(|at| format!(", ended {at}"))
        .unwrap_or_default();
    let unwritten = run
        .unwritten_note()
        .map(|note| format!(" ({note})"))
        .unwrap_or_default();
    format!(
        "{} {}{exit}: {command} in {} — started {}{ended}; {} bytes of output{unwritten}{}{}",
        run.id,
        run.state.as_str(),
        lnk_common::summary::cut(&run.dir, DIR_IN_LINE),
        run.started_at,
        run.output_bytes,
        if run.told { ", told" } else { "" },
        run.network
            .as_ref()
            .map(crate::net::render::in_a_line)
            .unwrap_or_default()
    )
}

/// A run as `list` shows it; a running run's output size is the live one (dropped bytes plus
/// the output file's length), when its file is the record's.
pub fn live_summary(record: &Record) -> RunSummary {
    let mut summary = shown_summary(record);
    if record.status.is_running()
        && let Some(len) = live_length(record)
    {
        summary.output_bytes = summary
            .output_bytes
            .max(record.output.dropped_bytes.saturating_add(len));
    }
    summary
}

/// A run as it is shown to the host: shortened, and its program, arguments and folder (as the
/// agent gave them) escaped ([`crate::text::escaping::one_line`]).
pub fn shown_summary(record: &Record) -> RunSummary {
    let mut summary = record.summary().shortened();
    summary.program = crate::text::escaping::one_line(&summary.program);
    summary.dir = crate::text::escaping::one_line(&summary.dir);
    for arg in &mut summary.args {
        *arg = crate::text::escaping::one_line(arg);
    }
    summary
}

/// The length of a running run's output file, when it is the file the record names.
fn live_length(record: &Record) -> Option<u64> {
    let files = FilesDir::open(&record.launch.files).ok()?;
    let dir = files.open_background_dir().ok()??;
    let file = dir.open_output_for_read(&record.id).ok()??;
    let id = lnk_common::record::FileId::of(&file).ok()?;
    if Some(id) != record.output.file {
        return None;
    }
    file.metadata().ok().map(|m| m.len())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn a_query_defaults_to_the_newest_twenty_of_every_state() {
        let query = Query::parse(&Map::new()).unwrap_or_else(|a| panic!("{}", a.text));
        assert_eq!(
            query,
            Query {
                filter: Filter::All,
                limit: 20,
                before: None
            }
        );
        let full = Query::parse(&map(
            json!({"state": "ended", "limit": 200, "before": "1714564800000-abcdefghijkl"}),
        ))
        .unwrap_or_else(|a| panic!("{}", a.text));
        assert_eq!(full.filter, Filter::Ended);
        assert_eq!(full.limit, 200);
        assert_eq!(
            full.before.map(|c| c.to_string()).as_deref(),
            Some("1714564800000-abcdefghijkl")
        );
    }

    #[test]
    fn bad_values_are_refused_with_what_to_pass() {
        for (arguments, says) in [
            (json!({"limit": 0}), "limit"),
            (json!({"limit": 201}), "limit"),
            (json!({"limit": -1}), "limit"),
            (json!({"limit": "5"}), "limit"),
            (json!({"state": "finished"}), "state"),
            (json!({"state": 3}), "state"),
            (json!({"before": "yesterday"}), "before"),
            (json!({"before": "12-NOT-AN-ID"}), "before"),
            (json!({"before": "-abcdefghijkl"}), "before"),
            (json!({"before": 5}), "before"),
            (json!({"page": 2}), "page"),
        ] {
            let refused = Query::parse(&map(arguments.clone()))
                .err()
                .unwrap_or_else(|| panic!("{arguments} is refused"));
            assert!(
                refused.is_error && refused.text.contains(says),
                "{arguments}: {}",
                refused.text
            );
        }
    }

    #[test]
    fn filters_admit_their_states() {
        assert!(Filter::Ended.admits(State::Lost) && !Filter::Ended.admits(State::Running));
        assert!(Filter::Only(State::Running).admits(State::Running));
        assert!(!Filter::Only(State::Exited).admits(State::Stopped));
        assert!(Filter::All.admits(State::TimedOut));
    }

    /// Runs whose arguments and folder are as costly to show as they can be: every character
    /// a control character (six bytes in JSON) or four bytes of UTF-8.
    fn costly_records(n: usize) -> Vec<Record> {
        let bytes = include_bytes!("../../../common/tests/data/record-v1.json");
        let fixture = Record::from_json(bytes, std::path::Path::new("record-v1.json")).unwrap();
        (0..n)
            .map(|i| {
                let mut record = fixture.clone();
                record.launch.program.args = vec!["\u{1}".repeat(200), "🦀".repeat(200)];
                record.launch.program.dir = "\u{2}".repeat(400);
                record.started_at_ms.0 -= i as u64;
                record
            })
            .collect()
    }

    #[test]
    fn a_page_of_costly_runs_stays_within_its_bytes() {
        let page = costly_records(MAX_LIMIT as usize);
        let (runs, lines) = within_budget(&page);
        let shown = runs.len();
        assert!(shown > 0 && shown < page.len(), "{shown} of {}", page.len());
        assert_eq!((runs.len(), lines.len()), (shown, shown));
        let structured = serde_json::to_vec(&runs).unwrap().len();
        let text: usize = lines.iter().map(|l| l.len() + 1).sum();
        assert!(structured + text <= PAGE_BYTES, "{structured} + {text}");
        // A cheap page is not cut: 200 short runs fit.
        let fixture = costly_records(1).remove(0);
        let mut cheap = fixture.clone();
        cheap.launch.program.args = vec!["-l".into()];
        cheap.launch.program.dir = "src".into();
        let page = vec![cheap; MAX_LIMIT as usize];
        assert_eq!(within_budget(&page).0.len(), page.len());
        // One run always shows, however costly.
        assert_eq!(within_budget(&costly_records(1)).0.len(), 1);
    }
}
