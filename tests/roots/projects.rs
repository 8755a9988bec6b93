//! Two projects, one state folder: two sessions of `serve --files-from roots` on two folders
//! keep their runs in two state folders under the one given. Neither session lists, reads,
//! writes, stops, gets or cancels the other's runs; `--background` counts each project's runs;
//! and what covers every run of the state folder — serve's sweep at its start, `sweep
//! <state>`, `stop --state`, `remove --state` — covers both projects' runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use lnk_tests::bins::link_supervise;
use lnk_tests::procs::{sigkill, supervisors, wait_gone, wait_supervisor};
use lnk_tests::results::{error_code, is_error, ok, structured, text};
use lnk_tests::roots::{
    answer, file_uri, initialize_with_roots, modern_call, modern_request, modern_tool,
    project_states, roots_result,
};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, both_sandboxes_warm_and_cold};
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::tools::{procs_args, started};

both_sandboxes_warm_and_cold!(two_sessions_on_two_folders_never_reach_each_other_s_runs);
both_sandboxes!(sweeps_stop_and_remove_of_the_state_folder_cover_every_project);

/// A folder of the test's own beside `files/`, canonical.
fn made(bg: &Bg, name: &str) -> PathBuf {
    let path = bg.setup.path(name);
    std::fs::create_dir_all(&path).unwrap();
    path.canonicalize().unwrap()
}

/// A 2026-07-28 session whose client's first root is `root` (serve started elsewhere), with
/// its project chosen by a first `list`.
fn modern_session(bg: &Bg, flags: &Flags, root: &Path) -> Serve {
    let mut serve = bg
        .serve(flags)
        .files_from_roots()
        .era(Era::Modern)
        .current_dir(&bg.setup.root.path().canonicalize().unwrap())
        .spawn();
    let listed = modern_tool(&mut serve, "list", json!({}), &[&file_uri(root)]);
    assert!(!is_error(&listed), "{listed}");
    serve
}

/// A tool call of a session whose project is chosen.
fn call(serve: &mut Serve, name: &str, arguments: Value) -> Value {
    ok(&modern_call(serve, name, arguments, json!({})))
}

/// The ids `list` shows.
fn listed_ids(serve: &mut Serve) -> Vec<String> {
    let result = call(serve, "list", json!({"limit": 200}));
    structured(&result)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The record of run `id` in the project state folder `state`.
fn record(state: &Path, id: &str) -> Value {
    let bytes = std::fs::read(state.join(format!("{id}.json")))
        .unwrap_or_else(|err| panic!("no record of {id} in {}: {err}", state.display()));
    serde_json::from_slice(&bytes).unwrap()
}

/// The one state folder of the project whose files folder is named `name`.
fn project_state(bg: &Bg, name: &str) -> PathBuf {
    let found = project_states(&bg.state, name);
    assert_eq!(
        found.len(),
        1,
        "one state folder for project {name}: {found:?}"
    );
    found[0].clone()
}

/// Everything `session` may not do to `other`'s run `id`, refused as for an unknown run.
fn cannot_reach(session: &mut Serve, id: &str) {
    assert!(
        !listed_ids(session).contains(&id.to_owned()),
        "{id} is listed"
    );
    for (name, arguments) in [
        ("read", json!({"id": id})),
        ("stop", json!({"id": id})),
        ("write", json!({"id": id, "text": "hi\n"})),
    ] {
        let result = call(session, name, arguments);
        assert!(is_error(&result), "{name} reached {id}: {result}");
        assert!(text(&result).contains(id), "{name}: {result}");
    }
    for method in ["tasks/get", "tasks/cancel"] {
        let response = modern_request(session, method, json!({"taskId": id}), true);
        assert_eq!(
            error_code(&response),
            -32602,
            "{method} reached {id}: {response}"
        );
    }
}

fn two_sessions_on_two_folders_never_reach_each_other_s_runs(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    // One run at a time per project: each project has its own.
    let flags = Flags {
        background: 1,
        ..Flags::default()
    };
    let (a, b) = (bg.setup.files.clone(), made(&bg, "other"));
    let mut session_a = modern_session(&bg, &flags, &a);
    let mut session_b = modern_session(&bg, &flags, &b);
    let (mark_a, mark_b) = (bg.marker(), bg.marker());
    let id_a = started(&call(
        &mut session_a,
        "start",
        procs_args("tree", &mark_a, 120),
    ));
    let id_b = started(&call(
        &mut session_b,
        "start",
        procs_args("tree", &mark_b, 120),
    ));
    let (state_a, state_b) = (project_state(&bg, "files"), project_state(&bg, "other"));
    assert_ne!(state_a, state_b);
    assert_eq!(
        record(&state_a, &id_a)["launch"]["files"],
        a.to_str().unwrap()
    );
    assert_eq!(
        record(&state_b, &id_b)["launch"]["files"],
        b.to_str().unwrap()
    );
    wait_supervisor(&id_a, ANSWER);
    wait_supervisor(&id_b, ANSWER);
    // Each session sees its own run, and nothing of the other's.
    assert_eq!(listed_ids(&mut session_a), vec![id_a.clone()]);
    assert_eq!(listed_ids(&mut session_b), vec![id_b.clone()]);
    cannot_reach(&mut session_a, &id_b);
    cannot_reach(&mut session_b, &id_a);
    // Both still run, untouched: no stop was asked of either.
    for (state, id) in [(&state_a, &id_a), (&state_b, &id_b)] {
        assert_eq!(record(state, id)["status"]["state"], "running");
        assert!(
            !state.join(format!("{id}.stop")).exists(),
            "a stop of {id} was asked"
        );
    }
    // --background counts each project's runs: a second run of A's is refused.
    let second = call(&mut session_a, "start", procs_args("linger", &mark_a, 120));
    assert!(is_error(&second), "{second}");
    // Each session reaches its own run.
    let read = call(
        &mut session_a,
        "read",
        json!({"id": id_a, "offset": 0, "wait_ms": 5000, "until": "started"}),
    );
    assert!(
        !is_error(&read) && text(&read).contains("started"),
        "{read}"
    );
    let got = ok(&modern_request(
        &mut session_a,
        "tasks/get",
        json!({"taskId": id_a}),
        true,
    ));
    assert_eq!(got["status"], "working", "{got}");
    let cancelled = modern_request(
        &mut session_b,
        "tasks/cancel",
        json!({"taskId": id_b}),
        true,
    );
    ok(&cancelled);
    let stopped = call(&mut session_a, "stop", json!({"id": id_a}));
    assert!(!is_error(&stopped), "{stopped}");
    assert_eq!(structured(&stopped)["state"], "stopped", "{stopped}");
    wait_gone(&mark_a, ANSWER);
    wait_gone(&mark_b, ANSWER);
    let poll_b = || record(&state_b, &id_b)["status"]["state"] == "stopped";
    assert!(
        lnk_tests::procs::poll(ANSWER, poll_b),
        "{}",
        record(&state_b, &id_b)
    );
}

/// `lnk-link-supervise <args>`, which must succeed.
fn supervise(args: &[&str]) {
    let out = Command::new(link_supervise()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "lnk-link-supervise {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Kills the supervisor of run `id` and waits until it is gone: the run's record still says
/// `running`, for a sweep to find.
fn kill_supervisor(id: &str) {
    for supervisor in supervisors(id) {
        sigkill(supervisor.pid);
    }
    lnk_tests::procs::wait_no_supervisor(id, ANSWER);
}

fn sweeps_stop_and_remove_of_the_state_folder_cover_every_project(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags::default();
    let (a, b) = (bg.setup.files.clone(), made(&bg, "other"));
    let state = bg.state.to_str().unwrap().to_owned();
    // Project A through a handshake session, project B through a 2026-07-28 one.
    let mut session_a = bg.serve(&flags).files_from_roots().spawn();
    let asked = initialize_with_roots(&mut session_a, "2025-11-25");
    answer(&mut session_a, &asked, roots_result(&[&file_uri(&a)]));
    let mut session_b = modern_session(&bg, &flags, &b);
    let start_a = |serve: &mut Serve, mark: &str| {
        let id = serve.send_request(
            "tools/call",
            json!({"name": "start", "arguments": procs_args("linger", mark, 120)}),
        );
        started(&serve.call_result(id, ANSWER))
    };
    let (mark_a, mark_b) = (bg.marker(), bg.marker());
    let id_a = start_a(&mut session_a, &mark_a);
    let id_b = started(&call(
        &mut session_b,
        "start",
        procs_args("linger", &mark_b, 120),
    ));
    let (state_a, state_b) = (project_state(&bg, "files"), project_state(&bg, "other"));
    wait_supervisor(&id_a, ANSWER);
    wait_supervisor(&id_b, ANSWER);
    // Supervisors that die leave `running` records, which a sweep of the state folder given
    // finds in each project: serve's own sweep at its start for A's, `sweep <state>` for B's.
    kill_supervisor(&id_a);
    let sweeping = bg
        .serve(&flags)
        .files_from_roots()
        .era(Era::Modern)
        .current_dir(&bg.setup.files)
        .spawn();
    let lost_a = || record(&state_a, &id_a)["status"]["state"] == "lost";
    assert!(
        lnk_tests::procs::poll(ANSWER, lost_a),
        "{}",
        record(&state_a, &id_a)
    );
    drop(sweeping);
    wait_gone(&mark_a, ANSWER);
    kill_supervisor(&id_b);
    // A sweep that finds the run's lock held (by the sweep serve started, still at work on
    // the folder) leaves the run to the next one: sweep until one has taken it.
    let lost_b = || {
        supervise(&["sweep", &state]);
        record(&state_b, &id_b)["status"]["state"] == "lost"
    };
    assert!(
        lnk_tests::procs::poll(ANSWER, lost_b),
        "{}",
        record(&state_b, &id_b)
    );
    wait_gone(&mark_b, ANSWER);
    // `stop --state` of the state folder given stops both projects' runs.
    let (mark_a, mark_b) = (bg.marker(), bg.marker());
    let id_a = start_a(&mut session_a, &mark_a);
    let id_b = started(&call(
        &mut session_b,
        "start",
        procs_args("linger", &mark_b, 120),
    ));
    wait_supervisor(&id_a, ANSWER);
    wait_supervisor(&id_b, ANSWER);
    supervise(&["stop", "--state", &state]);
    for (folder, id) in [(&state_a, &id_a), (&state_b, &id_b)] {
        let run = record(folder, id);
        assert_ne!(run["status"]["state"], "running", "{run}");
    }
    wait_gone(&mark_a, Duration::from_secs(5));
    wait_gone(&mark_b, Duration::from_secs(5));
    // `remove --state` removes every project's runs and folders with the state folder.
    let (mark_a, mark_b) = (bg.marker(), bg.marker());
    let id_a = start_a(&mut session_a, &mark_a);
    let id_b = started(&call(
        &mut session_b,
        "start",
        procs_args("linger", &mark_b, 120),
    ));
    wait_supervisor(&id_a, ANSWER);
    wait_supervisor(&id_b, ANSWER);
    supervise(&["remove", "--state", &state]);
    assert!(!bg.state.exists(), "the state folder is still there");
    wait_gone(&mark_a, Duration::from_secs(5));
    wait_gone(&mark_b, Duration::from_secs(5));
    for (files, id) in [(&a, &id_a), (&b, &id_b)] {
        assert!(!files.join("background").join(format!("{id}.out")).exists());
    }
}
