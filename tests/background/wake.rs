//! How a stop reaches a supervisor: `<id>.stop`, then SIGURG to the supervisor the
//! record names, which reads it from the signalfd it sleeps on. A stop asked before the
//! supervisor could be signalled is seen by its first look at `<id>.stop`; a SIGURG without a
//! stop request stops nothing; the run's processes do not inherit the supervisor's mask.
use rustix::process::Signal;

use lnk_tests::procs::{poll, proc_field, signal, sleeps, wait_no_supervisor, wait_supervisor};
use lnk_tests::procs::{wait_for_role, wait_gone};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::Sandbox;
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{procs_args, start, stop, stopped_run};

/// Whether signal `signo` is in a `/proc/<pid>/status` mask (`SigBlk` and the like, hex).
fn in_mask(pid: i32, field: &str, signo: u32) -> bool {
    let mask = proc_field(pid, "status", field).unwrap_or_else(|| panic!("no {field} for {pid}"));
    let mask = u64::from_str_radix(&mask, 16).unwrap_or_else(|e| panic!("{field} {mask}: {e}"));
    mask & (1u64 << (signo - 1)) != 0
}

const SIGURG: u32 = 23;

#[test]
fn a_stop_asked_before_the_supervisor_could_hear_it_is_seen() {
    let bg = Bg::new(Sandbox::Passthrough);
    // The supervisor records the run, then keeps the gate shut while this file is missing.
    let hold = bg.setup.path("hold-gate");
    let mut serve = bg
        .serve(&Flags::default())
        .start_env(&[("LNK_SUPERVISE_HOLD_GATE", hold.as_os_str())]);
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 120));
    bg.wait_record(&id, ANSWER, |r| r["supervisor"]["pid"].is_i64());
    wait_supervisor(&id, ANSWER);
    // What a stop asked before the record named the supervisor leaves: the request, and no
    // signal.
    std::fs::write(bg.state.join(format!("{id}.stop")), b"")
        .unwrap_or_else(|err| panic!("asking {id} to stop by hand: {err}"));
    std::fs::write(&hold, b"").unwrap_or_else(|err| panic!("opening the gate: {err}"));
    let record = bg.wait_record(&id, ANSWER, |r| r["status"]["state"] != "running");
    assert_eq!(record["status"]["state"], "stopped", "{record}");
    wait_no_supervisor(&id, ANSWER);
    wait_gone(&mark, ANSWER);
}

#[test]
fn a_wake_up_without_a_stop_request_stops_nothing() {
    let bg = Bg::new(Sandbox::Passthrough);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 120));
    let program = wait_for_role(&mark, "linger", ANSWER);
    // Settled: the record names the sandbox's group once the supervisor heard it started.
    bg.wait_record(&id, ANSWER, |r| r["sandbox"]["pgid"].is_i64());
    let supervisor = wait_supervisor(&id, ANSWER);
    // It listens for SIGURG (blocked, read from its signalfd); the run's processes do not
    // inherit that.
    assert!(in_mask(supervisor.pid, "SigBlk:", SIGURG));
    let (_, gate) = bg.group(&id);
    for pid in [gate, program.pid] {
        assert!(
            !in_mask(pid, "SigBlk:", SIGURG),
            "pid {pid} of the run has SIGURG blocked"
        );
    }
    let before = sleeps(supervisor.pid);
    signal(supervisor.pid, Signal::URG);
    // It woke, looked at `<id>.stop` (there is none), and went back to sleep.
    let slept_again = poll(ANSWER, || sleeps(supervisor.pid) > before);
    assert!(slept_again, "the supervisor did not wake for SIGURG");
    let record = bg
        .record(&id)
        .unwrap_or_else(|| panic!("{id} has no record"));
    assert_eq!(record["status"]["state"], "running", "{record}");
    assert_eq!(wait_supervisor(&id, ANSWER).pid, supervisor.pid);
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, ANSWER);
}
