//! `lnk-link-supervise stop --state` and `remove --state`, as `lnk agent stop` and
//! `lnk agent delete` use them: no process of any run is left (and, for `remove`, nothing on
//! disk), each is safe to run twice, and each is safe while a sweep runs beside it.
use std::time::Duration;

use serde_json::json;

use crate::disk::{CLI, Tell, exists, names, spawn_cli, supervise_cli};
use crate::told::the_message_about;
use crate::wayin::Answer;
use lnk_tests::procs::{signal, supervisors, wait_group_gone, wait_no_supervisor, wait_supervisor};
use lnk_tests::procs::{wait_for_role, wait_gone};
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::tools::{procs_args, send_tool, start};

both_sandboxes!(
    stop_state_stops_every_run_twice_beside_a_sweep,
    remove_state_leaves_nothing_twice_beside_a_sweep,
    stop_state_ends_a_frozen_supervisor,
);

/// Two lingering runs with grandchildren and one ended run; their ids, markers and groups.
struct Runs {
    lingering: Vec<(String, String, i32)>,
    ended: String,
}

fn start_runs(t: &Tell, serve: &mut Serve) -> Runs {
    let (ended, _) = t.ended_run(serve, "echo done");
    let lingering = (0..2)
        .map(|_| {
            let mark = t.bg.marker();
            let id = start(serve, procs_args("tree", &mark, 120));
            wait_for_role(&mark, "linger", ANSWER);
            wait_for_role(&mark, "tree", ANSWER);
            let (pgid, _) = t.bg.group(&id);
            (id, mark, pgid)
        })
        .collect();
    Runs { lingering, ended }
}

/// Runs `lnk-link-supervise <verb> --state <state>` while a sweep of the same folder runs;
/// both must succeed.
fn beside_a_sweep(t: &Tell, verb: &str) {
    let state = path_str(t.state());
    let sweep = spawn_cli(&["sweep", &state]);
    let out = supervise_cli(&[verb, "--state", &state], CLI);
    assert!(
        out.status.success(),
        "{verb} --state failed: {}",
        out.stderr
    );
    let swept = sweep.finish(CLI);
    assert!(
        swept.status.success(),
        "the sweep beside {verb} failed: {}",
        swept.stderr
    );
}

/// No process of the runs is left: programs, groups, supervisors.
fn nothing_runs(runs: &Runs) {
    for (id, mark, pgid) in &runs.lingering {
        wait_gone(mark, Duration::from_secs(5));
        wait_group_gone(*pgid, Duration::from_secs(5));
        wait_no_supervisor(id, Duration::from_secs(5));
    }
    assert!(supervisors(&runs.ended).is_empty());
}

fn stop_state_stops_every_run_twice_beside_a_sweep(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let way = t.way_in(Answer::Result);
    let mut serve = t.serve(&Flags::default()).start();
    let runs = start_runs(&t, &mut serve);

    beside_a_sweep(&t, "stop");
    nothing_runs(&runs);
    // Each ended and was told, once; the records stay.
    let got = way.received();
    assert_eq!(got.len(), 3, "{got:#?}");
    for (id, _, _) in &runs.lingering {
        let record = t.bg.record(id).unwrap();
        assert_eq!(record["status"]["state"], "stopped", "{record}");
        assert_eq!(record["telling"]["told"], true, "{record}");
        assert_eq!(the_message_about(&got, id)["run"]["state"], "stopped");
    }
    assert_eq!(
        t.bg.record(&runs.ended).unwrap()["status"]["state"],
        "exited"
    );
    let before = names(t.state());

    // Twice: nothing to do, nothing changes.
    let out = supervise_cli(&["stop", "--state", &path_str(t.state())], CLI);
    assert!(
        out.status.success(),
        "the second stop failed: {}",
        out.stderr
    );
    assert_eq!(names(t.state()), before);
    nothing_runs(&runs);
    assert_eq!(way.received().len(), 3, "{:#?}", way.received());
}

fn remove_state_leaves_nothing_twice_beside_a_sweep(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let way = t.way_in(Answer::Result);
    let mut serve = t.serve(&Flags::default()).start();
    let runs = start_runs(&t, &mut serve);
    let background = t.bg.setup.files.join("background");
    assert_eq!(names(&background).len(), 3, "{:?}", names(&background));

    beside_a_sweep(&t, "remove");
    nothing_runs(&runs);
    assert!(
        !exists(t.state()),
        "the state folder stays: {:?}",
        names(t.state())
    );
    let left: Vec<String> = names(&background)
        .into_iter()
        .filter(|n| n.ends_with(".out") || n.starts_with(".tmp-"))
        .collect();
    assert!(left.is_empty(), "output files stay: {left:?}");

    // Twice: the folder is gone already, which is fine.
    let out = supervise_cli(&["remove", "--state", &path_str(t.state())], CLI);
    assert!(
        out.status.success(),
        "the second remove failed: {}",
        out.stderr
    );
    assert!(!exists(t.state()));
    nothing_runs(&runs);

    // The serve beside it still answers.
    let asked = send_tool(&mut serve, "list", json!({}), None);
    serve.response(&json!(asked), ANSWER);
    // The lingering runs were told they stopped before they were removed.
    let got = way.received();
    for (id, _, _) in &runs.lingering {
        assert_eq!(the_message_about(&got, id)["run"]["state"], "stopped");
    }
}

/// A supervisor that does not answer (stopped with SIGSTOP) keeps its run's lock: `stop
/// --state` kills the run's group, then the lock's holder, and still ends with nothing left.
fn stop_state_ends_a_frozen_supervisor(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let _way = t.way_in(Answer::Result);
    let mut serve = t.serve(&Flags::default()).start();
    let mark = t.bg.marker();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    let (pgid, _) = t.bg.group(&id);
    let supervisor = wait_supervisor(&id, ANSWER);
    signal(supervisor.pid, rustix::process::Signal::STOP);

    let out = supervise_cli(&["stop", "--state", &path_str(t.state())], CLI);
    assert!(out.status.success(), "stop --state failed: {}", out.stderr);
    wait_gone(&mark, Duration::from_secs(5));
    wait_group_gone(pgid, Duration::from_secs(5));
    wait_no_supervisor(&id, Duration::from_secs(5));
    // Its supervisor died without recording the end; the stop recorded it lost.
    let record = t.bg.record(&id).unwrap();
    assert_eq!(record["status"]["state"], "lost", "{record}");
}

/// Writes `n` ended, told runs shaped like `template` (a real record): a record, a lock file
/// and an output file each, as a folder that kept thousands of runs would hold.
fn fabricate(t: &Tell, template: &serde_json::Value, n: usize) -> Vec<String> {
    let background = t.bg.setup.files.join("background");
    let mut record = template.clone();
    (0..n)
        .map(|i| {
            let id = format!("fab{i:017}");
            record["id"] = json!(id);
            record["output"]["file"] = serde_json::Value::Null;
            record["telling"]["told"] = json!(true);
            std::fs::write(t.bg.record_path(&id), serde_json::to_vec(&record).unwrap()).unwrap();
            std::fs::write(t.state().join(format!("{id}.lock")), b"").unwrap();
            std::fs::write(background.join(format!("{id}.out")), b"output\n").unwrap();
            id
        })
        .collect()
}

/// `lnk-link-supervise <verb> --state <state>` with at most `fds` descriptors open.
fn under_ulimit(t: &Tell, verb: &str, fds: u32) -> crate::disk::CliOut {
    let script = format!("ulimit -n {fds} && exec \"$0\" {verb} --state \"$1\"",);
    let supervise = path_str(&lnk_tests::bins::link_supervise());
    let state = path_str(t.state());
    supervise_cli_via_sh(&script, &supervise, &state)
}

fn supervise_cli_via_sh(script: &str, supervise: &str, state: &str) -> crate::disk::CliOut {
    let out = std::process::Command::new("sh")
        .args(["-c", script, supervise, state])
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    crate::disk::CliOut {
        status: out.status,
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn stop_and_remove_state_handle_thousands_of_runs_under_a_low_ulimit() {
    const KEPT: usize = 2000;
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.bg.serve(&Flags::default()).start();
    let (_, template) = t.ended_run(&mut serve, "echo done");
    let ids = fabricate(&t, &template, KEPT);
    let mark = t.bg.marker();
    let live = start(&mut serve, procs_args("tree", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);

    let out = under_ulimit(&t, "stop", 64);
    assert!(out.status.success(), "stop --state failed: {}", out.stderr);
    wait_gone(&mark, Duration::from_secs(5));
    wait_no_supervisor(&live, Duration::from_secs(5));
    assert_eq!(t.bg.record(&live).unwrap()["status"]["state"], "stopped");
    assert!(
        t.bg.record(&ids[KEPT - 1]).is_some(),
        "stop removed a kept run"
    );

    let out = under_ulimit(&t, "remove", 64);
    assert!(
        out.status.success(),
        "remove --state failed: {}",
        out.stderr
    );
    assert!(!exists(t.state()), "{} names left", names(t.state()).len());
    let left: Vec<String> = names(&t.bg.setup.files.join("background"))
        .into_iter()
        .filter(|n| n.ends_with(".out"))
        .collect();
    assert!(left.is_empty(), "{} output files stay", left.len());
}

/// Two `remove --state` at once both succeed: the second waited on `start.lock` while the
/// first removed the folder, and finds nothing left to do. (A process of the test's holds the
/// lock for a moment, so that both are waiting on it before either may go on.)
#[test]
fn two_removes_at_once_both_succeed() {
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.serve(&Flags::default()).start();
    let runs = start_runs(&t, &mut serve);
    drop(serve);
    let lock = t.state().join("start.lock");
    let mut holder = std::process::Command::new("flock")
        .arg(&lock)
        .args(["sleep", "1"])
        .spawn()
        .unwrap();
    // Held once a try from here fails.
    let file = std::fs::File::open(&lock).unwrap();
    let deadline = std::time::Instant::now() + ANSWER;
    while file.try_lock().is_ok() {
        file.unlock().unwrap();
        assert!(
            std::time::Instant::now() < deadline,
            "flock never held the lock"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(file);
    let state = path_str(t.state());
    let first = spawn_cli(&["remove", "--state", &state]);
    let second = spawn_cli(&["remove", "--state", &state]);
    assert!(holder.wait().unwrap().success());
    for (which, run) in [("first", first), ("second", second)] {
        let out = run.finish(CLI);
        assert!(
            out.status.success(),
            "the {which} remove failed: {}",
            out.stderr
        );
    }
    assert!(!exists(t.state()), "{:?}", names(t.state()));
    nothing_runs(&runs);
}
