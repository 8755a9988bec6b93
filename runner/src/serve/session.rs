//! `serve`: reads requests from stdin, answers the protocol's own methods, hands each tool
//! call to [`dispatch`](crate::serve::dispatch), and shuts down in order on stdin's end or a signal.

use std::io::BufReader;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::mcp::lines::{self, Line};
use crate::mcp::protocol::{self, Era, Incoming, RpcError};
use crate::mcp::stdout::Writer;
use crate::project::Before;
use crate::serve::dispatch::{ToolCall, dispatch};
use crate::serve::in_flight::{CallRefused, Calls};
use crate::sync::lock;
use crate::tool_call::context::Toolbox;
use crate::tools::{self, Tool};

/// How long shutdown waits for the calls it killed to be reaped.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// How long shutdown waits for stdout to take what is queued.
const FLUSH_WAIT: Duration = Duration::from_secs(2);
/// The `_meta` keys a tool call uses: its progress token, and what `start` reads.
const META_KEPT: [&str; 3] = [
    "progressToken",
    crate::background::META_THREAD,
    crate::background::META_HOPS,
];
/// How long a client may cache the tool list and the discovery result.
const CACHE_TTL_MS: u64 = 60_000;

/// One `serve` process: what its calls use, its calls in flight, and its writer.
pub struct Server {
    toolbox: Arc<Toolbox>,
    calls: Arc<Calls>,
    writer: Writer,
    /// The revision the `initialize` handshake chose, for requests without a modern envelope.
    handshake: Mutex<Option<&'static str>>,
}

impl Server {
    /// A server whose calls use `toolbox` and whose answers go through `writer`.
    pub fn new(toolbox: Toolbox, writer: Writer) -> Arc<Self> {
        Arc::new(Self {
            toolbox: Arc::new(toolbox),
            calls: Calls::new(),
            writer,
            handshake: Mutex::new(None),
        })
    }

    /// Serves stdin until it ends, then shuts down.
    pub fn serve_stdin(&self) {
        let stdin = std::io::stdin();
        let mut reader = BufReader::with_capacity(64 * 1024, stdin.lock());
        let mut buf = Vec::new();
        let mut first = true;
        loop {
            match lines::read_line(&mut reader, &mut buf, lines::MAX_LINE) {
                Ok(Line::Whole) => {
                    // A byte order mark some clients write before their first line.
                    let line = match buf.strip_prefix(b"\xEF\xBB\xBF") {
                        Some(rest) if first => rest,
                        _ => &buf[..],
                    };
                    first = false;
                    self.handle_line(line);
                }
                Ok(Line::TooLong) => self.writer.send(
                    &RpcError::new(
                        Value::Null,
                        protocol::INVALID_REQUEST,
                        format!("line longer than {} bytes, skipped", lines::MAX_LINE),
                    )
                    .to_message(),
                ),
                Ok(Line::End) => break,
                Err(err) => {
                    tracing::warn!(%err, "reading stdin failed; shutting down");
                    break;
                }
            }
        }
        self.shutdown();
    }

    /// Kills the calls in flight and waits (boundedly) for them and for stdout.
    pub fn shutdown(&self) {
        // Answers that find no room are dropped from now on, so no call thread waits on a
        // client that does not read.
        self.writer.close();
        let running = self.calls.shut_down(SHUTDOWN_WAIT);
        if running > 0 {
            tracing::warn!(calls = running, "calls still ending at shutdown");
        }
        self.writer.flush(FLUSH_WAIT);
    }

    fn handle_line(&self, line: &[u8]) {
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match protocol::parse(line) {
            Ok(Incoming::Request { id, method, params }) => {
                if let Err(err) = self.handle_request(&id, &method, params) {
                    self.writer.send(&err.to_message());
                }
            }
            Ok(Incoming::Notification { method, params }) => {
                self.handle_notification(&method, &params)
            }
            Ok(Incoming::Response { id, outcome }) => {
                if let Some(id) = id {
                    self.toolbox.projects.response(&id, outcome.as_ref());
                }
            }
            Err(err) => self.writer.send(&err.to_message()),
        }
    }

    fn handle_notification(&self, method: &str, params: &Map<String, Value>) {
        match method {
            "notifications/cancelled" => {
                if let Some(id) = params.get("requestId") {
                    self.calls.cancel(id);
                }
            }
            "notifications/initialized" => self.toolbox.projects.initialized(&self.writer),
            "notifications/roots/list_changed" => self.toolbox.projects.list_changed(&self.writer),
            other => tracing::debug!(method = protocol::cut_short(other), "notification ignored"),
        }
    }

    fn handle_request(
        &self,
        id: &Value,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<(), RpcError> {
        if self.calls.is_in_flight(id) {
            return Err(RpcError::new(
                id.clone(),
                protocol::INVALID_REQUEST,
                CallRefused::DuplicateId.to_string(),
            ));
        }
        let era = self.era_of(id, method, &params)?;
        let config = self.toolbox.config();
        let result = match method {
            "initialize" => self.initialize(&params),
            "ping" if era != Era::Modern => json!({}),
            "server/discover" => discover(config),
            "tools/list" => {
                let mut result = json!({"tools": tools::definitions(config, &era)});
                if era == Era::Modern {
                    result["ttlMs"] = json!(CACHE_TTL_MS);
                    result["cacheScope"] = json!("private");
                }
                result
            }
            "tools/call" => {
                let (call, asked) = tool_call(id, params, era.clone(), config)?;
                let before = self.toolbox.projects.before_call(
                    &call.era,
                    asked.declares_roots,
                    asked.input_responses.as_ref(),
                    &self.writer,
                );
                match before {
                    Before::Run => {
                        dispatch(&self.toolbox, &self.calls, &self.writer, call);
                        return Ok(());
                    }
                    // The client's roots are asked first; its retry carries them.
                    Before::InputRequired(question) => question,
                    Before::Malformed(why) => return Err(invalid_params(id, why)),
                }
            }
            "tasks/get" | "tasks/cancel" | "tasks/update"
                if era == Era::Modern && config.background.is_some() =>
            {
                let _span = tracing::info_span!(
                    "task",
                    id = %protocol::cut_short(&id.to_string()),
                    method
                )
                .entered();
                // A task is a run of this session's project: before the project is known,
                // none is.
                let Some(project) = self.toolbox.projects.ready() else {
                    return Err(invalid_params(
                        id,
                        "no task of this session's project: the project's folder is not known \
                         yet (it is chosen at the first tool call)",
                    ));
                };
                let Some(background) = &project.background else {
                    return Err(invalid_params(id, "no background runs"));
                };
                crate::background::task_method(id, method, &params, &project, background)?
            }
            _ => {
                return Err(RpcError::new(
                    id.clone(),
                    protocol::METHOD_NOT_FOUND,
                    format!("no method `{}`", protocol::cut_short(method)),
                ));
            }
        };
        self.writer
            .send(&protocol::result_message(id, &era, result));
        Ok(())
    }

    /// The revision of a request: a modern envelope in `_meta` makes it 2026-07-28; anything
    /// else is served at the handshake's revision (the latest one without a handshake).
    fn era_of(
        &self,
        id: &Value,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<Era, RpcError> {
        let meta = params.get("_meta").and_then(Value::as_object);
        let version = meta.and_then(|m| m.get(protocol::META_PROTOCOL_VERSION));
        let Some(version) = version.filter(|_| method != "initialize") else {
            let handshake = *lock(&self.handshake);
            return Ok(Era::Handshake(
                handshake.unwrap_or(protocol::LATEST_HANDSHAKE_VERSION),
            ));
        };
        if version.as_str() != Some(protocol::MODERN_VERSION) {
            // The version as sent: a string as it is, anything else as its JSON text.
            let shown = protocol::cut_short(
                &version
                    .as_str()
                    .map_or_else(|| version.to_string(), str::to_owned),
            );
            let mut err = RpcError::new(
                id.clone(),
                protocol::UNSUPPORTED_PROTOCOL_VERSION,
                format!("protocol version {shown} is not supported"),
            );
            err.data = Some(json!({"supported": [protocol::MODERN_VERSION], "requested": shown}));
            return Err(err);
        }
        if !meta.is_some_and(|m| {
            m.get(protocol::META_CLIENT_CAPABILITIES)
                .is_some_and(Value::is_object)
        }) {
            return Err(invalid_params(
                id,
                format!(
                    "params._meta is missing {}",
                    protocol::META_CLIENT_CAPABILITIES
                ),
            ));
        }
        Ok(Era::Modern)
    }

    fn initialize(&self, params: &Map<String, Value>) -> Value {
        let requested = params.get("protocolVersion").and_then(Value::as_str);
        let version = protocol::negotiate(requested);
        self.toolbox.projects.initialize(params.get("capabilities"));
        *lock(&self.handshake) = Some(version);
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": protocol::server_info(),
            "instructions": INSTRUCTIONS,
        })
    }
}

/// What a `tools/call` says of the client's roots (2026-07-28).
struct RootsAsked {
    /// Whether the request declares the `roots` capability.
    declares_roots: bool,
    /// Its `inputResponses`: the answers to what an `InputRequiredResult` asked.
    input_responses: Option<Value>,
}

/// A `tools/call` request, read: its tool (one this server offers), arguments and `_meta`,
/// and what it says of the client's roots.
fn tool_call(
    id: &Value,
    mut params: Map<String, Value>,
    era: Era,
    config: &Config,
) -> Result<(ToolCall, RootsAsked), RpcError> {
    let tool = match params.remove("name") {
        Some(Value::String(name)) => {
            Tool::parse(&name, config).map_err(|e| invalid_params(id, e))?
        }
        _ => return Err(invalid_params(id, "tools/call needs `name`, a string")),
    };
    let arguments = match params.remove("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments,
        Some(_) => return Err(invalid_params(id, "`arguments` must be an object")),
    };
    let tasks = era == Era::Modern
        && protocol::declares_tasks(params.get("_meta").and_then(Value::as_object));
    let asked = RootsAsked {
        declares_roots: era == Era::Modern
            && protocol::declares_roots(params.get("_meta").and_then(Value::as_object)),
        input_responses: params
            .remove("inputResponses")
            .filter(|_| era == Era::Modern),
    };
    // Only what a call uses of its `_meta` is kept for its life: a client may send megabytes
    // there, and 128 calls would hold them all.
    let meta = match params.remove("_meta") {
        Some(Value::Object(mut meta)) => Some(
            META_KEPT
                .iter()
                .filter_map(|key| meta.remove(*key).map(|value| ((*key).to_owned(), value)))
                .collect::<Map<String, Value>>(),
        ),
        _ => None,
    };
    if let Some(meta) = &meta {
        kept_meta_is_bounded(meta).map_err(|problem| invalid_params(id, problem))?;
    }
    let call = ToolCall {
        id: id.clone(),
        era,
        tool,
        arguments,
        meta,
        tasks,
    };
    Ok((call, asked))
}

/// The most bytes a kept `_meta` string may have: a progress token is echoed in every
/// progress notification, a thread is stored, signed and told; neither needs more.
const META_STRING_BYTES: usize = 256;

/// Whether what a call keeps of its `_meta` is small and can be echoed exactly: strings of at
/// most [`META_STRING_BYTES`], and a numeric progress token an integer of 64 bits (the parser
/// reads a larger one as a float, which would come back as another value).
fn kept_meta_is_bounded(meta: &Map<String, Value>) -> Result<(), String> {
    for (key, value) in meta {
        match value {
            Value::String(text) if text.len() > META_STRING_BYTES => {
                return Err(format!(
                    "`_meta[\"{key}\"]` is {} bytes long: at most {META_STRING_BYTES}",
                    text.len()
                ));
            }
            Value::Number(number)
                if key == "progressToken" && !(number.is_i64() || number.is_u64()) =>
            {
                return Err(
                    "`_meta.progressToken` must be a string or an integer of 64 bits".to_owned(),
                );
            }
            // MCP's progress token is a string or a number; `null` stands for none.
            Value::Object(_) | Value::Array(_) | Value::Bool(_) if key == "progressToken" => {
                return Err("`_meta.progressToken` must be a string or a number".to_owned());
            }
            _ => {}
        }
    }
    Ok(())
}

fn invalid_params(id: &Value, message: impl Into<String>) -> RpcError {
    RpcError::new(id.clone(), protocol::INVALID_PARAMS, message)
}

/// The discovery result: with background runs, the Tasks extension is declared, so that a
/// client that speaks it may be answered a task for a `start`.
fn discover(config: &Config) -> Value {
    let mut capabilities = json!({"tools": {"listChanged": false}});
    if config.background.is_some() {
        capabilities["extensions"] = json!({protocol::TASKS_EXTENSION: {}});
    }
    json!({
        "supportedVersions": [protocol::MODERN_VERSION],
        "capabilities": capabilities,
        "instructions": INSTRUCTIONS,
        "ttlMs": CACHE_TTL_MS,
        "cacheScope": "private",
    })
}

const INSTRUCTIONS: &str = "Link Run runs programs for you in a sandbox. Call `command` with a \
     program from its list; its description gives the limits in force. With background runs, \
     `start` runs a program that outlives the call (a build, a test suite, a server); `list`, \
     `read` and `stop` follow it, and a host that follows MCP tasks is told when it ends.";

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn config() -> Config {
        Config {
            programs_path: "/usr/bin".into(),
            timeout: Duration::from_secs(1),
            ..crate::testing::config("/nonexistent/files", &["/usr/bin/bwrap"])
        }
    }

    #[test]
    fn a_call_keeps_only_the_meta_it_uses() {
        let params = json!({
            "name": "command",
            "arguments": {"program": "true"},
            "_meta": {
                "progressToken": "p1",
                "link.local/thread": "th",
                "link.local/hops": 1,
                "junk": vec![0; 10_000],
            },
        });
        let Value::Object(params) = params else {
            panic!("an object")
        };
        let (call, _) = tool_call(&json!(1), params, Era::Modern, &config())
            .unwrap_or_else(|e| panic!("{}", e.message));
        let meta = call.meta.unwrap_or_default();
        let mut keys: Vec<&str> = meta.keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["link.local/hops", "link.local/thread", "progressToken"]
        );
        assert_eq!(call.tool, Tool::Command);
    }

    #[test]
    fn a_long_or_inexact_meta_value_is_refused() {
        let call = |meta: Value| {
            let Value::Object(params) =
                json!({"name": "command", "arguments": {"program": "true"}, "_meta": meta})
            else {
                panic!("an object")
            };
            tool_call(&json!(1), params, Era::Modern, &config())
        };
        for meta in [
            json!({"progressToken": "p".repeat(15 << 20)}),
            json!({"progressToken": "p".repeat(257)}),
            json!({"link.local/thread": "t".repeat(257)}),
            json!({"progressToken": 1.5}),
            json!({"progressToken": 1.180_591_620_717_411_3e21}),
            json!({"progressToken": {"a": 1}}),
            json!({"progressToken": [1]}),
            json!({"progressToken": true}),
        ] {
            let refused = call(meta.clone()).err().unwrap_or_else(|| {
                panic!(
                    "{} is refused",
                    crate::mcp::protocol::cut_short(&meta.to_string())
                )
            });
            assert_eq!(refused.code, protocol::INVALID_PARAMS);
            assert!(refused.message.len() < 100, "{}", refused.message);
        }
        for meta in [
            json!({"progressToken": "p".repeat(256)}),
            json!({"progressToken": u64::MAX}),
            json!({"progressToken": -7}),
            json!({"progressToken": null}),
            json!({"link.local/thread": "t".repeat(256), "junk": "j".repeat(1 << 20)}),
        ] {
            assert!(call(meta).is_ok());
        }
    }
}
