//! A run's stdin: `start`'s `input`, `interactive` runs driven with `write`, the
//! refusals, the channel `<state>/<id>.in` and who can reach it, and a supervisor killed with an
//! interactive run.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lnk_tests::procs::wait_gone;
use lnk_tests::procs::{
    poll, sigkill, sleeps, wait_group_gone, wait_no_supervisor, wait_supervisor,
};
use lnk_tests::results::{is_error, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::tools::{PROMPT, read_ok, start, stop, tool_within, wait_ended};

both_sandboxes!(
    input_reaches_the_program_then_ends,
    sh_driven_as_a_repl,
    writes_that_are_refused,
    a_program_that_does_not_read_is_not_waited_for,
    a_killed_supervisor_leaves_no_channel,
    no_other_program_or_user_reaches_a_channel,
    an_idle_interactive_run_does_not_wake_up,
);

/// `write`'s result.
pub fn write(serve: &mut Serve, id: &str, text: &str, eof: bool) -> Value {
    tool_within(
        serve,
        "write",
        json!({"id": id, "text": text, "eof": eof}),
        None,
        PROMPT,
    )
}

/// A `write` that must succeed: the bytes taken.
pub fn written(serve: &mut Serve, id: &str, text: &str, eof: bool) -> u64 {
    let result = write(serve, id, text, eof);
    assert!(!is_error(&result), "write was refused: {result}");
    let value = structured(&result);
    assert_eq!(value["id"], id, "{result}");
    assert_eq!(value["closed"], eof, "{result}");
    value["taken"]
        .as_u64()
        .unwrap_or_else(|| panic!("write answers taken: {result}"))
}

/// A refused `write`: its text.
pub fn refused(serve: &mut Serve, id: &str, text: &str, eof: bool) -> String {
    let result = write(serve, id, text, eof);
    assert!(is_error(&result), "write was not refused: {result}");
    lnk_tests::results::text(&result)
}

/// Polls `read` (from offset 0) until the run's output holds `needle`, and returns it.
pub fn wait_output(serve: &mut Serve, id: &str, needle: &str, within: Duration) -> String {
    let mut last = String::new();
    let found = poll(within, || {
        last = read_ok(serve, json!({"id": id, "offset": 0})).0;
        last.contains(needle)
    });
    assert!(found, "{needle:?} never came in {id}'s output: {last:?}");
    last
}

/// `<state>/<id>.in`.
pub fn channel(bg: &Bg, id: &str) -> PathBuf {
    bg.state.join(format!("{id}.in"))
}

fn input_reaches_the_program_then_ends(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "cat; echo END"], "input": "one\ntwo\n"}),
    );
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(
        (run["state"].as_str(), run["exit_code"].as_i64()),
        (Some("exited"), Some(0)),
        "{run}"
    );
    let (bytes, _) = read_ok(&mut serve, json!({"id": id, "offset": 0}));
    assert_eq!(bytes, "one\ntwo\nEND\n", "the input, then stdin ended");
    let record = bg.record(&id).unwrap();
    assert_eq!(
        record["launch"]["stdin"],
        json!({"input_bytes": 8, "mode": "ends"})
    );
    assert!(
        !channel(&bg, &id).exists(),
        "a run that is not interactive has no channel"
    );

    // A run without input still gets an empty stdin, and its record says nothing of it.
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "cat; echo END"]}),
    );
    wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(
        read_ok(&mut serve, json!({"id": id, "offset": 0})).0,
        "END\n"
    );
    assert_eq!(bg.record(&id).unwrap()["launch"].get("stdin"), None);

    // Too much input at once is refused, saying what to do.
    let result = tool_within(
        &mut serve,
        "start",
        json!({"program": "cat", "input": "x".repeat(64 * 1024 + 1)}),
        None,
        PROMPT,
    );
    assert!(
        is_error(&result) && text(&result).contains("at most 65536"),
        "{result}"
    );
}

fn sh_driven_as_a_repl(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "input": "echo ready\n", "interactive": true}),
    );
    wait_output(&mut serve, &id, "ready", ANSWER);
    assert_eq!(written(&mut serve, &id, "echo $((6*7))\n", false), 14);
    let output = wait_output(&mut serve, &id, "42", ANSWER);
    assert_eq!(output, "ready\n42\n");
    let mode = std::fs::symlink_metadata(channel(&bg, &id)).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_socket(&mode.file_type()));
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );

    // eof ends the shell: it exits 0, and the channel goes with the run.
    assert_eq!(written(&mut serve, &id, "echo bye\n", true), 9);
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(
        (run["state"].as_str(), run["exit_code"].as_i64()),
        (Some("exited"), Some(0)),
        "{run}"
    );
    assert_eq!(
        read_ok(&mut serve, json!({"id": id, "offset": 0})).0,
        "ready\n42\nbye\n"
    );
    wait_no_supervisor(&id, ANSWER);
    assert!(
        !channel(&bg, &id).exists(),
        "the channel is removed with the run"
    );
}

fn writes_that_are_refused(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    // Not interactive, though running.
    let plain = start(&mut serve, json!({"program": "sleep", "args": ["60"]}));
    let why = refused(&mut serve, &plain, "x\n", false);
    assert!(why.contains("not interactive"), "{why}");
    stop(&mut serve, &plain);

    // After eof, while the program still runs.
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "cat >/dev/null; sleep 60"], "interactive": true}),
    );
    assert_eq!(written(&mut serve, &id, "", true), 0);
    let why = refused(&mut serve, &id, "more\n", false);
    assert!(why.contains("closed by an earlier `eof`"), "{why}");

    // Too large at once, nothing sent.
    let why = refused(&mut serve, &id, &"y".repeat(64 * 1024 + 1), false);
    assert!(
        why.contains("more than a run's stdin takes at once"),
        "{why}"
    );

    // Ended.
    stop(&mut serve, &id);
    let why = refused(&mut serve, &id, "late\n", false);
    assert!(why.contains("has ended (stopped)"), "{why}");
    // Unknown and bad ids, bad arguments.
    assert!(refused(&mut serve, "abcdefghijkl0000", "x", false).contains("there is no run"));
    let result = tool_within(&mut serve, "write", json!({"id": id}), None, PROMPT);
    assert!(
        is_error(&result) && text(&result).contains("`text` is required"),
        "{result}"
    );
    let result = tool_within(
        &mut serve,
        "write",
        json!({"id": id, "text": "x", "wait": 1}),
        None,
        PROMPT,
    );
    assert!(
        is_error(&result) && text(&result).contains("unknown argument"),
        "{result}"
    );
}

fn a_program_that_does_not_read_is_not_waited_for(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sleep", "args": ["60"], "interactive": true}),
    );
    // A pipe's worth is taken; then nothing fits, and the call answers at once.
    assert_eq!(
        written(&mut serve, &id, &"z".repeat(64 * 1024), false),
        65536
    );
    let asked = Instant::now();
    let why = refused(&mut serve, &id, "one more\n", false);
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "a full stdin answers at once"
    );
    assert!(
        why.contains("took 0 of 9 bytes") && why.contains("not reading"),
        "{why}"
    );
    let run = lnk_tests::tools::stopped_run(&stop(&mut serve, &id));
    assert_eq!(run["state"], "stopped", "{run}");
}

fn a_killed_supervisor_leaves_no_channel(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(
        &mut serve,
        json!({"program": "lnk-test-procs", "args": ["linger", mark, "120"], "interactive": true}),
    );
    lnk_tests::procs::wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    assert!(
        poll(ANSWER, || channel(&bg, &id).exists()),
        "the channel is made"
    );
    let (pgid, _) = bg.group(&id);
    sigkill(supervisor.pid);
    let _ = lnk_tests::procs::wait_dead(supervisor.pid, ANSWER);
    // The channel is there still, with no one behind it: a `write` sweeps the orphan first
    // and says it was lost, at once.
    assert!(channel(&bg, &id).exists());
    let asked = Instant::now();
    let why = refused(&mut serve, &id, "x\n", false);
    assert!(why.contains("has ended (lost)"), "{why}");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    let record = bg.record(&id).unwrap();
    assert_eq!(record["status"]["state"], "lost", "{record}");
    assert!(!channel(&bg, &id).exists(), "the sweep removed the channel");
    wait_gone(&mark, Duration::from_secs(10));
    wait_group_gone(pgid, Duration::from_secs(10));
}

/// The hostile helper's lines about connecting to `sockets`, run by `run` through `sh`.
fn connect_lines(serve: &mut Serve, run: &str, sockets: &[&Path]) -> String {
    let hostile = env!("CARGO_BIN_EXE_lnk-test-hostile");
    let mut line = format!("'{hostile}' connect");
    for socket in sockets {
        line.push_str(&format!(" '{}'", socket.display()));
    }
    line.push_str("; echo DONE\n");
    written(serve, run, &line, false);
    wait_output(serve, run, "DONE", ANSWER)
}

fn no_other_program_or_user_reaches_a_channel(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let victim = start(&mut serve, json!({"program": "sh", "interactive": true}));
    let attacker = start(&mut serve, json!({"program": "sh", "interactive": true}));
    let (victim_in, own_in) = (channel(&bg, &victim), channel(&bg, &attacker));
    assert!(poll(ANSWER, || victim_in.exists() && own_in.exists()));
    if sandbox != Sandbox::Passthrough {
        // From inside the sandbox, neither the other run's channel nor its own can be reached.
        let lines = connect_lines(&mut serve, &attacker, &[&victim_in, &own_in]);
        assert!(!lines.contains("BROKE"), "{lines}");
        assert!(
            lines.contains(&format!(
                "held: connect to a socket: {}",
                victim_in.display()
            )),
            "{lines}"
        );
    }
    // Another user, outside any sandbox, cannot either.
    if rustix::process::geteuid().is_root() {
        let out = std::process::Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(env!("CARGO_BIN_EXE_lnk-test-hostile"))
            .arg("connect")
            .arg(&victim_in)
            .output()
            .unwrap();
        let lines = String::from_utf8_lossy(&out.stdout);
        assert!(
            lines.contains("held: connect to a socket") && !lines.contains("BROKE"),
            "{lines}"
        );
    } else {
        lnk_tests::skip::skip("another user's attempt needs root, to run it as nobody");
    }
    // The victim's stdin took nothing of all that.
    written(&mut serve, &victim, "echo still-clean\n", true);
    wait_ended(&mut serve, &victim, ANSWER);
    assert_eq!(
        read_ok(&mut serve, json!({"id": victim, "offset": 0})).0,
        "still-clean\n"
    );
    written(&mut serve, &attacker, "", true);
    wait_ended(&mut serve, &attacker, ANSWER);
}

/// An interactive run's supervisor and gate sleep like any other's: the channel wakes them,
/// nothing else. On a pipe and on a terminal, after a `write` and its answer.
fn an_idle_interactive_run_does_not_wake_up(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let piped = start(&mut serve, json!({"program": "sh", "interactive": true}));
    let on_tty = start(&mut serve, json!({"program": "sh", "tty": true}));
    let mut watched = Vec::new();
    for id in [&piped, &on_tty] {
        written(&mut serve, id, "echo awake\n", false);
        wait_output(&mut serve, id, "awake", ANSWER);
        watched.push(wait_supervisor(id, ANSWER).pid);
        watched.push(bg.group(id).1);
    }
    // Settled: the write was answered and its echo copied into the output file. Nothing of a
    // supervisor's or a gate's wakes on a clock while its run is quiet, so the count of their
    // sleeps holds from here on.
    std::thread::sleep(Duration::from_millis(200));
    let before: Vec<u64> = watched.iter().map(|pid| sleeps(*pid)).collect();
    std::thread::sleep(Duration::from_secs(3));
    let after: Vec<u64> = watched.iter().map(|pid| sleeps(*pid)).collect();
    assert_eq!(
        before, after,
        "the supervisors and gates (piped, then on a terminal) woke up while idle"
    );
    for id in [&piped, &on_tty] {
        written(&mut serve, id, "", true);
        wait_ended(&mut serve, id, ANSWER);
    }
}
