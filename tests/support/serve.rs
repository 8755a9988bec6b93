//! Starting `lnk-link-run serve` for a test and speaking MCP to it: a temporary folder per test,
//! a builder for the flags, and a client that reads every stdout line as JSON-RPC on a thread of
//! its own. Dropping a [`Serve`] SIGKILLs and reaps the server, so no test leaves one running.
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::sandbox::{Sandbox, path_str};

/// How long a test waits for an answer that should come at once (generous: machines are busy).
pub const ANSWER: Duration = Duration::from_secs(30);

/// The programs a default `serve` allows: all found on [`Setup::programs_path`].
pub const PROGRAMS: &[&str] = &[
    "sh",
    "cat",
    "echo",
    "env",
    "pwd",
    "sleep",
    "true",
    "touch",
    "lnk-test-procs",
    "lnk-test-write",
];

/// The `lnk-link-run` binary, beside this test's `deps/` folder in `target/<profile>/`.
pub fn link_run() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|err| panic!("no current exe: {err}"));
    let bin = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("lnk-link-run"))
        .unwrap_or_else(|| panic!("no target folder above {exe:?}"));
    assert!(
        bin.is_file(),
        "{bin:?} is missing: run `cargo build -p lnk-link-run` (or `cargo test` from the root)"
    );
    bin
}

/// The folder of this package's helper binaries (`lnk-test-procs`, `lnk-test-write`).
pub fn helpers_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_lnk-test-procs"))
        .parent()
        .unwrap_or_else(|| panic!("helper binary without a folder"))
        .to_path_buf()
}

/// A test's own temporary folder, with `files/` in it, and the sandbox its calls use.
pub struct Setup {
    /// The sandbox of this test's calls.
    pub sandbox: Sandbox,
    /// The temporary folder; removed when the test ends.
    pub root: TempDir,
    /// `root/files`, canonical: the `--files` folder.
    pub files: PathBuf,
}

impl Setup {
    /// Makes the folder under cargo's target tmp folder, so it lies outside `/tmp` (which
    /// bubblewrap replaces with an empty tmpfs) and programs in it stay visible in the sandbox.
    pub fn new(sandbox: Sandbox) -> Self {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(base).unwrap_or_else(|err| panic!("creating {base:?}: {err}"));
        let root = tempfile::Builder::new()
            .prefix("command-")
            .tempdir_in(base)
            .unwrap_or_else(|err| panic!("creating a temporary folder: {err}"));
        let files = root.path().join("files");
        std::fs::create_dir(&files).unwrap_or_else(|err| panic!("creating {files:?}: {err}"));
        let files = files
            .canonicalize()
            .unwrap_or_else(|err| panic!("canonicalizing {files:?}: {err}"));
        Setup {
            sandbox,
            root,
            files,
        }
    }

    /// A path inside the temporary folder.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    /// The default `--programs-path`: the helpers, then the system's folders.
    pub fn programs_path(&self) -> String {
        format!("{}:/usr/bin:/bin", path_str(&helpers_dir()))
    }

    /// The sandbox argv for `--files` = `files`: the helpers are visible in it, and nothing
    /// else of the test's folder (its state folder and keyring least of all).
    #[allow(dead_code)]
    pub fn sandbox_argv(&self, files: &Path) -> Vec<String> {
        self.sandbox_argv_with(files, &[])
    }

    /// [`Setup::sandbox_argv`], with `visible` shown (read-only) too.
    pub fn sandbox_argv_with(&self, files: &Path, visible: &[PathBuf]) -> Vec<String> {
        let mut shown = vec![helpers_dir()];
        shown.extend_from_slice(visible);
        self.sandbox.argv(files, &shown)
    }

    /// A `serve` with the defaults: timeout 10s, output 64KiB, the [`PROGRAMS`].
    pub fn serve(&self) -> ServeBuilder<'_> {
        ServeBuilder {
            setup: self,
            files: self.files.clone(),
            files_flag: None,
            programs_path: self.programs_path(),
            timeout: "10s".into(),
            output: "64KiB".into(),
            programs: PROGRAMS.iter().map(|p| (*p).to_owned()).collect(),
            vars: Vec::new(),
            extra: Vec::new(),
            era: Era::Legacy("2025-11-25"),
            sandbox: None,
            visible: Vec::new(),
            user: None,
            current_dir: None,
            env: Vec::new(),
        }
    }
}

/// How the client speaks to the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Era {
    /// `initialize` at this version first, then plain requests.
    Legacy(&'static str),
    /// No handshake; each request carries the 2026-07-28 `_meta` keys.
    Modern,
}

/// The flags of one `serve`.
pub struct ServeBuilder<'a> {
    setup: &'a Setup,
    files: PathBuf,
    files_flag: Option<PathBuf>,
    programs_path: String,
    timeout: String,
    output: String,
    programs: Vec<String>,
    vars: Vec<String>,
    extra: Vec<String>,
    era: Era,
    sandbox: Option<Vec<String>>,
    visible: Vec<PathBuf>,
    user: Option<u32>,
    current_dir: Option<PathBuf>,
    env: Vec<(String, OsString)>,
}

impl ServeBuilder<'_> {
    /// The sandbox prefix after `--`, instead of the setup's.
    #[allow(dead_code)]
    pub fn sandbox(mut self, argv: Vec<String>) -> Self {
        self.sandbox = Some(argv);
        self
    }

    /// A folder of the test's the sandboxed programs must see (read-only), such as a
    /// `--programs-path` folder of its own.
    #[allow(dead_code)]
    pub fn visible(mut self, path: &Path) -> Self {
        self.visible.push(path.to_path_buf());
        self
    }

    /// Runs serve as this user (and group of the same number), with no other groups; the tests
    /// run as root, so this is how they run serve as an ordinary user (`nobody`).
    #[allow(dead_code)]
    pub fn run_as(mut self, uid: u32) -> Self {
        self.user = Some(uid);
        self
    }

    /// The folder serve starts in (hosts often start it in the agent's folder).
    #[allow(dead_code)]
    pub fn current_dir(mut self, dir: &Path) -> Self {
        self.current_dir = Some(dir.to_path_buf());
        self
    }

    /// The variables added to serve's environment.
    #[allow(dead_code)]
    pub fn envs(&self) -> &[(String, OsString)] {
        &self.env
    }

    /// One more variable in serve's environment.
    #[allow(dead_code)]
    pub fn env(mut self, name: &str, value: impl Into<OsString>) -> Self {
        self.env.push((name.to_owned(), value.into()));
        self
    }

    /// `--timeout`.
    pub fn timeout(mut self, value: &str) -> Self {
        value.clone_into(&mut self.timeout);
        self
    }

    /// `--output`.
    pub fn output(mut self, value: &str) -> Self {
        value.clone_into(&mut self.output);
        self
    }

    /// The `--files` flag's value, when it is not the (canonical) files folder itself; the
    /// sandbox still binds the canonical folder.
    pub fn files_flag(mut self, path: &Path) -> Self {
        self.files_flag = Some(path.to_path_buf());
        self
    }

    /// `--programs-path`.
    pub fn programs_path(mut self, value: &str) -> Self {
        value.clone_into(&mut self.programs_path);
        self
    }

    /// The `--program` list, instead of [`PROGRAMS`].
    pub fn programs(mut self, names: &[&str]) -> Self {
        self.programs = names.iter().map(|p| (*p).to_owned()).collect();
        self
    }

    /// One more `--var NAME=VALUE`.
    pub fn var(mut self, assignment: &str) -> Self {
        self.vars.push(assignment.to_owned());
        self
    }

    /// More flags, put before `--`.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.extra.extend(flags.iter().map(|f| (*f).to_owned()));
        self
    }

    /// How [`ServeBuilder::start`] opens the session.
    pub fn era(mut self, era: Era) -> Self {
        self.era = era;
        self
    }

    /// The arguments after the binary's name.
    pub fn argv(&self) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![
            "serve".into(),
            "--files".into(),
            self.files_flag.as_ref().unwrap_or(&self.files).into(),
            "--programs-path".into(),
            self.programs_path.clone().into(),
            "--timeout".into(),
            self.timeout.clone().into(),
            "--output".into(),
            self.output.clone().into(),
        ];
        for program in &self.programs {
            argv.extend(["--program".into(), program.into()]);
        }
        for var in &self.vars {
            argv.extend(["--var".into(), var.into()]);
        }
        argv.extend(self.extra.iter().map(OsString::from));
        if !self.setup.sandbox.checked() {
            argv.push("--no-sandbox-check".into());
        }
        argv.push("--".into());
        let sandbox = match &self.sandbox {
            Some(sandbox) => sandbox.clone(),
            None => self.setup.sandbox_argv_with(&self.files, &self.visible),
        };
        argv.extend(sandbox.into_iter().map(OsString::from));
        argv
    }

    /// Starts the server without any message sent.
    pub fn spawn(&self) -> Serve {
        self.spawn_env(&[])
    }

    fn spawn_env(&self, envs: &[(&str, &std::ffi::OsStr)]) -> Serve {
        let mut all: Vec<(&str, &std::ffi::OsStr)> = self
            .env
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_os_str()))
            .collect();
        all.extend_from_slice(envs);
        Serve::spawn_env(
            &self.argv(),
            self.era,
            &all,
            self.current_dir.as_deref(),
            self.user,
        )
    }

    /// As [`ServeBuilder::start`], with more variables in the server's environment (test hooks
    /// such as `LNK_SUPERVISE_HOLD_GATE`, which only some test binaries use).
    #[allow(dead_code)]
    pub fn start_env(&self, envs: &[(&str, &std::ffi::OsStr)]) -> Serve {
        let mut serve = self.spawn_env(envs);
        if let Era::Legacy(version) = self.era {
            let result = serve.initialize(version);
            assert_eq!(result["protocolVersion"], version, "{result}");
        }
        serve
    }

    /// Starts the server and opens the session (`initialize` + `notifications/initialized` in
    /// the legacy era; nothing in the modern one).
    pub fn start(&self) -> Serve {
        let mut serve = self.spawn();
        if let Era::Legacy(version) = self.era {
            let result = serve.initialize(version);
            assert_eq!(result["protocolVersion"], version, "{result}");
        }
        serve
    }
}

thread_local! {
    /// Whether the serves this test thread starts start their calls cold ([`cold_starts`]).
    static COLD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs a test body with every `serve` it starts asked for cold starts (`LNK_COLD_START=1`):
/// the macros that run a body both ways use it, so that one body tests warm calls (the default)
/// and cold ones.
#[allow(dead_code)]
pub fn cold_starts<R>(body: impl FnOnce() -> R) -> R {
    COLD.with(|cold| cold.set(true));
    let result = body();
    COLD.with(|cold| cold.set(false));
    result
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
    next_id: i64,
    era: Era,
}

impl Serve {
    /// Starts the server with `envs` added to its environment, in `cwd` and as `user` when
    /// given.
    fn spawn_env(
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
        std::thread::spawn(move || {
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

/// The `_meta` keys of a 2026-07-28 request.
pub fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "lnk-tests", "version": "0"},
    })
}

/// The `result` of a response; fails on an error response.
pub fn ok(response: &Value) -> Value {
    assert!(
        response.get("error").is_none() && response.get("result").is_some(),
        "expected a result: {response}"
    );
    response["result"].clone()
}

/// The `error.code` of a response; fails on a result.
pub fn error_code(response: &Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("expected an error response: {response}"))
}

/// The text blocks of a tool result, joined by newlines.
pub fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool result has content: {result}"))
        .iter()
        .filter(|block| block["type"] == "text")
        .filter_map(|block| block["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What the text of a `command` answer shows of one stream (`stdout` or `stderr`): the lines
/// after its `--- name: … ---` header up to the next header. The text ends a stream whose last
/// line has no newline with one; the structured value does not.
pub fn stream_in_text(text: &str, name: &str) -> String {
    let header = text
        .find(&format!("--- {name}: "))
        .unwrap_or_else(|| panic!("no {name} header: {text}"));
    let start = header
        + text[header..]
            .find("---\n")
            .map(|at| at + 4)
            .unwrap_or_else(|| panic!("an unfinished {name} header: {text}"));
    let end = text[start..]
        .find("--- stderr: ")
        .filter(|_| name == "stdout")
        .map_or(text.len(), |at| start + at);
    text[start..end].to_owned()
}

/// Checks that a `command` answer's structured `stdout` and `stderr` are what its text shows
/// of each stream.
pub fn assert_streams_match_the_text(result: &Value) {
    let text = text(result);
    let value = structured(result);
    for name in ["stdout", "stderr"] {
        let shown = value[name]
            .as_str()
            .unwrap_or_else(|| panic!("the structured value has `{name}`: {result}"));
        let section = stream_in_text(&text, name);
        let added_newline = !shown.is_empty() && !shown.ends_with('\n');
        let expected = if added_newline {
            section.strip_suffix('\n').unwrap_or(&section)
        } else {
            &section
        };
        assert_eq!(shown, expected, "{name} as the text shows it: {text:?}");
    }
}

/// The structured value of a tool result.
pub fn structured(result: &Value) -> &Value {
    result
        .get("structuredContent")
        .unwrap_or_else(|| panic!("a tool result without structuredContent: {result}"))
}

/// Whether a tool result is a refusal.
pub fn is_error(result: &Value) -> bool {
    result.get("isError") == Some(&Value::Bool(true))
}

/// A `command` call's result that ran (not a refusal); returns its structured value.
pub fn ran(result: &Value) -> Value {
    assert!(!is_error(result), "the call was refused: {result}");
    structured(result).clone()
}
