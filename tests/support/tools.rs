//! The background tools as the tests call them: `start` (with the tests' thread in `_meta`),
//! `list`, `read` and `stop`, each checked for the shape of its answer.
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::results::{is_error, structured, text};
use crate::serve::{ANSWER, Serve};

/// The conversation the tests' starts name.
pub const THREAD: &str = "th-tests";

/// How long a tool that must answer promptly (even facing a hostile files folder) may take.
pub const PROMPT: Duration = Duration::from_secs(10);

/// A start's `_meta`: the tests' thread, and the hops if given.
pub fn meta(hops: Option<u32>) -> Value {
    let mut meta = json!({"link.local/thread": THREAD});
    if let Some(hops) = hops {
        meta["link.local/hops"] = json!(hops);
    }
    meta
}

/// Sends a `tools/call` of `name` and returns its request id without waiting.
pub fn send_tool(serve: &mut Serve, name: &str, arguments: Value, meta: Option<Value>) -> i64 {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Some(meta) = meta {
        params["_meta"] = meta;
    }
    serve.send_request("tools/call", params)
}

/// Calls a tool and returns its result (a refusal included), failing on a JSON-RPC error or
/// when no answer comes `within`.
pub fn tool_within(
    serve: &mut Serve,
    name: &str,
    arguments: Value,
    meta: Option<Value>,
    within: Duration,
) -> Value {
    let id = send_tool(serve, name, arguments, meta);
    serve.call_result(id, within)
}

/// Calls a tool and returns its result.
pub fn tool(serve: &mut Serve, name: &str, arguments: Value, meta: Option<Value>) -> Value {
    tool_within(serve, name, arguments, meta, ANSWER)
}

/// The id of a successful `start`, after checking its structured value.
pub fn started(result: &Value) -> String {
    assert!(!is_error(result), "start was refused: {result}");
    let value = structured(result);
    let id = value["id"]
        .as_str()
        .unwrap_or_else(|| panic!("start answers an id: {result}"))
        .to_owned();
    assert!(
        (12..=32).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
        "ids are 12 to 32 characters of [a-z0-9]: {id:?}"
    );
    assert_eq!(value["output"], format!("background/{id}.out"), "{result}");
    id
}

/// Starts a background run with the tests' thread and returns its id.
pub fn start(serve: &mut Serve, arguments: Value) -> String {
    started(&tool(serve, "start", arguments, Some(meta(None))))
}

/// `lnk-test-procs <role> <marker> <secs>` as `start`'s arguments.
pub fn procs_args(role: &str, mark: &str, secs: u32) -> Value {
    json!({"program": "lnk-test-procs", "args": [role, mark, secs.to_string()]})
}

/// The runs `list` shows, newest first.
pub fn list(serve: &mut Serve) -> Vec<Value> {
    list_within(serve, ANSWER)
}

/// Every run `list` shows, page after page (each page failing unless it answers `within`).
pub fn list_within(serve: &mut Serve, within: Duration) -> Vec<Value> {
    let mut runs = Vec::new();
    let mut arguments = json!({"limit": 200});
    loop {
        let result = tool_within(serve, "list", arguments.clone(), None, within);
        assert!(!is_error(&result), "list was refused: {result}");
        let page = structured(&result);
        runs.extend(
            page["runs"]
                .as_array()
                .unwrap_or_else(|| panic!("list answers runs: {result}"))
                .iter()
                .cloned(),
        );
        match page["next"].as_str() {
            Some(next) => arguments["before"] = json!(next),
            None => return runs,
        }
    }
}

/// The run `id` as `list` shows it.
pub fn listed(serve: &mut Serve, id: &str) -> Value {
    let runs = list(serve);
    runs.iter()
        .find(|r| r["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} is not listed: {runs:#?}"))
}

/// Polls `list` until the run `id` is no longer `running`, and returns it.
pub fn wait_ended(serve: &mut Serve, id: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let run = listed(serve, id);
        if run["state"] != "running" {
            return run;
        }
        assert!(
            Instant::now() < deadline,
            "{id} still running {within:?} later: {run}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `read`'s result.
pub fn read(serve: &mut Serve, arguments: Value) -> Value {
    tool_within(serve, "read", arguments, None, PROMPT)
}

/// A successful `read`: its bytes and its structured value.
pub fn read_ok(serve: &mut Serve, arguments: Value) -> (String, Value) {
    let result = read(serve, arguments);
    assert!(!is_error(&result), "read was refused: {result}");
    let (text, value) = (text(&result), structured(&result).clone());
    // Hosts that hand the model only the structured value must get the bytes there too. The
    // text adds, after them, only a line that says which bytes could not be written (a full
    // files folder), which the structured value says in its figures.
    let bytes = value["text"].as_str().unwrap_or_default();
    if text != bytes {
        let note = text
            .strip_prefix(bytes)
            .map(|rest| {
                rest.strip_prefix('\n')
                    .filter(|_| !bytes.ends_with('\n'))
                    .unwrap_or(rest)
            })
            .unwrap_or_else(|| {
                panic!("read's text does not begin with its structured text: {result}")
            });
        assert!(
            note.starts_with('[') && note.ends_with("]\n") && note.contains("could not be written"),
            "read's text adds more than the note on unwritten bytes: {note:?}"
        );
    }
    (text, value)
}

/// `stop`'s result, which must come within the 5 s it may wait plus a margin.
pub fn stop(serve: &mut Serve, id: &str) -> Value {
    tool_within(serve, "stop", json!({"id": id}), None, PROMPT)
}

/// The run a successful `stop` answers (as `list` shows it).
pub fn stopped_run(result: &Value) -> Value {
    assert!(!is_error(result), "stop was refused: {result}");
    let value = structured(result);
    // The run itself, or the run under a key of its own.
    value.get("run").unwrap_or(value).clone()
}

/// Whether a value is an RFC 3339 UTC time such as `2025-01-02T03:04:05.678Z`.
pub fn is_rfc3339(value: &Value) -> bool {
    let Some(s) = value.as_str() else {
        return false;
    };
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && (s.ends_with('Z') || s.ends_with("+00:00"))
}
