//! Nothing of a run outlives it, with or without a PID namespace (issues 10 and 12), and its
//! supervisor sleeps and stops it gracefully: what the program starts in a session of
//! its own, double-forked, under `nohup` or ignoring SIGTERM is gone after the run's end, `stop`,
//! the background timeout, `stop --state`, and its supervisor's SIGKILL followed by a sweep —
//! also when the supervisor is killed at each step of the run's start. A program that traps
//! SIGTERM gets to clean up before SIGKILL; one that ignores it still dies. An idle supervisor
//! and gate do not wake up.
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::json;

use lnk_tests::bins::link_supervise;
use lnk_tests::bins::procs;
use lnk_tests::containment::{
    escaping, escaping_with_trap, every_sandbox, reapers, wait_escaped, wait_file,
};
use lnk_tests::procs::{alive, wait_dead, wait_for_role, wait_gone, with_marker};
use lnk_tests::procs::{signal, sleeps, wait_supervisor};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{listed, procs_args, start, stop, stopped_run, wait_ended};

every_sandbox!(
    escapes_die_at_the_runs_end,
    escapes_die_when_the_run_is_stopped,
    escapes_die_at_the_background_timeout,
    escapes_die_with_stop_state,
    escapes_die_when_the_supervisor_is_killed_then_a_sweep_runs,
    a_run_held_in_its_gate_before_the_fork_leaves_nothing,
    a_run_held_before_its_exec_leaves_nothing,
    a_run_whose_group_is_not_recorded_yet_leaves_nothing,
    a_stop_lets_the_program_clean_up_and_still_kills_the_deaf,
    an_idle_supervisor_and_gate_do_not_wake_up,
    orphans_are_reaped_as_they_die,
);

both_sandboxes!(
    a_sweep_kills_what_a_killed_gate_and_supervisor_left,
    a_sweep_finds_a_sandbox_whose_group_was_not_recorded_when_both_reapers_died,
);

/// How long the processes of a run that ended may take to be gone (a stop's two seconds of
/// grace, a second of leftovers, and a busy machine).
const GONE: Duration = Duration::from_secs(15);

/// Runs a sweep of the test's state folder, as `serve` or a bridge would, to its end.
pub(crate) fn sweep(bg: &Bg) {
    let status = Command::new(link_supervise())
        .args(["sweep", &path_str(&bg.state)])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|err| panic!("running a sweep: {err}"));
    assert!(status.success(), "the sweep failed: {status}");
}

/// Checks that the record names the run's session (its gate's) and the sandbox's own group.
fn records_the_session_and_the_sandbox_group(bg: &Bg, id: &str) {
    let record = bg.wait_record(id, ANSWER, |r| r["sandbox"]["pgid"].is_i64());
    assert_eq!(
        record["sandbox"]["session"], record["group"]["leader_pid"],
        "the gate leads the run's session: {record}"
    );
    assert_ne!(
        record["sandbox"]["pgid"], record["group"]["pgid"],
        "the sandbox has a group of its own: {record}"
    );
}

fn escapes_die_at_the_runs_end(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, escaping(&mark, "leave"));
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["state"], "exited", "{run}");
    assert_eq!(run["exit_code"], 0, "{run}");
    records_the_session_and_the_sandbox_group(&bg, &id);
    wait_gone(&mark, GONE);
}

fn escapes_die_when_the_run_is_stopped(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, escaping(&mark, "stay"));
    wait_escaped(&mark, ANSWER);
    records_the_session_and_the_sandbox_group(&bg, &id);
    let run = stopped_run(&stop(&mut serve, &id));
    assert_eq!(run["state"], "stopped", "{run}");
    wait_gone(&mark, GONE);
}

fn escapes_die_at_the_background_timeout(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        timeout: "3s",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let mark = bg.marker();
    let id = start(&mut serve, escaping(&mark, "stay"));
    wait_escaped(&mark, ANSWER);
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["state"], "timed_out", "{run}");
    wait_gone(&mark, GONE);
}

fn escapes_die_with_stop_state(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let marks: Vec<String> = (0..2).map(|_| bg.marker()).collect();
    let ids: Vec<String> = marks
        .iter()
        .map(|mark| start(&mut serve, escaping(mark, "stay")))
        .collect();
    for mark in &marks {
        wait_escaped(mark, ANSWER);
    }
    let status = Command::new(link_supervise())
        .args(["stop", "--state", &path_str(&bg.state)])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .status()
        .unwrap_or_else(|err| panic!("running stop --state: {err}"));
    assert!(status.success(), "stop --state failed: {status}");
    for (id, mark) in ids.iter().zip(&marks) {
        // `stop --state` returns once each run has ended and let go of its lock.
        assert_eq!(listed(&mut serve, id)["state"], "stopped");
        wait_gone(mark, GONE);
    }
}

fn escapes_die_when_the_supervisor_is_killed_then_a_sweep_runs(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, escaping(&mark, "stay"));
    wait_escaped(&mark, ANSWER);
    records_the_session_and_the_sandbox_group(&bg, &id);
    kill_supervisor_then_sweep(&bg, &id);
    wait_gone(&mark, GONE);
}

/// SIGKILLs the run's supervisor, waits until it has let go of the lock, runs a sweep, and
/// checks the run is recorded `lost`.
fn kill_supervisor_then_sweep(bg: &Bg, id: &str) {
    let supervisor = wait_supervisor(id, ANSWER);
    signal(supervisor.pid, Signal::KILL);
    // Only a zombie has surely let go of the lock (the command line goes first).
    assert!(wait_dead(supervisor.pid, ANSWER), "{supervisor:?} lives");
    sweep(bg);
    let record = bg
        .record(id)
        .unwrap_or_else(|| panic!("{id} has no record"));
    assert_eq!(record["status"]["state"], "lost", "{record}");
}

/// Holds a run at a step of its start (`hook`: a test hook and its value), checks that only
/// `held` processes of Link Run's carry the run's marker there, then SIGKILLs the supervisor,
/// sweeps, and checks that nothing of the run is left.
fn held_run_leaves_nothing(sandbox: Sandbox, hook: &str, step: Option<&str>, held: usize) {
    let bg = Bg::new(sandbox);
    let hold = bg.setup.path("held");
    let value = match step {
        Some(step) => format!("{step}={}", hold.display()),
        None => hold.display().to_string(),
    };
    let mut serve = bg
        .serve(&Flags::default())
        .start_env(&[(hook, std::ffi::OsStr::new(&value))]);
    let mark = bg.marker();
    let id = start(&mut serve, escaping(&mark, "stay"));
    wait_file(&hold, ANSWER);
    let there = with_marker(&mark);
    assert_eq!(reapers(&mark).len(), held, "held: {there:#?}");
    if held > 0 {
        assert_eq!(
            there.len(),
            held,
            "only Link Run's processes run: {there:#?}"
        );
    }
    kill_supervisor_then_sweep(&bg, &id);
    wait_gone(&mark, GONE);
}

fn a_run_held_in_its_gate_before_the_fork_leaves_nothing(sandbox: Sandbox) {
    held_run_leaves_nothing(sandbox, "LNK_HOLD", Some("run-reaper"), 1);
}

fn a_run_held_before_its_exec_leaves_nothing(sandbox: Sandbox) {
    // The gate and its fork, which would become the sandbox.
    held_run_leaves_nothing(sandbox, "LNK_HOLD", Some("run-exec"), 2);
}

fn a_run_whose_group_is_not_recorded_yet_leaves_nothing(sandbox: Sandbox) {
    // The supervisor holds before recording the sandbox's group: the sandbox runs (and its
    // program gets out of its group), only the gate holds it.
    let bg = Bg::new(sandbox);
    let hold = bg.setup.path("held");
    let value = format!("run-started={}", hold.display());
    let mut serve = bg
        .serve(&Flags::default())
        .start_env(&[("LNK_HOLD", std::ffi::OsStr::new(&value))]);
    let mark = bg.marker();
    let id = start(&mut serve, escaping(&mark, "stay"));
    wait_file(&hold, ANSWER);
    wait_escaped(&mark, ANSWER);
    let record = bg.record(&id).unwrap_or_else(|| panic!("no record"));
    assert!(record["sandbox"]["pgid"].is_null(), "{record}");
    kill_supervisor_then_sweep(&bg, &id);
    wait_gone(&mark, GONE);
}

fn a_stop_lets_the_program_clean_up_and_still_kills_the_deaf(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let clean = bg.setup.files.join("cleaned-up");
    let id = start(&mut serve, escaping_with_trap(&mark, &clean));
    wait_escaped(&mark, ANSWER);
    wait_for_role(&mark, "linger-main", ANSWER);
    let run = stopped_run(&stop(&mut serve, &id));
    assert_eq!(run["state"], "stopped", "{run}");
    // It trapped SIGTERM, wrote its file and exited 0 (under bubblewrap too: its SIGTERM
    // went to the program, not to bwrap, whose death would have killed it at once).
    assert_eq!(run["exit_code"], 0, "{run}");
    let written = std::fs::read_to_string(&clean).unwrap_or_default();
    assert_eq!(written, "cleaned up\n", "the program did not clean up");
    // The one that ignores SIGTERM got SIGKILL.
    wait_gone(&mark, GONE);
}

fn an_idle_supervisor_and_gate_do_not_wake_up(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    records_the_session_and_the_sandbox_group(&bg, &id);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (_, gate) = bg.group(&id);
    // Settled: whatever the start did is over once the record names the sandbox's group.
    std::thread::sleep(Duration::from_millis(300));
    let before = (sleeps(supervisor.pid), sleeps(gate));
    std::thread::sleep(Duration::from_secs(3));
    let after = (sleeps(supervisor.pid), sleeps(gate));
    assert_eq!(
        before, after,
        "the supervisor and the gate woke up (voluntary context switches) while idle"
    );
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, GONE);
}

/// A program that starts short-lived processes that leave its group and are orphaned: the
/// gate reaps each as it dies, so no zombie stays under it.
fn orphans_are_reaped_as_they_die(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let script = r#"for i in 1 2 3 4 5 6 7 8 9 10; do ( setsid true & ); done
        exec "$1" linger "$2" 120"#;
    let procs = procs();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, "sh", procs, &mark]}),
    );
    wait_for_role(&mark, "linger", ANSWER);
    let (_, gate) = bg.group(&id);
    let zombies = || {
        gate_children(gate)
            .into_iter()
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| {
                        s.rsplit_once(')')
                            .map(|(_, r)| r.trim_start().starts_with('Z'))
                    })
                    .unwrap_or(false)
            })
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while zombies() > 0 {
        assert!(Instant::now() < deadline, "zombies stay under the gate");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(alive(gate));
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, GONE);
}

/// The children of `pid` (from its threads' `children` files).
fn gate_children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// Both reapers of a run gone at once: the supervisor stopped, its gate SIGKILLed (what the
/// gate held is reparented to the stopped supervisor), then the supervisor SIGKILLed (and all
/// of it reparented above). The sweep finds no gate, and kills what `/proc` proves the run's:
/// in the recorded session, in a recorded group, started after the gate.
fn a_sweep_kills_what_a_killed_gate_and_supervisor_left(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    records_the_session_and_the_sandbox_group(&bg, &id);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (_, gate) = bg.group(&id);
    signal(supervisor.pid, Signal::STOP);
    signal(gate, Signal::KILL);
    assert!(wait_dead(gate, ANSWER), "the gate lives");
    signal(supervisor.pid, Signal::KILL);
    assert!(wait_dead(supervisor.pid, ANSWER), "the supervisor lives");
    if sandbox == Sandbox::Passthrough {
        // Nothing holds the run now but its record. (Under bubblewrap, `--die-with-parent`
        // took the sandbox down with its gate already.)
        let program = wait_for_role(&mark, "linger", ANSWER);
        assert!(alive(program.pid), "{program:?}");
    }
    sweep(&bg);
    let record = bg.record(&id).unwrap_or_else(|| panic!("no record"));
    assert_eq!(record["status"]["state"], "lost", "{record}");
    wait_gone(&mark, GONE);
}

/// A run whose sandbox cannot be executed (its program went away after serve started) is
/// recorded `lost` with the reason, and the output file says it too: not "exited with 127".
#[test]
fn a_run_whose_sandbox_cannot_be_executed_is_recorded_so() {
    let bg = Bg::new(Sandbox::Passthrough);
    let copy = bg.setup.path("vanishing-sandbox");
    std::fs::copy(env!("CARGO_BIN_EXE_lnk-test-passthrough"), &copy).unwrap();
    let mut serve = bg
        .serve(&Flags::default())
        .sandbox(vec![path_str(&copy)])
        .start();
    std::fs::remove_file(&copy).unwrap();
    let id = start(&mut serve, json!({"program": "true"}));
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["state"], "lost", "{run}");
    assert_eq!(run["exit_code"], serde_json::Value::Null, "{run}");
    let record = bg.record(&id).unwrap_or_else(|| panic!("no record"));
    let failure = record["failure"].as_str().unwrap_or_default();
    assert!(
        failure.starts_with("it could not start: the sandbox could not be executed")
            && failure.contains("No such file or directory"),
        "{record}"
    );
    let output = std::fs::read_to_string(bg.output_path(&id)).unwrap_or_default();
    assert!(output.contains(failure), "{output:?}");
}

/// A program that SIGSTOPs its own gate (possible where the sandbox shares the supervisor's
/// PID namespace, as the pass-through prefix does) still has its run end at the background
/// timeout, recorded as timed out, with nothing left: the supervisor wakes the gate when it
/// asks it to stop.
#[test]
fn a_gate_stopped_by_its_program_still_ends_the_run_at_its_timeout() {
    let bg = Bg::new(Sandbox::Passthrough);
    let flags = Flags {
        timeout: "1s",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let mark = bg.marker();
    // Under the pass-through prefix the shell's parent is its gate.
    let script = r#"kill -STOP $PPID; exec "$0" linger "$1" 60"#;
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, procs(), mark]}),
    );
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["state"], "timed_out", "{run}");
    wait_gone(&mark, GONE);
    // It ended because it was woken, not because it was killed as a stuck gate: a gate that
    // does not end is killed only 7 s after it was asked to stop (the run's 2 s stop grace and
    // the supervisor's 5 s more), so 8 s after the start at the soonest.
    let record = bg.record(&id).unwrap();
    let started = record["started_at_ms"].as_u64().unwrap();
    let ended = record["status"]["ended_at_ms"].as_u64().unwrap();
    assert!(
        ended - started < 8000,
        "the run ended {} ms after its start: {record}",
        ended - started
    );
}

/// Both reapers killed after the sandbox started but before its own group was recorded (the
/// supervisor held there): the record names the session but no sandbox group. The sweep still
/// finds what is left, by the session and the output pipe its processes hold.
fn a_sweep_finds_a_sandbox_whose_group_was_not_recorded_when_both_reapers_died(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let hold = bg.setup.path("held");
    let value = format!("run-started={}", hold.display());
    let mut serve = bg
        .serve(&Flags::default())
        .start_env(&[("LNK_HOLD", std::ffi::OsStr::new(&value))]);
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    wait_file(&hold, ANSWER);
    wait_for_role(&mark, "linger", ANSWER);
    let record = bg.record(&id).unwrap_or_else(|| panic!("no record"));
    assert!(record["sandbox"]["pgid"].is_null(), "{record}");
    let supervisor = wait_supervisor(&id, ANSWER);
    let (_, gate) = bg.group(&id);
    signal(supervisor.pid, Signal::STOP);
    signal(gate, Signal::KILL);
    assert!(wait_dead(gate, ANSWER), "the gate lives");
    signal(supervisor.pid, Signal::KILL);
    assert!(wait_dead(supervisor.pid, ANSWER), "the supervisor lives");
    sweep(&bg);
    let record = bg.record(&id).unwrap_or_else(|| panic!("no record"));
    assert_eq!(record["status"]["state"], "lost", "{record}");
    wait_gone(&mark, GONE);
}
