//! `stop`: asks a run to stop (`<id>.stop`) and waits up to five seconds for its end.

use std::time::{Duration, Instant};

use lnk_common::Causes;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use serde_json::{Map, Value};

use super::args::{only, run_id};
use super::list::live_summary;
use crate::answer::ToolAnswer as Answer;
use crate::config::Background;

/// How long `stop` waits for the end to be recorded.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// How often the record is looked at while waiting.
const STOP_POLL: Duration = Duration::from_millis(20);

/// The `stop` tool.
pub fn stop(background: &Background, arguments: &Map<String, Value>) -> Answer {
    if let Err(answer) = only(arguments, "stop", &["id"]) {
        return answer;
    }
    let id = match run_id(arguments) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let state = StateDir::new(&background.state);
    let mut record = match Record::load(&state, &id) {
        Ok(record) => record,
        Err(e) if e.is_not_found() => {
            return Answer::refusal(format!("there is no run {id}; `list` shows the runs"));
        }
        Err(e) => return Answer::refusal(format!("run {id} cannot be read: {}", Causes(&e))),
    };
    super::orphans::sweep_orphans(background, std::slice::from_mut(&mut record));
    if record.status.is_running() {
        if let Err(e) = lnk_proc::wake::request_stop(&state, &id) {
            return Answer::refusal(format!("run {id} cannot be asked to stop: {}", Causes(&e)));
        }
        let start = Instant::now();
        while record.status.is_running() && start.elapsed() < STOP_WAIT {
            std::thread::sleep(STOP_POLL);
            match Record::load(&state, &id) {
                Ok(fresh) => record = fresh,
                Err(e) => tracing::warn!(%id, "{}", Causes(&e)),
            }
        }
    }
    let summary = serde_json::to_value(live_summary(&record)).unwrap_or(Value::Null);
    let text = if record.status.is_running() {
        format!(
            "run {id} was asked to stop but its end is not recorded after {} s; `list` shows it",
            STOP_WAIT.as_secs()
        )
    } else {
        format!("run {id} is {}", record.status.state().as_str())
    };
    Answer::ok(format!("{text}\n{summary}"), summary)
}
