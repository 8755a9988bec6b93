//! A client that declares MCP roots and gives them (`serve --files-from roots`): in the
//! handshake era it answers the server's `roots/list` request; in the 2026-07-28 era it
//! declares `roots` in each request's client capabilities and retries a call that was answered
//! `input_required` with its roots in `inputResponses`.
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::results::{modern_meta, ok};
use crate::serve::{ANSWER, Serve};

/// The word of the sandbox line that serve fills in with the files folder.
pub const FILES_WORD: &str = "{files}";

/// `path` as a `file://` URI, each byte outside the unreserved ones and `/` percent-encoded.
pub fn file_uri(path: &Path) -> String {
    let mut uri = String::from("file://");
    for &byte in path.as_os_str().as_encoded_bytes() {
        if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
            uri.push(char::from(byte));
        } else {
            uri.push_str(&format!("%{byte:02X}"));
        }
    }
    uri
}

/// A `ListRootsResult` of these URIs.
pub fn roots_result(uris: &[&str]) -> Value {
    let roots: Vec<Value> = uris.iter().map(|uri| json!({"uri": uri})).collect();
    json!({ "roots": roots })
}

/// `initialize` at `version` declaring the `roots` capability, then
/// `notifications/initialized`; returns the server's `roots/list` request, which must come.
pub fn initialize_with_roots(serve: &mut Serve, version: &str) -> Value {
    let result = ok(&serve.request(
        "initialize",
        json!({
            "protocolVersion": version,
            "capabilities": {"roots": {"listChanged": true}},
            "clientInfo": {"name": "lnk-tests", "version": "0"},
        }),
    ));
    assert_eq!(result["protocolVersion"], version, "{result}");
    serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    roots_request(serve, 0)
}

/// The `n`-th (from 0) `roots/list` request the server sent (failing when none comes).
pub fn roots_request(serve: &mut Serve, n: usize) -> Value {
    let deadline = Instant::now() + ANSWER;
    loop {
        let asked: Vec<&Value> = serve
            .inbox()
            .iter()
            .filter(|m| is_roots_request(m))
            .collect();
        if let Some(request) = asked.get(n) {
            return (*request).clone();
        }
        assert!(
            Instant::now() < deadline,
            "serve did not ask roots/list a {}. time; stderr:\n{}",
            n + 1,
            serve.stderr()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn is_roots_request(message: &Value) -> bool {
    message["method"] == "roots/list" && message.get("id").is_some()
}

/// Answers the server's request `request` with `result`.
pub fn answer(serve: &mut Serve, request: &Value, result: Value) {
    serve.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
}

/// A 2026-07-28 request's `_meta` that declares `roots` (and the Tasks extension, with
/// `tasks`).
pub fn modern_roots_meta(tasks: bool) -> Value {
    let mut meta = modern_meta();
    let mut capabilities = json!({"roots": {"listChanged": true}});
    if tasks {
        capabilities["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
    }
    meta["io.modelcontextprotocol/clientCapabilities"] = capabilities;
    meta
}

/// Sends a 2026-07-28 `tools/call` of `name` that declares roots, with `extra` merged into
/// its params (`inputResponses`, `_meta` keys of the call's own), and returns its response.
pub fn modern_call(serve: &mut Serve, name: &str, arguments: Value, extra: Value) -> Value {
    let id = serve.fresh_id();
    let mut params =
        json!({"name": name, "arguments": arguments, "_meta": modern_roots_meta(false)});
    for (key, value) in extra.as_object().into_iter().flatten() {
        if key == "_meta" {
            for (k, v) in value.as_object().into_iter().flatten() {
                params["_meta"][k] = v.clone();
            }
        } else {
            params[key] = value.clone();
        }
    }
    serve.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    serve.response(&json!(id), ANSWER)
}

/// A 2026-07-28 tool call as a client that gives roots makes it: when the answer asks for the
/// roots (`input_required`, the first call), the call is made again with `roots` in
/// `inputResponses`. Returns the final result.
pub fn modern_tool(serve: &mut Serve, name: &str, arguments: Value, roots: &[&str]) -> Value {
    let first = ok(&modern_call(serve, name, arguments.clone(), json!({})));
    if first["resultType"] != "input_required" {
        return first;
    }
    assert_eq!(
        first["inputRequests"],
        json!({"roots": {"method": "roots/list"}}),
        "{first}"
    );
    let responses = json!({"inputResponses": {"roots": roots_result(roots)}});
    ok(&modern_call(serve, name, arguments, responses))
}

/// Sends a 2026-07-28 request of `method` whose `_meta` declares roots (and the Tasks
/// extension, with `tasks`), and returns its whole response.
pub fn modern_request(serve: &mut Serve, method: &str, mut params: Value, tasks: bool) -> Value {
    let id = serve.fresh_id();
    params["_meta"] = modern_roots_meta(tasks);
    serve.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    serve.response(&json!(id), ANSWER)
}

/// The state folders of the projects under the state folder `state`, whose files folder is
/// named `name` (`<state>/projects/<name>-<digest>`).
pub fn project_states(state: &Path, name: &str) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(state.join("projects")) else {
        return Vec::new();
    };
    let prefix = format!("{name}-");
    let mut found: Vec<std::path::PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix(&prefix))
                .is_some_and(|digest| digest.len() == 32 && !digest.contains('-'))
        })
        .map(|e| e.path())
        .collect();
    found.sort();
    found
}
