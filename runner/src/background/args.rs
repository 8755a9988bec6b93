//! Reading the background tools' arguments: refusals say what to pass instead.

use serde_json::{Map, Value};

use crate::tool_call::answer::ToolAnswer as Answer;

/// Refuses arguments other than `allowed`.
pub fn only(arguments: &Map<String, Value>, tool: &str, allowed: &[&str]) -> Result<(), Answer> {
    match arguments.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(Answer::refusal(format!(
            "unknown argument `{}`; `{tool}` takes {}",
            crate::mcp::protocol::cut_short(unknown),
            if allowed.is_empty() {
                "no arguments".to_owned()
            } else {
                allowed.join(", ")
            }
        ))),
        None => Ok(()),
    }
}

/// The `id` argument, checked before it touches the disk.
pub fn run_id(arguments: &Map<String, Value>) -> Result<lnk_common::id::RunId, Answer> {
    let Some(Value::String(text)) = arguments.get("id") else {
        return Err(Answer::refusal(
            "`id` is required: a run id as `start` or `list` gave it",
        ));
    };
    lnk_common::id::RunId::parse(text).map_err(|_| {
        Answer::refusal(format!(
            "`{}` is not a run id (12 to 32 characters of a-z and 0-9); `list` shows the runs",
            text.chars().take(64).collect::<String>()
        ))
    })
}

/// An optional non-negative integer argument.
pub fn count(arguments: &Map<String, Value>, key: &str) -> Result<Option<u64>, Answer> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| Answer::refusal(format!("`{key}` must be a non-negative integer"))),
    }
}

/// An optional boolean argument (false when absent).
pub fn flag(arguments: &Map<String, Value>, key: &str) -> Result<bool, Answer> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(value)) => Ok(*value),
        Some(_) => Err(Answer::refusal(format!("`{key}` must be true or false"))),
    }
}
