//! A private HOME for each test, serve's flags as a person types them, the printed entry, and
//! starting an entry exactly as a host does.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::{Value, json};

use lnk_tests::runs::Flags;
use lnk_tests::sandbox::path_str;
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::{bins, results};

pub const HOSTS: [&str; 5] = ["claude-code", "codex", "gemini", "claude-desktop", "vscode"];
/// A file the entry's `ls` must show: proof that the call ran in the agent's folder.
pub const PROBE_FILE: &str = "config-probe.txt";

/// The variables by which the tools name their caches outside the HOME.
const CACHE_VARIABLES: [&str; 10] = [
    "CARGO_HOME",
    "GOMODCACHE",
    "GOCACHE",
    "GOPATH",
    "GOENV",
    "PIP_CACHE_DIR",
    "PIP_CONFIG_FILE",
    "npm_config_cache",
    "NPM_CONFIG_CACHE",
    "XDG_CACHE_HOME",
];

/// A private HOME with the agent's folder `work` in it.
pub struct Home {
    _root: tempfile::TempDir,
    /// The HOME folder.
    pub path: PathBuf,
}

impl Home {
    pub fn new() -> Home {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(base).unwrap();
        let root = tempfile::Builder::new()
            .prefix("config-")
            .tempdir_in(base)
            .unwrap();
        let path = root.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(path.join("work")).unwrap();
        std::fs::write(path.join("work").join(PROBE_FILE), "hello\n").unwrap();
        // The README's entries allow cargo from `~/.cargo/bin`, as a rustup install puts it.
        lnk_tests::toolchains::give_cargo(&path);
        Home { _root: root, path }
    }

    pub fn work(&self) -> PathBuf {
        self.path.join("work")
    }

    /// `lnk-link-run config <args>` run in HOME, with this HOME and nothing else of the
    /// person's environment that names the hosts' folders.
    pub fn config(&self, args: &[String], path_var: Option<&Path>) -> Output {
        let mut command = Command::new(bins::link_run());
        command
            .arg("config")
            .args(args)
            .current_dir(&self.path)
            .env("HOME", &self.path)
            .env("XDG_CONFIG_HOME", self.path.join(".config"))
            .env_remove("CODEX_HOME")
            .env_remove("RUST_LOG");
        // The tools' caches are found in this HOME alone (config adds the ones it finds).
        for name in CACHE_VARIABLES {
            command.env_remove(name);
        }
        if let Some(path) = path_var {
            command.env("PATH", path);
        }
        command.output().unwrap()
    }
}

/// The background flags `config`'s tests give serve, with `--state`.
pub const STATE_FLAGS: Flags = Flags {
    background: 2,
    timeout: "1m",
    output: "1MiB",
    keep: "1h",
    hops: 3,
};

/// serve's flags for the tests: relative and `~` paths, as a person types them in a shell.
pub fn flags(extra: &[&str]) -> Vec<String> {
    let mut flags: Vec<String> = [
        "--files",
        "~/work",
        "--programs-path",
        "/usr/bin:/bin",
        "--timeout",
        "30s",
        "--output",
        "64KiB",
        "--program",
        "ls",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    flags.extend(STATE_FLAGS.args("state"));
    flags.extend(extra.iter().map(|e| (*e).to_owned()));
    flags
}

/// The pass-through prefix, with the check skipped on purpose.
pub fn passthrough() -> Vec<String> {
    vec![
        "--no-sandbox-check".to_owned(),
        "--".to_owned(),
        path_str(Path::new(env!("CARGO_BIN_EXE_lnk-test-passthrough"))),
    ]
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The printed document as JSON (TOML converted), and the server entry in it.
pub fn printed_entry(host: &str, out: &Output) -> (Value, Value) {
    assert!(
        out.status.success(),
        "config {host} failed: {}",
        stderr(out)
    );
    let text = stdout(out);
    let doc: Value = if host == "codex" {
        let table: toml::Table = toml::from_str(&text)
            .unwrap_or_else(|err| panic!("config codex printed no TOML: {err}\n{text}"));
        serde_json::to_value(table).unwrap()
    } else {
        serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("config {host} printed no JSON: {err}\n{text}"))
    };
    let servers = match host {
        "codex" => &doc["mcp_servers"],
        "vscode" => &doc["servers"],
        _ => &doc["mcpServers"],
    };
    let entry = servers["link-run"].clone();
    assert!(
        entry.is_object(),
        "config {host}: no link-run entry in {doc}"
    );
    (doc, entry)
}

/// The host's own settings Link Run needs, in the entry.
pub fn assert_host_settings(host: &str, entry: &Value) {
    match host {
        "claude-code" => assert_eq!(entry["timeout"], 300_000, "{entry}"),
        "codex" => {
            assert_eq!(entry["tool_timeout_sec"], 300, "{entry}");
            assert_eq!(entry["default_tools_approval_mode"], "approve", "{entry}");
        }
        "gemini" => {
            assert_eq!(entry["timeout"], 300_000, "{entry}");
            assert_eq!(entry["trust"], true, "{entry}");
        }
        "vscode" => assert_eq!(entry["type"], "stdio", "{entry}"),
        _ => {}
    }
}

pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Starts the entry exactly as a host would: its command with its arguments, no shell; it
/// must answer `tools/list` and run `ls` in the agent's folder. Nothing is left running.
pub fn start_entry(entry: &Value, place: &str) {
    let command = PathBuf::from(entry["command"].as_str().unwrap());
    let args = strings(&entry["args"]);
    let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
    let mut serve =
        Serve::spawn_program(&command, &argv, Era::Legacy("2025-11-25"), &[], None, None);
    serve.initialize("2025-11-25");
    let tools = serve.result("tools/list", json!({}));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{place}: tools/list without tools: {tools}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    for name in ["command", "start", "list", "read", "stop"] {
        assert!(names.contains(&name), "{place}: no `{name}` in {names:?}");
    }
    let result = serve.call(json!({"program": "ls", "args": ["-a"]}));
    assert!(
        results::text(&result).contains(PROBE_FILE),
        "{place}: `ls` did not list the agent's folder: {}",
        results::text(&result)
    );
    serve.close_stdin();
    let status = serve.wait_exit(ANSWER);
    assert!(
        status.success(),
        "{place}: serve ended with {status}: {}",
        serve.stderr()
    );
    let state = &args[args.iter().position(|a| a == "--state").unwrap() + 1];
    lnk_tests::procs::wait_gone(state, Duration::from_secs(10));
}
