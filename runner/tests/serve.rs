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
        .args(["--program", "true", "--no-sandbox-check", "--", "env"])
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
    let files = tempfile::tempdir().unwrap();
    let mut serve = serve_piped(files.path());
    let mut stdin = serve.stdin.take().unwrap();
    let total = lnk_link_run::MAX_CALLS + 2;
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
    let mut child = serve_piped_with(files.path(), "99999999999999h");
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

/// `serve` with `env` as its sandbox prefix (it runs what follows `--`; unchecked, on
/// purpose), the programs `sleep` and `true`, a call time limit of `timeout`, stdin and stdout
/// piped.
fn serve_piped_with(files: &std::path::Path, timeout: &str) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("lnk-link-run"))
        .args(["serve", "--files"])
        .arg(files)
        .args(["--programs-path", "/bin:/usr/bin", "--timeout", timeout])
        .args([
            "--output",
            "1KiB",
            "--program",
            "sleep",
            "--program",
            "true",
        ])
        .args(["--no-sandbox-check", "--", "env"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// [`serve_piped_with`] a 30 s time limit.
fn serve_piped(files: &std::path::Path) -> std::process::Child {
    serve_piped_with(files, "30s")
}

/// `serve` with these flags, which must refuse to start; its output.
fn refused(args: &[&str]) -> std::process::Output {
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("lnk-link-run"))
        .arg("serve")
        .args(args)
        .args([
            "--timeout",
            "1s",
            "--output",
            "1KiB",
            "--program",
            "true",
            "--no-sandbox-check",
            "--",
            "env",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    out
}

fn next_json(lines: &mut impl Iterator<Item = std::io::Result<String>>) -> serde_json::Value {
    serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
}

#[test]
fn a_byte_order_mark_and_bad_notification_params_lose_nothing() {
    use std::io::{BufRead, BufReader, Write};
    let files = tempfile::tempdir().unwrap();
    let mut serve = serve_piped(files.path());
    let mut stdin = serve.stdin.take().unwrap();
    stdin
        .write_all(b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n")
        .unwrap();
    // A notification gets no answer, not even for params that are not an object.
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/whatever","params":[1]}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":2,"method":"ping"}}"#).unwrap();
    drop(stdin);
    let answers: Vec<serde_json::Value> = BufReader::new(serve.stdout.take().unwrap())
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0]["id"], 1, "{answers:?}");
    assert_eq!(answers[1]["id"], 2, "{answers:?}");
    assert!(serve.wait().unwrap().success());
}

#[test]
fn an_id_in_flight_is_refused_for_any_request() {
    use std::io::{BufRead, BufReader, Write};
    let files = tempfile::tempdir().unwrap();
    let mut serve = serve_piped(files.path());
    let mut stdin = serve.stdin.take().unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"command","arguments":{{"program":"sleep","args":["1"]}}}}}}"#
    )
    .unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":7,"method":"ping"}}"#).unwrap();
    let refused = next_json(&mut lines);
    assert_eq!(refused["id"], 7);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    let answered = next_json(&mut lines);
    assert_eq!(answered["id"], 7);
    assert_eq!(
        answered["result"]["structuredContent"]["exit_code"], 0,
        "{answered}"
    );
    // Once answered, the id may be used again at once.
    for _ in 0..50 {
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"command","arguments":{{"program":"true"}}}}}}"#
        )
        .unwrap();
        let again = next_json(&mut lines);
        assert_eq!(
            again["result"]["structuredContent"]["exit_code"], 0,
            "{again}"
        );
    }
    drop(stdin);
    assert!(serve.wait().unwrap().success());
}

#[test]
fn progress_only_increases_even_after_a_stall() {
    use std::io::{BufRead, BufReader, Write};
    let files = tempfile::tempdir().unwrap();
    let mut serve = serve_piped(files.path());
    let pid = rustix::process::Pid::from_raw(serve.id() as i32).unwrap();
    let mut stdin = serve.stdin.take().unwrap();
    let mut lines = BufReader::new(serve.stdout.take().unwrap()).lines();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"_meta":{{"progressToken":"p"}},"name":"command","arguments":{{"program":"sleep","args":["5"]}}}}}}"#
    )
    .unwrap();
    let first = next_json(&mut lines);
    assert_eq!(first["method"], "notifications/progress", "{first}");
    // serve cannot run for three seconds; ticks missed then are not caught up in a burst.
    rustix::process::kill_process(pid, rustix::process::Signal::STOP).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(3));
    rustix::process::kill_process(pid, rustix::process::Signal::CONT).unwrap();
    let mut values = vec![first["params"]["progress"].as_f64().unwrap()];
    loop {
        let message = next_json(&mut lines);
        if message["id"] == 1 {
            break;
        }
        values.push(message["params"]["progress"].as_f64().unwrap());
    }
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    drop(stdin);
    assert!(serve.wait().unwrap().success());
}

#[test]
fn a_client_that_does_not_read_cannot_grow_serve() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::fd::AsFd;
    let files = tempfile::tempdir().unwrap();
    let mut serve = serve_piped(files.path());
    let pid = serve.id();
    let mut stdin = serve.stdin.take().unwrap();
    let stdout = serve.stdout.take().unwrap();
    // A second handle on the stdin pipe, to see how full it is; closed before the end, so
    // that serve still sees its stdin end.
    let stdin_pipe = stdin.as_fd().try_clone_to_owned().unwrap();
    // Each small request is answered with the whole tool list: unread, the answers would
    // pile up in serve without a bound.
    let writer = std::thread::spawn(move || {
        for id in 0..20_000 {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            if writeln!(stdin, "{line}").is_err() {
                return;
            }
        }
    });
    held_back(pid, stdin_pipe.as_fd(), stdout.as_fd());
    drop(stdin_pipe);
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert!(rss_kib < 48 * 1024, "serve grew to {rss_kib} KiB");
    // Everything is still answered once the client reads.
    let answered = BufReader::new(stdout).lines().count();
    writer.join().unwrap();
    assert_eq!(answered, 20_000);
    assert!(serve.wait().unwrap().success());
}

/// Waits until serve holds back: answers nobody reads wait in its stdout pipe, its stdin
/// pipe is full of requests it does not take, none of its threads runs, and neither pipe
/// moved since the last look (a serve without a bound would go on reading and answering, and
/// grow). Panics after a minute.
fn held_back(pid: u32, stdin: std::os::fd::BorrowedFd<'_>, stdout: std::os::fd::BorrowedFd<'_>) {
    let pending = |pipe| rustix::io::ioctl_fionread(pipe).unwrap();
    let capacity = rustix::pipe::fcntl_getpipe_size(stdin).unwrap() as u64;
    let asleep = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
            .all(|task| {
                let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
                // The state follows the command's closing parenthesis.
                stat.rsplit_once(") ")
                    .is_some_and(|(_, rest)| !rest.starts_with('R'))
            })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut last = None;
    loop {
        let now = (pending(stdin), pending(stdout));
        // Within a page of full, the stdin pipe has no room for another request.
        let held = now.0 + 4096 >= capacity && now.1 > 0 && asleep();
        if held && last == Some(now) {
            return;
        }
        last = held.then_some(now);
        assert!(
            std::time::Instant::now() < deadline,
            "serve never held back: {} bytes of {capacity} wait in its stdin, {} in its stdout",
            now.0,
            now.1,
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn a_refusal_stays_one_line_whatever_the_paths_hold() {
    let out = refused(&["--files", "/nonexistent/a\nb", "--programs-path", "/bin"]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("a\\nb"), "{stderr}");

    let out = refused(&["--files", "/", "--programs-path", "bin:usr/bin"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no absolute folder"));
}

#[test]
fn closing_stdin_ends_serve_even_when_the_client_stopped_reading() {
    use std::io::Write;
    let files = tempfile::tempdir().unwrap();
    let mut serve = serve_piped(files.path());
    let mut stdin = serve.stdin.take().unwrap();
    // Never read: the answers fill the pipe and the queue, and the reader of stdin waits.
    let _unread = serve.stdout.take().unwrap();
    let writer = std::thread::spawn(move || {
        for id in 0..300 {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            if writeln!(stdin, "{line}").is_err() {
                return;
            }
        }
        // Closing stdin here: serve must see it and end.
    });
    writer.join().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let status = loop {
        if let Some(status) = serve.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = serve.kill();
            let _ = serve.wait();
            panic!("serve did not end after its stdin closed");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}

#[test]
fn a_client_that_closes_stdin_but_still_reads_gets_every_answer() {
    use std::io::{BufRead, BufReader, Write};
    let files = tempfile::tempdir().unwrap();
    let mut serve = serve_piped(files.path());
    let mut stdin = serve.stdin.take().unwrap();
    const REQUESTS: usize = 3000;
    // All requests, then stdin closed, while the answers are still being read, slowly: serve
    // must not take the closed stdin for a client that reads no more.
    let writer = std::thread::spawn(move || {
        for id in 0..REQUESTS {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            writeln!(stdin, "{line}").unwrap();
        }
    });
    let mut answered = 0;
    for line in BufReader::new(serve.stdout.take().unwrap()).lines() {
        line.unwrap();
        answered += 1;
        if answered % 2 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    writer.join().unwrap();
    assert_eq!(answered, REQUESTS);
    assert!(serve.wait().unwrap().success());
}
