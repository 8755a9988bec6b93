//! `serve`: reads requests from stdin, answers through the one stdout writer, runs each tool
//! call on a thread of its own, and shuts down in order on stdin's end or a signal.

use std::collections::HashMap;
use std::io::BufReader;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::lines::{self, Line};
use crate::protocol::{self, Era, Incoming, RpcError};
use crate::tools;
use crate::writer::Writer;
use crate::{background, call, foreground};

/// How long shutdown waits for the calls it killed to be reaped.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// How long shutdown waits for stdout to take what is queued.
const FLUSH_WAIT: Duration = Duration::from_secs(2);
/// The most tool calls one server runs at once; more are refused until some end, so a client
/// cannot make the server start threads without bound.
pub const MAX_CALLS: usize = 128;
/// How long a client may cache the tool list and the discovery result.
const CACHE_TTL_MS: u64 = 60_000;

/// One `serve` process: its configuration, its writer and its calls in flight.
pub struct Server {
    pub(crate) config: Config,
    pub(crate) writer: Writer,
    pub(crate) watchdog: crate::watchdog::Watchdog,
    /// The revision the `initialize` handshake chose, for requests without a modern envelope.
    handshake: Mutex<Option<&'static str>>,
    in_flight: Mutex<HashMap<String, Arc<call::CallControl>>>,
    /// Background runs whose lock was found free: finished for good (see `start`).
    pub(crate) finished_runs: Mutex<std::collections::HashSet<lnk_common::id::RunId>>,
    running: Mutex<usize>,
    ended: Condvar,
    shutting_down: AtomicBool,
}

impl Server {
    /// A server that writes through `writer`.
    pub fn new(config: Config, writer: Writer, watchdog: crate::watchdog::Watchdog) -> Arc<Self> {
        Arc::new(Self {
            config,
            writer,
            watchdog,
            handshake: Mutex::new(None),
            in_flight: Mutex::new(HashMap::new()),
            finished_runs: Mutex::new(std::collections::HashSet::new()),
            running: Mutex::new(0),
            ended: Condvar::new(),
            shutting_down: AtomicBool::new(false),
        })
    }

    /// Serves stdin until it ends, then shuts down.
    pub fn serve_stdin(self: &Arc<Self>) {
        let stdin = std::io::stdin();
        let mut reader = BufReader::with_capacity(64 * 1024, stdin.lock());
        let mut buf = Vec::new();
        let mut first = true;
        loop {
            match lines::read_line(&mut reader, &mut buf, lines::MAX_LINE) {
                Ok(Line::Line) => {
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
        self.shutting_down.store(true, Ordering::SeqCst);
        // Answers that find no room are dropped from now on, so no call thread waits on a
        // client that does not read.
        self.writer.close();
        for control in lock(&self.in_flight).values() {
            control.cancel();
        }
        let running = lock(&self.running);
        let (running, _) = self
            .ended
            .wait_timeout_while(running, SHUTDOWN_WAIT, |n| *n > 0)
            .unwrap_or_else(PoisonError::into_inner);
        if *running > 0 {
            tracing::warn!(calls = *running, "calls still ending at shutdown");
        }
        drop(running);
        self.writer.flush(FLUSH_WAIT);
    }

    fn handle_line(self: &Arc<Self>, line: &[u8]) {
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
            Ok(Incoming::Response) => {}
            Err(err) => self.writer.send(&err.to_message()),
        }
    }

    fn handle_notification(&self, method: &str, params: &Map<String, Value>) {
        match method {
            "notifications/cancelled" => {
                if let Some(id) = params.get("requestId")
                    && let Some(control) = lock(&self.in_flight).get(&id_key(id))
                {
                    control.cancel();
                }
            }
            "notifications/initialized" => {}
            other => tracing::debug!(method = other, "notification ignored"),
        }
    }

    fn handle_request(
        self: &Arc<Self>,
        id: &Value,
        method: &str,
        params: Map<String, Value>,
    ) -> Result<(), RpcError> {
        if lock(&self.in_flight).contains_key(&id_key(id)) {
            return Err(RpcError::new(
                id.clone(),
                protocol::INVALID_REQUEST,
                CallRefused::DuplicateId.to_string(),
            ));
        }
        let era = self.era_of(id, method, &params)?;
        let result = match method {
            "initialize" => self.initialize(&params),
            "ping" if era != Era::Modern => json!({}),
            "server/discover" => self.discover(),
            "tools/list" => {
                let mut definitions = tools::definitions(&self.config, &era);
                definitions.extend(background::definitions(&self.config, &era));
                let mut result = json!({"tools": definitions});
                if era == Era::Modern {
                    result["ttlMs"] = json!(CACHE_TTL_MS);
                    result["cacheScope"] = json!("private");
                }
                result
            }
            "tools/call" => return self.tools_call(id, params, era),
            _ => {
                return Err(RpcError::new(
                    id.clone(),
                    protocol::METHOD_NOT_FOUND,
                    format!("no method `{method}`"),
                ));
            }
        };
        self.answer(id, &era, result);
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
            let mut err = RpcError::new(
                id.clone(),
                protocol::UNSUPPORTED_PROTOCOL_VERSION,
                format!("protocol version {version} is not supported"),
            );
            err.data = Some(json!({"supported": [protocol::MODERN_VERSION], "requested": version}));
            return Err(err);
        }
        if !meta.is_some_and(|m| {
            m.get(protocol::META_CLIENT_CAPABILITIES)
                .is_some_and(Value::is_object)
        }) {
            return Err(RpcError::new(
                id.clone(),
                protocol::INVALID_PARAMS,
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
        *lock(&self.handshake) = Some(version);
        json!({
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": false}},
            "serverInfo": server_info(),
            "instructions": instructions(),
        })
    }

    fn discover(&self) -> Value {
        json!({
            "supportedVersions": [protocol::MODERN_VERSION],
            "capabilities": {"tools": {"listChanged": false}},
            "instructions": instructions(),
            "ttlMs": CACHE_TTL_MS,
            "cacheScope": "private",
        })
    }

    fn tools_call(
        self: &Arc<Self>,
        id: &Value,
        mut params: Map<String, Value>,
        era: Era,
    ) -> Result<(), RpcError> {
        let invalid =
            |message: String| RpcError::new(id.clone(), protocol::INVALID_PARAMS, message);
        let name = match params.get("name") {
            Some(Value::String(name)) => name.clone(),
            _ => return Err(invalid("tools/call needs `name`, a string".into())),
        };
        let arguments = match params.remove("arguments") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(arguments)) => arguments,
            Some(_) => return Err(invalid("`arguments` must be an object".into())),
        };
        let progress = params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_number())
            .cloned();
        let meta = match params.remove("_meta") {
            Some(Value::Object(meta)) => Some(meta),
            _ => None,
        };
        match name.as_str() {
            tools::COMMAND => {
                foreground::start(self, id.clone(), era, &arguments, progress);
                Ok(())
            }
            name if self.config.background.is_some() && background::TOOLS.contains(&name) => {
                self.background_call(id, name, arguments, meta, era)
            }
            other => {
                let mut names = vec![tools::COMMAND];
                if self.config.background.is_some() {
                    names.extend(background::TOOLS);
                }
                Err(invalid(format!(
                    "unknown tool `{other}`; this server's tools: {}",
                    names.join(", ")
                )))
            }
        }
    }

    /// Runs a background tool on a thread of its own (a start may wait for `start.lock`, a stop
    /// for the run's end) and answers, unless the call was cancelled meanwhile.
    fn background_call(
        self: &Arc<Self>,
        id: &Value,
        name: &str,
        arguments: Map<String, Value>,
        meta: Option<Map<String, Value>>,
        era: Era,
    ) -> Result<(), RpcError> {
        let control = match self.call_started(id) {
            Ok(control) => control,
            Err(CallRefused::DuplicateId) => {
                return Err(RpcError::new(
                    id.clone(),
                    protocol::INVALID_REQUEST,
                    CallRefused::DuplicateId.to_string(),
                ));
            }
            Err(refused) => {
                self.answer(id, &era, refusal_result(&refused.to_string()));
                return Ok(());
            }
        };
        let server = Arc::clone(self);
        let thread_id = id.clone();
        let name = name.to_owned();
        let spawned = std::thread::Builder::new()
            .name(format!("{name} {id}"))
            .spawn(move || {
                let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    background::call(&server, &name, &arguments, meta.as_ref(), &era)
                }))
                .unwrap_or_else(|_| {
                    background::Answer::refusal(format!(
                        "`{name}` failed inside the server (a bug; its log says where)"
                    ))
                });
                let mut result = json!({
                    "content": [{"type": "text", "text": answer.text}],
                    "isError": answer.is_error,
                });
                if era.has_structured_output()
                    && let Some(structured) = answer.structured
                {
                    result["structuredContent"] = structured;
                }
                server.forget(&thread_id);
                if !control.is_cancelled() {
                    server.answer(&thread_id, &era, result);
                }
                server.count_ended();
            });
        spawned.map(drop).map_err(|err| {
            self.forget(id);
            self.count_ended();
            RpcError::new(
                id.clone(),
                protocol::INTERNAL_ERROR,
                format!("no thread for the call: {err}"),
            )
        })
    }

    /// Sends a result, with what the revision asks every result to carry.
    pub(crate) fn answer(&self, id: &Value, era: &Era, mut result: Value) {
        if *era == Era::Modern
            && let Some(object) = result.as_object_mut()
        {
            object.insert("resultType".into(), json!("complete"));
            object.insert(
                "_meta".into(),
                json!({protocol::META_SERVER_INFO: server_info()}),
            );
        }
        self.writer.send(&protocol::result_message(id, result));
    }

    /// Registers a call in flight, or says why it may not start. The count of running calls
    /// goes up until [`Server::call_ended`].
    pub(crate) fn call_started(&self, id: &Value) -> Result<Arc<call::CallControl>, CallRefused> {
        if self.shutting_down.load(Ordering::SeqCst) {
            return Err(CallRefused::ShuttingDown);
        }
        let control = call::CallControl::new().map_err(CallRefused::NoEventfd)?;
        let control = Arc::new(control);
        let mut in_flight = lock(&self.in_flight);
        let key = id_key(id);
        if in_flight.contains_key(&key) {
            return Err(CallRefused::DuplicateId);
        }
        self.count_started()?;
        in_flight.insert(key, control.clone());
        Ok(control)
    }

    /// Counts a call that runs on a thread of its own, within [`MAX_CALLS`].
    fn count_started(&self) -> Result<(), CallRefused> {
        let mut running = lock(&self.running);
        if *running >= MAX_CALLS {
            return Err(CallRefused::TooMany);
        }
        *running += 1;
        Ok(())
    }

    /// Forgets a call's id: it is no longer in flight (its answer may follow).
    pub(crate) fn forget(&self, id: &Value) {
        lock(&self.in_flight).remove(&id_key(id));
    }

    /// Counts a call's thread as ended.
    pub(crate) fn count_ended(&self) {
        let mut running = lock(&self.running);
        *running = running.saturating_sub(1);
        self.ended.notify_all();
    }
}

/// Why a call could not start.
#[derive(Debug, thiserror::Error)]
pub enum CallRefused {
    /// Shutdown has begun.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// Another request with this id is in flight.
    #[error("a request with this id is already in flight")]
    DuplicateId,
    /// [`MAX_CALLS`] calls are running.
    #[error(
        "{MAX_CALLS} calls are running, the most this server runs at once; wait for some to end"
    )]
    TooMany,
    /// No eventfd for the call's wake-ups.
    #[error("the call could not be set up: {0}")]
    NoEventfd(std::io::Error),
}

/// A request id as a map key: its JSON text, so `1` and `"1"` stay apart.
fn id_key(id: &Value) -> String {
    id.to_string()
}

fn server_info() -> Value {
    json!({"name": "lnk-link-run", "title": "Link Run", "version": env!("CARGO_PKG_VERSION")})
}

fn instructions() -> &'static str {
    "Link Run runs programs for you in a sandbox. Call `command` with a program from its list; \
     its description gives the limits in force. With background runs, `start` runs a program \
     that outlives the call; `list`, `read` and `stop` follow it."
}

/// A tool result that refuses the call with `text`.
pub(crate) fn refusal_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

/// Locks a mutex; a panic elsewhere while it was held leaves data that is still consistent
/// here (plain maps and counters), so the lock is taken anyway.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
