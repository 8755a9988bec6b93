//! JSON-RPC 2.0 messages as MCP sends them over stdio, one per line, and the MCP revisions
//! this server speaks.

use serde_json::{Map, Value, json};

/// Invalid JSON.
pub const PARSE_ERROR: i64 = -32700;
/// Not a valid JSON-RPC request.
pub const INVALID_REQUEST: i64 = -32600;
/// No such method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Bad parameters, or an unknown tool.
pub const INVALID_PARAMS: i64 = -32602;
/// The server failed.
pub const INTERNAL_ERROR: i64 = -32603;
/// The request's protocol version is not served (2026-07-28).
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// The request lacks a client capability it needs (2026-07-28): a `tasks/*` request that does
/// not declare the Tasks extension.
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;

/// The stateless revision, served per request.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The revisions reachable through the `initialize` handshake, oldest first.
pub const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The handshake revision answered when the client asks for one this server does not know.
pub const LATEST_HANDSHAKE_VERSION: &str = "2025-11-25";

/// `_meta` key of a 2026-07-28 request: its protocol version.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of a 2026-07-28 request: the client's capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of a 2026-07-28 result: who answered.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The Tasks extension's identifier (2026-07-28): in `server/discover`'s
/// `capabilities.extensions`, and in a request's client capabilities when the client takes a
/// task for an answer.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Whether a 2026-07-28 request's `_meta` declares the Tasks extension among the client's
/// capabilities (`extensions["io.modelcontextprotocol/tasks"]`, an object).
pub fn declares_tasks(meta: Option<&Map<String, Value>>) -> bool {
    meta.and_then(|meta| meta.get(META_CLIENT_CAPABILITIES))
        .and_then(|capabilities| capabilities.get("extensions"))
        .and_then(|extensions| extensions.get(TASKS_EXTENSION))
        .is_some_and(Value::is_object)
}

/// Whether a 2026-07-28 request's `_meta` declares the `roots` capability among the client's
/// capabilities (an object): the client answers `roots/list` asked in an
/// `InputRequiredResult`.
pub fn declares_roots(meta: Option<&Map<String, Value>>) -> bool {
    meta.and_then(|meta| meta.get(META_CLIENT_CAPABILITIES))
        .and_then(|capabilities| capabilities.get("roots"))
        .is_some_and(Value::is_object)
}

/// The revision a request is served at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Era {
    /// A handshake revision (one of [`HANDSHAKE_VERSIONS`]).
    Handshake(&'static str),
    /// The stateless 2026-07-28 revision.
    Modern,
}

impl Era {
    /// Whether tools have `outputSchema` and results `structuredContent` (from 2025-06-18).
    pub fn has_structured_output(&self) -> bool {
        match self {
            Era::Modern => true,
            Era::Handshake(v) => *v >= "2025-06-18",
        }
    }

    /// Whether progress notifications may carry a `message` (from 2025-03-26).
    pub fn has_progress_message(&self) -> bool {
        match self {
            Era::Modern => true,
            Era::Handshake(v) => *v >= "2025-03-26",
        }
    }
}

/// The handshake revision to answer `initialize` with: the client's when this server speaks
/// it, else the latest.
pub fn negotiate(requested: Option<&str>) -> &'static str {
    HANDSHAKE_VERSIONS
        .iter()
        .find(|v| Some(**v) == requested)
        .copied()
        .unwrap_or(LATEST_HANDSHAKE_VERSION)
}

/// A message from the client.
#[derive(Debug)]
pub enum Incoming {
    /// A request: it gets exactly one answer (unless cancelled).
    Request {
        /// Its id, a string or a number.
        id: Value,
        /// The method.
        method: String,
        /// Its params (an empty object when absent).
        params: Map<String, Value>,
    },
    /// A notification: no answer.
    Notification {
        /// The method.
        method: String,
        /// Its params (an empty object when absent).
        params: Map<String, Value>,
    },
    /// A response to a request of the server's (`roots/list`, `crate::project`).
    Response {
        /// The id of the request it answers (absent: none this server can match).
        id: Option<Value>,
        /// Its `result`, or its `error`.
        outcome: Result<Value, Value>,
    },
}

/// A JSON-RPC error to send back.
#[derive(Debug, Clone)]
pub struct RpcError {
    /// The id of the request it answers (null when it could not be read).
    pub id: Value,
    /// The error code.
    pub code: i64,
    /// What went wrong.
    pub message: String,
    /// More, for the client to act on.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error for request `id`.
    pub fn new(id: Value, code: i64, message: impl Into<String>) -> Self {
        Self {
            id,
            code,
            message: message.into(),
            data: None,
        }
    }

    /// The JSON-RPC line for it.
    pub fn to_message(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        json!({"jsonrpc": "2.0", "id": self.id, "error": error})
    }
}

/// Reads one line into a message.
pub fn parse(line: &[u8]) -> Result<Incoming, RpcError> {
    match serde_json::from_slice(line) {
        Ok(value) => parse_value(value, line),
        Err(e) => {
            // A lone surrogate (`"\ud83d"`: an emoji cut in half, as a JavaScript host may send
            // it) is valid JSON text that serde refuses; it is read as U+FFFD, as invalid UTF-8
            // is shown elsewhere, so the request is answered rather than left unanswered.
            if let Some(repaired) = lone_surrogates_replaced(line)
                && let Ok(value) = serde_json::from_slice(&repaired)
            {
                return parse_value(value, &repaired);
            }
            Err(RpcError::new(
                Value::Null,
                PARSE_ERROR,
                format!("not JSON: {}", lnk_common::Causes(&e)),
            ))
        }
    }
}

/// `line` with each `\uXXXX` escape of a lone surrogate (one not in a high-low pair) made
/// `\ufffd`; `None` when it has none.
fn lone_surrogates_replaced(line: &[u8]) -> Option<Vec<u8>> {
    let escape_at = |i: usize| -> Option<u32> {
        let hex = line.get(i..i + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let mut out = Vec::with_capacity(line.len());
    let (mut i, mut in_string, mut replaced) = (0, false, false);
    while i < line.len() {
        let byte = line[i];
        if !in_string {
            in_string = byte == b'"';
            out.push(byte);
            i += 1;
            continue;
        }
        match byte {
            b'"' => in_string = false,
            b'\\' => {
                if let Some(unit) = escape_at(i) {
                    let high = (0xd800..0xdc00).contains(&unit);
                    let paired =
                        high && escape_at(i + 6).is_some_and(|low| (0xdc00..0xe000).contains(&low));
                    if paired {
                        out.extend_from_slice(&line[i..i + 12]);
                        i += 12;
                    } else if (0xd800..0xe000).contains(&unit) {
                        out.extend_from_slice(b"\\ufffd");
                        replaced = true;
                        i += 6;
                    } else {
                        out.extend_from_slice(&line[i..i + 6]);
                        i += 6;
                    }
                    continue;
                }
                // Any other escape: its two bytes as they are.
                out.extend_from_slice(&line[i..(i + 2).min(line.len())]);
                i += 2;
                continue;
            }
            _ => {}
        }
        out.push(byte);
        i += 1;
    }
    replaced.then_some(out)
}

/// Reads a parsed message; `line` is the text it came from.
fn parse_value(value: Value, line: &[u8]) -> Result<Incoming, RpcError> {
    let Value::Object(mut message) = value else {
        let what = if value.is_array() {
            "batches are not supported; send one JSON-RPC object per line"
        } else {
            "a JSON-RPC message is a JSON object"
        };
        return Err(RpcError::new(Value::Null, INVALID_REQUEST, what));
    };
    let id = message.remove("id");
    if let Some(id) = &id
        && !(id.is_string() || id.is_number())
    {
        return Err(RpcError::new(
            Value::Null,
            INVALID_REQUEST,
            "a request id is a string or a number",
        ));
    }
    if id.as_ref().is_some_and(Value::is_f64) && integer_too_large(line) {
        return Err(RpcError::new(
            Value::Null,
            INVALID_REQUEST,
            "a request id that is a number must be an integer of at most 64 bits: a larger \
             one cannot be answered with the same id; send it as a string",
        ));
    }
    let id_or_null = id.clone().unwrap_or(Value::Null);
    if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(RpcError::new(
            id_or_null,
            INVALID_REQUEST,
            "`jsonrpc` must be \"2.0\"",
        ));
    }
    let method = match message.remove("method") {
        Some(Value::String(method)) => method,
        Some(_) => {
            return Err(RpcError::new(
                id_or_null,
                INVALID_REQUEST,
                "`method` must be a string",
            ));
        }
        None if message.contains_key("result") || message.contains_key("error") => {
            let outcome = match message.remove("result") {
                Some(result) => Ok(result),
                None => Err(message.remove("error").unwrap_or(Value::Null)),
            };
            return Ok(Incoming::Response { id, outcome });
        }
        None => return Err(RpcError::new(id_or_null, INVALID_REQUEST, "no `method`")),
    };
    let params = match message.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(params)) => params,
        // A notification gets no answer, not even an error: its bad params are dropped.
        Some(_) if id.is_none() => Map::new(),
        Some(_) => {
            return Err(RpcError::new(
                id_or_null,
                INVALID_PARAMS,
                "`params` must be an object",
            ));
        }
    };
    Ok(match id {
        Some(id) => Incoming::Request { id, method, params },
        None => Incoming::Notification { method, params },
    })
}

/// Whether the line's `id` is an integer too large for 64 bits, which the parser read as a
/// float: answering with it would change its value.
fn integer_too_large(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct RawId<'a> {
        #[serde(borrow)]
        id: &'a serde_json::value::RawValue,
    }
    serde_json::from_slice::<RawId<'_>>(line).is_ok_and(|raw| {
        let text = raw.id.get();
        !text.contains(['.', 'e', 'E'])
    })
}

/// A result line for request `id`, with what `era` asks every result to carry (2026-07-28:
/// `resultType`, `complete` unless the result says otherwise — a task says `task` — and who
/// answered).
pub fn result_message(id: &Value, era: &Era, mut result: Value) -> Value {
    if *era == Era::Modern
        && let Some(object) = result.as_object_mut()
    {
        object
            .entry("resultType")
            .or_insert_with(|| json!("complete"));
        object.insert("_meta".into(), json!({META_SERVER_INFO: server_info()}));
    }
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Who answers: this server's name, title and version.
pub fn server_info() -> Value {
    json!({"name": "lnk-link-run", "title": "Link Run", "version": env!("CARGO_PKG_VERSION")})
}

/// The longest piece of what a client sent that a message quotes back.
const QUOTED_CHARS: usize = 64;

/// What a client sent (a method, a tool name), cut short for a message: a 3 MiB name must
/// not come back 3 MiB long.
pub fn cut_short(text: &str) -> String {
    let text = crate::text::escaping::one_line(text);
    let mut chars = text.chars();
    let mut out: String = chars.by_ref().take(QUOTED_CHARS).collect();
    if chars.next().is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_is_read_as_a_replacement_character() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"a":"x\ud83d","b":"\udc00y","c":"\ud83d\ude00","d":"\\ud83d"}}"#;
        let Ok(Incoming::Request { id, params, .. }) = parse(line) else {
            panic!("a request with lone surrogates is read")
        };
        assert_eq!(id, json!(7));
        assert_eq!(params["a"], "x\u{fffd}");
        assert_eq!(params["b"], "\u{fffd}y");
        assert_eq!(params["c"], "😀");
        assert_eq!(params["d"], "\\ud83d");
        assert!(lone_surrogates_replaced(br#"{"a":"\ud83d\ude00 \\ud800"}"#).is_none());
        // Still not JSON: answered as before.
        let Err(refused) = parse(br#"{"a":"\ud83d"#) else {
            panic!("a cut line is refused")
        };
        assert_eq!(refused.code, PARSE_ERROR);
    }

    #[test]
    fn quotes_are_cut_short() {
        assert_eq!(cut_short("tools/call"), "tools/call");
        let long = "é".repeat(3 * 1024 * 1024);
        let cut = cut_short(&long);
        assert_eq!(cut.chars().count(), QUOTED_CHARS + 1);
        assert!(cut.ends_with('…'));
    }

    #[test]
    fn modern_results_say_they_are_complete_and_who_answered() {
        let line = result_message(&json!(3), &Era::Modern, json!({"tools": []}));
        assert_eq!(line["result"]["resultType"], "complete");
        assert_eq!(
            line["result"]["_meta"][META_SERVER_INFO]["name"],
            "lnk-link-run"
        );
        let old = result_message(&json!(3), &Era::Handshake("2025-06-18"), json!({}));
        assert_eq!(old, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    }

    #[test]
    fn a_task_keeps_its_result_type() {
        let line = result_message(&json!(4), &Era::Modern, json!({"resultType": "task"}));
        assert_eq!(line["result"]["resultType"], "task");
    }

    #[test]
    fn the_tasks_extension_is_declared_per_request() {
        let meta = |value: Value| match value {
            Value::Object(map) => map,
            _ => Map::new(),
        };
        let declared =
            meta(json!({META_CLIENT_CAPABILITIES: {"extensions": {TASKS_EXTENSION: {}}}}));
        assert!(declares_tasks(Some(&declared)));
        for not in [
            json!({META_CLIENT_CAPABILITIES: {}}),
            json!({META_CLIENT_CAPABILITIES: {"extensions": {}}}),
            json!({META_CLIENT_CAPABILITIES: {"extensions": {TASKS_EXTENSION: true}}}),
            json!({"extensions": {TASKS_EXTENSION: {}}}),
        ] {
            assert!(!declares_tasks(Some(&meta(not))));
        }
        assert!(!declares_tasks(None));
    }

    #[test]
    fn negotiates_handshake_versions() {
        assert_eq!(negotiate(Some("2024-11-05")), "2024-11-05");
        assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
        assert_eq!(negotiate(Some("2026-07-28")), "2025-11-25");
        assert_eq!(negotiate(Some("1999-01-01")), "2025-11-25");
        assert_eq!(negotiate(None), "2025-11-25");
    }

    #[test]
    fn structured_output_starts_with_2025_06_18() {
        assert!(!Era::Handshake("2024-11-05").has_structured_output());
        assert!(!Era::Handshake("2025-03-26").has_structured_output());
        assert!(Era::Handshake("2025-06-18").has_structured_output());
        assert!(Era::Modern.has_structured_output());
    }

    #[test]
    fn reads_requests_notifications_and_refuses_the_rest() {
        let request = parse(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
        assert!(matches!(request, Ok(Incoming::Request { ref method, .. }) if method == "ping"));
        let note = parse(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(matches!(note, Ok(Incoming::Notification { .. })));
        assert!(matches!(
            parse(b"nope"),
            Err(RpcError {
                code: PARSE_ERROR,
                ..
            })
        ));
        assert!(matches!(
            parse(b"[1]"),
            Err(RpcError {
                code: INVALID_REQUEST,
                ..
            })
        ));
        let null_id = parse(br#"{"jsonrpc":"2.0","id":null,"method":"x"}"#);
        assert!(matches!(
            null_id,
            Err(RpcError {
                code: INVALID_REQUEST,
                ..
            })
        ));
        let huge = parse(br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"x"}"#);
        assert!(matches!(
            huge,
            Err(RpcError {
                code: INVALID_REQUEST,
                ..
            })
        ));
        let fraction = parse(br#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#);
        assert!(matches!(fraction, Ok(Incoming::Request { ref id, .. }) if *id == json!(1.5)));
        let big = parse(br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"x"}"#);
        assert!(matches!(big, Ok(Incoming::Request { ref id, .. }) if id.is_u64()));
        let bad_params = parse(br#"{"jsonrpc":"2.0","id":"a","method":"x","params":[1]}"#);
        assert!(
            matches!(bad_params, Err(RpcError { code: INVALID_PARAMS, ref id, .. }) if id == "a")
        ); // The client's answers to the server's own requests, by id.
        let answer = parse(br#"{"jsonrpc":"2.0","id":"r1","result":{"roots":[]}}"#);
        assert!(matches!(
            answer,
            Ok(Incoming::Response { id: Some(ref id), outcome: Ok(ref result) })
                if id == "r1" && result["roots"] == json!([])
        ));
        let error = parse(br#"{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"no"}}"#);
        assert!(matches!(
            error,
            Ok(Incoming::Response { id: Some(ref id), outcome: Err(ref e) })
                if *id == json!(2) && e["message"] == "no"
        ));
    }
}
