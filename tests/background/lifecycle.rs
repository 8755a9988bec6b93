//! A run's life: it outlives the call and the `serve` that started it; `list` shows it and
//! `read` reads it (the tail, offsets, `next_offset`, the limit); `stop` leaves no process of
//! it; leftovers die a second after the program; ids that are not ids touch nothing.
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lnk_tests::bins::{procs, write};
use lnk_tests::procs::{alive, wait_for_role, wait_gone};
use lnk_tests::procs::{
    poll, stays_alive, supervisors, wait_group_gone, wait_no_supervisor, wait_supervisor,
};
use lnk_tests::results::{is_error, text};
use lnk_tests::runs::{Bg, Flags, pattern, snapshot, unit};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{
    is_rfc3339, list, listed, meta, procs_args, read, read_ok, send_tool, start, started, stop,
    stopped_run, tool, wait_ended,
};

both_sandboxes!(
    a_run_outlives_the_call_and_serve,
    list_shows_the_runs_newest_first,
    read_gives_the_tail_and_offsets,
    stop_leaves_no_process,
    leftovers_die_after_the_program,
    bad_ids_touch_nothing,
    a_cancelled_stop_is_not_answered,
    a_damaged_record_is_refused_with_its_cause,
);

fn a_run_outlives_the_call_and_serve(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mark = bg.marker();
    let mut first = bg.serve(&Flags::default()).start();
    let asked = Instant::now();
    let result = tool(
        &mut first,
        "start",
        procs_args("linger", &mark, 120),
        Some(meta(None)),
    );
    let took = asked.elapsed();
    let id = started(&result);
    assert!(
        took < Duration::from_secs(5),
        "start answers at once, not when the run ends: it took {took:?}"
    );
    let program = wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (pgid, _leader) = bg.group(&id);

    // serve dies by SIGKILL; the run and its supervisor go on.
    first.kill();
    drop(first);
    stays_alive(program.pid, Duration::from_millis(500), "the run's program");
    assert!(alive(supervisor.pid), "the supervisor died with serve");

    // A new serve on the same state folder sees it running, and can stop it.
    let mut second = bg.serve(&Flags::default()).start();
    let run = listed(&mut second, &id);
    assert_eq!(run["state"], "running", "{run}");
    let run = stopped_run(&stop(&mut second, &id));
    assert_eq!(run["id"], id, "{run}");
    assert_eq!(run["state"], "stopped", "{run}");
    wait_gone(&mark, Duration::from_secs(10));
    wait_group_gone(pgid, Duration::from_secs(10));
    wait_no_supervisor(&id, Duration::from_secs(10));
}

fn list_shows_the_runs_newest_first(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    assert_eq!(list(&mut serve), Vec::<Value>::new(), "no runs yet");

    // A run that ends by itself, with a code.
    let quick_args = json!(["-c", "printf '%s\\n' hello; exit 3"]);
    let quick = start(&mut serve, json!({"program": "sh", "args": quick_args}));
    let run = wait_ended(&mut serve, &quick, ANSWER);
    assert_eq!(run["state"], "exited", "{run}");
    assert_eq!(run["exit_code"], 3, "{run}");
    assert_eq!(run["signal"], Value::Null, "{run}");
    assert!(is_rfc3339(&run["started_at"]), "{run}");
    assert!(is_rfc3339(&run["ended_at"]), "{run}");
    assert_eq!(run["program"], "sh", "{run}");
    assert_eq!(run["args"], quick_args, "{run}");
    assert_eq!(run["dir"], ".", "{run}");
    assert_eq!(run["output_bytes"], 6, "{run}");
    assert_eq!(run["dropped_bytes"], 0, "{run}");
    assert_eq!(run["told"], false, "no way in: never told: {run}");
    wait_no_supervisor(&quick, Duration::from_secs(10));

    // A lingering run, in a folder of its own, started later: listed first.
    let mark = bg.marker();
    std::fs::create_dir(bg.setup.files.join("sub")).unwrap();
    let mut args = procs_args("linger", &mark, 120);
    args["dir"] = json!("sub");
    let lingering = start(&mut serve, args);
    wait_for_role(&mark, "linger", ANSWER);
    let runs = list(&mut serve);
    let ids: Vec<&Value> = runs.iter().map(|r| &r["id"]).collect();
    assert_eq!(
        ids,
        [&json!(lingering), &json!(quick)],
        "newest first: {runs:#?}"
    );
    let run = &runs[0];
    for key in [
        "id",
        "program",
        "args",
        "dir",
        "state",
        "exit_code",
        "signal",
        "started_at",
        "ended_at",
        "output_bytes",
        "dropped_bytes",
        "told",
    ] {
        assert!(run.get(key).is_some(), "a run has {key}: {run}");
    }
    assert_eq!(run["state"], "running", "{run}");
    assert_eq!(run["dir"], "sub", "{run}");
    assert_eq!(run["program"], "lnk-test-procs", "{run}");
    assert_eq!(run["exit_code"], Value::Null, "{run}");
    assert_eq!(
        run["ended_at"],
        Value::Null,
        "ended_at is null while running: {run}"
    );
    assert!(is_rfc3339(&run["started_at"]), "{run}");

    let run = stopped_run(&stop(&mut serve, &lingering));
    assert_eq!(run["state"], "stopped", "{run}");
    assert!(is_rfc3339(&run["ended_at"]), "{run}");
    wait_gone(&mark, Duration::from_secs(10));
}

fn read_gives_the_tail_and_offsets(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    // The answer's limit (`--output`) is 64 KiB; the run writes more than that.
    let mut serve = bg.serve(&Flags::default()).output("64KiB").start();
    let mark = bg.marker();
    let unit = unit();
    let total: u64 = 100_000;
    let script = format!(
        "\"$1\" 1 {total} {} && exec \"$2\" linger \"$3\" 120",
        hex::encode(&unit)
    );
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, "sh", write(), procs(), mark]}),
    );
    wait_for_role(&mark, "linger", ANSWER);
    // Everything is written once the program lingers; the copy to the file may lag a little.
    let mut last = Value::Null;
    let all_there = poll(ANSWER, || {
        last = read_ok(&mut serve, json!({"id": id, "limit": 1})).1;
        last["output_bytes"] == total
    });
    assert!(all_there, "output_bytes never reached {total}: {last}");

    // The tail, with a limit.
    let (bytes, value) = read_ok(&mut serve, json!({"id": id, "limit": 1000}));
    assert_eq!(
        bytes,
        pattern(&unit, total - 1000, 1000),
        "the last 1000 bytes"
    );
    assert_eq!(value["id"], id, "{value}");
    assert_eq!(value["state"], "running", "{value}");
    assert_eq!(value["offset"], total - 1000, "{value}");
    assert_eq!(value["next_offset"], total, "{value}");
    assert_eq!(value["output_bytes"], total, "{value}");
    assert_eq!(value["dropped_bytes"], 0, "{value}");
    assert_eq!(value["skipped"], 0, "{value}");

    // The tail without a limit: `--output` bytes.
    let (bytes, value) = read_ok(&mut serve, json!({"id": id}));
    assert_eq!(
        bytes.len(),
        65536,
        "the limit defaults to --output: {value}"
    );
    assert_eq!(bytes, pattern(&unit, total - 65536, 65536));
    assert_eq!(value["next_offset"], total, "{value}");

    // Offsets, one read after the other through next_offset.
    let (bytes, value) = read_ok(&mut serve, json!({"id": id, "offset": 0, "limit": 5000}));
    assert_eq!(bytes, pattern(&unit, 0, 5000));
    assert_eq!(value["offset"], 0, "{value}");
    assert_eq!(value["next_offset"], 5000, "{value}");
    let next = value["next_offset"].clone();
    let (bytes, value) = read_ok(&mut serve, json!({"id": id, "offset": next, "limit": 5000}));
    assert_eq!(bytes, pattern(&unit, 5000, 5000));
    assert_eq!(value["next_offset"], 10_000, "{value}");

    // Near the end, the read is short; at the end, empty.
    let (bytes, value) = read_ok(
        &mut serve,
        json!({"id": id, "offset": total - 10, "limit": 1000}),
    );
    assert_eq!(bytes, pattern(&unit, total - 10, 10));
    assert_eq!(value["next_offset"], total, "{value}");
    let (bytes, value) = read_ok(&mut serve, json!({"id": id, "offset": total}));
    assert_eq!(bytes, "", "{value}");
    assert_eq!(value["next_offset"], total, "{value}");

    // The limit is capped at --output.
    let (bytes, value) = read_ok(
        &mut serve,
        json!({"id": id, "offset": 0, "limit": 1_000_000}),
    );
    assert_eq!(
        bytes.len(),
        65536,
        "the limit is capped at --output: {value}"
    );
    assert_eq!(bytes, pattern(&unit, 0, 65536));
    assert_eq!(value["next_offset"], 65536, "{value}");

    let run = stopped_run(&stop(&mut serve, &id));
    assert_eq!(run["state"], "stopped", "{run}");
    wait_gone(&mark, Duration::from_secs(10));
    // The output stays readable after the end.
    let (bytes, value) = read_ok(&mut serve, json!({"id": id, "limit": 89}));
    assert_eq!(bytes, pattern(&unit, total - 89, 89));
    assert_eq!(value["state"], "stopped", "{value}");
}

fn stop_leaves_no_process(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    // A program with a grandchild: both carry the marker.
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    let child = wait_for_role(&mark, "linger", ANSWER);
    let parent = wait_for_role(&mark, "tree", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (pgid, leader) = bg.group(&id);
    assert!(alive(leader), "the group's leader runs");

    let asked = Instant::now();
    let run = stopped_run(&stop(&mut serve, &id));
    let took = asked.elapsed();
    assert_eq!(run["id"], id, "{run}");
    assert_eq!(run["state"], "stopped", "{run}");
    assert!(is_rfc3339(&run["ended_at"]), "{run}");
    assert!(
        took < Duration::from_secs(7),
        "stop waits up to 5 s: {took:?}"
    );
    // Its end is recorded before the answer, so the processes are gone, or nearly.
    wait_gone(&mark, Duration::from_secs(3));
    wait_group_gone(pgid, Duration::from_secs(3));
    assert!(!alive(child.pid) && !alive(parent.pid) && !alive(leader));
    wait_no_supervisor(&id, Duration::from_secs(5));
    assert!(lnk_tests::procs::wait_dead(
        supervisor.pid,
        Duration::from_secs(5)
    ));
    let record = bg.record(&id).unwrap();
    assert_eq!(record["status"]["state"], "stopped", "{record}");

    // Stopping an ended run is not an error.
    let again = stopped_run(&stop(&mut serve, &id));
    assert_eq!(again["state"], "stopped", "{again}");
    assert_eq!(listed(&mut serve, &id)["state"], "stopped");
}

fn leftovers_die_after_the_program(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    // The program exits at once and leaves a child in its group.
    let id = start(&mut serve, procs_args("leave-quiet", &mark, 120));
    let (pgid, _leader) = bg.group(&id);
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["state"], "exited", "{run}");
    assert_eq!(run["exit_code"], 0, "{run}");
    wait_gone(&mark, Duration::from_secs(5));
    wait_group_gone(pgid, Duration::from_secs(5));
    wait_no_supervisor(&id, Duration::from_secs(5));
}

fn bad_ids_touch_nothing(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    // One run, so the state folder and `background/` hold something to protect.
    let id = start(
        &mut serve,
        json!({"program": "lnk-test-write", "args": ["1", "100", "61"]}),
    );
    wait_ended(&mut serve, &id, ANSWER);
    wait_no_supervisor(&id, Duration::from_secs(10));
    let before = snapshot(bg.setup.root.path());

    let bad = [
        json!(""),
        json!("short"),
        json!("ABCDEFGHIJKLMNOP"),
        json!(format!("{id}.json")),
        json!("../../../../etc/passwd"),
        json!("abcdefghijkl/../x"),
        json!("abcdefghijklmnop/"),
        json!("/abcdefghijklmnop"),
        json!("abcdefghijkl mnop"),
        json!("a".repeat(33)),
        json!(format!("{id}\u{0}")),
        json!(42),
        json!(null),
    ];
    for name in ["read", "stop"] {
        for bad_id in &bad {
            let result = tool(&mut serve, name, json!({"id": bad_id}), None);
            assert!(is_error(&result), "{name} {bad_id}: {result}");
            assert!(
                !text(&result).trim().is_empty(),
                "{name} {bad_id}: says why"
            );
        }
        let result = tool(&mut serve, name, json!({}), None);
        assert!(is_error(&result), "{name} without an id: {result}");
    }
    assert_eq!(
        snapshot(bg.setup.root.path()),
        before,
        "a malformed id touched the disk"
    );
    // A well-formed id that names no run: refused, and no stop request is left for it.
    for name in ["read", "stop"] {
        let result = tool(&mut serve, name, json!({"id": "abcdefghijklmnop"}), None);
        assert!(is_error(&result), "{name} of an unknown id: {result}");
    }
    assert_eq!(
        snapshot(bg.setup.root.path()),
        before,
        "a refused unknown id touched the disk"
    );
    // The server keeps serving.
    assert_eq!(listed(&mut serve, &id)["state"], "exited");
    let result = read(&mut serve, json!({"id": id}));
    assert_eq!(text(&result), "a".repeat(100), "{result}");
    assert!(supervisors(&id).is_empty());
}

/// `notifications/cancelled` for a background tool's call in flight: no answer is sent for it
/// (the run still stops: the stop was asked before the cancel).
fn a_cancelled_stop_is_not_answered(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    let stop_id = send_tool(&mut serve, "stop", json!({"id": id}), None);
    serve.send(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": stop_id},
    }));
    // Later requests are answered; the cancelled one never is.
    let runs = list(&mut serve);
    assert!(runs.iter().any(|r| r["id"] == id), "{runs:?}");
    wait_gone(&mark, Duration::from_secs(10));
    let answered = serve.wait_for(Duration::from_secs(2), |m| m["id"] == stop_id);
    assert!(
        answered.is_none(),
        "the cancelled stop was answered: {answered:?}"
    );
}

/// A record that is not JSON is refused by `read` and `stop` with the parser's own words, not
/// only "parsing record …".
fn a_damaged_record_is_refused_with_its_cause(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo hi"]}),
    );
    wait_ended(&mut serve, &id, Duration::from_secs(10));
    std::fs::write(bg.record_path(&id), b"{\"version\": 1, oops").unwrap();
    for name in ["read", "stop"] {
        let result = tool(&mut serve, name, json!({"id": id}), None);
        assert!(is_error(&result), "{name}: {result}");
        let why = text(&result);
        assert!(why.contains("parsing record"), "{name}: {why}");
        assert!(
            why.contains("line 1 column"),
            "{name} says what the parser found: {why}"
        );
    }
}
