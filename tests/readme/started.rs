//! The README's host entries started as a host starts them, in a fresh home standing for
//! `/home/me`: each answers a short session; and the README's three quickstart commands give a
//! working server.
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Entry, PLACEHOLDER_HOME, PROBE_FILE, config_blocks, parse, server_entries};
use lnk_tests::sandbox::Sandbox;
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::{bins, procs, readme, results, sandbox};

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
    // The entries allow cargo from `~/.cargo/bin`, where a rustup install in the home puts it.
    lnk_tests::toolchains::give_cargo(&path);
    Home { _root: root, path }
}

/// Starts the entry as a host would and speaks to it briefly.
fn run_entry(entry: &Entry, cwd: Option<&Path>) {
    run_entry_and(entry, cwd, |_| {});
}

/// [`run_entry`], with `more` asked of the server before it is closed.
fn run_entry_and(entry: &Entry, cwd: Option<&Path>, more: impl FnOnce(&mut Serve)) {
    let argv: Vec<OsString> = entry.args.iter().map(OsString::from).collect();
    let mut serve = Serve::spawn_program(
        Path::new(&entry.command),
        &argv,
        Era::Legacy("2025-11-25"),
        &[],
        cwd,
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
    more(&mut serve);

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
            run_entry(&entry, None);
            started += 1;
        }
    }
    assert!(started >= 4, "only {started} server entries were started");
}

/// The README's three commands, as a newcomer runs them on a fresh home with rustup in it:
/// the binaries where `scripts/install.sh` puts them (linked here, the build standing for the
/// install), cargo in `~/.cargo/bin` and rustup's `~/.rustup` (linked to this machine's), then
/// the `config` line as written (the shell's `~` expanded to that home), then the host
/// starting the server `config` wrote: it must answer `tools/list`, run `ls` in the agent's
/// folder, and run `cargo test` on a crate through rustup inside the sandbox. (`scripts/hosts/run.sh`
/// starts Claude Code itself on such an entry, and has it run `cargo test`.)
#[test]
fn the_readme_quickstart_gives_a_working_server() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let readme = include_str!("../../README.md");
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
    // A crate of the agent's, tested through rustup inside the sandbox.
    let adder = home.path.join("work/adder");
    std::fs::create_dir_all(adder.join("src")).expect("the crate's folder");
    std::fs::write(
        adder.join("Cargo.toml"),
        "[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .expect("the crate's manifest");
    std::fs::write(
        adder.join("src/lib.rs"),
        "#[test]\nfn adds() {\n    assert_eq!(2 + 3, 5);\n}\n",
    )
    .expect("the crate's source");
    // Started as a host started in `~/work` starts it (`cd ~/work && claude`): with
    // `--files-from roots`, a client that gives no roots works in that folder.
    run_entry_and(&entry, Some(&home.path.join("work")), |serve| {
        let id = serve.send_call(
            json!({"program": "cargo", "args": ["test", "--offline"], "dir": "adder"}),
            None,
        );
        let result = serve.call_result(id, Duration::from_secs(120));
        let text = results::text(&result);
        assert_eq!(
            results::structured(&result)["exit_code"],
            0,
            "the README's quickstart: `cargo test` failed inside: {text}"
        );
        assert!(text.contains("test result: ok. 1 passed"), "{text}");
    });
}
