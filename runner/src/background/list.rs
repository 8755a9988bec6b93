//! `list`: every run of the state folder, newest first, as the records say.

use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::safe_open::FilesDir;
use lnk_common::summary::RunSummary;
use serde_json::{Map, Value, json};

use super::args::only;
use crate::answer::ToolAnswer as Answer;
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
    super::orphans::sweep_orphans(background, &mut records);
    records.sort_by(|a, b| {
        b.started_at_ms
            .cmp(&a.started_at_ms)
            .then_with(|| b.id.as_str().cmp(a.id.as_str()))
    });
    let runs: Vec<RunSummary> = records.iter().map(live_summary).collect();
    let text = if runs.is_empty() {
        "no background runs".to_owned()
    } else {
        runs.iter().map(line).collect::<Vec<_>>().join("\n")
    };
    match serde_json::to_value(&runs) {
        Ok(runs) => Answer::ok(text, json!({"runs": runs})),
        Err(e) => Answer::refusal(format!("the runs cannot be shown: {e}")),
    }
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
    format!(
        "{} {}{exit}: {command} in {} — started {}{ended}; {} bytes of output{}",
        run.id,
        run.state.as_str(),
        run.dir,
        run.started_at,
        run.output_bytes,
        if run.told { ", told" } else { "" }
    )
}

/// A run as `list` shows it; a running run's output size is the live one (dropped bytes plus
/// the output file's length), when its file is the record's.
pub fn live_summary(record: &Record) -> RunSummary {
    let mut summary = record.summary();
    if record.status.is_running()
        && let Some(len) = live_length(record)
    {
        summary.output_bytes = summary
            .output_bytes
            .max(record.output.dropped_bytes.saturating_add(len));
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
