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

use serde_json::Value;

use lnk_tests::readme;

/// The docs' relative links lead somewhere.
mod links;
/// The entries started as written, and the quickstart.
mod started;

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
