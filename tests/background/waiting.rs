//! `read` that waits: for its `until` text, for any output, for the run's
//! end or for its time; asleep meanwhile (no thread of it wakes), cancelled like any call, and
//! through rotations of the output file.
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lnk_tests::bins::write;
use lnk_tests::procs::{inotify_instances, sleeps, thread_sleeps, threads_named, wait_supervisor};
use lnk_tests::procs::{wait_for_role, wait_gone};
use lnk_tests::results::{is_error, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::tools::{procs_args, read, read_ok, send_tool, start, stop, stopped_run};

both_sandboxes!(
    a_read_waits_for_its_text,
    a_read_waits_for_output_the_end_or_its_time,
    a_cancelled_waiting_read_is_not_answered,
    waiting_reads_sleep,
    a_wait_sees_through_rotations,
    bad_waits_are_refused,
    a_read_wakes_for_its_own_run_only,
    a_huge_output_file_costs_a_wait_no_more_than_its_cap,
);

/// A `read` with these arguments, allowed `within` to answer.
fn read_within(serve: &mut Serve, arguments: Value, within: Duration) -> Value {
    let id = send_tool(serve, "read", arguments, None);
    serve.call_result(id, within)
}

fn a_read_waits_for_its_text(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).timeout("30s").start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo starting; sleep 2; echo listening on $((4000+80)); sleep 60"]}),
    );
    let asked = Instant::now();
    let result = read_within(
        &mut serve,
        json!({"id": id, "offset": 0, "wait_ms": 20_000, "until": "listening on 4080"}),
        Duration::from_secs(25),
    );
    let took = asked.elapsed();
    assert!(!is_error(&result), "{result}");
    let value = lnk_tests::results::structured(&result);
    assert_eq!(value["matched"], true, "{value}");
    assert_eq!(value["ended"], false, "{value}");
    assert_eq!(value["match_offset"], "starting\n".len(), "{value}");
    assert!(text(&result).contains("listening on 4080"), "{result}");
    assert!(
        took < Duration::from_secs(15),
        "the read answered when the text came, not at its time: {took:?}"
    );
    assert!(
        value["waited_ms"].as_u64().is_some_and(|ms| ms < 15_000),
        "{value}"
    );
    // Already there: a second wait from the start answers at once.
    let again = read_within(
        &mut serve,
        json!({"id": id, "offset": 0, "wait_ms": 20_000, "until": "starting"}),
        Duration::from_secs(5),
    );
    let value = lnk_tests::results::structured(&again);
    assert_eq!(
        (&value["matched"], &value["match_offset"]),
        (&json!(true), &json!(0))
    );
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
}

fn a_read_waits_for_output_the_end_or_its_time(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).timeout("30s").start();
    // Without an offset: output written after the call began.
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo early; sleep 1; echo later-$((21*2)); sleep 60"]}),
    );
    // Wait for the early line first, so that the waiting read begins after it.
    read_within(
        &mut serve,
        json!({"id": id, "offset": 0, "wait_ms": 10_000}),
        Duration::from_secs(15),
    );
    let result = read_within(
        &mut serve,
        json!({"id": id, "wait_ms": 10_000}),
        Duration::from_secs(15),
    );
    let value = lnk_tests::results::structured(&result).clone();
    assert!(
        value["text"].as_str().unwrap_or("").contains("later-42"),
        "{value}"
    );
    assert!(
        !value["text"].as_str().unwrap_or("").contains("early"),
        "{value}"
    );
    assert_eq!(value["matched"], false, "{value}");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");

    // A run that ends before its text comes: `ended`, not matched.
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "sleep 1; echo done"]}),
    );
    let result = read_within(
        &mut serve,
        json!({"id": id, "offset": 0, "wait_ms": 20_000, "until": "never printed"}),
        Duration::from_secs(25),
    );
    let value = lnk_tests::results::structured(&result);
    assert_eq!(value["ended"], true, "{value}");
    assert_eq!(value["matched"], false, "{value}");
    assert_eq!(value["match_offset"], Value::Null, "{value}");
    assert!(
        value["waited_ms"].as_u64().is_some_and(|ms| ms < 15_000),
        "{value}"
    );
    assert_eq!(value["text"], "done\n", "{value}");

    // A wait that times out: about its time.
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 60));
    let result = read_within(
        &mut serve,
        json!({"id": id, "wait_ms": 1500, "until": "never printed"}),
        Duration::from_secs(10),
    );
    let value = lnk_tests::results::structured(&result);
    assert_eq!(
        (&value["matched"], &value["ended"]),
        (&json!(false), &json!(false))
    );
    let waited = value["waited_ms"].as_u64().unwrap_or(0);
    assert!((1500..6000).contains(&waited), "{value}");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

fn a_cancelled_waiting_read_is_not_answered(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).timeout("30s").start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 60));
    let call = send_tool(
        &mut serve,
        "read",
        json!({"id": id, "wait_ms": 20_000, "until": "x"}),
        None,
    );
    let deadline = Instant::now() + ANSWER;
    while threads_named(serve.pid(), "read ").is_empty() {
        assert!(Instant::now() < deadline, "the read never waited");
        std::thread::sleep(Duration::from_millis(20));
    }
    serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call}}));
    // Its thread ends at once, and no answer comes for it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !threads_named(serve.pid(), "read ").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the cancelled read's thread lives on"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let later = read(&mut serve, json!({"id": id}));
    assert!(!is_error(&later), "{later}");
    let answered = serve
        .inbox()
        .iter()
        .any(|message| message.get("id") == Some(&json!(call)));
    assert!(!answered, "the cancelled read was answered");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

fn waiting_reads_sleep(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).timeout("30s").start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 60));
    wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    // Under a line with `{protected}`, serve holds one more, its protected paths' watches.
    let instances = inotify_instances(serve.pid());
    let calls: Vec<i64> = (0..20)
        .map(|_| {
            send_tool(
                &mut serve,
                "read",
                json!({"id": id, "wait_ms": 20_000, "until": "x"}),
                None,
            )
        })
        .collect();
    let deadline = Instant::now() + ANSWER;
    while threads_named(serve.pid(), "read ").len() < calls.len() {
        assert!(Instant::now() < deadline, "the reads never all waited");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Settled, then 3 s in which nothing is written: no waiting thread wakes.
    std::thread::sleep(Duration::from_millis(300));
    let waiting = threads_named(serve.pid(), "read ");
    let count = |pid: i32| {
        waiting
            .iter()
            .map(|&tid| thread_sleeps(pid, tid))
            .sum::<u64>()
    };
    let before = (count(serve.pid()), sleeps(supervisor.pid));
    std::thread::sleep(Duration::from_secs(3));
    let after = (count(serve.pid()), sleeps(supervisor.pid));
    assert_eq!(
        before, after,
        "waiting reads (or the supervisor) woke while nothing was written"
    );
    // They share the server's one inotify instance: a user has few of them (twenty of their
    // own would be twenty more). The protected paths' instance may be absent from either
    // count, dropped and made anew when their folders change: one more at most.
    let after = inotify_instances(serve.pid());
    assert!(
        (instances + 1..=instances + 2).contains(&after),
        "one inotify instance for all waiting reads: {after}, {instances} before"
    );
    for call in calls {
        serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call}}));
    }
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

fn a_wait_sees_through_rotations(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        output: "64KiB",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).timeout("30s").start();
    // 2 MiB through a 64 KiB file, then the text waited for.
    let unit = hex::encode(b"0123456789abcdef\n");
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", format!("sleep 1; {} 1 2097152 {unit}; echo finished-$((3*3)); sleep 60", write())]}),
    );
    let result = read_within(
        &mut serve,
        json!({"id": id, "offset": 0, "wait_ms": 20_000, "until": "finished-9"}),
        Duration::from_secs(25),
    );
    let value = lnk_tests::results::structured(&result).clone();
    assert_eq!(value["matched"], true, "{value}");
    assert_eq!(value["match_offset"], 2_097_152, "{value}");
    assert!(
        value["skipped"].as_u64().unwrap_or(0) > 0,
        "offset 0 was dropped: {value}"
    );
    // The offset it gave is the run's: reading there gives the text.
    let (bytes, _) = read_ok(&mut serve, json!({"id": id, "offset": 2_097_152}));
    assert!(bytes.starts_with("finished-9"), "{bytes}");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
}

fn bad_waits_are_refused(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).timeout("10s").start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo hi"]}),
    );
    for (arguments, says) in [
        (json!({"id": id, "wait_ms": 10_001}), "at most 10000"),
        (json!({"id": id, "wait_ms": -1}), "wait_ms"),
        (json!({"id": id, "wait_ms": 100, "until": ""}), "until"),
        (json!({"id": id, "wait_ms": 100, "until": 7}), "until"),
        (
            json!({"id": id, "wait_ms": 100, "until": "u".repeat(1025)}),
            "until",
        ),
        (json!({"id": id, "until": "hi"}), "needs `wait_ms`"),
    ] {
        let refused = read_within(&mut serve, arguments.clone(), ANSWER);
        assert!(is_error(&refused), "{arguments}: {refused}");
        assert!(
            text(&refused).contains(says),
            "{arguments}: {}",
            text(&refused)
        );
    }
}

fn a_read_wakes_for_its_own_run_only(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).timeout("30s").start();
    let mark = bg.marker();
    let quiet = start(&mut serve, procs_args("linger", &mark, 60));
    let call = send_tool(
        &mut serve,
        "read",
        json!({"id": quiet, "wait_ms": 20_000}),
        None,
    );
    let deadline = Instant::now() + ANSWER;
    while threads_named(serve.pid(), "read ").is_empty() {
        assert!(Instant::now() < deadline, "the read never waited");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another run writes a line every 20 ms for 2 s; the quiet run's read sleeps through it.
    start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "i=0; while [ $i -lt 100 ]; do echo $i; sleep 0.02; i=$((i+1)); done"]}),
    );
    std::thread::sleep(Duration::from_millis(300));
    let reader = threads_named(serve.pid(), "read ");
    let before: u64 = reader
        .iter()
        .map(|&tid| thread_sleeps(serve.pid(), tid))
        .sum();
    std::thread::sleep(Duration::from_secs(1));
    let after: u64 = reader
        .iter()
        .map(|&tid| thread_sleeps(serve.pid(), tid))
        .sum();
    assert_eq!(
        before, after,
        "the quiet run's read woke for another run's output"
    );
    serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": call}}));
    assert_eq!(stopped_run(&stop(&mut serve, &quiet))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

fn a_huge_output_file_costs_a_wait_no_more_than_its_cap(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).timeout("30s").start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 60));
    // Any program in the files folder can make a run's output file huge, and a sparse file
    // costs it nothing.
    let grown = serve.call(
        json!({"program": "sh", "args": ["-c", format!("truncate -s 100G background/{id}.out")]}),
    );
    assert!(
        !is_error(&grown) && text(&grown).contains("exited with code 0"),
        "{grown}"
    );
    let asked = Instant::now();
    let call = send_tool(
        &mut serve,
        "read",
        json!({"id": id, "offset": 0, "wait_ms": 1000, "until": "never printed"}),
        None,
    );
    let result = serve.call_result(call, Duration::from_secs(20));
    let value = lnk_tests::results::structured(&result);
    assert_eq!(value["matched"], false, "{value}");
    assert!(
        asked.elapsed() < Duration::from_secs(15),
        "a wait of 1 s over a 100 GB file took {:?}",
        asked.elapsed()
    );
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}
