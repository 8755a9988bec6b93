//! A client of one `lnk-link-run serve` process: one JSON-RPC message per line over its
//! stdin and stdout, with a deadline on every read so a stuck server fails the benchmark
//! instead of hanging it.

use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use serde_json::{Value, json};

/// How long `serve` may take to exit once its stdin is closed.
const EXIT_WAIT: Duration = Duration::from_secs(10);

/// What a `serve` is started with.
pub struct ServeArgs<'a> {
    /// The `lnk-link-run` binary.
    pub binary: &'a Path,
    /// `--files`.
    pub files: &'a Path,
    /// `--programs-path`.
    pub programs: &'a Path,
    /// `--output`, as the flag reads it (`64KiB`).
    pub output: &'a str,
    /// The names given with `--program`.
    pub allowed: &'a [&'a str],
    /// More flags before `--` (`--state` and the background flags).
    pub extra: Vec<OsString>,
    /// The sandbox prefix after `--`.
    pub sandbox: Vec<OsString>,
    /// Whether serve checks the sandbox at start (off for the pass-through prefix, which is
    /// no sandbox on purpose: `--no-sandbox-check`).
    pub sandbox_check: bool,
    /// Where serve's stderr (its logs) goes.
    pub log: PathBuf,
}

/// A running `serve`, initialized.
pub struct Serve {
    name: String,
    child: Child,
    stdin: Option<ChildStdin>,
    lines: LineReader,
    log: PathBuf,
    next_id: u64,
    /// The length of the last answer's line, in bytes.
    last_answer_bytes: usize,
}

/// The structured value of a `command` answer, with the figures the benchmark checks.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    pub exit_code: Option<i64>,
    pub signal: Option<i64>,
    pub timed_out: bool,
    pub stdout_bytes: u64,
    pub elapsed_ms: u64,
}

impl Serve {
    /// Starts `serve` and goes through the initialize handshake.
    pub fn start(name: &str, args: &ServeArgs<'_>) -> Result<Serve> {
        Serve::start_with_env(name, args, &[])
    }

    /// [`Serve::start`] with `env` added to serve's environment (a test hook that serve's
    /// supervisors inherit).
    pub fn start_with_env(
        name: &str,
        args: &ServeArgs<'_>,
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Result<Serve> {
        let log = File::create(&args.log)
            .with_context(|| format!("creating serve's log {}", args.log.display()))?;
        let mut command = Command::new(args.binary);
        command
            .arg("serve")
            .arg("--files")
            .arg(args.files)
            .arg("--programs-path")
            .arg(args.programs)
            .args(["--timeout", "60s", "--output", args.output]);
        for program in args.allowed {
            command.args(["--program", program]);
        }
        command.args(&args.extra);
        command.envs(env.iter().copied());
        if !args.sandbox_check {
            command.arg("--no-sandbox-check");
        }
        command.arg("--").args(&args.sandbox);
        Serve::start_command(name, command, log, &args.log)
    }

    /// Starts any MCP server over stdio (`command`, its stdio set here; its stderr to `log`,
    /// whose path is `log_path`) and goes through the initialize handshake.
    pub fn start_command(
        name: &str,
        mut command: Command,
        log: File,
        log_path: &Path,
    ) -> Result<Serve> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log);
        let mut child = command
            .spawn()
            .with_context(|| format!("starting {:?}", command.get_program()))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("serve was started without its pipes");
        };
        let mut serve = Serve {
            name: name.to_owned(),
            child,
            stdin: Some(stdin),
            lines: LineReader::new(stdout),
            log: log_path.to_path_buf(),
            next_id: 1,
            last_answer_bytes: 0,
        };
        if let Err(err) = serve.initialize() {
            let log = serve.log_tail();
            serve.kill();
            return Err(err.context(format!("initializing serve `{name}`; its log: {log}")));
        }
        Ok(serve)
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn initialize(&mut self) -> Result<()> {
        let id = self.take_id();
        self.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "lnk-bench", "version": env!("CARGO_PKG_VERSION")},
            },
        }))?;
        let answer = self.read_response(Duration::from_secs(10))?;
        if answer.get("id") != Some(&json!(id)) || answer.get("result").is_none() {
            bail!("unexpected answer to initialize: {answer}");
        }
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    }

    /// The length of the last answer's line, in bytes.
    pub fn last_answer_bytes(&self) -> usize {
        self.last_answer_bytes
    }

    /// A fresh request id.
    pub fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Writes one `command` call with id `id`; the answer is read with [`Serve::read_answer`].
    pub fn send_command(&mut self, id: u64, program: &str, args: &[&str]) -> Result<()> {
        self.send(&json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "command", "arguments": {"program": program, "args": args}},
        }))
    }

    /// One call, start to answer: `(the answer, the time from writing to reading)`.
    pub fn call(&mut self, program: &str, args: &[&str], limit: Duration) -> Result<Answer> {
        let id = self.take_id();
        self.send_command(id, program, args)?;
        let (got, answer) = self.read_answer(limit)?;
        if got != id {
            bail!("serve `{}` answered id {got}, expected {id}", self.name);
        }
        Ok(answer)
    }

    /// Reads the next answer (progress notifications are skipped): its id and figures.
    pub fn read_answer(&mut self, limit: Duration) -> Result<(u64, Answer)> {
        let message = self.read_response(limit)?;
        let id = message
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| anyhow!("an answer without a numeric id: {message}"))?;
        if let Some(error) = message.get("error") {
            bail!("call {id} failed with a JSON-RPC error: {error}");
        }
        let result = message
            .get("result")
            .ok_or_else(|| anyhow!("answer {id} has no result: {message}"))?;
        if result.get("isError") == Some(&Value::Bool(true)) {
            bail!("call {id} was refused: {}", result["content"]);
        }
        let value = result
            .get("structuredContent")
            .ok_or_else(|| anyhow!("answer {id} has no structuredContent"))?;
        let number = |key: &str| value.get(key).and_then(Value::as_u64);
        Ok((
            id,
            Answer {
                exit_code: value.get("exit_code").and_then(Value::as_i64),
                signal: value.get("signal").and_then(Value::as_i64),
                timed_out: value.get("timed_out") == Some(&Value::Bool(true)),
                stdout_bytes: number("stdout_bytes")
                    .ok_or_else(|| anyhow!("answer {id} lacks stdout_bytes: {value}"))?,
                elapsed_ms: number("elapsed_ms")
                    .ok_or_else(|| anyhow!("answer {id} lacks elapsed_ms: {value}"))?,
            },
        ))
    }

    /// Reads messages until one that is not a notification, within `limit`.
    fn read_response(&mut self, limit: Duration) -> Result<Value> {
        self.read_response_at(limit).map(|(message, _)| message)
    }

    /// [`Serve::read_response`], with the moment its line was read whole (before parsing it,
    /// so that the time to parse a large answer is not counted as the server's).
    fn read_response_at(&mut self, limit: Duration) -> Result<(Value, Instant)> {
        let deadline = Instant::now() + limit;
        loop {
            let line = self
                .lines
                .next_line(deadline)
                .with_context(|| format!("reading from serve `{}`", self.name))?;
            let at = Instant::now();
            self.last_answer_bytes = line.len();
            let message: Value = serde_json::from_slice(line)
                .with_context(|| format!("serve `{}` wrote a line that is not JSON", self.name))?;
            if message.get("id").is_some() {
                return Ok((message, at));
            }
        }
    }

    /// One `tools/call` of tool `name`, with `_meta` when given: its structured value and the
    /// time from just before writing the request to having read the answer's line. A refusal
    /// (`isError`) or a JSON-RPC error is an error.
    pub fn call_tool(
        &mut self,
        name: &str,
        arguments: &Value,
        meta: Option<&Value>,
        limit: Duration,
    ) -> Result<(Value, Duration)> {
        let id = self.take_id();
        let mut params = json!({"name": name, "arguments": arguments});
        if let Some(meta) = meta {
            params["_meta"] = meta.clone();
        }
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        let mut line = serde_json::to_vec(&request).context("encoding a request")?;
        line.push(b'\n');
        let start = Instant::now();
        self.send_line(&line)?;
        let (message, at) = self.read_response_at(limit)?;
        let took = at.duration_since(start);
        if message.get("id") != Some(&json!(id)) {
            bail!("serve `{}` answered {message}, expected id {id}", self.name);
        }
        if let Some(error) = message.get("error") {
            bail!("`{name}` failed with a JSON-RPC error: {error}");
        }
        let mut result = message
            .get("result")
            .cloned()
            .ok_or_else(|| anyhow!("the answer to `{name}` has no result"))?;
        if result.get("isError") == Some(&Value::Bool(true)) {
            bail!("`{name}` was refused: {}", result["content"]);
        }
        let value = result
            .get_mut("structuredContent")
            .map(Value::take)
            .ok_or_else(|| anyhow!("the answer to `{name}` has no structuredContent"))?;
        Ok((value, took))
    }

    /// One request of `method` with `params`: its result and the time from just before
    /// writing the request to having read the answer's line. A JSON-RPC error is an error.
    pub fn request(
        &mut self,
        method: &str,
        params: &Value,
        limit: Duration,
    ) -> Result<(Value, Duration)> {
        let id = self.take_id();
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = serde_json::to_vec(&request).context("encoding a request")?;
        line.push(b'\n');
        let start = Instant::now();
        self.send_line(&line)?;
        let (mut message, at) = self.read_response_at(limit)?;
        let took = at.duration_since(start);
        if message.get("id") != Some(&json!(id)) {
            bail!("serve `{}` answered {message}, expected id {id}", self.name);
        }
        if let Some(error) = message.get("error") {
            bail!("`{method}` failed with a JSON-RPC error: {error}");
        }
        let result = message
            .get_mut("result")
            .map(Value::take)
            .ok_or_else(|| anyhow!("the answer to `{method}` has no result"))?;
        Ok((result, took))
    }

    /// Sends a request of `method` with `params` without waiting for its answer; its id.
    pub fn send_request(&mut self, method: &str, params: &Value) -> Result<u64> {
        let id = self.take_id();
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        Ok(id)
    }

    /// Reads the next answer (notifications skipped): its id and its result. A JSON-RPC
    /// error is an error.
    pub fn read_result(&mut self, limit: Duration) -> Result<(u64, Value)> {
        let mut message = self.read_response(limit)?;
        let id = message
            .get("id")
            .and_then(Value::as_u64)
            .ok_or_else(|| anyhow!("an answer without a numeric id: {message}"))?;
        if let Some(error) = message.get("error") {
            bail!("request {id} failed with a JSON-RPC error: {error}");
        }
        let result = message
            .get_mut("result")
            .map(Value::take)
            .ok_or_else(|| anyhow!("answer {id} has no result"))?;
        Ok((id, result))
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: &Value) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
    }

    fn send(&mut self, message: &Value) -> Result<()> {
        let mut line = serde_json::to_vec(message).context("encoding a request")?;
        line.push(b'\n');
        self.send_line(&line)
    }

    fn send_line(&mut self, line: &[u8]) -> Result<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| anyhow!("serve `{}` has no stdin any more", self.name))?;
        stdin
            .write_all(line)
            .with_context(|| format!("writing to serve `{}`", self.name))
    }

    /// The last lines of serve's log, for error messages.
    pub fn log_tail(&self) -> String {
        match std::fs::read_to_string(&self.log) {
            Ok(text) if text.trim().is_empty() => "(empty)".into(),
            Ok(text) => {
                let lines: Vec<&str> = text.lines().collect();
                lines[lines.len().saturating_sub(10)..].join("\n")
            }
            Err(err) => format!("(unreadable: {err})"),
        }
    }

    /// Closes stdin and waits for a clean exit (status 0).
    pub fn shutdown(mut self) -> Result<()> {
        self.stdin = None;
        let deadline = Instant::now() + EXIT_WAIT;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => bail!(
                    "serve `{}` exited with {status}; its log: {}",
                    self.name,
                    self.log_tail()
                ),
                Ok(None) if Instant::now() >= deadline => {
                    self.kill();
                    bail!(
                        "serve `{}` did not exit within {EXIT_WAIT:?} of its stdin closing; killed",
                        self.name
                    );
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(err) => {
                    self.kill();
                    return Err(err).context("waiting for serve");
                }
            }
        }
    }

    /// SIGKILLs serve and reaps it.
    pub fn kill(&mut self) {
        self.stdin = None;
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    /// A serve left behind by an error is killed and reaped; a shut-down one is already gone.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        }
    }
}

/// Lines from a pipe, read with `poll` so that a read can give up at a deadline.
struct LineReader {
    pipe: ChildStdout,
    buf: Vec<u8>,
    /// Where the unread bytes of `buf` begin.
    start: usize,
    /// The length of the line handed out last, consumed at the next call.
    handed: usize,
}

impl LineReader {
    fn new(pipe: ChildStdout) -> Self {
        Self {
            pipe,
            buf: Vec::with_capacity(256 * 1024),
            start: 0,
            handed: 0,
        }
    }

    fn next_line(&mut self, deadline: Instant) -> Result<&[u8]> {
        self.start += std::mem::take(&mut self.handed);
        if self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        let mut searched = self.start;
        loop {
            if let Some(at) = self.buf[searched..].iter().position(|b| *b == b'\n') {
                let end = searched + at;
                self.handed = end + 1 - self.start;
                return Ok(&self.buf[self.start..end]);
            }
            searched = self.buf.len();
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() {
                bail!("no answer in time");
            }
            let timeout = Timespec {
                tv_sec: i64::try_from(wait.as_secs()).unwrap_or(i64::MAX),
                tv_nsec: i64::from(wait.subsec_nanos()),
            };
            let mut fds = [PollFd::new(&self.pipe, PollFlags::IN)];
            match poll(&mut fds, Some(&timeout)) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(err) => return Err(err).context("poll"),
            }
            if fds[0].revents().is_empty() {
                continue;
            }
            if self.start > 0 {
                self.buf.drain(..self.start);
                searched -= self.start;
                self.start = 0;
            }
            let old = self.buf.len();
            self.buf.resize(old + 64 * 1024, 0);
            match rustix::io::read(&self.pipe, &mut self.buf[old..]) {
                Ok(0) => {
                    self.buf.truncate(old);
                    bail!("serve closed its stdout");
                }
                Ok(n) => self.buf.truncate(old + n),
                Err(rustix::io::Errno::INTR) => self.buf.truncate(old),
                Err(err) => {
                    self.buf.truncate(old);
                    return Err(err).context("read");
                }
            }
        }
    }
}
