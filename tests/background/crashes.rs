//! Supervisors that die: one sent SIGTERM, SIGINT or SIGHUP kills the group and records `lost`;
//! one killed with SIGKILL before the gate opens leaves nothing running and its program never
//! runs; one killed at a random moment as its sandbox starts leaves nothing once a sweep ran
//! (the bench's soak does the same hundreds of times). And the run never inherits a descriptor
//! of the state folder (a leaked lock would make a dead supervisor look alive).
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::process::Signal;
use serde_json::json;

use lnk_tests::bins::procs;
use lnk_tests::procs::{alive, wait_for_role, wait_gone, with_marker};
use lnk_tests::procs::{fd_targets, signal, wait_group_gone, wait_no_supervisor, wait_supervisor};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{listed, procs_args, start, stop, stopped_run};

both_sandboxes!(
    supervisor_sigterm_records_lost,
    supervisor_sigint_records_lost,
    supervisor_sighup_records_lost,
    supervisor_sigkill_before_the_gate_opens_runs_nothing,
    supervisor_sigterm_before_the_gate_opens_runs_nothing,
    the_lock_is_not_inherited_by_the_run,
    list_and_stop_sweep_a_run_whose_supervisor_died,
    serve_stdio_does_not_leak_into_the_supervisor_or_the_run,
    a_supervisor_killed_as_its_sandbox_starts_leaves_nothing,
);

fn supervisor_sigterm_records_lost(sandbox: Sandbox) {
    supervisor_signalled_records_lost(sandbox, Signal::TERM);
}

fn supervisor_sigint_records_lost(sandbox: Sandbox) {
    supervisor_signalled_records_lost(sandbox, Signal::INT);
}

fn supervisor_sighup_records_lost(sandbox: Sandbox) {
    supervisor_signalled_records_lost(sandbox, Signal::HUP);
}

/// A supervisor sent `sig` kills the run's group and records it `lost`, untold.
fn supervisor_signalled_records_lost(sandbox: Sandbox, sig: Signal) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (pgid, leader) = bg.group(&id);

    signal(supervisor.pid, sig);
    let record = bg.wait_record(&id, Duration::from_secs(10), |r| {
        r["status"]["state"] != "running"
    });
    assert_eq!(record["status"]["state"], "lost", "{record}");
    assert_eq!(record["telling"]["told"], false, "{record}");
    wait_gone(&mark, Duration::from_secs(10));
    wait_group_gone(pgid, Duration::from_secs(10));
    assert!(!alive(leader), "the group's leader survived");
    wait_no_supervisor(&id, Duration::from_secs(10));
    assert_eq!(listed(&mut serve, &id)["state"], "lost");
    // Stopping a lost run is not an error either.
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "lost");
}

fn supervisor_sigkill_before_the_gate_opens_runs_nothing(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    // The supervisor records the group, then keeps the gate shut while this file is missing.
    let hold = bg.setup.path("hold-gate");
    let mut serve = bg
        .serve(&Flags::default())
        .start_env(&[("LNK_SUPERVISE_HOLD_GATE", hold.as_os_str())]);
    let mark = bg.marker();
    // Had it run, the program would leave `<files>/<marker>` behind, then linger.
    let script = ": > \"$1\"; exec \"$2\" linger \"$1\" 120";
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, "sh", mark, procs()]}),
    );
    let ran_file: PathBuf = bg.setup.files.join(&mark);
    // The program's processes: anything with the marker but the gate (whose command line
    // holds the program's too).
    let program_ran = |mark: &str| {
        with_marker(mark)
            .into_iter()
            .filter(|p| !p.argv.iter().any(|a| a == "gate"))
            .collect::<Vec<_>>()
    };
    let (pgid, leader) = bg.group(&id);
    let supervisor = wait_supervisor(&id, ANSWER);
    assert!(
        alive(leader),
        "the gate waits while the hold file is missing"
    );
    // The gate stays shut (a short look: the hold is a test hook, not the point).
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        let ran = program_ran(&mark);
        assert!(
            ran.is_empty() && !ran_file.exists(),
            "the program ran before the gate opened: {ran:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    signal(supervisor.pid, Signal::KILL);
    // The gate sees its pipe close and exits without running anything.
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(leader) || !with_marker(&mark).is_empty() {
        let ran = program_ran(&mark);
        assert!(
            ran.is_empty(),
            "the program ran after its supervisor died: {ran:?}"
        );
        assert!(
            Instant::now() < deadline,
            "the gate (pid {leader}) still waits 10 s after its supervisor died: {:?}",
            with_marker(&mark)
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    wait_group_gone(pgid, Duration::from_secs(5));
    wait_no_supervisor(&id, Duration::from_secs(5));
    assert!(!ran_file.exists(), "the program ran: {ran_file:?} exists");
    // Opening the hold now changes nothing: no one is left to open the gate.
    std::fs::write(&hold, b"").unwrap();
    assert!(program_ran(&mark).is_empty() && !ran_file.exists());
}

fn the_lock_is_not_inherited_by_the_run(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    wait_for_role(&mark, "tree", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (_pgid, leader) = bg.group(&id);
    let state = bg.state.canonicalize().unwrap();

    // The supervisor holds the run's lock: the check below can see such a descriptor.
    let lock = state.join(format!("{id}.lock"));
    let held = fd_targets(supervisor.pid);
    assert!(
        held.contains(&lock),
        "the supervisor holds no descriptor of {lock:?}: {held:?}"
    );
    // No process of the run has any descriptor into the state folder.
    let mut pids: Vec<i32> = with_marker(&mark).iter().map(|p| p.pid).collect();
    pids.push(leader);
    for pid in pids {
        let leaked: Vec<PathBuf> = fd_targets(pid)
            .into_iter()
            .filter(|t| t.starts_with(&state) || t.starts_with(&bg.state))
            .collect();
        assert!(
            leaked.is_empty(),
            "process {pid} of the run holds descriptors of the state folder: {leaked:?}"
        );
    }

    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

/// Only the lock crosses from serve to the supervisor: serve's stdio pipes (to its MCP host,
/// here this test) must not be held by the supervisor or the run, or a host waiting for serve's
/// stderr to close would wait for every background run to end.
fn serve_stdio_does_not_leak_into_the_supervisor_or_the_run(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    wait_for_role(&mark, "tree", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (_pgid, leader) = bg.group(&id);
    let serve_fds: Vec<PathBuf> = (0..3)
        .map(|fd| std::fs::read_link(format!("/proc/{}/fd/{fd}", serve.pid())).unwrap())
        .collect();
    assert!(
        serve_fds
            .iter()
            .all(|t| t.to_string_lossy().starts_with("pipe:")),
        "serve's stdio are this test's pipes: {serve_fds:?}"
    );
    let mut pids: Vec<i32> = with_marker(&mark).iter().map(|p| p.pid).collect();
    pids.extend([leader, supervisor.pid]);
    for pid in pids {
        let leaked: Vec<PathBuf> = fd_targets(pid)
            .into_iter()
            .filter(|t| serve_fds.contains(t))
            .collect();
        let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        assert!(
            leaked.is_empty(),
            "process {pid} ({}) holds serve's stdio (stdin, stdout, stderr: {serve_fds:?}): {leaked:?}",
            String::from_utf8_lossy(&argv).replace('\0', " ")
        );
    }

    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}

/// SIGTERM while the gate is still shut: the supervisor keeps it shut, so the program never
/// runs, and the run is recorded `lost`.
fn supervisor_sigterm_before_the_gate_opens_runs_nothing(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let hold = bg.setup.path("hold-gate");
    let mut serve = bg
        .serve(&Flags::default())
        .start_env(&[("LNK_SUPERVISE_HOLD_GATE", hold.as_os_str())]);
    let mark = bg.marker();
    let script = ": > \"$1\"; exec \"$2\" linger \"$1\" 120";
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, "sh", mark, procs()]}),
    );
    let ran_file: PathBuf = bg.setup.files.join(&mark);
    let (pgid, leader) = bg.group(&id);
    let supervisor = wait_supervisor(&id, ANSWER);
    assert!(
        alive(leader),
        "the gate waits while the hold file is missing"
    );

    signal(supervisor.pid, Signal::TERM);
    let record = bg.wait_record(&id, ANSWER, |r| r["status"]["state"] != "running");
    assert_eq!(record["status"]["state"], "lost", "{record}");
    assert_eq!(record["telling"]["told"], false, "{record}");
    wait_group_gone(pgid, Duration::from_secs(5));
    wait_no_supervisor(&id, Duration::from_secs(5));
    assert!(
        with_marker(&mark)
            .iter()
            .all(|p| p.argv.iter().any(|a| a == "gate"))
    );
    assert!(!ran_file.exists(), "the program ran: {ran_file:?} exists");
}

/// A supervisor killed with SIGKILL while serve goes on: `list` on the same serve finds the
/// run's lock free, has a sweep record it `lost` (and kill what is left of its group) and
/// shows that, rather than `running`; `stop` answers it as it is.
fn list_and_stop_sweep_a_run_whose_supervisor_died(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    let (pgid, _) = bg.group(&id);
    let supervisor = wait_supervisor(&id, ANSWER);
    signal(supervisor.pid, Signal::KILL);
    wait_no_supervisor(&id, Duration::from_secs(5));
    // Its command line goes before its descriptors do: only a zombie has surely let go of the
    // run's lock.
    assert!(lnk_tests::procs::wait_dead(
        supervisor.pid,
        Duration::from_secs(5)
    ));

    let run = listed(&mut serve, &id);
    assert_eq!(run["state"], "lost", "{run}");
    wait_gone(&mark, Duration::from_secs(5));
    wait_group_gone(pgid, Duration::from_secs(5));
    let run = stopped_run(&stop(&mut serve, &id));
    assert_eq!(run["state"], "lost", "{run}");
}

/// Trials per sandbox of [`a_supervisor_killed_as_its_sandbox_starts_leaves_nothing`] (the
/// bench's `soak --kind gate` makes hundreds).
const STARTING_TRIALS: usize = 12;

/// A supervisor SIGKILLed while its sandbox starts: its gate held shut until a random 0–15 ms
/// after `start` answered, the supervisor killed a random 0–30 ms after it, then a sweep;
/// nothing of the run may be left.
fn a_supervisor_killed_as_its_sandbox_starts_leaves_nothing(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let hold = bg.setup.path("hold-gate");
    let mut serve = bg
        .serve(&Flags::default())
        .start_env(&[("LNK_SUPERVISE_HOLD_GATE", hold.as_os_str())]);
    let serve_pid = serve.pid();
    let mut seed = u64::from(std::process::id()) << 32 | 0x9e37_79b9;
    let mut below = |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    for trial in 0..STARTING_TRIALS {
        let _ = std::fs::remove_file(&hold);
        let mark = bg.marker();
        let id = start(&mut serve, procs_args("tree", &mark, 120));
        let answered = Instant::now();
        let open_at = answered + Duration::from_micros(below(15_000));
        let kill_at = answered + Duration::from_micros(below(30_000));
        // The supervisor itself, not the first process that forks it away from serve.
        let mut supervisor = None;
        let found = lnk_tests::procs::poll(ANSWER, || {
            supervisor = lnk_tests::procs::supervisors(&id).into_iter().find(|p| {
                lnk_tests::containment::parent_of(p.pid).is_some_and(|parent| parent != serve_pid)
            });
            supervisor.is_some()
        });
        assert!(found, "trial {trial}: no supervisor of {id}");
        let supervisor = supervisor.unwrap_or_else(|| unreachable!("found"));
        let mut moments = [(open_at, true), (kill_at, false)];
        moments.sort();
        for (at, open) in moments {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if open {
                std::fs::write(&hold, b"").unwrap();
            } else {
                signal(supervisor.pid, Signal::KILL);
            }
        }
        assert!(
            lnk_tests::procs::wait_dead(supervisor.pid, ANSWER),
            "trial {trial}: the supervisor lives"
        );
        // And the first process serve started, which forked the supervisor away: until it has
        // exited it holds the run's lock too (a loaded machine may not have run it since its
        // fork), and a sweep then rightly takes the run for a living one.
        wait_no_supervisor(&id, ANSWER);
        crate::contained::sweep(&bg);
        let record = bg.record(&id).unwrap_or_else(|| panic!("no record"));
        assert_ne!(
            record["status"]["state"], "running",
            "trial {trial}: {record}"
        );
        let moments = format!(
            "trial {trial}: gate opened at {} µs, supervisor killed at {} µs",
            (open_at - answered).as_micros(),
            (kill_at - answered).as_micros()
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while !with_marker(&mark).is_empty() {
            assert!(
                Instant::now() < deadline,
                "{moments}: left running {:#?}",
                with_marker(&mark)
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
