//! A watch as an MCP task: made by `watch` for a request that declares the Tasks extension,
//! followed with `tasks/get`, ended early with `tasks/cancel` (which never touches the run).
//!
//! The watch lives in the state folder ([`lnk_common::watch`]): what it waits for (written
//! before the task is answered, so a `tasks/get` for it resolves at once) and, once it has
//! ended, how. A thread of the `serve` that made it waits for it ([`super::watch_search`]:
//! asleep until the run's output or record changes, no lock a start, a sweep or a supervisor
//! takes), holding the watch's own flock, and writes its ending. So a watch outlives the `serve`
//! that made it, as a run does: a later `serve`'s `tasks/get` that finds the watch unended and
//! its flock free (no one waits for it) takes the flock and waits for it from then on, from
//! where it began; what the run wrote meanwhile is looked at then (a line dropped by rotations
//! meanwhile is counted in `skipped`, and a watch whose time passed meanwhile looks once through
//! what is there). Whoever ends a watch first (the waiter, a `tasks/cancel`) is the one whose
//! ending stays.
//!
//! | the watch | the task |
//! |---|---|
//! | waiting | `working`; `statusMessage`: what for, how long, the run's output so far |
//! | a line matched, the run ended, or its time was up | `completed`, `result` the watch's answer ([`super::watch_result`]) |
//! | cancelled | `cancelled` |

use std::fs::File;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lnk_common::Causes;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::time::UnixMs;
use lnk_common::watch::{self, WatchEnding, WatchId, WatchSpec};
use serde_json::{Map, Value, json};

use super::lines::Matcher;
use super::task_fields;
use super::watch_asked::Asked;
use super::watch_result::{Watched, answer};
use super::watch_search::{Ending, Target, search};
use crate::call::CallControl;
use crate::config::Background;
use crate::mcp::protocol::{self, Era, RpcError};
use crate::tool_call::answer::ToolAnswer as Answer;

/// The most watches one `serve` waits for at once (a thread each, asleep).
pub const MAX_WAITING: usize = 256;

/// How many watches this `serve` waits for now.
static WAITING: AtomicUsize = AtomicUsize::new(0);

/// Makes the watch `asked` (lines from `from` on) and starts waiting for it: its
/// `CreateTaskResult`, once its file exists.
pub fn create(state: &StateDir, asked: &Asked, from: u64) -> Result<Value, Answer> {
    let record = Record::load(state, &asked.run)
        .map_err(|e| super::output::record_refusal(&asked.run, &e))?;
    let id = WatchId::generate(&asked.run)
        .map_err(|e| Answer::refusal(format!("no id for a new watch: {}", Causes(&e))))?;
    let now = UnixMs::now();
    let spec = WatchSpec {
        version: watch::VERSION,
        id,
        until: asked.matcher.as_ref().map(|m| m.pattern().to_owned()),
        regex: asked.matcher.as_ref().is_some_and(Matcher::is_regex),
        from,
        created_at_ms: now,
        deadline_ms: now.saturating_add(asked.timeout),
    };
    let slot = Waiting::take().ok_or_else(|| {
        Answer::refusal(format!(
            "this server waits for {MAX_WAITING} watches already; cancel some, or wait for them \
             to end"
        ))
    })?;
    spec.create(state)
        .map_err(|e| Answer::refusal(format!("the watch cannot be written: {}", Causes(&e))))?;
    let lock = WatchSpec::lock(state, &spec.id)
        .ok()
        .flatten()
        .ok_or_else(|| Answer::refusal("the watch just written cannot be locked"))?;
    wait_in_background(
        state.clone(),
        spec.clone(),
        asked.matcher.clone(),
        lock,
        slot,
    );
    let message = format!(
        "{}; the host is told when it ends",
        waiting_for(&spec, &record)
    );
    let mut task = fields(&spec, Some(&record), "working", message, spec.created_at_ms);
    task.insert("resultType".into(), json!("task"));
    Ok(Value::Object(task))
}

/// One of the [`MAX_WAITING`] places, given back when dropped.
struct Waiting;

impl Waiting {
    fn take() -> Option<Waiting> {
        WAITING
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_WAITING).then_some(n + 1)
            })
            .ok()
            .map(|_| Waiting)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        WAITING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits for watch `spec` on a thread of its own, holding its `lock` and `slot`, and writes its
/// ending.
fn wait_in_background(
    state: StateDir,
    spec: WatchSpec,
    matcher: Option<Matcher>,
    lock: File,
    slot: Waiting,
) {
    let name = format!("watch {}", spec.id.run());
    let id = spec.id.clone();
    let started = std::thread::Builder::new().name(name).spawn(move || {
        let _held = (lock, slot);
        wait(&state, &spec, matcher.as_ref());
    });
    if let Err(err) = started {
        // Its lock is free again: the next `tasks/get` takes the watch up.
        tracing::warn!(watch = %id, "no thread to wait for the watch: {err}");
    }
}

/// Waits for the watch to end and writes how.
fn wait(state: &StateDir, spec: &WatchSpec, matcher: Option<&Matcher>) {
    let control = match CallControl::new() {
        Ok(control) => control,
        Err(err) => {
            tracing::warn!(watch = %spec.id, "the watch cannot wait: {err}");
            return;
        }
    };
    let left = spec.deadline_ms.saturating_since(UnixMs::now());
    let target = Target {
        run: spec.id.run(),
        matcher,
        from: spec.from,
        deadline: Instant::now() + left,
        watch: Some(&spec.id),
    };
    let watched = Watched {
        run: spec.id.run(),
        watch: Some(&spec.id),
        matcher,
        from: spec.from,
    };
    let (message, result) = match search(state, &target, &control) {
        // Ended by someone else: theirs is the ending. (The control is never cancelled.)
        Ok(Some(outcome)) if outcome.ending == Ending::EndedElsewhere => return,
        Ok(None) => return,
        Ok(Some(mut outcome)) => {
            // Counted from the watch's start, which may be in an earlier `serve`.
            outcome.waited = UnixMs::now().saturating_since(spec.created_at_ms);
            let done = answer(state, &watched, &outcome);
            let message = done.structured.as_ref().and_then(|s| s["summary"].as_str());
            (message.unwrap_or_default().to_owned(), done)
        }
        Err(refusal) => (format!("the watch ended: {}", refusal.text), refusal),
    };
    end(state, &spec.id, "completed", message, Some(result));
}

/// Writes watch `id`'s ending, unless it has one.
fn end(state: &StateDir, id: &WatchId, status: &str, message: String, result: Option<Answer>) {
    let result = result.map(|answer| {
        let mut result = answer.into_result(&Era::Modern);
        // The call's own result, as a 2026-07-28 `tools/call` would have been answered.
        result["resultType"] = json!("complete");
        result
    });
    let ending = WatchEnding {
        status: status.to_owned(),
        ended_at_ms: UnixMs::now(),
        message: crate::text::escaping::one_line(&message),
        result,
    };
    if let Err(err) = ending.store_first(state, id) {
        tracing::warn!(watch = %id, "the watch's end cannot be written: {}", Causes(&err));
    }
}

/// Answers `tasks/get`, `tasks/cancel` or `tasks/update` (`method`) for watch `watch`.
pub fn task_method(
    id: &Value,
    method: &str,
    watch: &WatchId,
    background: &Background,
) -> Result<Value, RpcError> {
    let state = StateDir::new(&background.state);
    let spec = WatchSpec::load(&state, watch).map_err(|e| {
        if e.is_not_found() {
            RpcError::new(
                id.clone(),
                protocol::INVALID_PARAMS,
                format!(
                    "no task {watch}: no such watch is kept (a run's watches are removed with \
                     the run, {} after its end)",
                    humantime::format_duration(background.keep)
                ),
            )
        } else {
            RpcError::new(
                id.clone(),
                protocol::INTERNAL_ERROR,
                format!("task {watch} cannot be read: {}", Causes(&e)),
            )
        }
    })?;
    match method {
        "tasks/get" => Ok(get(&state, &spec)),
        "tasks/cancel" => {
            if matches!(WatchEnding::load(&state, watch), Ok(None)) {
                end(&state, watch, "cancelled", cancelled(&spec), None);
            }
            Ok(json!({}))
        }
        // No watch asks for input.
        _ => Ok(json!({})),
    }
}

/// The task as `tasks/get` shows it; a watch no one waits for is taken up here.
fn get(state: &StateDir, spec: &WatchSpec) -> Value {
    let record = Record::load(state, spec.id.run()).ok();
    let ending = match WatchEnding::load(state, &spec.id) {
        Ok(ending) => ending,
        Err(err) => Some(WatchEnding {
            status: "completed".into(),
            ended_at_ms: UnixMs::now(),
            message: format!("the watch's end cannot be read: {}", Causes(&err)),
            result: None,
        }),
    };
    let task = match ending {
        Some(ending) => {
            let mut task = fields(
                spec,
                record.as_ref(),
                &ending.status,
                ending.message.clone(),
                ending.ended_at_ms,
            );
            if ending.status == "completed" {
                let result = ending.result.unwrap_or_else(|| {
                    let mut refusal = Answer::refusal(ending.message).into_result(&Era::Modern);
                    refusal["resultType"] = json!("complete");
                    refusal
                });
                task.insert("result".into(), result);
            }
            task
        }
        None => {
            take_up(state, spec);
            let message = match &record {
                Some(record) => waiting_for(spec, record),
                None => format!("watching run {}", spec.id.run()),
            };
            fields(
                spec,
                record.as_ref(),
                "working",
                message,
                spec.created_at_ms,
            )
        }
    };
    Value::Object(task)
}

/// Starts waiting for a watch whose lock is free (the `serve` that waited for it is gone).
fn take_up(state: &StateDir, spec: &WatchSpec) {
    let Ok(Some(lock)) = WatchSpec::lock(state, &spec.id) else {
        return;
    };
    let Some(slot) = Waiting::take() else {
        return;
    };
    let matcher = match &spec.until {
        Some(until) => match Matcher::new(until, spec.regex, "until") {
            Ok(matcher) => Some(matcher),
            Err(why) => {
                let refusal = Answer::refusal(format!("the watch cannot be taken up: {why}"));
                return end(state, &spec.id, "completed", why, Some(refusal));
            }
        },
        None => None,
    };
    tracing::info!(watch = %spec.id, "taking up a watch no one waits for");
    wait_in_background(state.clone(), spec.clone(), matcher, lock, slot);
}

/// What a working watch's status says: what for, since when, the run's output so far.
fn waiting_for(spec: &WatchSpec, record: &Record) -> String {
    let what = match (&spec.until, spec.regex) {
        (Some(until), true) => format!("a line matching /{until}/"),
        (Some(until), false) => format!("a line holding \"{until}\""),
        (None, _) => "its end".to_owned(),
    };
    let live = super::task_result::live(record);
    let since = super::task_result::took(UnixMs::now().saturating_since(spec.created_at_ms));
    crate::text::escaping::one_line(&format!(
        "watching run {} ({}) for {what} for {since}; the run is {}",
        spec.id.run(),
        super::task_result::command_line(record),
        live.message
    ))
}

fn cancelled(spec: &WatchSpec) -> String {
    format!(
        "the watch of run {} was cancelled; the run goes on",
        spec.id.run()
    )
}

/// The fields every watch's task has.
fn fields(
    spec: &WatchSpec,
    record: Option<&Record>,
    status: &str,
    message: String,
    updated: UnixMs,
) -> Map<String, Value> {
    // The watch is kept as long as its run's record, which is kept its timeout and its keep
    // after the run's start at least.
    let ttl = record.map(|record| {
        let limits = &record.launch.limits;
        let kept_until = record.started_at_ms.saturating_add(Duration::from_millis(
            limits.timeout_ms.saturating_add(limits.keep_ms),
        ));
        u64::try_from(kept_until.saturating_since(spec.created_at_ms).as_millis())
            .unwrap_or(u64::MAX)
    });
    task_fields::fields(
        &spec.id.to_string(),
        status,
        message,
        spec.created_at_ms,
        updated,
        ttl,
    )
}
