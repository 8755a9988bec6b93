//! Background runs as MCP tasks, over raw JSON-RPC: a `start` whose request declares
//! the Tasks extension is answered with a task, `tasks/get` follows it to `completed` (or
//! `cancelled` after `tasks/cancel`), and nothing of it is ever sent to a request that did not
//! ask, to `command`, or in the handshake eras.
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::{Value, json};

use lnk_tests::procs::{signal, wait_no_supervisor, wait_supervisor};
use lnk_tests::procs::{wait_for_role, wait_gone};
use lnk_tests::results::{error_code, is_error, modern_meta, ok, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::tools::{procs_args, read_ok, stop, stopped_run, tool};

both_sandboxes!(
    a_declared_start_is_a_task_that_completes,
    never_a_task_unless_asked,
    task_ids_that_are_not_tasks_are_refused,
    a_cancelled_task_reads_cancelled_and_leaves_nothing,
    a_stopped_or_timed_out_run_completes,
    a_lost_run_completes_as_an_error,
    a_task_outlives_the_serve_that_started_it,
    a_rotated_output_counts_as_read_counts_it,
    a_task_shows_only_its_own_output,
);

/// The extension's identifier.
pub(crate) const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A 2026-07-28 request's `_meta` that declares the Tasks extension.
pub(crate) fn tasks_meta() -> Value {
    let mut meta = modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"extensions": {TASKS: {}}});
    meta
}

/// Sends `method` with `params` and the declaring `_meta` (not the session's stamp, which
/// declares nothing); the whole response.
pub(crate) fn declared(serve: &mut Serve, method: &str, mut params: Value) -> Value {
    let id = serve.fresh_id();
    params["_meta"] = tasks_meta();
    serve.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    serve.response(&json!(id), ANSWER)
}

/// A `start` that declares the extension: its result (a task, or a refusal).
pub(crate) fn start_task(serve: &mut Serve, arguments: Value) -> Value {
    ok(&declared(
        serve,
        "tools/call",
        json!({"name": "start", "arguments": arguments}),
    ))
}

/// `tasks/get`'s result.
pub(crate) fn get(serve: &mut Serve, task: &str) -> Value {
    ok(&declared(serve, "tasks/get", json!({"taskId": task})))
}

/// Polls `tasks/get` until the task is no longer `working`.
pub(crate) fn wait_done(serve: &mut Serve, task: &str, within: Duration) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let got = get(serve, task);
        if got["status"] != "working" {
            return got;
        }
        assert!(Instant::now() < deadline, "{task} still working: {got}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The checks every task answer passes: its id, status and times.
fn is_a_task(task: &Value, id: &str, result_type: &str) {
    assert_eq!(task["resultType"], result_type, "{task}");
    assert_eq!(task["taskId"], id, "{task}");
    for key in ["createdAt", "lastUpdatedAt"] {
        assert!(lnk_tests::tools::is_rfc3339(&task[key]), "{key}: {task}");
    }
    assert!(task["ttlMs"].as_u64().is_some_and(|ttl| ttl > 0), "{task}");
    assert!(
        task["statusMessage"]
            .as_str()
            .is_some_and(|m| !m.is_empty() && !m.contains('\n')),
        "{task}"
    );
}

/// A modern serve of `bg` with these flags.
pub(crate) fn modern(bg: &Bg, flags: &Flags) -> Serve {
    bg.serve(flags).era(Era::Modern).start()
}

/// `start`'s output schema, as `tools/list` gives it.
fn start_schema(serve: &mut Serve) -> Value {
    let listed = serve.result("tools/list", json!({}));
    listed["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "start"))
        .map(|t| t["outputSchema"].clone())
        .unwrap_or_else(|| panic!("no start tool: {listed}"))
}

/// Checks `value` against `schema` as far as `start`'s schema goes: an object whose keys are
/// all properties, with every required one, each of its declared type.
fn conforms(value: &Value, schema: &Value) {
    let properties = schema["properties"].as_object().expect("properties");
    let object = value.as_object().expect("an object");
    for key in schema["required"].as_array().expect("required") {
        assert!(
            object.contains_key(key.as_str().unwrap_or("")),
            "{key} missing: {value}"
        );
    }
    for (key, field) in object {
        let property = properties
            .get(key)
            .unwrap_or_else(|| panic!("`{key}` is not in the schema: {value}"));
        let types: Vec<&str> = match &property["type"] {
            Value::String(one) => vec![one.as_str()],
            Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
            other => panic!("a type: {other}"),
        };
        let kind = match field {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_u64() || n.is_i64() => "integer",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        assert!(
            types.contains(&kind),
            "`{key}` is {kind}, not {types:?}: {value}"
        );
    }
}

fn a_declared_start_is_a_task_that_completes(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let discovered = ok(&declared(&mut serve, "server/discover", json!({})));
    assert_eq!(
        discovered["capabilities"]["extensions"][TASKS],
        json!({}),
        "{discovered}"
    );
    // The markers are made by the shell, so they are in no argument.
    let task = start_task(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "sleep 1; echo out-$((1111*3)); echo err-$((2222*3)) >&2; exit 3"]}),
    );
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    is_a_task(&task, &id, "task");
    assert_eq!(task["status"], "working", "{task}");
    assert_eq!(task["pollIntervalMs"], 1000, "{task}");
    // Durably created: a get resolves at once, before the run has done anything.
    let first = get(&mut serve, &id);
    is_a_task(&first, &id, "complete");
    assert_eq!(first["status"], "working", "{first}");
    assert!(
        first["statusMessage"]
            .as_str()
            .unwrap_or("")
            .contains("running for"),
        "{first}"
    );

    let done = wait_done(&mut serve, &id, Duration::from_secs(30));
    is_a_task(&done, &id, "complete");
    assert_eq!(done["status"], "completed", "{done}");
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{done}");
    assert_eq!(result["resultType"], "complete", "{done}");
    let said = text(result);
    assert!(said.contains("exited with code 3"), "{said}");
    let value = structured(result);
    for shown in [&said, value["output"].as_str().unwrap_or("")] {
        assert!(
            shown.contains("out-3333") && shown.contains("err-6666"),
            "{done}"
        );
    }
    assert_eq!(value["state"], "exited", "{value}");
    assert_eq!(value["exit_code"], 3, "{value}");
    assert_eq!(value["id"], id.as_str(), "{value}");
    assert!(
        value["summary"]
            .as_str()
            .unwrap_or("")
            .contains("exited with code 3")
    );
    conforms(value, &start_schema(&mut serve));
    // The completed task keeps its answer: asked again, the same.
    let again = get(&mut serve, &id);
    assert_eq!(again["result"], done["result"]);
}

fn never_a_task_unless_asked(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mark = bg.marker();
    // 2026-07-28 without the declaration: today's answer.
    let mut serve = modern(&bg, &Flags::default());
    let plain = tool(&mut serve, "start", procs_args("linger", &mark, 60), None);
    assert!(plain.get("taskId").is_none(), "{plain}");
    let id = lnk_tests::tools::started(&plain);
    // A task request that does not declare the extension is refused as the extension says.
    let id_value = serve.fresh_id();
    let mut params = json!({"taskId": id});
    params["_meta"] = modern_meta();
    serve.send(&json!({"jsonrpc": "2.0", "id": id_value, "method": "tasks/get", "params": params}));
    let refused = serve.response(&json!(id_value), ANSWER);
    assert_eq!(error_code(&refused), -32021, "{refused}");
    assert_eq!(
        refused["error"]["data"]["requiredCapabilities"]["extensions"][TASKS],
        json!({}),
        "{refused}"
    );
    // `command` is never a task.
    let command = ok(&declared(
        &mut serve,
        "tools/call",
        json!({"name": "command", "arguments": {"program": "echo", "args": ["hi"]}}),
    ));
    assert!(
        command.get("taskId").is_none() && command["resultType"] == "complete",
        "{command}"
    );
    assert!(text(&command).contains("hi"), "{command}");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");

    // The handshake era has no tasks, whatever a request's `_meta` says (a request with the
    // 2026-07-28 version in it is served at 2026-07-28, so this one has none).
    let mut old = bg.serve(&Flags::default()).start();
    let capabilities =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS: {}}}});
    let result = tool(
        &mut old,
        "start",
        procs_args("linger", &mark, 60),
        Some(capabilities),
    );
    assert!(result.get("taskId").is_none(), "{result}");
    let id = lnk_tests::tools::started(&result);
    let got = old.request("tasks/get", json!({"taskId": id}));
    assert_eq!(error_code(&got), -32601, "{got}");
    assert_eq!(stopped_run(&stop(&mut old, &id))["state"], "stopped");

    // Without background runs, no extension and no task methods.
    let mut plain_serve = bg.setup.serve().era(Era::Modern).start();
    let discovered = plain_serve.result("server/discover", json!({}));
    assert!(
        discovered["capabilities"].get("extensions").is_none(),
        "{discovered}"
    );
    let got = declared(&mut plain_serve, "tasks/get", json!({"taskId": id}));
    assert_eq!(error_code(&got), -32601, "{got}");
    wait_gone(&mark, Duration::from_secs(10));
}

fn task_ids_that_are_not_tasks_are_refused(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    for method in ["tasks/get", "tasks/cancel", "tasks/update"] {
        for (params, says) in [
            (json!({}), "taskId"),
            (json!({"taskId": 7}), "taskId"),
            (json!({"taskId": "../../etc/passwd"}), "not a task"),
            (json!({"taskId": "ABCDEFGHIJKL"}), "not a task"),
            (json!({"taskId": "x".repeat(100_000)}), "not a task"),
            (json!({"taskId": "abcdefghijkl0123"}), "no task"),
        ] {
            let refused = declared(&mut serve, method, params);
            assert_eq!(error_code(&refused), -32602, "{method}: {refused}");
            let message = refused["error"]["message"].as_str().unwrap_or("");
            assert!(
                message.contains(says) && message.len() < 300,
                "{method}: {message}"
            );
        }
    }
    // Nothing was made for them.
    assert_eq!(bg.record_ids(), Vec::<String>::new());
}

fn a_cancelled_task_reads_cancelled_and_leaves_nothing(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let mark = bg.marker();
    let task = start_task(&mut serve, procs_args("tree", &mark, 120));
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let cancelled = ok(&declared(&mut serve, "tasks/cancel", json!({"taskId": id})));
    assert_eq!(cancelled["resultType"], "complete", "{cancelled}");
    assert_eq!(
        cancelled.as_object().map(|o| o.len()),
        Some(2),
        "{cancelled}"
    );
    let done = wait_done(&mut serve, &id, Duration::from_secs(15));
    is_a_task(&done, &id, "complete");
    assert_eq!(done["status"], "cancelled", "{done}");
    assert!(done.get("result").is_none(), "{done}");
    wait_gone(&mark, Duration::from_secs(10));
    wait_no_supervisor(&id, Duration::from_secs(10));
    // Its command line goes before it is a zombie: what a look by id sees gone may still, for
    // a moment, be exiting.
    assert!(
        lnk_tests::procs::wait_dead(supervisor.pid, Duration::from_secs(10)),
        "the supervisor {} outlived its run",
        supervisor.pid
    );
    // A second cancel, and an update, of the ended task: empty answers, nothing changes.
    ok(&declared(&mut serve, "tasks/cancel", json!({"taskId": id})));
    let updated = ok(&declared(
        &mut serve,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"k": {"action": "accept"}}}),
    ));
    assert_eq!(updated["resultType"], "complete", "{updated}");
    assert_eq!(get(&mut serve, &id)["status"], "cancelled");
}

fn a_stopped_or_timed_out_run_completes(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        timeout: "2s",
        ..Flags::default()
    };
    let mut serve = modern(&bg, &flags);
    // Stopped with the `stop` tool: an ordinary stopped run, a completed task.
    let mark = bg.marker();
    let task = start_task(&mut serve, procs_args("linger", &mark, 120));
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    wait_for_role(&mark, "linger", ANSWER);
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    let done = wait_done(&mut serve, &id, Duration::from_secs(10));
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(structured(&done["result"])["state"], "stopped", "{done}");
    assert!(text(&done["result"]).contains("was stopped"), "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");

    // Past its timeout.
    let task = start_task(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo begun; sleep 60"]}),
    );
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    let done = wait_done(&mut serve, &id, Duration::from_secs(20));
    assert_eq!(done["status"], "completed", "{done}");
    let value = structured(&done["result"]);
    assert_eq!(value["state"], "timed_out", "{done}");
    assert!(
        value["output"].as_str().unwrap_or("").contains("begun"),
        "{done}"
    );
    assert!(
        text(&done["result"]).contains("timed out after 2s"),
        "{done}"
    );
    assert_eq!(done["result"]["isError"], false, "{done}");
}

fn a_lost_run_completes_as_an_error(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let mark = bg.marker();
    let task = start_task(&mut serve, procs_args("tree", &mark, 120));
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    signal(supervisor.pid, Signal::KILL);
    // The poll notices the free lock and has a sweep record it; a later poll reads it.
    let done = wait_done(&mut serve, &id, Duration::from_secs(20));
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["isError"], true, "{done}");
    assert_eq!(structured(&done["result"])["state"], "lost", "{done}");
    assert!(text(&done["result"]).contains("was lost"), "{done}");
    wait_gone(&mark, Duration::from_secs(10));
}

fn a_task_outlives_the_serve_that_started_it(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut first = modern(&bg, &Flags::default());
    let task = start_task(
        &mut first,
        json!({"program": "sh", "args": ["-c", "sleep 1; echo late-$((4444*2))"]}),
    );
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    first.close_stdin();
    first.wait_exit(Duration::from_secs(10));
    drop(first);
    let mut second = modern(&bg, &Flags::default());
    let done = wait_done(&mut second, &id, Duration::from_secs(30));
    assert_eq!(done["status"], "completed", "{done}");
    assert!(text(&done["result"]).contains("late-8888"), "{done}");
}

fn a_rotated_output_counts_as_read_counts_it(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        output: "64KiB",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).era(Era::Modern).output("4KiB").start();
    // 1 MiB through a 64 KiB file: rotated many times.
    let task = start_task(
        &mut serve,
        json!({"program": "lnk-test-write", "args": ["1", "1048576", hex::encode(b"0123456789abcdef\n")]}),
    );
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    let done = wait_done(&mut serve, &id, Duration::from_secs(30));
    let value = structured(&done["result"]).clone();
    let (_, read) = read_ok(&mut serve, json!({"id": id}));
    assert_eq!(
        value["output_bytes"], read["output_bytes"],
        "{value} / {read}"
    );
    assert_eq!(
        value["dropped_bytes"], read["dropped_bytes"],
        "{value} / {read}"
    );
    assert_eq!(value["output_bytes"], 1_048_576, "{value}");
    assert!(value["dropped_bytes"].as_u64().unwrap_or(0) > 0, "{value}");
    let listed = lnk_tests::tools::listed(&mut serve, &id);
    assert_eq!(listed["output_bytes"], value["output_bytes"], "{listed}");
    // The text keeps the head and tail within `--output` (4 KiB), however long the file.
    let said = text(&done["result"]);
    assert!(said.len() < 6 * 1024, "{} bytes", said.len());
    assert!(
        said.contains("left out") && said.contains("were dropped"),
        "{said}"
    );
    assert!(!is_error(&done["result"]));
}

fn a_task_shows_only_its_own_output(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = modern(&bg, &Flags::default());
    let task = start_task(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo real-$((7*6))"]}),
    );
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    let done = wait_done(&mut serve, &id, Duration::from_secs(30));
    assert!(text(&done["result"]).contains("real-42"), "{done}");
    // Bytes appended after the end are not the run's.
    let appended = serve.call(
        json!({"program": "sh", "args": ["-c", format!("echo FAKE >> background/{id}.out")]}),
    );
    assert!(!is_error(&appended), "{appended}");
    let again = get(&mut serve, &id);
    let value = structured(&again["result"]);
    assert_eq!(value["output"], "real-42\n", "{again}");
    assert_eq!(value["output_bytes"], 8, "{again}");
    // Another file renamed over the run's: not shown, and said so.
    let replaced = serve.call(json!({"program": "sh", "args": ["-c", format!("echo FAKE > x && mv x background/{id}.out")]}));
    assert!(!is_error(&replaced), "{replaced}");
    let again = get(&mut serve, &id);
    let said = text(&again["result"]);
    assert!(
        !said.contains("FAKE") && said.contains("replaced"),
        "{said}"
    );
}
