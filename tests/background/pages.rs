//! `list` a page at a time: newest first, `limit` and `before`/`next`, the `state` filter, a
//! short line per run, and bad values refused with `isError`.
use std::time::Duration;

use serde_json::{Value, json};

use lnk_tests::results::{is_error, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::Serve;
use lnk_tests::tools::{procs_args, start, stop, stopped_run, tool, wait_ended};

both_sandboxes!(
    pages_run_newest_first_and_follow_on,
    the_state_filter_keeps_its_runs,
    bad_list_arguments_are_refused,
    a_long_dir_is_shortened_in_a_page,
);

/// One page: its runs' ids, its `next`, and its text.
fn page(serve: &mut Serve, arguments: Value) -> (Vec<String>, Option<String>, String) {
    let result = tool(serve, "list", arguments.clone(), None);
    assert!(!is_error(&result), "list {arguments} was refused: {result}");
    let value = structured(&result);
    let ids = value["runs"]
        .as_array()
        .unwrap_or_else(|| panic!("runs: {result}"))
        .iter()
        .map(|run| run["id"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        value["next"].is_null() || value["next"].is_string(),
        "{result}"
    );
    (
        ids,
        value["next"].as_str().map(str::to_owned),
        text(&result),
    )
}

fn pages_run_newest_first_and_follow_on(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    // Started one after the other, so their start times order them.
    let mut started = Vec::new();
    for i in 0..5 {
        let id = start(
            &mut serve,
            json!({"program": "sh", "args": ["-c", format!("echo run-{i}")]}),
        );
        wait_ended(&mut serve, &id, Duration::from_secs(10));
        started.push(id);
    }
    let newest_first: Vec<String> = started.iter().rev().cloned().collect();

    let (all, next, text) = page(&mut serve, json!({}));
    assert_eq!(all, newest_first, "newest first, by start time");
    assert_eq!(next, None, "no more runs: {text}");
    assert_eq!(text.lines().count(), 5, "a line per run: {text}");
    for (line, id) in text.lines().zip(&newest_first) {
        assert!(line.starts_with(id.as_str()), "{line}");
        assert!(line.chars().count() < 300, "a short line: {line}");
    }

    let (first, next, text) = page(&mut serve, json!({"limit": 2}));
    assert_eq!(first, newest_first[..2], "{text}");
    let next = next.unwrap_or_else(|| panic!("three more runs: {text}"));
    assert!(text.contains(&next), "the text says how to go on: {text}");
    let (second, next, _) = page(&mut serve, json!({"limit": 2, "before": next}));
    assert_eq!(second, newest_first[2..4]);
    let next = next.unwrap_or_else(|| panic!("one more run"));
    let (third, next, text) = page(&mut serve, json!({"limit": 2, "before": next}));
    assert_eq!(third, newest_first[4..], "{text}");
    assert_eq!(next, None, "the last page: {text}");
    assert_eq!(text.lines().count(), 1, "{text}");
}

fn the_state_filter_keeps_its_runs(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let exited = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "exit 4"]}),
    );
    wait_ended(&mut serve, &exited, Duration::from_secs(10));
    let mark = bg.marker();
    let stopped = start(&mut serve, procs_args("linger", &mark, 120));
    assert_eq!(stopped_run(&stop(&mut serve, &stopped))["state"], "stopped");
    let running = start(&mut serve, procs_args("linger", &bg.marker(), 120));

    let cases = [
        ("running", vec![running.clone()]),
        ("ended", vec![stopped.clone(), exited.clone()]),
        ("exited", vec![exited.clone()]),
        ("stopped", vec![stopped.clone()]),
        ("timed_out", vec![]),
        ("lost", vec![]),
    ];
    for (state, expected) in cases {
        let (ids, next, text) = page(&mut serve, json!({"state": state}));
        assert_eq!(ids, expected, "state {state}: {text}");
        assert_eq!(next, None);
        if expected.is_empty() {
            assert_eq!(text, "no background runs", "{state}");
        }
    }
    let (ids, _, _) = page(&mut serve, json!({"state": "ended", "limit": 1}));
    assert_eq!(ids, std::slice::from_ref(&stopped));
    assert_eq!(stopped_run(&stop(&mut serve, &running))["state"], "stopped");
}

fn bad_list_arguments_are_refused(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    for (arguments, says) in [
        (json!({"limit": 0}), "limit"),
        (json!({"limit": 201}), "limit"),
        (json!({"limit": "ten"}), "limit"),
        (json!({"state": "done"}), "state"),
        (json!({"before": "not a cursor"}), "before"),
        (json!({"before": "17-../../etc"}), "before"),
        (json!({"page": 2}), "page"),
    ] {
        let result = tool(&mut serve, "list", arguments.clone(), None);
        assert!(is_error(&result), "{arguments}: {result}");
        assert!(text(&result).contains(says), "{arguments}: {result}");
    }
    // The server keeps serving.
    let (ids, next, _) = page(&mut serve, json!({"limit": 200}));
    assert!(ids.is_empty() && next.is_none());
}

/// A page stays small whatever the agent passed: a `dir` thousands of characters long is
/// shown shortened, as the arguments are.
fn a_long_dir_is_shortened_in_a_page(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let dir = "./".repeat(2000);
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "true", "x".repeat(5000)], "dir": dir}),
    );
    wait_ended(&mut serve, &id, Duration::from_secs(10));
    let result = tool(&mut serve, "list", json!({}), None);
    let run = &structured(&result)["runs"][0];
    assert_eq!(run["id"], id.as_str(), "{result}");
    let shown = run["dir"].as_str().unwrap_or_default();
    assert!(
        shown.chars().count() <= 257 && shown.ends_with('…'),
        "{shown}"
    );
    assert!(
        result.to_string().len() < 4096,
        "{} bytes",
        result.to_string().len()
    );
}
