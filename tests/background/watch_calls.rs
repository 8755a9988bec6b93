//! `watch` for a host that does not follow tasks: the call itself waits, as a
//! waiting `read` with `until` does, at most `--timeout`; what `tools/list` says of it; its
//! refusals; and watch ids among task ids, refused before they touch the disk when malformed.
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::tasks::{declared, modern};
use crate::watch::{watch_id, watch_task};
use lnk_tests::procs::wait_gone;
use lnk_tests::results::{error_code, is_error, ok, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::Serve;
use lnk_tests::tools::{procs_args, start, stop, stopped_run, tool, tool_within};

both_sandboxes!(
    without_tasks_a_watch_waits_in_its_call,
    a_watch_is_described_for_the_model,
    bad_watches_are_refused,
    watch_ids_share_tasks_get_with_run_ids,
    a_runs_watches_go_with_it,
);

/// The tool named `name` as `tools/list` shows it.
fn listed_tool(serve: &mut Serve, name: &str) -> Value {
    let listed = serve.result("tools/list", json!({}));
    listed["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no {name} tool: {listed}"))
}

fn without_tasks_a_watch_waits_in_its_call(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    // The handshake era, and the 2026-07-28 one without the extension declared: no task.
    for mut serve in [
        bg.serve(&Flags::default()).timeout("3s").start(),
        bg.serve(&Flags::default())
            .timeout("3s")
            .era(lnk_tests::serve::Era::Modern)
            .start(),
    ] {
        let id = start(
            &mut serve,
            json!({"program": "sh", "args": ["-c", "sleep 1; echo ready-$((2*21)); sleep 60"]}),
        );
        let asked = Instant::now();
        let result = tool_within(
            &mut serve,
            "watch",
            json!({"id": id, "until": "ready-"}),
            None,
            Duration::from_secs(20),
        );
        assert!(!is_error(&result), "{result}");
        assert!(
            result.get("taskId").is_none(),
            "no task unless asked: {result}"
        );
        assert!(text(&result).contains("ready-42"), "{result}");
        {
            let value = structured(&result);
            assert_eq!(
                (&value["matched"], &value["line"]),
                (&json!(true), &json!("ready-42"))
            );
            assert_eq!(value["watch"], Value::Null, "{value}");
        }
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{:?}",
            asked.elapsed()
        );
        assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    }
    // A call waits no longer than a call may (`--timeout`), and says how to go on.
    let mut serve = bg.serve(&Flags::default()).timeout("3s").start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 60));
    let asked = Instant::now();
    let result = tool_within(
        &mut serve,
        "watch",
        json!({"id": id, "until": "never printed"}),
        None,
        Duration::from_secs(20),
    );
    let took = asked.elapsed();
    assert!(
        (Duration::from_secs(3)..Duration::from_secs(12)).contains(&took),
        "{took:?}"
    );
    let value = structured(&result);
    assert_eq!(
        (&value["timed_out"], &value["matched"]),
        (&json!(true), &json!(false))
    );
    assert!(
        value["summary"]
            .as_str()
            .unwrap_or("")
            .contains("call `watch` again"),
        "{value}"
    );
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

fn a_watch_is_described_for_the_model(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let watch = listed_tool(&mut serve, "watch");
    assert_eq!(watch["execution"]["taskSupport"], "required", "{watch}");
    let description = watch["description"].as_str().unwrap_or("");
    for says in [
        "ready",
        "failed",
        "tells you when",
        "instead of calling `read`",
    ] {
        assert!(description.contains(says), "{says}: {description}");
    }
    assert!(
        watch["outputSchema"]["properties"]["line"].is_object(),
        "{watch}"
    );
    let stop = listed_tool(&mut serve, "stop");
    assert_eq!(
        stop["inputSchema"]["properties"]["signal"]["enum"],
        json!(["INT", "HUP", "TERM", "QUIT", "USR1", "USR2", "KILL", "CONT"])
    );
    let read = listed_tool(&mut serve, "read");
    for key in ["grep", "raw"] {
        assert!(read["inputSchema"]["properties"][key].is_object(), "{read}");
    }
    // Where there are no tasks (a handshake revision), no task support is claimed.
    let mut old = bg.serve(&Flags::default()).start();
    let watch = listed_tool(&mut old, "watch");
    assert!(watch.get("execution").is_none(), "{watch}");
}

fn bad_watches_are_refused(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo hi"]}),
    );
    for (arguments, says) in [
        (json!({"id": id}), "needs `until`"),
        (
            json!({"id": id, "regex": true, "ended": true}),
            "there is no `until`",
        ),
        (json!({"id": id, "until": ""}), "1 to 1024"),
        (json!({"id": id, "until": "a\nb"}), "newline"),
        (json!({"id": id, "until": 7}), "must be a string"),
        (json!({"id": id, "until": "x", "timeout": -1}), "timeout"),
        (
            json!({"id": id, "until": "x", "tiemout": 5}),
            "unknown argument",
        ),
        (
            json!({"id": "abcdefghijkl0000", "until": "x"}),
            "there is no run",
        ),
        (json!({"id": "../etc", "until": "x"}), "is not a run id"),
    ] {
        let refused = tool(&mut serve, "watch", arguments.clone(), None);
        assert!(is_error(&refused), "{arguments}: {refused}");
        assert!(
            text(&refused).contains(says),
            "{arguments}: {}",
            text(&refused)
        );
    }
}

fn watch_ids_share_tasks_get_with_run_ids(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "sleep 30"]}),
    );
    let watch = watch_id(
        &watch_task(&mut serve, json!({"id": id, "ended": true})),
        &id,
    );
    // The run's task and the watch's are two tasks.
    let run_task = ok(&declared(&mut serve, "tasks/get", json!({"taskId": id})));
    let watch_task = ok(&declared(&mut serve, "tasks/get", json!({"taskId": watch})));
    assert_eq!(
        (&run_task["taskId"], &watch_task["taskId"]),
        (&json!(id), &json!(watch))
    );
    let gone = format!("{id}-zzzzzzzzzz");
    for (task, says) in [
        (format!("{id}-short"), "not a task of this server"),
        (format!("{id}-../../etc"), "not a task of this server"),
        (format!("{id}-ABCDEFGHIJ"), "not a task of this server"),
        (
            "abcdefghijkl-abcdefghij-x".to_owned(),
            "not a task of this server",
        ),
        (gone.clone(), "no task"),
        ("zzzzzzzzzzzz0000-abcdefghij".to_owned(), "no task"),
    ] {
        let response = declared(&mut serve, "tasks/get", json!({"taskId": task}));
        assert_eq!(error_code(&response), -32602, "{task}: {response}");
        let message = response["error"]["message"].as_str().unwrap_or("");
        assert!(message.contains(says), "{task}: {message}");
    }
    assert!(
        !bg.state
            .join("watches")
            .join(&id)
            .join("zzzzzzzzzz.json")
            .exists()
    );
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
}

fn a_runs_watches_go_with_it(sandbox: Sandbox) {
    // (A sweep removes a run's watches with the run: `lnk_common::run_files`' own test.)
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "sleep 30"]}),
    );
    watch_task(&mut serve, json!({"id": id, "until": "x"}));
    assert!(bg.state.join("watches").join(&id).is_dir());
    drop(serve);
    // `remove --state` removes a state folder that keeps watches, whole.
    let removed = std::process::Command::new(lnk_tests::bins::link_supervise())
        .args(["remove", "--state"])
        .arg(&bg.state)
        .status()
        .expect("remove --state");
    let left = || {
        std::fs::read_dir(&bg.state)
            .map(|names| names.flatten().map(|e| e.file_name()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    assert!(removed.success(), "left: {:?}", left());
    assert!(!bg.state.exists(), "the state folder is gone");
}
