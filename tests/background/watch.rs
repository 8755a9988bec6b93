//! `watch` as an MCP task: it completes within a second of its line and not
//! before, with a regular expression too, when the run ends first, at its timeout; a cancelled
//! watch leaves the run running; ten watches on one run; a watch over 10 MB of output costs no
//! CPU while it waits and finds its line across rotations; a watch outlives its serve.
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::tasks::{declared, get, modern, wait_done};
use lnk_tests::bins::write;
use lnk_tests::procs::{
    cpu_time, inotify_instances, thread_sleeps, threads_named, wait_for_role, wait_gone,
};
use lnk_tests::results::{ok, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::tools::{listed, procs_args, start, stop, stopped_run, tool};

both_sandboxes!(
    a_watch_completes_within_a_second_of_its_line_and_not_before,
    a_regex_watch_matches_whole_lines,
    a_watch_on_a_run_that_ends_says_how_it_ended,
    a_watch_ends_at_its_timeout,
    a_cancelled_watch_leaves_the_run_running,
    ten_watches_on_one_run,
    a_watch_over_10_mb_sleeps_and_sees_through_rotations,
    a_watch_outlives_the_serve_that_made_it,
);

/// A `watch` whose request declares the Tasks extension: its `CreateTaskResult`.
pub(crate) fn watch_task(serve: &mut Serve, arguments: Value) -> Value {
    let created = ok(&declared(
        serve,
        "tools/call",
        json!({"name": "watch", "arguments": arguments}),
    ));
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    created
}

/// The task id of a created watch, checked to be its run's id, `-` and a tag.
pub(crate) fn watch_id(created: &Value, run: &str) -> String {
    let id = created["taskId"].as_str().expect("a task id").to_owned();
    let tag = id
        .strip_prefix(&format!("{run}-"))
        .unwrap_or_else(|| panic!("a watch's id is its run's, `-` and a tag: {id}"));
    assert!(
        (8..=16).contains(&tag.len()) && tag.bytes().all(|b| b.is_ascii_alphanumeric()),
        "{id}"
    );
    id
}

/// The structured value of a completed watch's result.
fn completed(done: &Value) -> Value {
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");
    structured(&done["result"]).clone()
}

fn a_watch_completes_within_a_second_of_its_line_and_not_before(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo starting; sleep 3; echo not yet; sleep 2; echo listening on port $((4000+80)); sleep 60"]}),
    );
    let created = watch_task(&mut serve, json!({"id": id, "until": "listening on"}));
    let watch = watch_id(&created, &id);
    assert!(
        created["statusMessage"]
            .as_str()
            .is_some_and(|m| m.contains("listening on") && !m.contains('\n')),
        "{created}"
    );
    let output = bg.output_path(&id);
    let written = || {
        std::fs::read_to_string(&output).is_ok_and(|text| text.contains("listening on port 4080"))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut seen_at, mut working_after_not_yet) = (None, false);
    let done = loop {
        if seen_at.is_none() && written() {
            seen_at = Some(Instant::now());
        }
        let got = get(&mut serve, &watch);
        if got["status"] != "working" {
            // Not before: the line is there when the watch says it is.
            assert!(written(), "the watch completed before its line: {got}");
            break got;
        }
        working_after_not_yet |= std::fs::read_to_string(&output)
            .is_ok_and(|text| text.contains("not yet") && !text.contains("listening"));
        assert!(Instant::now() < deadline, "still working: {got}");
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = seen_at.map(|at| at.elapsed()).unwrap_or_default();
    assert!(
        took < Duration::from_secs(1),
        "completed {took:?} after its line was written"
    );
    assert!(
        working_after_not_yet,
        "a line that does not match ends no watch"
    );
    let value = completed(&done);
    assert_eq!(value["matched"], true, "{value}");
    assert_eq!(value["line"], "listening on port 4080", "{value}");
    assert_eq!(
        value["match_offset"],
        "starting\nnot yet\n".len(),
        "{value}"
    );
    assert_eq!(value["ended"], false, "{value}");
    assert_eq!(value["watch"], watch.as_str(), "{value}");
    assert!(
        value["text"]
            .as_str()
            .unwrap_or("")
            .contains("not yet\nlistening on port 4080\n")
    );
    let said = text(&done["result"]);
    assert!(said.contains("listening on port 4080"), "{said}");
    // The completed task keeps its answer.
    assert_eq!(get(&mut serve, &watch)["result"], done["result"]);
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
}

fn a_regex_watch_matches_whole_lines(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "sleep 1; echo 'not ready on port 1'; echo 'ready on port 80 (almost)'; printf 'ready on port %s\\r\\n' $((8000+80)); sleep 60"]}),
    );
    let created = watch_task(
        &mut serve,
        json!({"id": id, "until": "^ready on port [0-9]+$", "regex": true, "offset": 0}),
    );
    let done = wait_done(&mut serve, &watch_id(&created, &id), ANSWER);
    let value = completed(&done);
    // A terminal's `\r\n` ends a line as `\n` does.
    assert_eq!(value["line"], "ready on port 8080", "{value}");
    assert_eq!(
        value["match_offset"],
        "not ready on port 1\nready on port 80 (almost)\n".len(),
        "{value}"
    );
    // A pattern that is no regular expression, or too large a one, is refused.
    for (until, says) in [
        ("(", "not a regular expression"),
        ("\\w{999}{999}", "too large"),
    ] {
        let refused = tool(
            &mut serve,
            "watch",
            json!({"id": id, "until": until, "regex": true}),
            None,
        );
        assert!(text(&refused).contains(says), "{refused}");
    }
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
}

fn a_watch_on_a_run_that_ends_says_how_it_ended(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "sleep 1; echo bye-$((6*7)); printf 'no newline'; exit 3"]}),
    );
    let for_text = watch_id(
        &watch_task(
            &mut serve,
            json!({"id": id, "until": "never printed", "offset": 0}),
        ),
        &id,
    );
    let for_end = watch_id(
        &watch_task(&mut serve, json!({"id": id, "ended": true})),
        &id,
    );
    // The last line, ended by no newline, is a line once the run has ended.
    let for_last = watch_id(
        &watch_task(
            &mut serve,
            json!({"id": id, "until": "no newline", "offset": 0}),
        ),
        &id,
    );
    let value = completed(&wait_done(&mut serve, &for_text, ANSWER));
    assert_eq!(
        (&value["matched"], &value["ended"], &value["exit_code"]),
        (&json!(false), &json!(true), &json!(3)),
        "{value}"
    );
    let summary = value["summary"].as_str().unwrap_or("");
    assert!(summary.contains("exited with code 3"), "{summary}");
    assert!(
        summary.contains("no line holding \"never printed\""),
        "{summary}"
    );
    assert!(
        value["text"].as_str().unwrap_or("").contains("bye-42"),
        "{value}"
    );
    let value = completed(&wait_done(&mut serve, &for_end, ANSWER));
    assert_eq!(
        (&value["ended"], &value["state"]),
        (&json!(true), &json!("exited"))
    );
    assert!(
        value["summary"]
            .as_str()
            .unwrap_or("")
            .contains("exited with code 3")
    );
    let value = completed(&wait_done(&mut serve, &for_last, ANSWER));
    assert_eq!(value["line"], "no newline", "{value}");
}

fn a_watch_ends_at_its_timeout(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 60));
    let asked = Instant::now();
    let created = watch_task(&mut serve, json!({"id": id, "until": "x", "timeout": 1500}));
    let done = wait_done(&mut serve, &watch_id(&created, &id), ANSWER);
    let took = asked.elapsed();
    let value = completed(&done);
    assert_eq!(
        (&value["timed_out"], &value["matched"], &value["state"]),
        (&json!(true), &json!(false), &json!("running")),
        "{value}"
    );
    assert!(
        (Duration::from_millis(1500)..Duration::from_secs(10)).contains(&took),
        "{took:?}"
    );
    wait_for_role(&mark, "linger", ANSWER);
    // No more than the background timeout (2 minutes here).
    let refused = tool(
        &mut serve,
        "watch",
        json!({"id": id, "until": "x", "timeout": 120_001}),
        None,
    );
    assert!(text(&refused).contains("at most 120000"), "{refused}");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

fn a_cancelled_watch_leaves_the_run_running(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 60));
    let watch = watch_id(
        &watch_task(&mut serve, json!({"id": id, "until": "x"})),
        &id,
    );
    let deadline = Instant::now() + ANSWER;
    while threads_named(serve.pid(), "watch ").is_empty() {
        assert!(Instant::now() < deadline, "no thread waits for the watch");
        std::thread::sleep(Duration::from_millis(20));
    }
    let cancel = |serve: &mut Serve| {
        let answered = ok(&declared(serve, "tasks/cancel", json!({"taskId": watch})));
        // An empty result (beside the era's `resultType` and `_meta`).
        assert_eq!(answered["resultType"], "complete", "{answered}");
        assert!(answered.get("status").is_none(), "{answered}");
    };
    cancel(&mut serve);
    let done = wait_done(&mut serve, &watch, ANSWER);
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(done.get("result").is_none(), "{done}");
    // Its thread is gone; the run and its program are not.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !threads_named(serve.pid(), "watch ").is_empty() {
        assert!(
            Instant::now() < deadline,
            "the cancelled watch's thread lives on"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(listed(&mut serve, &id)["state"], "running");
    wait_for_role(&mark, "linger", ANSWER);
    // Cancelled stays cancelled, and a second cancel changes nothing.
    cancel(&mut serve);
    assert_eq!(get(&mut serve, &watch)["status"], "cancelled");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

fn ten_watches_on_one_run(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "sleep 2; i=1; while [ $i -le 10 ]; do echo step-$i-done; sleep 0.1; i=$((i+1)); done; sleep 60"]}),
    );
    // Under a line with `{protected}`, serve holds one more, its protected paths' watches.
    let pid = serve.pid();
    let inotify = || inotify_instances(pid);
    let instances = inotify();
    let watches: Vec<String> = (1..=10)
        .map(|i| {
            let created = watch_task(&mut serve, json!({"id": id, "until": format!("step-{i}-")}));
            watch_id(&created, &id)
        })
        .collect();
    let mut tags: Vec<&String> = watches.iter().collect();
    tags.dedup();
    assert_eq!(tags.len(), 10, "each watch has an id of its own");
    for (i, watch) in watches.iter().enumerate() {
        let value = completed(&wait_done(&mut serve, watch, ANSWER));
        assert_eq!(value["line"], format!("step-{}-done", i + 1), "{value}");
    }
    // They shared the server's one inotify instance (ten of their own would be ten more). The
    // protected paths' instance may be absent from either count, dropped and made anew when
    // their folders change: one more at most.
    let after = inotify();
    assert!(
        (instances + 1..=instances + 2).contains(&after),
        "{after} inotify instances after ten watches, {instances} before"
    );
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
}

fn a_watch_over_10_mb_sleeps_and_sees_through_rotations(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    // 10 MiB through a 1 MiB output file, then nothing until a line is typed, then the line.
    let unit = hex::encode(b"0123456789abcde\n");
    let script = format!(
        "sleep 1; {} 1 10485760 {unit}; read go; echo found-$((6*7)); sleep 60",
        write()
    );
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script], "interactive": true}),
    );
    let watch = watch_id(
        &watch_task(
            &mut serve,
            json!({"id": id, "until": "found-42", "offset": 0}),
        ),
        &id,
    );
    let deadline = Instant::now() + ANSWER;
    while listed(&mut serve, &id)["output_bytes"]
        .as_u64()
        .unwrap_or(0)
        < 10_485_760
    {
        assert!(Instant::now() < deadline, "the 10 MiB were not written");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Settled, then 10 s in which nothing is written and nothing is asked.
    std::thread::sleep(Duration::from_secs(1));
    let waiter = threads_named(serve.pid(), "watch ");
    assert_eq!(waiter.len(), 1, "one thread waits for the watch");
    let sleeps = |tid| thread_sleeps(serve.pid(), tid);
    let (cpu, woke) = (cpu_time(serve.pid()), sleeps(waiter[0]));
    std::thread::sleep(Duration::from_secs(10));
    let spent = cpu_time(serve.pid()).saturating_sub(cpu);
    assert_eq!(
        sleeps(waiter[0]),
        woke,
        "the waiting watch woke while nothing was written"
    );
    assert!(
        spent <= Duration::from_millis(50),
        "serve used {spent:?} of CPU in 10 s with one watch waiting"
    );
    assert_eq!(get(&mut serve, &watch)["status"], "working");
    let typed = tool(&mut serve, "write", json!({"id": id, "text": "go\n"}), None);
    assert_eq!(structured(&typed)["taken"], 3, "{typed}");
    let value = completed(&wait_done(&mut serve, &watch, ANSWER));
    assert_eq!(value["line"], "found-42", "{value}");
    assert_eq!(value["match_offset"], 10_485_760, "{value}");
    assert!(
        value["dropped_bytes"].as_u64().unwrap_or(0) >= 9 * 1024 * 1024,
        "{value}"
    );
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
}

fn a_watch_outlives_the_serve_that_made_it(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut first = modern(&bg, &Flags::default());
    let id = start(
        &mut first,
        json!({"program": "sh", "args": ["-c", "sleep 3; echo late-$((5*5)); sleep 60"]}),
    );
    let watch = watch_id(
        &watch_task(&mut first, json!({"id": id, "until": "late-"})),
        &id,
    );
    first.kill();
    // The line comes while no serve waits for the watch.
    let output = bg.output_path(&id);
    let deadline = Instant::now() + ANSWER;
    while !std::fs::read_to_string(&output).is_ok_and(|text| text.contains("late-25")) {
        assert!(Instant::now() < deadline, "the line never came");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut second = modern(&bg, &Flags::default());
    let value = completed(&wait_done(&mut second, &watch, ANSWER));
    assert_eq!(value["line"], "late-25", "{value}");
    assert_eq!(value["match_offset"], 0, "{value}");
    assert!(value["waited_ms"].as_u64().unwrap_or(0) >= 2500, "{value}");
    assert_eq!(stopped_run(&stop(&mut second, &id))["state"], "stopped");
}
