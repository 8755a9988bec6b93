//! Background runs for the tests: a test folder with a state folder beside `files/`, a `serve`
//! with the background flags, the `start`, `list`, `read` and `stop` tools, the records on disk,
//! and a guard that kills whatever a test's runs left behind, however the test ends.
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process, kill_process_group};
use serde_json::{Value, json};

use crate::procs::{Proc, alive, marker, with_marker};
use crate::sandbox::{Sandbox, path_str};
use crate::serve::{ANSWER, Serve, ServeBuilder, Setup, is_error, link_run, structured, text};

/// The conversation the tests' starts name.
pub const THREAD: &str = "th-tests";

/// How long a tool that must answer promptly (even facing a hostile files folder) may take.
pub const PROMPT: Duration = Duration::from_secs(10);

/// The background flags of a `serve`.
#[derive(Clone, Copy, Debug)]
pub struct Flags {
    /// `--background`.
    pub background: u32,
    /// `--background-timeout`.
    pub timeout: &'static str,
    /// `--background-output`.
    pub output: &'static str,
    /// `--background-keep`.
    pub keep: &'static str,
    /// `--hops`.
    pub hops: u32,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            background: 4,
            timeout: "2m",
            output: "1MiB",
            keep: "1h",
            hops: 3,
        }
    }
}

/// `lnk-link-supervise`, which `serve` finds beside itself in `target/<profile>/`.
pub fn link_supervise() -> PathBuf {
    let bin = link_run().with_file_name("lnk-link-supervise");
    assert!(
        bin.is_file(),
        "{bin:?} is missing: run `cargo build --workspace` (or `cargo test` from the root)"
    );
    bin
}

/// A test's folder (`files/`, and `state/` beside it, which `serve` creates), and the markers of
/// its runs. Dropping it kills what the test's runs left: their supervisors, their groups (from
/// the records) and any process carrying one of its markers.
pub struct Bg {
    /// The folder, the files folder and the sandbox.
    pub setup: Setup,
    /// The `--state` folder.
    pub state: PathBuf,
    markers: RefCell<Vec<String>>,
}

impl Bg {
    /// A new test folder; checks that both binaries are built.
    pub fn new(sandbox: Sandbox) -> Bg {
        link_supervise();
        let setup = Setup::new(sandbox);
        let state = setup.path("state");
        Bg {
            setup,
            state,
            markers: RefCell::new(Vec::new()),
        }
    }

    /// A marker no other process carries, killed (if still running) when the test ends.
    pub fn marker(&self) -> String {
        let mark = marker();
        self.markers.borrow_mut().push(mark.clone());
        mark
    }

    /// A `serve` with `--state` and these background flags.
    pub fn serve(&self, flags: &Flags) -> ServeBuilder<'_> {
        let owned = [
            "--state".to_owned(),
            path_str(&self.state),
            "--background".to_owned(),
            flags.background.to_string(),
            "--background-timeout".to_owned(),
            flags.timeout.to_owned(),
            "--background-output".to_owned(),
            flags.output.to_owned(),
            "--background-keep".to_owned(),
            flags.keep.to_owned(),
            "--hops".to_owned(),
            flags.hops.to_string(),
        ];
        let borrowed: Vec<&str> = owned.iter().map(String::as_str).collect();
        self.setup.serve().flags(&borrowed)
    }

    /// `<state>/<id>.json`.
    pub fn record_path(&self, id: &str) -> PathBuf {
        self.state.join(format!("{id}.json"))
    }

    /// `<files>/background/<id>.out`.
    pub fn output_path(&self, id: &str) -> PathBuf {
        self.setup
            .files
            .join("background")
            .join(format!("{id}.out"))
    }

    /// The record of `id`, if it exists (records are renamed into place, never torn).
    pub fn record(&self, id: &str) -> Option<Value> {
        let path = self.record_path(id);
        let bytes = std::fs::read(&path).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap_or_else(|err| {
            panic!(
                "{path:?} is not JSON ({err}): {}",
                String::from_utf8_lossy(&bytes)
            )
        }))
    }

    /// Waits until the record of `id` exists and satisfies `pred`.
    pub fn wait_record(&self, id: &str, within: Duration, pred: impl Fn(&Value) -> bool) -> Value {
        let mut last = None;
        let found = poll(within, || {
            last = self.record(id);
            last.as_ref().is_some_and(&pred)
        });
        assert!(
            found,
            "the record of {id} did not get there within {within:?}: {last:#?}"
        );
        last.unwrap_or_else(|| unreachable!("found"))
    }

    /// The ids of the records in the state folder.
    pub fn record_ids(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.state) else {
            return Vec::new();
        };
        let mut ids: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_suffix(".json")
                    .map(String::from)
            })
            .collect();
        ids.sort();
        ids
    }

    /// The recorded process group of `id` (pgid, leader pid), once the supervisor wrote it.
    pub fn group(&self, id: &str) -> (i32, i32) {
        let record = self.wait_record(id, ANSWER, |r| r["group"].is_object());
        let pid = |key: &str| {
            record["group"][key]
                .as_i64()
                .and_then(|p| i32::try_from(p).ok())
                .filter(|p| *p > 1)
                .unwrap_or_else(|| panic!("group.{key} is a pid: {record}"))
        };
        (pid("pgid"), pid("leader_pid"))
    }
}

impl Drop for Bg {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the supervisors and sweeps logged says why a run ended as it did.
            for entry in std::fs::read_dir(&self.state)
                .into_iter()
                .flatten()
                .flatten()
            {
                let path = entry.path();
                if path.extension().is_some_and(|e| e == "log")
                    && let Ok(text) = std::fs::read_to_string(&path)
                {
                    eprintln!("--- {} ---\n{text}--- end ---", path.display());
                }
            }
        }
        // A test that passed must leave no supervisor behind: each quits once its run's end is
        // recorded.
        let mut lingering: Vec<String> = Vec::new();
        if !std::thread::panicking() {
            let ids = self.record_ids();
            poll(Duration::from_secs(10), || {
                lingering = ids
                    .iter()
                    .filter(|id| !supervisors(id).is_empty())
                    .cloned()
                    .collect();
                lingering.is_empty()
            });
        }
        for id in self.record_ids() {
            for supervisor in supervisors(&id) {
                sigkill(supervisor.pid);
            }
            let record = std::fs::read(self.record_path(&id))
                .ok()
                .and_then(|bytes| serde_json::from_slice::<Value>(&bytes).ok());
            let pgid = record
                .as_ref()
                .filter(|r| r["status"]["state"] == "running")
                .and_then(|r| r["group"]["pgid"].as_i64())
                .and_then(|p| i32::try_from(p).ok())
                .filter(|p| *p > 1)
                .and_then(Pid::from_raw);
            if let Some(pgid) = pgid {
                // Gone already is fine: this only cleans up after a failed test.
                let _gone = kill_process_group(pgid, Signal::KILL);
            }
        }
        for mark in self.markers.borrow().iter() {
            for proc in with_marker(mark) {
                sigkill(proc.pid);
            }
        }
        assert!(
            lingering.is_empty(),
            "supervisors still ran 10 s after the test: {lingering:?}; records: {:#?}",
            lingering
                .iter()
                .map(|id| self.record(id))
                .collect::<Vec<_>>()
        );
    }
}

/// SIGKILLs a pid, ignoring that it may be gone.
pub fn sigkill(pid: i32) {
    signal(pid, Signal::KILL);
}

/// Sends a signal to a pid, ignoring that it may be gone.
pub fn signal(pid: i32, sig: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _gone = kill_process(pid, sig);
    }
}

/// Polls `done` every 20 ms until it holds (true) or the time is up (false).
pub fn poll(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Fails unless `pid` stays alive for all of `window` (a bounded check that something does
/// *not* happen: a process dying after its parent's death).
pub fn stays_alive(pid: i32, window: Duration, what: &str) {
    let deadline = Instant::now() + window;
    while Instant::now() < deadline {
        assert!(alive(pid), "{what} (pid {pid}) died");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The live `lnk-link-supervise supervise <id>` processes: the supervisors themselves, not
/// the first process serve starts for one, which forks the supervisor away and exits at once
/// (its parent is serve; the supervisor's is that first process, or whoever adopted it).
pub fn supervisors(id: &str) -> Vec<Proc> {
    with_marker(id)
        .into_iter()
        .filter(|p| p.argv.iter().any(|a| a == "supervise"))
        .filter(|p| !parent_is_serve(p.pid))
        .collect()
}

/// Whether process `pid`'s parent is an `lnk-link-run serve`.
fn parent_is_serve(pid: i32) -> bool {
    let Some(ppid) = proc_field(pid, "status", "PPid:").and_then(|v| v.parse::<i32>().ok()) else {
        return false;
    };
    std::fs::read(format!("/proc/{ppid}/cmdline")).is_ok_and(|cmdline| {
        let mut words = cmdline.split(|b| *b == 0);
        words
            .next()
            .is_some_and(|exe| exe.ends_with(b"lnk-link-run"))
            && words.any(|w| w == b"serve")
    })
}

/// Waits for the supervisor of `id` and returns it.
pub fn wait_supervisor(id: &str, within: Duration) -> Proc {
    let mut found = None;
    let ok = poll(within, || {
        found = supervisors(id).into_iter().next();
        found.is_some()
    });
    assert!(
        ok,
        "no `lnk-link-supervise supervise {id}` within {within:?}"
    );
    found.unwrap_or_else(|| unreachable!("found"))
}

/// Waits until no supervisor of `id` runs.
pub fn wait_no_supervisor(id: &str, within: Duration) {
    let gone = poll(within, || supervisors(id).is_empty());
    assert!(
        gone,
        "the supervisor of {id} still runs {within:?} later: {:?}",
        supervisors(id)
    );
}

/// The live (not zombie) pids whose process group is `pgid`.
pub fn in_group(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot read /proc");
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the command name: state, ppid, pgrp.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.first().is_some_and(|s| *s != "Z")
                && fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
        })
        .collect()
}

/// Waits until no process of the group `pgid` is left.
pub fn wait_group_gone(pgid: i32, within: Duration) {
    let gone = poll(within, || in_group(pgid).is_empty());
    assert!(
        gone,
        "processes of the run's group {pgid} still run {within:?} later: {:?}",
        in_group(pgid)
    );
}

/// Where each open descriptor of `pid` points (`readlink /proc/<pid>/fd/*`).
pub fn fd_targets(pid: i32) -> Vec<PathBuf> {
    let dir = format!("/proc/{pid}/fd");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("cannot read {dir}: {err}"));
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .collect()
}

/// Every path under `root` (folders end with `/`), with files' sizes and links' targets, so a
/// test can tell that nothing was written.
pub fn snapshot(root: &Path) -> BTreeMap<String, String> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let path = entry.path();
            let rel = path_str(path.strip_prefix(root).unwrap_or(&path));
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                seen.insert(format!("{rel}/"), String::new());
                todo.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).map(|t| path_str(&t));
                seen.insert(rel, format!("-> {}", target.unwrap_or_default()));
            } else {
                seen.insert(rel, format!("{} bytes", meta.len()));
            }
        }
    }
    seen
}

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
    // Hosts that hand the model only the structured value must get the bytes there too.
    assert_eq!(value["text"], text, "read's structured text is its text");
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

/// The printable ASCII unit the tests' writers repeat: 89 bytes (a prime, so no rotation or
/// block boundary lines up with it), so a byte's offset decides its value.
pub fn unit() -> Vec<u8> {
    (0x21u8..0x21 + 89).collect()
}

/// Bytes `[from, from + len)` of what `lnk-test-write` writes with `unit`.
pub fn pattern(unit: &[u8], from: u64, len: usize) -> String {
    let n = unit.len() as u64;
    (0..len as u64)
        .map(|i| {
            let at = usize::try_from((from + i) % n).unwrap_or(0);
            char::from(unit[at])
        })
        .collect()
}

/// A field of `/proc/<pid>/<file>` (`status`, `smaps_rollup`), its value trimmed.
pub fn proc_field(pid: i32, file: &str, name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix(name).map(|v| v.trim().to_owned()))
}

/// `voluntary_ctxt_switches` of a process: how often it went to sleep.
pub fn sleeps(pid: i32) -> u64 {
    proc_field(pid, "status", "voluntary_ctxt_switches:")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no voluntary_ctxt_switches for {pid}"))
}
