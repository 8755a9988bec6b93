//! A running `lnk-link-run serve` and the MCP client the tests speak to it with: it reads every
//! stdout line as JSON-RPC on a thread of its own ([`crate::setup`] starts one). Dropping a
//! [`Serve`] SIGKILLs and reaps the server, so no test leaves one running.
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bins::link_run;
use crate::results::{modern_meta, ok};

/// How long a test waits for an answer that should come at once (generous: machines are busy).
pub const ANSWER: Duration = Duration::from_secs(30);

/// How the client speaks to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` at this version first, then plain requests.
    Legacy(&'static str),
    /// No handshake; each request carries the 2026-07-28 `_meta` keys.
    Modern,
}

thread_local! {
    /// Whether the serves this test thread starts start their calls cold ([`cold_starts`]).
    static COLD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a test body with every `serve` it starts asked for cold starts (`LNK_COLD_START=1`):
/// the macros that run a body both ways use it, so that one body tests warm calls (the default)
/// and cold ones.
pub fn cold_starts<R>(body: impl FnOnce() -> R) -> R {
    COLD.with(|cold| cold.set(true));
    let result = body();
    COLD.with(|cold| cold.set(false));
    result
}

/// Whether the serves this test thread starts now start their calls cold.
pub fn is_cold() -> bool {
    COLD.with(|cold| cold.get())
}

/// A running `serve` and a JSON-RPC client of it.
pub struct Serve {
    child: Child,
    stdin: Option<ChildStdin>,
    rx: Receiver<Value>,
    /// Every message read from stdout so far, in order.
    inbox: Vec<Value>,
    /// Lines of stdout that are not JSON-RPC 2.0 messages (there must be none).
    bad_lines: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// The thread that reads stderr, until its end.
    stderr_reader: std::thread::JoinHandle<()>,
    next_id: i64,
    era: Era,
}

impl Serve {
    /// Starts the server with `envs` added to its environment, in `cwd` and as `user` when
    /// given.
    pub fn spawn_env(
        argv: &[OsString],
        era: Era,
        envs: &[(&str, &std::ffi::OsStr)],
        cwd: Option<&Path>,
        user: Option<u32>,
    ) -> Serve {
        Self::spawn_program(&link_run(), argv, era, envs, cwd, user)
    }

    /// Starts `program` (a `lnk-link-run`, under whatever path a host would use) with `argv`,
    /// `envs` added to its environment, in `cwd` and as `user` when given, without any message
    /// sent.
    pub fn spawn_program(
        program: &Path,
        argv: &[OsString],
        era: Era,
        envs: &[(&str, &std::ffi::OsStr)],
        cwd: Option<&Path>,
        user: Option<u32>,
    ) -> Serve {
        let mut command = Command::new(program);
        if let Some(cwd) = cwd {
            command.current_dir(cwd);
        }
        if let Some(uid) = user {
            use std::os::unix::process::CommandExt;
            // As root, std drops the supplementary groups before it changes the user.
            command.uid(uid).gid(uid);
        }
        if COLD.with(std::cell::Cell::get) {
            command.env("LNK_COLD_START", "1");
        }
        let mut child = command
            .args(argv)
            .env_remove("RUST_LOG")
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {program:?}: {err}"));
        let (tx, rx) = channel();
        let bad_lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        let bad = Arc::clone(&bad_lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                let Ok(line) = line else { break };
                match serde_json::from_slice::<Value>(&line) {
                    Ok(msg) if msg.is_object() && msg["jsonrpc"] == "2.0" => {
                        if tx.send(msg).is_err() {
                            break;
                        }
                    }
                    _ => bad
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(String::from_utf8_lossy(&line).into_owned()),
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap_or_else(|| panic!("no stderr"));
        let sink = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n @ 1..) = pipe.read(&mut buf) {
                sink.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&buf[..n]);
            }
        });
        Serve {
            stdin: child.stdin.take(),
            child,
            rx,
            inbox: Vec::new(),
            bad_lines,
            stderr,
            stderr_reader,
            next_id: 1,
            era,
        }
    }

    /// The server's pid.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or_else(|_| panic!("pid out of range"))
    }

    /// What the server wrote on stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// All the server wrote on stderr, once the pipe has ended (it exited, and nothing it left
    /// holds the pipe), waiting for that at most `within`.
    pub fn stderr_to_end(&self, within: Duration) -> String {
        let deadline = Instant::now() + within;
        while !self.stderr_reader.is_finished() {
            assert!(
                Instant::now() < deadline,
                "serve's stderr did not end within {within:?}: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stderr()
    }

    /// Writes one line (a newline is added).
    pub fn send_line(&mut self, line: &[u8]) {
        let stdin = self
            .stdin
            .as_mut()
            .unwrap_or_else(|| panic!("stdin already closed"));
        stdin
            .write_all(line)
            .and_then(|()| stdin.write_all(b"\n"))
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|err| panic!("writing to serve: {err}"));
    }

    /// Writes one message.
    pub fn send(&mut self, msg: &Value) {
        self.send_line(msg.to_string().as_bytes());
    }

    /// A fresh request id.
    pub fn fresh_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    /// Adds the modern era's `_meta` keys to a request's params when the session is modern.
    pub fn stamp(&self, mut params: Value) -> Value {
        if self.era == Era::Modern {
            if !params.is_object() {
                params = json!({});
            }
            let meta = params
                .as_object_mut()
                .map(|p| p.entry("_meta").or_insert_with(|| json!({})))
                .unwrap_or_else(|| panic!("params is an object"));
            for (key, value) in modern_meta().as_object().into_iter().flatten() {
                meta[key] = value.clone();
            }
        }
        params
    }

    /// Sends a request (stamped for the era) and returns its id without waiting.
    pub fn send_request(&mut self, method: &str, params: Value) -> i64 {
        let id = self.fresh_id();
        let params = self.stamp(params);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// Sends a request and waits for its whole response (result or error).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.response(&json!(id), ANSWER)
    }

    /// Sends a request and returns its `result`, failing on an error response.
    pub fn result(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params);
        ok(&response)
    }

    /// `initialize` at `version`, then `notifications/initialized`; returns the result.
    pub fn initialize(&mut self, version: &str) -> Value {
        let result = self.result(
            "initialize",
            json!({
                "protocolVersion": version,
                "capabilities": {},
                "clientInfo": {"name": "lnk-tests", "version": "0"},
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        result
    }

    /// Starts a `command` call without waiting; `meta` goes into `params._meta`.
    pub fn send_call(&mut self, arguments: Value, meta: Option<Value>) -> i64 {
        let mut params = json!({"name": "command", "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta;
        }
        self.send_request("tools/call", params)
    }

    /// The result of a call started with [`Serve::send_call`].
    pub fn call_result(&mut self, id: i64, within: Duration) -> Value {
        let response = self.response(&json!(id), within);
        ok(&response)
    }

    /// Runs a `command` call and returns its result.
    pub fn call(&mut self, arguments: Value) -> Value {
        let id = self.send_call(arguments, None);
        self.call_result(id, ANSWER)
    }

    /// Waits for the response with this id.
    pub fn response(&mut self, id: &Value, within: Duration) -> Value {
        self.wait_for(within, |msg| {
            msg.get("id") == Some(id) && msg.get("method").is_none()
        })
        .unwrap_or_else(|| {
            panic!(
                "no response to id {id} within {within:?}; stderr:\n{}",
                self.stderr()
            )
        })
    }

    /// Waits for the first message read so far or later that matches.
    pub fn wait_for(&mut self, within: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + within;
        let mut checked = 0;
        loop {
            self.check_stdout();
            if let Some(found) = self.inbox[checked..].iter().find(|m| pred(m)) {
                return Some(found.clone());
            }
            checked = self.inbox.len();
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(msg) => self.inbox.push(msg),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    self.check_stdout();
                    return None;
                }
            }
        }
    }

    /// Reads whatever arrived, without waiting.
    pub fn drain(&mut self) {
        while let Ok(msg) = self.rx.try_recv() {
            self.inbox.push(msg);
        }
        self.check_stdout();
    }

    /// Every message read so far.
    pub fn inbox(&mut self) -> &[Value] {
        self.drain();
        &self.inbox
    }

    /// Fails if anything but JSON-RPC 2.0 appeared on stdout.
    pub fn check_stdout(&self) {
        let bad = self.bad_lines.lock().unwrap_or_else(|e| e.into_inner());
        assert!(
            bad.is_empty(),
            "serve wrote lines that are not JSON-RPC 2.0 messages on stdout: {bad:?}"
        );
    }

    /// Takes the server's stdin, for a writer thread that may block (give it back with
    /// [`Serve::put_stdin`]).
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin
            .take()
            .unwrap_or_else(|| panic!("stdin already closed"))
    }

    /// Gives back the stdin taken by [`Serve::take_stdin`].
    pub fn put_stdin(&mut self, stdin: ChildStdin) {
        self.stdin = Some(stdin);
    }

    /// Closes the server's stdin.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Sends a signal to the server.
    pub fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.pid())
            .unwrap_or_else(|| panic!("serve has no valid pid"));
        rustix::process::kill_process(pid, signal)
            .unwrap_or_else(|err| panic!("signalling serve: {err}"));
    }

    /// Waits for the server to exit, polling until the deadline.
    pub fn wait_exit(&mut self, within: Duration) -> ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) => panic!(
                    "serve did not exit within {within:?}; stderr:\n{}",
                    self.stderr()
                ),
                Err(err) => panic!("waiting for serve: {err}"),
            }
        }
    }

    /// SIGKILLs the server and reaps it.
    pub fn kill(&mut self) {
        // An error here means it already exited; it is reaped below either way.
        let _already_gone = self.child.kill();
        let _status = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!("--- serve stderr ---\n{}--- end ---", self.stderr());
        }
    }
}
