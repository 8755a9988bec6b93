//! `lnk-link-run config <host>`: for each host the printed entry is the host's own format and
//! serve started with exactly its command and arguments answers `tools/list`; without a sandbox
//! line the entry holds the README's recommended line with `--files` bound (under bubblewrap);
//! `--write` merges into a file that holds other servers and settings, keeps them, leaves a
//! backup, and refuses a second time without `--force`; a line the sandbox check refuses and a
//! machine without bubblewrap write nothing and say why. Each test has its own HOME.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/procs.rs"]
#[allow(dead_code)]
mod procs;
#[path = "support/readme.rs"]
#[allow(dead_code)]
mod readme;
#[path = "support/sandbox.rs"]
#[allow(unused)]
mod sandbox;
#[path = "support/serve.rs"]
#[allow(dead_code)]
mod serve;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::{Value, json};

use crate::sandbox::{Sandbox, path_str};
use crate::serve::{Era, Serve};

const HOSTS: [&str; 5] = ["claude-code", "codex", "gemini", "claude-desktop", "vscode"];
/// A file the entry's `ls` must show: proof that the call ran in the agent's folder.
const PROBE_FILE: &str = "config-probe.txt";

/// A private HOME with the agent's folder `work` in it.
struct Home {
    _root: tempfile::TempDir,
    path: PathBuf,
}

impl Home {
    fn new() -> Home {
        let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
        std::fs::create_dir_all(base).unwrap();
        let root = tempfile::Builder::new()
            .prefix("config-")
            .tempdir_in(base)
            .unwrap();
        let path = root.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(path.join("work")).unwrap();
        std::fs::write(path.join("work").join(PROBE_FILE), "hello\n").unwrap();
        Home { _root: root, path }
    }

    fn work(&self) -> PathBuf {
        self.path.join("work")
    }

    /// `lnk-link-run config <args>` run in HOME, with this HOME and nothing else of the
    /// person's environment that names the hosts' folders.
    fn config(&self, args: &[String], path_var: Option<&Path>) -> Output {
        let mut command = Command::new(serve::link_run());
        command
            .arg("config")
            .args(args)
            .current_dir(&self.path)
            .env("HOME", &self.path)
            .env("XDG_CONFIG_HOME", self.path.join(".config"))
            .env_remove("CODEX_HOME")
            .env_remove("RUST_LOG");
        if let Some(path) = path_var {
            command.env("PATH", path);
        }
        command.output().unwrap()
    }
}

/// serve's flags for the tests: relative and `~` paths, as a person types them in a shell.
fn flags(extra: &[&str]) -> Vec<String> {
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
        "--state",
        "state",
        "--background",
        "2",
        "--background-timeout",
        "1m",
        "--background-output",
        "1MiB",
        "--background-keep",
        "1h",
        "--hops",
        "3",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    flags.extend(extra.iter().map(|e| (*e).to_owned()));
    flags
}

/// The pass-through prefix, with the check skipped on purpose.
fn passthrough() -> Vec<String> {
    vec![
        "--no-sandbox-check".to_owned(),
        "--".to_owned(),
        path_str(Path::new(env!("CARGO_BIN_EXE_lnk-test-passthrough"))),
    ]
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The printed document as JSON (TOML converted), and the server entry in it.
fn printed_entry(host: &str, out: &Output) -> (Value, Value) {
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
fn assert_host_settings(host: &str, entry: &Value) {
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

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {value}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// Starts the entry exactly as a host would: its command with its arguments, no shell; it
/// must answer `tools/list` and run `ls` in the agent's folder. Nothing is left running.
fn start_entry(entry: &Value, place: &str) {
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
        serve::text(&result).contains(PROBE_FILE),
        "{place}: `ls` did not list the agent's folder: {}",
        serve::text(&result)
    );
    serve.close_stdin();
    let status = serve.wait_exit(serve::ANSWER);
    assert!(
        status.success(),
        "{place}: serve ended with {status}: {}",
        serve.stderr()
    );
    let state = &args[args.iter().position(|a| a == "--state").unwrap() + 1];
    procs::wait_gone(state, Duration::from_secs(10));
}

#[test]
fn each_host_gets_its_own_format_and_serve_starts_with_exactly_that() {
    for host in HOSTS {
        let home = Home::new();
        let mut args = vec![host.to_owned()];
        args.extend(flags(&[]));
        args.extend(passthrough());
        let out = home.config(&args, None);
        let (_, entry) = printed_entry(host, &out);
        assert_eq!(
            entry["command"].as_str().map(PathBuf::from),
            Some(serve::link_run().canonicalize().unwrap()),
            "{host}: the entry starts this lnk-link-run by its absolute path"
        );
        assert_host_settings(host, &entry);
        let entry_args = strings(&entry["args"]);
        let work = path_str(&home.work());
        let state = path_str(&home.path.join("state"));
        for (flag, value) in [("--files", &work), ("--state", &state)] {
            let at = entry_args.iter().position(|a| a == flag).unwrap();
            assert_eq!(
                &entry_args[at + 1],
                value,
                "{host}: {flag} made absolute here"
            );
        }
        start_entry(&entry, host);
    }
}

#[test]
fn without_a_sandbox_line_the_entry_holds_the_recommended_line_for_this_machine() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for host in HOSTS {
        let home = Home::new();
        let mut args = vec![host.to_owned()];
        args.extend(flags(&[]));
        let out = home.config(&args, None);
        let (_, entry) = printed_entry(host, &out);
        let entry_args = strings(&entry["args"]);
        let at = entry_args.iter().position(|a| a == "--").unwrap();
        let mut wanted = vec!["--".to_owned()];
        wanted.extend(readme::recommended_sandbox(&home.work(), &[]));
        assert_eq!(
            entry_args[at..],
            wanted[..],
            "{host}: the README's line, --files bound"
        );
        assert!(!entry_args.iter().any(|a| a == "--no-sandbox-check"));
        start_entry(&entry, host);
    }
}

/// What is in each host's file before `--write`: another server and settings of the host's.
fn existing(host: &str, home: &Home) -> Vec<(PathBuf, String)> {
    let h = &home.path;
    let w = home.work();
    match host {
        "claude-code" => vec![
            (
                w.join(".mcp.json"),
                "{\n    \"mcpServers\": {\n        \"other\": {\"command\": \"/bin/other\", \"args\": []}\n    },\n    \"zzz\": true\n}\n".into(),
            ),
            (
                w.join(".claude/settings.local.json"),
                "{\"permissions\": {\"allow\": [\"Bash(ls:*)\"], \"deny\": [\"Read(./.env)\"]}, \"model\": \"x\"}\n".into(),
            ),
        ],
        "codex" => vec![(
            h.join(".codex/config.toml"),
            "# my settings\nmodel = \"m\"  # chosen\n\n[mcp_servers.other]\ncommand = \"/bin/other\"\n\n[profiles.fast]\nmodel = \"f\"\n".into(),
        )],
        "gemini" => vec![
            (
                h.join(".gemini/settings.json"),
                "{\n  \"theme\": \"Dark\",\n  \"mcpServers\": {\n    \"other\": {\"command\": \"/bin/other\"}\n  }\n}\n".into(),
            ),
            (
                h.join(".gemini/trustedFolders.json"),
                "{\"/somewhere\": \"TRUST_PARENT\"}".into(),
            ),
        ],
        "claude-desktop" => vec![(
            h.join(".config/Claude/claude_desktop_config.json"),
            "{\"globalShortcut\": \"Ctrl+Space\", \"mcpServers\": {}}\n".into(),
        )],
        "vscode" => vec![(
            w.join(".vscode/mcp.json"),
            "{\n\t\"inputs\": [],\n\t\"servers\": {\n\t\t\"other\": {\"type\": \"stdio\", \"command\": \"/bin/other\"}\n\t}\n}\n".into(),
        )],
        other => panic!("no host {other}"),
    }
}

fn parse(path: &Path, text: &str) -> Value {
    if path.extension().is_some_and(|e| e == "toml") {
        serde_json::to_value(toml::from_str::<toml::Table>(text).unwrap()).unwrap()
    } else {
        serde_json::from_str(text).unwrap_or_else(|err| panic!("{path:?}: {err}\n{text}"))
    }
}

/// `after` less what `config --write` adds must be `before`.
fn without_ours(host: &str, path: &Path, mut after: Value) -> Value {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let servers = match (host, name.as_str()) {
        ("codex", _) => Some("mcp_servers"),
        ("vscode", _) => Some("servers"),
        (_, "settings.local.json" | "trustedFolders.json") => None,
        _ => Some("mcpServers"),
    };
    if let Some(servers) = servers {
        after[servers].as_object_mut().unwrap().remove("link-run");
    }
    if name == "settings.local.json" {
        after
            .as_object_mut()
            .unwrap()
            .remove("enabledMcpjsonServers");
        let allow = after["permissions"]["allow"].as_array_mut().unwrap();
        assert_eq!(allow.pop(), Some(json!("mcp__link-run")));
    }
    if name == "trustedFolders.json" {
        after
            .as_object_mut()
            .unwrap()
            .remove(path_str(&path.parent().unwrap().parent().unwrap().join("work")).as_str());
    }
    after
}

#[test]
fn write_merges_keeps_the_rest_and_a_backup_and_refuses_a_second_time_without_force() {
    for host in HOSTS {
        let home = Home::new();
        let files = existing(host, &home);
        for (path, text) in &files {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let mut args = vec![host.to_owned(), "--write".to_owned()];
        args.extend(flags(&[]));
        args.extend(passthrough());
        let out = home.config(&args, None);
        assert!(out.status.success(), "{host}: {}", stderr(&out));
        let mut first = None;
        for (path, before) in &files {
            let after = std::fs::read_to_string(path).unwrap();
            let backup = format!("{}.bak", path.display());
            assert_eq!(
                &std::fs::read_to_string(&backup).unwrap(),
                before,
                "{host}: {backup}"
            );
            assert_eq!(
                without_ours(host, path, parse(path, &after)),
                parse(path, before),
                "{host}: {path:?} lost or changed something:\n{after}"
            );
            first.get_or_insert_with(|| {
                let (_, entry) = printed_entry(
                    host,
                    &Output {
                        stdout: after.clone().into_bytes(),
                        ..out.clone()
                    },
                );
                entry
            });
        }
        if host == "codex" {
            // toml_edit keeps the rest as it was, comments and blank lines included.
            let mut after = std::fs::read_to_string(&files[0].0).unwrap();
            let start = after.find("[mcp_servers.link-run]\n").unwrap();
            let end = after[start..]
                .find("\n[")
                .map_or(after.len(), |at| start + at + 1);
            after.replace_range(start..end, "");
            assert_eq!(after, files[0].1, "comments and layout kept");
        }
        let entry = first.unwrap();
        assert_host_settings(host, &entry);
        start_entry(&entry, &format!("{host} as written"));

        let written: Vec<String> = files
            .iter()
            .map(|(p, _)| std::fs::read_to_string(p).unwrap())
            .collect();
        let again = home.config(&args, None);
        assert_eq!(
            again.status.code(),
            Some(2),
            "{host}: a second --write is refused"
        );
        assert!(
            stderr(&again).contains("--force"),
            "{host}: {}",
            stderr(&again)
        );
        for ((path, _), text) in files.iter().zip(&written) {
            assert_eq!(
                &std::fs::read_to_string(path).unwrap(),
                text,
                "{host}: refused, yet written"
            );
        }
        args.insert(2, "--force".to_owned());
        let forced = home.config(&args, None);
        assert!(forced.status.success(), "{host}: {}", stderr(&forced));
        let path = &files[0].0;
        assert_eq!(
            std::fs::read_to_string(format!("{}.bak.1", path.display())).unwrap(),
            written[0],
            "{host}: --force keeps the first backup and makes another"
        );
    }
}

#[test]
fn a_line_the_check_refuses_is_refused_with_its_words_and_nothing_is_written() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let home = Home::new();
    let root = path_str(&home.path);
    let mut line = readme::recommended_sandbox(&home.work(), &[]);
    let at = line.iter().position(|a| a == "--bind").unwrap();
    line.splice(at..at, ["--bind".to_owned(), root.clone(), root.clone()]);
    let mut args = vec!["claude-code".to_owned(), "--write".to_owned()];
    args.extend(flags(&[]));
    args.push("--".to_owned());
    args.extend(line);
    let out = home.config(&args, None);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for words in [
        "serve would refuse to start",
        "appeared there",
        "--ro-bind",
        &root,
    ] {
        assert!(err.contains(words), "`{words}` missing: {err}");
    }
    assert!(out.stdout.is_empty());
    assert!(!home.work().join(".mcp.json").exists());
    assert!(!home.work().join(".claude").exists());
}

#[test]
fn without_bubblewrap_nothing_is_written_and_it_says_what_to_install() {
    let home = Home::new();
    let empty = home.path.join("no-bwrap-here");
    std::fs::create_dir(&empty).unwrap();
    let mut args = vec!["gemini".to_owned(), "--write".to_owned()];
    args.extend(flags(&[]));
    let out = home.config(&args, Some(&empty));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for words in [
        "bubblewrap",
        "apt-get install bubblewrap",
        "dnf install bubblewrap",
    ] {
        assert!(err.contains(words), "`{words}` missing: {err}");
    }
    assert!(out.stdout.is_empty());
    assert!(!home.path.join(".gemini").exists());
}

#[test]
fn serve_s_own_refusals_and_a_scope_the_host_lacks_are_refused() {
    let home = Home::new();
    let mut args = vec![
        "codex".to_owned(),
        "--scope".to_owned(),
        "project".to_owned(),
    ];
    args.extend(flags(&[]));
    args.extend(passthrough());
    let out = home.config(&args, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no project scope"),
        "{}",
        stderr(&out)
    );
    let mut args = vec!["vscode".to_owned()];
    args.extend(flags(&["--hops", "x"]));
    let out = home.config(&args, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--hops"), "{}", stderr(&out));
    let out = home.config(&["nohost".to_owned()], None);
    assert_eq!(out.status.code(), Some(2));
}
