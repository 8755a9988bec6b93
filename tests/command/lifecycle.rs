//! A call's life on a session: progress while it runs, cancellation (the group dies, no answer
//! is sent), calls running at once, and shutdown (stdin closed, SIGTERM, SIGINT) killing the calls
//! in flight with exit 0.
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::{Value, json};

use lnk_tests::procs::{marker, poll, thread_names, wait_for_role, wait_gone};
use lnk_tests::results::{ok, ran};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::setup::Setup;

both_sandboxes!(
    progress_is_sent_while_a_call_runs,
    cancellation_kills_the_group_and_sends_no_answer,
    calls_run_at_once,
    shutdown_on_stdin_closed,
    shutdown_on_sigterm,
    shutdown_on_sigint,
);

/// The progress notifications for `token`, in order, with their place in the inbox.
fn progress_for(serve: &mut Serve, token: &Value) -> Vec<(usize, Value)> {
    serve
        .inbox()
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == *token
        })
        .map(|(i, m)| (i, m["params"].clone()))
        .collect()
}

fn progress_is_sent_while_a_call_runs(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    // Both eras at once, on two servers: a string token and an integer token.
    let mut legacy = setup.serve().start();
    let mut modern = setup.serve().era(Era::Modern).start();
    let sleep = json!({"program": "sleep", "args": ["3"]});
    let cases = [(json!("tok-legacy"), &mut legacy), (json!(42), &mut modern)];
    let mut started = Vec::new();
    for (token, serve) in cases {
        let id = serve.send_call(sleep.clone(), Some(json!({"progressToken": token})));
        started.push((token, serve, id));
    }
    for (token, serve, id) in started {
        let result = serve.call_result(id, ANSWER);
        assert_eq!(ran(&result)["exit_code"], 0, "{result}");
        let answer_at = serve
            .inbox()
            .iter()
            .position(|m| m["id"] == id && m.get("method").is_none())
            .unwrap();
        // Another exchange after the answer: progress for a finished call must not follow.
        ok(&serve.request("tools/list", json!({})));
        let progress = progress_for(serve, &token);
        assert!(
            progress.len() >= 2,
            "{token}: about one a second over 3 s, got {progress:?}"
        );
        assert!(
            progress.iter().all(|(at, _)| *at < answer_at),
            "{token}: progress after the answer: {progress:?}"
        );
        let values: Vec<f64> = progress
            .iter()
            .map(|(_, p)| {
                assert!(
                    p.get("message").is_none_or(Value::is_string),
                    "{token}: {p}"
                );
                p["progress"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("progress is a number: {p}"))
            })
            .collect();
        assert!(
            values.windows(2).all(|w| w[0] < w[1]),
            "{token}: progress increases: {values:?}"
        );
    }
}

fn cancellation_kills_the_group_and_sends_no_answer(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    // Both eras at once, on two servers.
    let mut legacy = setup.serve().timeout("60s").start();
    let mut modern = setup.serve().timeout("60s").era(Era::Modern).start();
    let mut calls = Vec::new();
    for serve in [&mut legacy, &mut modern] {
        let mark = marker();
        let id = serve.send_call(
            json!({"program": "lnk-test-procs", "args": ["tree", &mark, "60"]}),
            None,
        );
        calls.push((serve, mark, id));
    }
    for (serve, mark, id) in &mut calls {
        wait_for_role(mark, "linger", Duration::from_secs(10));
        serve.send(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": *id, "reason": "the test cancels it"},
        }));
    }
    for (_, mark, _) in &calls {
        wait_gone(mark, Duration::from_secs(5));
    }
    // A later call is answered; by its end (over a second) an answer to the cancelled call
    // would have been written.
    let later: Vec<i64> = calls
        .iter_mut()
        .map(|(serve, _, _)| serve.send_call(json!({"program": "sleep", "args": ["1.2"]}), None))
        .collect();
    for ((serve, _, id), later) in calls.iter_mut().zip(later) {
        let result = serve.call_result(later, ANSWER);
        assert_eq!(ran(&result)["exit_code"], 0, "{result}");
        let answered: Vec<Value> = serve
            .inbox()
            .iter()
            .filter(|m| m["id"] == *id)
            .cloned()
            .collect();
        assert!(
            answered.is_empty(),
            "the cancelled call was answered: {answered:?}"
        );
    }
}

fn calls_run_at_once(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("30s").start();
    // A slow call first: it must not hold up the others.
    let mark = marker();
    let slow = serve.send_call(
        json!({"program": "lnk-test-procs", "args": ["linger", &mark, "20"]}),
        None,
    );
    wait_for_role(&mark, "linger", Duration::from_secs(10));
    let started = Instant::now();
    let ids: Vec<i64> = (0..16)
        .map(|_| serve.send_call(json!({"program": "sleep", "args": ["1"]}), None))
        .collect();
    for id in ids {
        let result = serve.call_result(id, ANSWER);
        let value = ran(&result);
        assert_eq!(value["exit_code"], 0, "{result}");
        assert!(value["elapsed_ms"].as_u64().unwrap() >= 900, "{result}");
    }
    let took = started.elapsed();
    // Not a benchmark: one after another would take 16 s.
    assert!(
        took < Duration::from_secs(5),
        "16 calls of `sleep 1` took {took:?}"
    );
    assert!(
        serve.inbox().iter().all(|m| m["id"] != slow),
        "the slow call ended early"
    );
    // Their threads end, or wait for the next call: four at most wait, whatever the burst.
    let mut names = Vec::new();
    let settled = poll(ANSWER, || {
        names = thread_names(serve.pid());
        let idle = names.iter().filter(|name| *name == "call (idle)").count();
        let calls = names
            .iter()
            .filter(|name| name.starts_with("command "))
            .count();
        idle <= 4 && calls <= 1
    });
    assert!(settled, "serve's threads after the calls: {names:?}");
}

/// Starts a call whose program has a child, stops serve with `stop`, and checks that serve exits
/// 0 and both processes are gone.
fn shutdown_case(sandbox: Sandbox, stop: impl FnOnce(&mut Serve)) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("60s").start();
    let mark = marker();
    serve.send_call(
        json!({"program": "lnk-test-procs", "args": ["tree", &mark, "60"]}),
        None,
    );
    wait_for_role(&mark, "linger", Duration::from_secs(10));
    stop(&mut serve);
    let status = serve.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(0), "serve ended with {status}");
    wait_gone(&mark, Duration::from_secs(5));
    serve.check_stdout();
}

fn shutdown_on_stdin_closed(sandbox: Sandbox) {
    shutdown_case(sandbox, Serve::close_stdin);
}

fn shutdown_on_sigterm(sandbox: Sandbox) {
    shutdown_case(sandbox, |serve| serve.signal(Signal::TERM));
}

fn shutdown_on_sigint(sandbox: Sandbox) {
    shutdown_case(sandbox, |serve| serve.signal(Signal::INT));
}

/// A cancellation that serve has read is never answered, however it races the call's end:
/// thousands of short calls, each cancelled at once and followed by a `ping`. serve reads its
/// input in order, so by the time it answers the ping it has read the cancellation; an answer
/// to the call written after the ping's answer is an answer to a call it knew was cancelled.
/// (An answer before the ping's may have been queued before the cancellation was read: the
/// two crossed on the wire, which no server can prevent.)
#[test]
fn a_cancellation_read_before_the_answer_always_wins() {
    const CALLS: usize = 2000;
    const AT_ONCE: usize = 40;
    let setup = Setup::new(Sandbox::Passthrough);
    let mut serve = setup.serve().start();
    let mut triples = Vec::with_capacity(CALLS);
    for _ in 0..CALLS / AT_ONCE {
        let mut pings = Vec::with_capacity(AT_ONCE);
        for _ in 0..AT_ONCE {
            let call = serve.send_call(json!({"program": "true"}), None);
            serve.send(&json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": call, "reason": "raced on purpose"},
            }));
            let ping = serve.send_request("ping", json!({}));
            pings.push(ping);
            triples.push((call, ping));
        }
        for ping in pings {
            ok(&serve.response(&json!(ping), ANSWER));
        }
    }
    // Whatever the calls would still answer comes within the leftover grace.
    let last = serve.send_call(json!({"program": "sleep", "args": ["1.2"]}), None);
    ok(&serve.response(&json!(last), ANSWER));
    let inbox = serve.inbox().to_vec();
    let place = |id: i64| {
        inbox
            .iter()
            .position(|m| m["id"] == id && (m.get("result").is_some() || m.get("error").is_some()))
    };
    let mut answered_before = 0;
    for (call, ping) in triples {
        let ping_at = place(ping).unwrap_or_else(|| panic!("ping {ping} is answered"));
        if let Some(call_at) = place(call) {
            assert!(
                call_at < ping_at,
                "call {call} was answered after serve had read its cancellation: {}",
                inbox[call_at]
            );
            answered_before += 1;
        }
    }
    eprintln!("{answered_before} of {CALLS} calls ended before their cancellation was read");
}
