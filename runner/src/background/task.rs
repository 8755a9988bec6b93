//! Background runs as MCP tasks (the 2026-07-28 Tasks extension, `io.modelcontextprotocol/tasks`).
//!
//! A run is its own task: the task's id is the run's id, and the run's record in the state
//! folder is the task's whole state. So any `serve` on the state folder answers for any run it
//! keeps — one started by an earlier `serve` too, as hosts keep task ids across restarts — and
//! reading a task costs one record and the two ends of its output file, whatever else the
//! folder keeps.
//!
//! | the run | the task |
//! |---|---|
//! | running | `working`; `statusMessage`: how long, how many bytes, its last line |
//! | ended: exited, timed out, stopped, lost | `completed`; `result` a `CallToolResult` that reads like `command`'s ([`super::task_result`]); `isError` only for `lost` |
//! | stopped by `tasks/cancel` | `cancelled` ([`lnk_common::cancel`]) |
//!
//! A watch ([`super::watch_task`]) is a task too, whose id is its run's id, `-` and a tag: the
//! two kinds share `tasks/get`, and neither's id can be the other's.
//!
//! `failed` is never used: it is for JSON-RPC errors, and a run that cannot start is refused
//! before any task exists. No run asks for input, so `input_required` is never used either.

use lnk_common::Causes;
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::time::UnixMs;
use lnk_common::watch::WatchId;
use serde_json::{Map, Value, json};

use super::{task_fields, task_result};
use crate::config::{Background, Config};
use crate::mcp::protocol::{self, Era, RpcError};

/// The `CreateTaskResult` a `start` answers when its request declared the extension: the run
/// just recorded, `working`.
pub fn created(record: &Record) -> Value {
    let mut task = fields(
        record,
        "working",
        format!(
            "started {}; the host is told when it ends",
            task_result::command_line(record)
        ),
        record.started_at_ms,
    );
    task.insert("resultType".into(), json!("task"));
    Value::Object(task)
}

/// Answers `tasks/get`, `tasks/cancel` or `tasks/update` (`method`) for request `id`.
///
/// The extension's text asks a request that does not declare it to be refused (-32021); the
/// task's id must be a run of this state folder (-32602 otherwise, saying which).
pub fn task_method(
    id: &Value,
    method: &str,
    params: &Map<String, Value>,
    config: &Config,
    background: &Background,
) -> Result<Value, RpcError> {
    if !protocol::declares_tasks(params.get("_meta").and_then(Value::as_object)) {
        let mut err = RpcError::new(
            id.clone(),
            protocol::MISSING_CLIENT_CAPABILITY,
            format!(
                "`{method}` is for clients that declare the Tasks extension \
                 ({}) in the request's client capabilities",
                protocol::TASKS_EXTENSION
            ),
        );
        err.data = Some(json!({
            "requiredCapabilities": {"extensions": {protocol::TASKS_EXTENSION: {}}}
        }));
        return Err(err);
    }
    let state = StateDir::new(&background.state);
    let run = match task_id(id, method, params)? {
        TaskRef::Run(run) => run,
        TaskRef::Watch(watch) => {
            return super::watch_task::task_method(id, method, &watch, background);
        }
    };
    let mut record = load(id, &state, &run, background)?;
    match method {
        "tasks/get" => Ok(get(config, background, &state, &mut record)),
        "tasks/cancel" => {
            if record.status.is_running()
                && let Err(e) = lnk_proc::run::wake::request_cancel(&state, &run)
            {
                return Err(RpcError::new(
                    id.clone(),
                    protocol::INTERNAL_ERROR,
                    format!("task {run} cannot be cancelled: {}", Causes(&e)),
                ));
            }
            Ok(json!({}))
        }
        // No run asks for input: whatever answers are sent, there is nothing to give them to.
        _ => Ok(json!({})),
    }
}

/// The task as `tasks/get` shows it.
fn get(config: &Config, background: &Background, state: &StateDir, record: &mut Record) -> Value {
    let orphaned = super::orphans::notice_orphan(background, record);
    let task = if record.status.is_running() {
        let live = task_result::live(record);
        let message = if orphaned {
            format!(
                "{}; its supervisor is gone, and its end is being recorded",
                live.message
            )
        } else {
            live.message
        };
        fields(record, "working", message, live.updated)
    } else {
        let ended_at = record.status.ended_at().unwrap_or(record.started_at_ms);
        let cancelled = record.status.state() == lnk_common::status::State::Stopped
            && lnk_common::cancel::cancelled_by_task(state, &record.id).unwrap_or_else(|e| {
                tracing::warn!(id = %record.id, "{}", Causes(&e));
                false
            });
        let how = task_result::how_it_ended(record, cancelled);
        if cancelled {
            fields(record, "cancelled", how, ended_at)
        } else {
            let mut result = task_result::ended(config, record, &how).into_result(&Era::Modern);
            // The call's own result, as a 2026-07-28 `tools/call` would have been answered:
            // clients check its `resultType` too.
            result["resultType"] = json!("complete");
            let mut task = fields(record, "completed", how, ended_at);
            task.insert("result".into(), result);
            task
        }
    };
    Value::Object(task)
}

/// The fields every run's task has.
fn fields(record: &Record, status: &str, message: String, updated: UnixMs) -> Map<String, Value> {
    let limits = &record.launch.limits;
    // The record outlives the run's timeout and its keep after that, at least.
    let ttl = limits.timeout_ms.saturating_add(limits.keep_ms);
    task_fields::fields(
        record.id.as_str(),
        status,
        message,
        record.started_at_ms,
        updated,
        Some(ttl),
    )
}

/// What a task's id names: a run, or a watch of one ([`lnk_common::watch::WatchId`]: a run's
/// id, `-` and a tag, so never a run's id).
enum TaskRef {
    Run(RunId),
    Watch(WatchId),
}

/// The run or watch a task request names, checked before it touches the disk, or -32602 that
/// says what is wrong with `taskId`.
fn task_id(id: &Value, method: &str, params: &Map<String, Value>) -> Result<TaskRef, RpcError> {
    let invalid = |message: String| RpcError::new(id.clone(), protocol::INVALID_PARAMS, message);
    match params.get("taskId") {
        Some(Value::String(text)) => match (RunId::parse(text), WatchId::parse(text)) {
            (Ok(run), _) => Ok(TaskRef::Run(run)),
            (_, Some(watch)) => Ok(TaskRef::Watch(watch)),
            _ => Err(invalid(format!(
                "`taskId` `{}` is not a task of this server: its tasks' ids are a run's (12 to \
                 32 characters of a-z and 0-9) or a watch's (a run's, `-` and 8 to 16 more)",
                protocol::cut_short(text)
            ))),
        },
        _ => Err(invalid(format!("`{method}` needs `taskId`, a string"))),
    }
}

/// The record of run `run`: -32602 when the state folder keeps no such run.
fn load(
    id: &Value,
    state: &StateDir,
    run: &RunId,
    background: &Background,
) -> Result<Record, RpcError> {
    Record::load(state, run).map_err(|e| {
        if e.is_not_found() {
            RpcError::new(
                id.clone(),
                protocol::INVALID_PARAMS,
                format!(
                    "no task {run}: no such run is kept (an ended run is removed {} after its \
                     end)",
                    humantime::format_duration(background.keep)
                ),
            )
        } else {
            RpcError::new(
                id.clone(),
                protocol::INTERNAL_ERROR,
                format!("task {run} cannot be read: {}", Causes(&e)),
            )
        }
    })
}
