//! The fields every task has, a run's ([`super::task`]) or a watch's ([`super::watch_task`]),
//! and how often a client is asked to poll one.

use lnk_common::time::UnixMs;
use serde_json::{Map, Value, json};

/// How often a client is asked to poll a working task.
pub const POLL_INTERVAL_MS: u64 = 1000;

/// A task's fields: its id, its status and message, when it was made and last changed (never
/// before it was made), how long it is kept (`ttlMs`: `null` when that is not known) and how
/// often to poll it.
pub fn fields(
    task_id: &str,
    status: &str,
    message: String,
    created: UnixMs,
    updated: UnixMs,
    ttl_ms: Option<u64>,
) -> Map<String, Value> {
    let mut task = Map::new();
    task.insert("taskId".into(), json!(task_id));
    task.insert("status".into(), json!(status));
    task.insert("statusMessage".into(), json!(message));
    task.insert("createdAt".into(), json!(created.rfc3339()));
    task.insert(
        "lastUpdatedAt".into(),
        json!(updated.max(created).rfc3339()),
    );
    task.insert("ttlMs".into(), json!(ttl_ms));
    task.insert("pollIntervalMs".into(), json!(POLL_INTERVAL_MS));
    task
}
