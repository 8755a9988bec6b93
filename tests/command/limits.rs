//! The `command` tool's limits: a process group per call killed at `--timeout`, leftovers
//! killed a second after the program exits (without waiting on pipes they hold), nothing outliving
//! `serve` even when it is SIGKILLed, and output kept to a head and a tail with exact counts,
//! bounded memory, and UTF-8-safe cuts.
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lnk_tests::procs::{marker, peak_rss_kib, wait_dead, wait_for_role, wait_gone};
use lnk_tests::results::{ran, text};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::setup::Setup;

both_sandboxes!(
    timeout_kills_the_group,
    leftovers_holding_pipes_are_killed,
    leftovers_without_pipes_are_killed,
    nothing_outlives_serve_killed,
    output_keeps_head_and_tail,
    output_at_the_limit_is_whole,
    output_cuts_keep_utf8_whole,
);

fn timeout_kills_the_group(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("2s").start();
    let mark = marker();
    let started = Instant::now();
    let id = serve.send_call(
        json!({"program": "lnk-test-procs", "args": ["tree", &mark, "60"]}),
        None,
    );
    // The program and its child (same group) both run before the timeout.
    wait_for_role(&mark, "tree", Duration::from_secs(10));
    wait_for_role(&mark, "linger", Duration::from_secs(10));
    let result = serve.call_result(id, ANSWER);
    let took = started.elapsed();
    let value = ran(&result);
    assert_eq!(value["timed_out"], true, "{result}");
    assert_eq!(value["signal"], 9, "{result}");
    assert_eq!(value["exit_code"], Value::Null, "{result}");
    assert!(value["elapsed_ms"].as_u64().unwrap() >= 1900, "{result}");
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
    assert!(text(&result).contains("timed out"), "{result}");
    wait_gone(&mark, Duration::from_secs(5));
}

/// Runs `lnk-test-procs <role> <marker> 30`, which exits at once and leaves a child lingering 30
/// s, and checks that the answer comes promptly and the child is gone.
fn leftover_case(sandbox: Sandbox, role: &str) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("20s").start();
    let mark = marker();
    let started = Instant::now();
    let id = serve.send_call(
        json!({"program": "lnk-test-procs", "args": [role, &mark, "30"]}),
        None,
    );
    let result = serve.call_result(id, ANSWER);
    let took = started.elapsed();
    let value = ran(&result);
    assert_eq!(value["exit_code"], 0, "{result}");
    assert_eq!(value["timed_out"], false, "{result}");
    assert!(text(&result).contains("started"), "{result}");
    // About a second; in any case far from the leftover's 30 s.
    assert!(took < Duration::from_secs(10), "answered after {took:?}");
    match sandbox {
        // The leftover was still in the call's group a second after the program exited; the
        // text tells the agent too.
        Sandbox::Passthrough => {
            assert_eq!(value["leftovers_killed"], true, "{result}");
            assert!(text(&result).to_lowercase().contains("kill"), "{result}");
        }
        // Without a PID namespace of its own, the leftover outlives the sandbox as under the
        // pass-through prefix, and is killed as a leftover.
        Sandbox::BwrapSharedPid => {
            assert_eq!(value["leftovers_killed"], true, "{result}");
            assert!(text(&result).to_lowercase().contains("kill"), "{result}");
        }
        // bubblewrap's own PID namespace ends with the sandbox, and takes the leftover with
        // it: nothing is left for the reaper to kill.
        Sandbox::Bwrap => {
            assert_eq!(value["leftovers_killed"], false, "{result}");
        }
    }
    wait_gone(&mark, Duration::from_secs(5));
}

fn leftovers_holding_pipes_are_killed(sandbox: Sandbox) {
    leftover_case(sandbox, "leave");
}

fn leftovers_without_pipes_are_killed(sandbox: Sandbox) {
    leftover_case(sandbox, "leave-quiet");
}

fn nothing_outlives_serve_killed(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("60s").start();
    let mark = marker();
    // The program and its grandchild: the call's reaper, told by its parent-death signal,
    // kills them both (see `containment.rs` for processes that leave the group).
    let (args, role) = (json!(["tree", &mark, "60"]), "linger");
    serve.send_call(json!({"program": "lnk-test-procs", "args": args}), None);
    let program = wait_for_role(&mark, role, Duration::from_secs(10));
    serve.kill();
    wait_gone(&mark, Duration::from_secs(10));
    assert!(
        wait_dead(program.pid, Duration::from_secs(10)),
        "{program:?} outlived serve"
    );
}

/// The bytes `lnk-test-write` writes for `count` bytes of `unit`.
fn pattern(unit: &[u8], from: usize, to: usize) -> String {
    String::from_utf8((from..to).map(|i| unit[i % unit.len()]).collect()).unwrap()
}

/// The text's lines that report left-out bytes (a stream's header may say it too).
fn left_out_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.contains("left out")).collect()
}

fn output_keeps_head_and_tail(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().output("64KiB").start();
    let out_unit = b"0123456789abcdefghijklmnopqrstuvwxyz\n";
    let err_unit = b"ERR-stream-ABCDEFGHIJKLMNOPQRSTUVWXYZ-";
    let (out_n, err_n) = (100_000_000usize, 3_000_000usize);
    let result = serve.call(json!({"program": "lnk-test-write", "args": [
        "1", out_n.to_string(), hex::encode(out_unit),
        "2", err_n.to_string(), hex::encode(err_unit),
    ]}));
    let value = ran(&result);
    assert_eq!(value["exit_code"], 0, "{result}");
    assert_eq!(value["stdout_bytes"], out_n, "the count is exact");
    assert_eq!(value["stderr_bytes"], err_n, "the count is exact");
    let text = text(&result);
    assert!(
        text.len() < 2 * 65536 + 8192,
        "the text is bounded: {} bytes",
        text.len()
    );
    let half = 65536 / 2;
    for (unit, n, name) in [
        (&out_unit[..], out_n, "stdout"),
        (&err_unit[..], err_n, "stderr"),
    ] {
        let head = pattern(unit, 0, half);
        let tail = pattern(unit, n - half, n);
        assert!(text.contains(head.trim()), "{name}'s head is in the text");
        assert!(text.contains(tail.trim()), "{name}'s tail is in the text");
        // One more byte either side was left out.
        assert!(
            !text.contains(&pattern(unit, 0, half + 40)),
            "{name}: head too long"
        );
        let omitted = (n - 2 * half).to_string();
        assert!(
            left_out_lines(&text).iter().any(|l| l.contains(&omitted)),
            "{name}: a line says {omitted} bytes were left out: {:?}",
            left_out_lines(&text)
        );
    }
    // The structured value carries the same head, left-out line and tail, bounded the same.
    lnk_tests::results::assert_streams_match_the_text(&result);
    let stdout = value["stdout"].as_str().unwrap_or_default();
    assert!(
        stdout.len() < 65536 + 100,
        "bounded: {} bytes",
        stdout.len()
    );
    let omitted = out_n - 2 * half;
    assert!(
        stdout.contains(&format!("\n[... {omitted} bytes left out ...]\n")),
        "the left-out line is in the structured stdout"
    );
    assert!(stdout.starts_with(pattern(out_unit, 0, 64).as_str()));
    assert!(stdout.ends_with(pattern(out_unit, out_n - 64, out_n).as_str()));
    // 100 MB went through; serve's memory stayed far below that.
    let peak = peak_rss_kib(serve.pid());
    assert!(peak < 48 * 1024, "serve's peak RSS grew to {peak} KiB");
}

fn output_at_the_limit_is_whole(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().output("1KiB").start();
    let unit = b"abcdefghij";
    let result =
        serve.call(json!({"program": "lnk-test-write", "args": ["1", "1024", hex::encode(unit)]}));
    assert_eq!(ran(&result)["stdout_bytes"], 1024, "{result}");
    let whole = text(&result);
    assert!(whole.contains(pattern(unit, 0, 1024).trim()), "{whole}");
    assert!(left_out_lines(&whole).is_empty(), "{whole}");

    let result =
        serve.call(json!({"program": "lnk-test-write", "args": ["1", "1025", hex::encode(unit)]}));
    assert_eq!(ran(&result)["stdout_bytes"], 1025, "{result}");
    let cut = text(&result);
    assert!(
        left_out_lines(&cut).contains(&"[... 1 bytes left out ...]"),
        "a line says 1 byte was left out: {cut}"
    );
    assert!(cut.contains(&pattern(unit, 0, 512)), "{cut}");
    assert!(cut.contains(&pattern(unit, 513, 1025)), "{cut}");
}

fn output_cuts_keep_utf8_whole(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    // 8 bytes a side: a three-byte '€' can never end exactly there.
    let mut serve = setup.serve().output("16").start();
    let result = serve.call(json!({"program": "lnk-test-write", "args": [
        "1", "120", hex::encode("€".as_bytes()), "2", "123", hex::encode("€".as_bytes()),
    ]}));
    let value = ran(&result);
    assert_eq!(value["stdout_bytes"], 120, "{result}");
    assert_eq!(value["stderr_bytes"], 123, "{result}");
    let cut = text(&result);
    assert!(!cut.contains('\u{FFFD}'), "a cut split a character: {cut}");
    lnk_tests::results::assert_streams_match_the_text(&result);
    assert!(
        !value["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains('\u{FFFD}'),
        "{result}"
    );
    assert!(cut.contains("€€"), "{cut}");
    // Each stream says what it left out: 108 and 111 bytes, since the cuts keep the two
    // whole characters (6 bytes) that fit in each 8-byte side.
    assert_eq!(
        left_out_lines(&cut),
        [
            "--- stdout: 120 bytes, 108 left out ---",
            "[... 108 bytes left out ...]",
            "--- stderr: 123 bytes, 111 left out ---",
            "[... 111 bytes left out ...]",
        ],
        "{cut}"
    );

    // Bytes that are not UTF-8 are shown replaced, never dropped.
    let result = serve.call(json!({"program": "lnk-test-write", "args": ["1", "3", "61ff62"]}));
    assert_eq!(ran(&result)["stdout_bytes"], 3, "{result}");
    assert!(text(&result).contains("a\u{FFFD}b"), "{result}");
}
