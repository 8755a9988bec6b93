//! The runner's own quick checks of its binary; the full end-to-end suite is in `tests/`.
//! (Having an integration test here also makes `cargo test` build `lnk-link-run` for it.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use assert_cmd::Command;
use predicates::prelude::*;

#[test]
fn answers_a_handshake_and_exits_zero_when_stdin_ends() {
    let files = tempfile::tempdir().unwrap();
    let input = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#,
        "\n"
    );
    Command::cargo_bin("lnk-link-run")
        .unwrap()
        .args(["serve", "--files"])
        .arg(files.path())
        .args([
            "--programs-path",
            "/bin",
            "--timeout",
            "5s",
            "--output",
            "1KiB",
        ])
        .args(["--program", "true", "--", "env"])
        .write_stdin(input)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            r#""protocolVersion":"2024-11-05""#,
        ))
        .stdout(predicate::str::contains(
            r#"{"id":2,"jsonrpc":"2.0","result":{}}"#,
        ));
}

#[test]
fn refuses_to_start_without_a_sandbox_in_one_line() {
    let files = tempfile::tempdir().unwrap();
    let assert = Command::cargo_bin("lnk-link-run")
        .unwrap()
        .args(["serve", "--files"])
        .arg(files.path())
        .args([
            "--programs-path",
            "/bin",
            "--timeout",
            "5s",
            "--output",
            "1KiB",
        ])
        .args(["--program", "true"])
        .assert()
        .failure()
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("a sandbox is required"));
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn refuses_calls_beyond_the_most_it_runs_at_once() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let files = tempfile::tempdir().unwrap();
    let mut serve = std::process::Command::new(assert_cmd::cargo::cargo_bin("lnk-link-run"))
        .args(["serve", "--files"])
        .arg(files.path())
        .args([
            "--programs-path",
            "/bin:/usr/bin",
            "--timeout",
            "30s",
            "--output",
            "1KiB",
        ])
        .args(["--program", "sleep", "--", "env"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = serve.stdin.take().unwrap();
    let total = lnk_link_run::server::MAX_CALLS + 2;
    for id in 0..total {
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"command","arguments":{{"program":"sleep","args":["30"]}}}}}}"#
        )
        .unwrap();
    }
    stdin.flush().unwrap();
    // The refusals come at once, while the others sleep.
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    for _ in 0..2 {
        let line = lines.next().unwrap().unwrap();
        assert!(line.contains(r#""isError":true"#), "{line}");
        assert!(line.contains("calls are running"), "{line}");
    }
    // Closing stdin kills the calls in flight; serve exits 0 without answering them.
    drop(stdin);
    assert!(serve.wait().unwrap().success());
}

#[test]
fn a_limit_too_long_to_count_is_no_limit() {
    let files = tempfile::tempdir().unwrap();
    let input = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"command","arguments":{"program":"true"}}}"#,
        "\n"
    );
    // stdin stays open until the answer came: its end would kill the call in flight.
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("lnk-link-run"))
        .args(["serve", "--files"])
        .arg(files.path())
        .args([
            "--programs-path",
            "/bin:/usr/bin",
            "--timeout",
            "99999999999999h",
        ])
        .args(["--output", "1KiB", "--program", "true", "--", "env"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::{BufRead, Write};
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains(r#""exit_code":0"#), "{line}");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}
