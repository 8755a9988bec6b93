//! The README's host entries, tested as written. Every `json` and `toml` block of README.md
//! must parse; every MCP server entry in them (`mcpServers.<name>` in JSON, `mcp_servers.<name>`
//! in TOML) is started exactly as written, with `/home/me` replaced by a fresh home that holds
//! only what the README assumes (the agent's folder `work`, the binaries in `.cargo/bin`), and
//! answers a short session: `initialize`, `tools/list`, and one `command` call of `ls`. The
//! one-line `mcp add` commands and the Inspector's line (the `sh` blocks after a
//! `<!-- host-entry: … -->` line) must pass the same arguments as the entries beside them;
//! `scripts/hosts/run.sh` runs them with the hosts themselves.
//!
//! The entries run under bubblewrap: without it the serve half fails, or with `LNK_ALLOW_SKIP=1`
//! prints "skipped" and passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use lnk_tests::sandbox::Sandbox;
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::{bins, procs, readme, results, sandbox};

/// The home every README entry is written for.
const PLACEHOLDER_HOME: &str = "/home/me";
/// A file the entry's `ls` must show: proof that the call ran in the agent's folder.
const PROBE_FILE: &str = "readme-probe.txt";

/// A fenced block of README.md: its language, its first line's number, its text, and the name
/// of the `<!-- host-entry: NAME -->` line right above it, if any.
struct Block {
    lang: String,
    line: usize,
    text: String,
    entry: Option<String>,
}

fn blocks(readme: &str) -> Vec<Block> {
    let mut found = Vec::new();
    let mut open: Option<Block> = None;
    let mut previous = "";
    for (index, line) in readme.lines().enumerate() {
        match open.take() {
            Some(block) if line.trim_start() == "```" => found.push(block),
            Some(mut block) => {
                block.text.push_str(line);
                block.text.push('\n');
                open = Some(block);
            }
            None => {
                if let Some(lang) = line.trim_start().strip_prefix("```") {
                    let entry = previous
                        .strip_prefix("<!-- host-entry: ")
                        .and_then(|rest| rest.strip_suffix(" -->"))
                        .map(str::to_owned);
                    open = Some(Block {
                        lang: lang.trim().to_owned(),
                        line: index + 2,
                        text: String::new(),
                        entry,
                    });
                }
            }
        }
        previous = line;
    }
    assert!(open.is_none(), "the docs end inside a fenced block");
    found
}

/// A server entry of a host's config: where it is, and what a host would start.
struct Entry {
    place: String,
    command: String,
    args: Vec<String>,
}

/// The server entries of a parsed block (as JSON; TOML converted).
fn server_entries(block: &Block, value: &Value) -> Vec<Entry> {
    let servers = value
        .get("mcpServers")
        .or_else(|| value.get("mcp_servers"))
        .and_then(Value::as_object);
    let mut entries = Vec::new();
    for (name, server) in servers.into_iter().flatten() {
        let place = format!("the docs, line {} ({name})", block.line);
        let command = server["command"]
            .as_str()
            .unwrap_or_else(|| panic!("{place}: the entry has no `command` string"))
            .to_owned();
        let args = server["args"]
            .as_array()
            .unwrap_or_else(|| panic!("{place}: the entry has no `args` array"))
            .iter()
            .map(|arg| {
                arg.as_str()
                    .unwrap_or_else(|| panic!("{place}: an argument is not a string: {arg}"))
                    .to_owned()
            })
            .collect();
        entries.push(Entry {
            place,
            command,
            args,
        });
    }
    entries
}

/// A block's text parsed as its language says.
fn parse(block: &Block, text: &str) -> Value {
    match block.lang.as_str() {
        "json" => serde_json::from_str(text).unwrap_or_else(|err| {
            panic!(
                "the docs, line {}: the JSON block does not parse: {err}",
                block.line
            )
        }),
        "toml" => {
            let table: toml::Table = toml::from_str(text).unwrap_or_else(|err| {
                panic!(
                    "the docs, line {}: the TOML block does not parse: {err}",
                    block.line
                )
            });
            serde_json::to_value(table).expect("TOML values convert to JSON")
        }
        other => panic!("not a config language: {other}"),
    }
}

fn config_blocks(readme: &str) -> Vec<Block> {
    blocks(readme)
        .into_iter()
        .filter(|b| b.lang == "json" || b.lang == "toml")
        .collect()
}

#[test]
fn every_json_and_toml_block_parses() {
    let readme = readme::DOCS;
    let configs = config_blocks(readme);
    assert!(!configs.is_empty(), "the docs have no JSON or TOML block");
    for block in &configs {
        parse(block, &block.text);
    }
}

#[test]
fn every_host_entry_names_the_binaries_and_paths_the_readme_assumes() {
    let readme = readme::DOCS;
    let mut seen = 0;
    for block in config_blocks(readme) {
        for entry in server_entries(&block, &parse(&block, &block.text)) {
            seen += 1;
            assert_eq!(
                entry.command, "/home/me/.cargo/bin/lnk-link-run",
                "{}: hosts start the binary where the Install section puts it",
                entry.place
            );
            assert_eq!(
                entry.args.first().map(String::as_str),
                Some("serve"),
                "{}",
                entry.place
            );
            for arg in &entry.args {
                assert!(
                    !arg.starts_with('~') && !arg.contains("$HOME"),
                    "{}: hosts expand neither `~` nor `$HOME`: {arg}",
                    entry.place
                );
            }
        }
    }
    // Claude Code, Codex, Gemini CLI and Claude Desktop each have one.
    assert!(
        seen >= 4,
        "the docs have {seen} server entries, fewer than its hosts"
    );
}

#[test]
fn every_host_entry_ends_with_the_recommended_sandbox_line() {
    let line = readme::recommended_elements();
    let readme = readme::DOCS;
    for block in config_blocks(readme) {
        for entry in server_entries(&block, &parse(&block, &block.text)) {
            let at = entry
                .args
                .iter()
                .position(|a| a == "--")
                .unwrap_or_else(|| panic!("{}: no `--` before a sandbox", entry.place));
            assert_eq!(
                entry.args[at..],
                line[..],
                "{}: the sandbox is not the recommended line as it is",
                entry.place
            );
        }
    }
}

/// The words of a README `sh` block, lines joined at a trailing `\`.
fn shell_words(block: &Block) -> Vec<String> {
    let joined = block.text.replace("\\\n", " ");
    shlex::split(&joined).unwrap_or_else(|| {
        panic!(
            "the docs, line {}: the command line does not split",
            block.line
        )
    })
}

/// The arguments a one-line command passes to `lnk-link-run`: the words after its path.
fn args_after_binary(block: &Block) -> Vec<String> {
    let words = shell_words(block);
    let at = words
        .iter()
        .position(|w| w == "/home/me/.cargo/bin/lnk-link-run")
        .unwrap_or_else(|| {
            panic!(
                "the docs, line {}: the command line does not start lnk-link-run",
                block.line
            )
        });
    let mut args = words[at + 1..].to_vec();
    // `gemini mcp add … <binary> -- serve …`: the `--` is gemini's, not serve's.
    if args.first().is_some_and(|a| a == "--") {
        args.remove(0);
    }
    args
}

#[test]
fn the_one_line_commands_pass_what_the_entries_hold() {
    let readme = readme::DOCS;
    let all = blocks(readme);
    let entry_args = |name: &str| -> Vec<String> {
        let block = all
            .iter()
            .find(|b| b.entry.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("the docs have no block after <!-- host-entry: {name} -->"));
        let entries = server_entries(block, &parse(block, &block.text));
        assert_eq!(
            entries.len(),
            1,
            "the docs, line {}: one server entry",
            block.line
        );
        entries
            .into_iter()
            .next()
            .map(|e| e.args)
            .unwrap_or_default()
    };
    let pairs = [
        ("claude-code-add", "claude-code"),
        ("codex-add", "codex"),
        ("gemini-cli-add", "gemini-cli"),
        ("inspector-cli", "claude-desktop"),
    ];
    for (line_name, entry_name) in pairs {
        let block = all
            .iter()
            .find(|b| b.entry.as_deref() == Some(line_name))
            .unwrap_or_else(|| {
                panic!("the docs have no block after <!-- host-entry: {line_name} -->")
            });
        assert_eq!(
            args_after_binary(block),
            entry_args(entry_name),
            "the docs, line {}: the `{line_name}` line and the `{entry_name}` entry start different servers",
            block.line
        );
    }
}

/// A home as the README assumes one on a fresh machine: the agent's folder and the binaries in
/// `.cargo/bin`, nothing else (no keyring, no state folder yet).
struct Home {
    _root: tempfile::TempDir,
    path: PathBuf,
}

fn fresh_home() -> Home {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(base).expect("the target's tmp folder");
    let root = tempfile::Builder::new()
        .prefix("readme-")
        .tempdir_in(base)
        .expect("a temporary folder");
    let path = root.path().join("home");
    std::fs::create_dir_all(path.join("work")).expect("the agent's folder");
    std::fs::write(path.join("work").join(PROBE_FILE), "hello\n").expect("the probe file");
    let bin = path.join(".cargo/bin");
    std::fs::create_dir_all(&bin).expect("~/.cargo/bin");
    let runner = bins::link_run();
    let supervisor = runner.with_file_name("lnk-link-supervise");
    assert!(supervisor.is_file(), "{} is missing", supervisor.display());
    std::os::unix::fs::symlink(&runner, bin.join("lnk-link-run")).expect("linking lnk-link-run");
    std::os::unix::fs::symlink(&supervisor, bin.join("lnk-link-supervise"))
        .expect("linking lnk-link-supervise");
    Home { _root: root, path }
}

/// Starts the entry as a host would and speaks to it briefly.
fn run_entry(entry: &Entry) {
    let argv: Vec<OsString> = entry.args.iter().map(OsString::from).collect();
    let mut serve = Serve::spawn_program(
        Path::new(&entry.command),
        &argv,
        Era::Legacy("2025-11-25"),
        &[],
        None,
        None,
    );
    let init = serve.initialize("2025-11-25");
    assert_eq!(
        init["protocolVersion"], "2025-11-25",
        "{}: {init}",
        entry.place
    );

    let tools = serve.result("tools/list", json!({}));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: tools/list without tools: {tools}", entry.place))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let mut wanted = vec!["command"];
    if entry.args.iter().any(|a| a == "--state") {
        wanted.extend(["start", "list", "read", "stop"]);
    }
    for name in wanted {
        assert!(
            names.contains(&name),
            "{}: no `{name}` tool in {names:?}",
            entry.place
        );
    }

    let result = serve.call(json!({"program": "ls", "args": ["-a"]}));
    let text = results::text(&result);
    assert!(
        !results::is_error(&result),
        "{}: `ls` was refused: {text}",
        entry.place
    );
    assert_eq!(
        results::structured(&result)["exit_code"],
        0,
        "{}: {text}",
        entry.place
    );
    assert!(
        text.contains(PROBE_FILE),
        "{}: `ls` did not list the agent's folder: {text}",
        entry.place
    );

    serve.close_stdin();
    let status = serve.wait_exit(ANSWER);
    assert!(
        status.success(),
        "{}: serve ended with {status}; stderr:\n{}",
        entry.place,
        serve.stderr()
    );
    // The sweep serve starts with --state must end too: nothing of the test stays running.
    if let Some(at) = entry.args.iter().position(|a| a == "--state") {
        procs::wait_gone(&entry.args[at + 1], Duration::from_secs(10));
    }
}

#[test]
fn every_host_entry_starts_serve_as_written() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let readme = readme::DOCS;
    let mut started = 0;
    for block in config_blocks(readme) {
        if server_entries(&block, &parse(&block, &block.text)).is_empty() {
            continue;
        }
        // Each block gets a home of its own, fresh: no keyring and no state folder yet.
        let home = fresh_home();
        let text = block
            .text
            .replace(PLACEHOLDER_HOME, &sandbox::path_str(&home.path));
        for entry in server_entries(&block, &parse(&block, &text)) {
            run_entry(&entry);
            started += 1;
        }
    }
    assert!(started >= 4, "only {started} server entries were started");
}

/// The README's three commands, as a newcomer runs them on a fresh home: the binaries where
/// `scripts/install.sh` puts them (linked here, the build standing for the install), then the
/// `config` line as written (the shell's `~` expanded to that home), then the host starting
/// the server `config` wrote: it must answer `tools/list` and run `ls` in the agent's folder.
/// (`scripts/hosts/run.sh` starts Claude Code itself on such an entry.)
#[test]
fn the_readme_quickstart_gives_a_working_server() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let readme = include_str!("../README.md");
    let marker = "<!-- quickstart: claude-code -->\n```sh\n";
    let at = readme
        .find(marker)
        .unwrap_or_else(|| panic!("README.md has no `{}`", marker.trim()));
    let block = &readme[at + marker.len()..];
    let block = &block[..block.find("\n```").expect("the quickstart block is closed")];
    let lines: Vec<&str> = block.split_inclusive('\n').collect();
    assert_eq!(
        lines.first().map(|l| l.trim()),
        Some("scripts/install.sh"),
        "{block}"
    );
    assert!(
        lines
            .last()
            .is_some_and(|l| l.trim() == "cd ~/work && claude"),
        "{block}"
    );
    let config: String = lines[1..lines.len() - 1].concat();
    let home = fresh_home();
    let home_str = sandbox::path_str(&home.path);
    let words = shlex::split(&config.replace("\\\n", " ")).expect("the config line splits");
    assert_eq!(words[0], "~/.cargo/bin/lnk-link-run", "{config}");
    // What the shell does with `~` before `config` sees it.
    let words: Vec<String> = words
        .iter()
        .map(|w| w.replacen('~', &home_str, usize::from(w.starts_with('~'))))
        .collect();
    let out = std::process::Command::new(&words[0])
        .args(&words[1..])
        .env_clear()
        .env("HOME", &home.path)
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .output()
        .expect("running the README's config line");
    assert!(
        out.status.success(),
        "the README's config line failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Value = serde_json::from_slice(
        &std::fs::read(home.path.join(".claude.json")).expect("config wrote ~/.claude.json"),
    )
    .expect("~/.claude.json is JSON");
    let server = &written["mcpServers"]["link-run"];
    let entry = Entry {
        place: "the README's quickstart".into(),
        command: server["command"].as_str().expect("a command").to_owned(),
        args: server["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("a string").to_owned())
            .collect(),
    };
    run_entry(&entry);
}

/// Every relative link of the README and of `docs/`, and every `docs/` page they name, exists.
#[test]
fn every_link_of_the_docs_leads_somewhere() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lies in the workspace");
    let mut pages = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("a docs entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        let folder = page.parent().expect("a folder");
        for target in markdown_links(&text) {
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || path.contains("://") || path.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            assert!(
                folder.join(path).exists(),
                "{}: the link `{target}` leads nowhere",
                page.display()
            );
        }
        for named in text.split(|c: char| c.is_whitespace() || "`()[]|,;:".contains(c)) {
            if let Some(rest) = named.strip_prefix("docs/")
                && rest.ends_with(".md")
            {
                assert!(
                    root.join("docs").join(rest).exists(),
                    "{}: names docs/{rest}, which does not exist",
                    page.display()
                );
            }
        }
    }
    assert!(checked >= 10, "only {checked} links were found");
}

/// The targets of the Markdown links `[text](target)` of `text`.
fn markdown_links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) if !after[..end].contains(char::is_whitespace) => {
                found.push(after[..end].to_owned());
                rest = &after[end..];
            }
            _ => rest = after,
        }
    }
    found
}
