//! Starting a run through serve and reading its record: what every item does.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use crate::serve::Serve;

/// Starts before the timed ones, so that caches and the allocator are warm.
pub(super) const WARMUP: usize = 10;
/// The limit on any one tool call.
pub(super) const CALL_LIMIT: Duration = Duration::from_secs(30);
/// How long a run that should end at once may take to be recorded ended.
pub(super) const END_LIMIT: Duration = Duration::from_secs(20);

/// The `_meta` every `start` carries.
pub(super) fn meta() -> Value {
    json!({"link.local/thread": "bench", "link.local/hops": 0})
}

/// One `start`: the run's id and the time from writing the request to reading the answer.
pub(crate) fn start_run(
    serve: &mut Serve,
    program: &str,
    args: &[&str],
) -> Result<(String, Duration)> {
    let (value, took) = serve.call_tool(
        "start",
        &json!({"program": program, "args": args}),
        Some(&meta()),
        CALL_LIMIT,
    )?;
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("`start` answered without an id: {value}"))?;
    Ok((id.to_owned(), took))
}

/// The run's record as it is on disk now.
pub(super) fn load_record(state: &Path, id: &str) -> Result<Value> {
    let path = state.join(format!("{id}.json"));
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not JSON", path.display()))
}

pub(super) fn record_state(record: &Value) -> &str {
    record["status"]["state"].as_str().unwrap_or("")
}

pub(super) fn record_u64(record: &Value, pointer: &str) -> Result<u64> {
    record
        .pointer(pointer)
        .and_then(Value::as_u64)
        .ok_or_else(|| anyhow!("the record has no {pointer}: {record}"))
}

/// Polls the run's record every `every` until it is no longer `running`; the record.
pub(crate) fn wait_ended(
    state: &Path,
    id: &str,
    within: Duration,
    every: Duration,
) -> Result<Value> {
    let deadline = Instant::now() + within;
    loop {
        // The record is replaced by rename, so a read sees a whole one or none.
        if let Ok(record) = load_record(state, id)
            && record_state(&record) != "running"
        {
            return Ok(record);
        }
        if Instant::now() >= deadline {
            bail!("run {id} was not recorded ended within {within:?}");
        }
        std::thread::sleep(every);
    }
}
