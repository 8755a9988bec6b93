//! `serve`'s flags: each refusal to start is one line on stderr, a non-zero exit, nothing on
//! stdout and nothing written; valid `--state` flags start a server that serves.
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use predicates::prelude::*;
use serde_json::json;

use lnk_tests::bins::link_run;
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::setup::Setup;

both_sandboxes!(
    refuses_nothing_after_separator,
    refuses_missing_required_flag,
    refuses_files_not_a_folder,
    refuses_bad_duration_or_size,
    refuses_malformed_var,
    refuses_way_in_without_as,
    refuses_state_without_its_numbers,
    refuses_state_inside_files,
    starts_with_valid_state_flags,
    refuses_paths_that_are_not_absolute,
);

/// The `--state` flags with every number they need.
fn state_flags(state: &Path) -> Vec<String> {
    Flags {
        background: 2,
        timeout: "1h",
        output: "1MiB",
        keep: "24h",
        hops: 3,
    }
    .args(&path_str(state))
}

/// Every path below `root` with its size (0 for folders), to show that nothing was written.
fn snapshot(root: &Path) -> BTreeMap<String, u64> {
    let mut seen = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().map(Result::unwrap) {
            let meta = entry.path().symlink_metadata().unwrap();
            if meta.is_dir() {
                todo.push(entry.path());
            }
            let size = if meta.is_file() { meta.len() } else { 0 };
            seen.insert(path_str(&entry.path()), size);
        }
    }
    seen
}

/// `argv` without every occurrence of `flag` and its value.
fn without(argv: &[OsString], flag: &str) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut args = argv.iter();
    let mut in_sandbox = false;
    while let Some(arg) = args.next() {
        if !in_sandbox && arg == flag {
            args.next();
            continue;
        }
        in_sandbox |= arg == "--";
        out.push(arg.clone());
    }
    out
}

/// Runs `lnk-link-run <argv>` and checks that it refuses to start: a non-zero exit, one line on
/// stderr naming one of `mentions` (case-insensitive; empty = anything), an empty stdout, and no
/// change below the test's folder.
fn refuses(setup: &Setup, argv: &[OsString], mentions: &[&str]) -> String {
    refuses_in(setup, argv, mentions, Path::new(env!("CARGO_MANIFEST_DIR")))
}

/// [`refuses`], with serve started in `cwd`; returns the refusal's line.
fn refuses_in(setup: &Setup, argv: &[OsString], mentions: &[&str], cwd: &Path) -> String {
    let before = snapshot(setup.root.path());
    let assert = assert_cmd::Command::new(link_run())
        .current_dir(cwd)
        .args(argv)
        .env_remove("RUST_LOG")
        .write_stdin("")
        .timeout(Duration::from_secs(20))
        .assert()
        .failure()
        .stdout(predicate::str::is_empty());
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    let line = err.trim_end_matches('\n');
    assert!(
        !line.trim().is_empty() && line.lines().count() == 1,
        "a refusal is one line on stderr, not {err:?}; argv {argv:?}"
    );
    let lower = line.to_lowercase();
    assert!(
        mentions.is_empty() || mentions.iter().any(|m| lower.contains(&m.to_lowercase())),
        "the refusal {line:?} names none of {mentions:?}; argv {argv:?}"
    );
    assert_eq!(
        before,
        snapshot(setup.root.path()),
        "a refused start wrote something: {argv:?}"
    );
    line.to_owned()
}

fn refuses_nothing_after_separator(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut argv = setup.serve().argv();
    let separator = argv.iter().position(|a| a == "--").unwrap();
    argv.truncate(separator + 1);
    refuses(&setup, &argv, &["sandbox"]);
    argv.truncate(separator);
    refuses(&setup, &argv, &["sandbox"]);
}

fn refuses_missing_required_flag(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let argv = setup.serve().argv();
    for flag in [
        "--files",
        "--programs-path",
        "--timeout",
        "--output",
        "--program",
    ] {
        refuses(
            &setup,
            &without(&argv, flag),
            &[flag, flag.trim_start_matches('-')],
        );
    }
    let bogus = setup.serve().flags(&["--bogus", "1"]).argv();
    refuses(&setup, &bogus, &["bogus"]);
}

fn refuses_files_not_a_folder(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let missing = setup.path("nope");
    let afile = setup.path("afile");
    std::fs::write(&afile, "not a folder").unwrap();
    for files in [&missing, &afile] {
        let mut argv = without(&setup.serve().argv(), "--files");
        argv.splice(1..1, ["--files".into(), files.clone().into_os_string()]);
        refuses(&setup, &argv, &["files", &path_str(files)]);
    }
    assert!(!missing.exists());
}

fn refuses_bad_duration_or_size(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    for timeout in ["10 parsecs", "abc", "1x", ""] {
        let argv = setup.serve().timeout(timeout).argv();
        refuses(&setup, &argv, &["timeout", "duration"]);
    }
    for output in ["lots", "12XB", "3 bananas", ""] {
        let argv = setup.serve().output(output).argv();
        refuses(&setup, &argv, &["output", "size", "byte"]);
    }
    let state = setup.path("state");
    for (flag, bad, words) in [
        (
            "--background-timeout",
            "soon",
            &["background-timeout", "duration"][..],
        ),
        (
            "--background-keep",
            "forever",
            &["background-keep", "duration"],
        ),
        (
            "--background-output",
            "big",
            &["background-output", "size", "byte"],
        ),
        ("--background", "many", &["background", "number", "integer"]),
        ("--hops", "x", &["hops", "number", "integer"]),
    ] {
        let mut flags = state_flags(&state);
        let at = flags.iter().position(|f| f == flag).unwrap();
        flags[at + 1] = bad.into();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let argv = setup.serve().flags(&flags).argv();
        refuses(&setup, &argv, words);
    }
}

fn refuses_malformed_var(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    for var in ["NOEQUALS", "=value"] {
        let argv = setup.serve().var(var).argv();
        refuses(&setup, &argv, &["var", var]);
    }
}

fn refuses_way_in_without_as(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let flags = state_flags(&setup.path("state"));
    let way_in = path_str(&setup.path("way-in.sock"));
    let mut alone: Vec<&str> = flags.iter().map(String::as_str).collect();
    alone.extend(["--way-in", &way_in]);
    refuses(
        &setup,
        &setup.serve().flags(&alone).argv(),
        &["as", "way-in"],
    );
    let mut as_alone: Vec<&str> = flags.iter().map(String::as_str).collect();
    as_alone.extend(["--as", "agent-1"]);
    refuses(
        &setup,
        &setup.serve().flags(&as_alone).argv(),
        &["as", "way-in"],
    );
}

fn refuses_state_without_its_numbers(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let state = setup.path("state");
    let argv = setup.serve().flags(&["--state", &path_str(&state)]).argv();
    refuses(&setup, &argv, &["background", "hops"]);
    let flags = state_flags(&state);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let full_with_state = setup.serve().flags(&flags).argv();
    for flag in [
        "--background",
        "--background-timeout",
        "--background-output",
        "--background-keep",
        "--hops",
    ] {
        refuses(
            &setup,
            &without(&full_with_state, flag),
            &[flag.trim_start_matches('-')],
        );
    }
}

fn refuses_state_inside_files(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    for state in [setup.files.join("state"), setup.files.clone()] {
        let flags = state_flags(&state);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let argv = setup.serve().flags(&flags).argv();
        refuses(&setup, &argv, &["state"]);
    }
}

fn starts_with_valid_state_flags(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let state = setup.path("state");
    std::fs::create_dir(&state).unwrap();
    let flags = state_flags(&state);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut serve = setup.serve().flags(&flags).start();
    let tools = serve.result("tools/list", json!({}));
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"command"), "{tools}");
    let result = serve.call(json!({"program": "true"}));
    assert_eq!(lnk_tests::results::ran(&result)["exit_code"], 0, "{result}");
}

/// Hosts start serve without a shell: `~` is not expanded, and a relative path would land in
/// whatever folder the host starts in. So `--files`, `--state`, `--keyring` and `--way-in` must
/// be absolute, and the refusal says why. serve starts in the test's folder, where `files` and
/// the others would be found if they were taken relative to it.
fn refuses_paths_that_are_not_absolute(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let root = setup.root.path().to_path_buf();
    std::fs::create_dir(root.join("state")).unwrap();
    std::fs::create_dir(root.join("keyring")).unwrap();
    let state = state_flags(&setup.path("state"));
    let way_in = path_str(&setup.path("way-in.sock"));
    let keyring = path_str(&setup.path("keyring"));
    for bad in ["files", "./files", "~/files", "~"] {
        let mut argv = without(&setup.serve().argv(), "--files");
        argv.splice(1..1, ["--files".into(), bad.into()]);
        check_not_absolute(&setup, &argv, "--files", bad);
    }
    for bad in ["state", "~/.local/state/lnk/agent-1"] {
        let mut flags = state.clone();
        flags[1] = bad.to_owned();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        check_not_absolute(&setup, &setup.serve().flags(&flags).argv(), "--state", bad);
    }
    for bad in ["way-in.sock", "~/way-in.sock"] {
        let mut flags: Vec<&str> = state.iter().map(String::as_str).collect();
        flags.extend(["--way-in", bad, "--as", "agent-1", "--keyring", &keyring]);
        check_not_absolute(&setup, &setup.serve().flags(&flags).argv(), "--way-in", bad);
    }
    for bad in ["keyring", "~/.config/lnk/keyring"] {
        let mut flags: Vec<&str> = state.iter().map(String::as_str).collect();
        flags.extend(["--way-in", &way_in, "--as", "agent-1", "--keyring", bad]);
        check_not_absolute(
            &setup,
            &setup.serve().flags(&flags).argv(),
            "--keyring",
            bad,
        );
    }
}

fn check_not_absolute(setup: &Setup, argv: &[OsString], flag: &str, bad: &str) {
    let line = refuses_in(setup, argv, &[flag], setup.root.path());
    for word in [flag, bad, "absolute", "shell", "`~`"] {
        assert!(
            line.contains(word),
            "the refusal of {flag} {bad} does not say {word:?}: {line}"
        );
    }
}
