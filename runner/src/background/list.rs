//! `list`: every run of the state folder, newest first, as the records say.

use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::safe_open::FilesDir;
use serde_json::{Map, Value, json};

use super::{Answer, only};
use crate::config::Background;

/// The `list` tool.
pub fn list(background: &Background, arguments: &Map<String, Value>) -> Answer {
    if let Err(answer) = only(arguments, "list", &[]) {
        return answer;
    }
    let state = StateDir::new(&background.state);
    let listing = match state.list() {
        Ok(listing) => listing,
        Err(e) => return Answer::refusal(format!("the runs cannot be listed: {e}")),
    };
    let mut records: Vec<Record> = listing
        .record_ids()
        .filter_map(|id| match Record::load(&state, id) {
            Ok(record) => Some(record),
            Err(e) => {
                // Removed since the listing (a sweep), or damaged: a sweep reports and moves it.
                if !e.is_not_found() {
                    tracing::warn!(%id, "{e}");
                }
                None
            }
        })
        .collect();
    records.sort_by(|a, b| {
        b.started_at_ms
            .cmp(&a.started_at_ms)
            .then_with(|| b.id.as_str().cmp(a.id.as_str()))
    });
    let runs: Vec<Value> = records
        .iter()
        .map(|r| summary_json(r, background))
        .collect();
    let text = if runs.is_empty() {
        "no background runs".to_owned()
    } else {
        runs.iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    Answer::ok(text, json!({"runs": runs}))
}

/// A run as `list` shows it; a running run's output size is the live one (dropped bytes plus
/// the output file's length), when its file is the record's.
pub fn summary_json(record: &Record, background: &Background) -> Value {
    let _ = background;
    let mut summary = record.summary();
    if record.status.is_running()
        && let Some(len) = live_length(record)
    {
        summary.output_bytes = summary.output_bytes.max(record.output.dropped_bytes + len);
    }
    serde_json::to_value(summary).unwrap_or(Value::Null)
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
