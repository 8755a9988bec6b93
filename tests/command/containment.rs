//! Nothing of a call outlives it, with or without a PID namespace: what its program starts in a
//! session of its own, double-forked, under `nohup` or ignoring SIGTERM is gone after the call's
//! end (and counted as leftovers), its timeout, its cancellation and serve's SIGKILL. And a call
//! stopped at each step of its start, then serve SIGKILLed there, leaves nothing and runs
//! nothing.
use std::time::Duration;

use serde_json::json;

use crate::containment::{escaping, every_sandbox, reapers, wait_escaped, wait_file};
use crate::procs::{marker, wait_gone, with_marker};
use crate::sandbox::Sandbox;
use crate::serve::{ANSWER, Setup, ran, text};

every_sandbox!(
    escapes_die_at_the_calls_end,
    escapes_die_at_the_timeout,
    escapes_die_at_cancellation,
    escapes_die_with_serve_killed,
    a_call_held_before_its_fork_dies_with_serve,
    a_call_held_before_its_exec_dies_with_serve,
    a_descriptor_serve_inherited_does_not_reach_the_program,
);

/// How long the processes of a call that ended may take to be gone (the second of leftover
/// grace, and a busy machine).
const GONE: Duration = Duration::from_secs(10);

fn escapes_die_at_the_calls_end(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("60s").start();
    let mark = marker();
    let result = serve.call(escaping(&mark, "leave"));
    let value = ran(&result);
    assert_eq!(value["exit_code"], 0, "{result}");
    assert_eq!(value["timed_out"], false, "{result}");
    assert!(text(&result).contains("started"), "{result}");
    match sandbox {
        // Nothing but the reaper held them: they were still running a second after the
        // program's end, and were killed as its leftovers.
        Sandbox::Passthrough | Sandbox::BwrapSharedPid => {
            assert_eq!(value["leftovers_killed"], true, "{result}");
            assert!(text(&result).contains("killed"), "{result}");
        }
        // bubblewrap's own PID namespace ends with the sandbox and takes them with it:
        // nothing is left for the reaper to kill.
        Sandbox::Bwrap => assert_eq!(value["leftovers_killed"], false, "{result}"),
    }
    wait_gone(&mark, GONE);
}

fn escapes_die_at_the_timeout(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("3s").start();
    let mark = marker();
    let id = serve.send_call(escaping(&mark, "stay"), None);
    wait_escaped(&mark, ANSWER);
    let result = serve.call_result(id, ANSWER);
    let value = ran(&result);
    assert_eq!(value["timed_out"], true, "{result}");
    // A timeout is not leftovers: the program itself was still running.
    assert_eq!(value["leftovers_killed"], false, "{result}");
    wait_gone(&mark, GONE);
}

fn escapes_die_at_cancellation(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("60s").start();
    let mark = marker();
    let id = serve.send_call(escaping(&mark, "stay"), None);
    wait_escaped(&mark, ANSWER);
    serve.send(&json!({
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the test cancels it"},
    }));
    wait_gone(&mark, GONE);
    // Answered later calls prove the server goes on; the cancelled one gets no answer.
    let later = serve.call(json!({"program": "true"}));
    assert_eq!(ran(&later)["exit_code"], 0, "{later}");
    assert!(
        serve.inbox().iter().all(|m| m["id"] != id),
        "the cancelled call was answered"
    );
}

fn escapes_die_with_serve_killed(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("60s").start();
    let mark = marker();
    serve.send_call(escaping(&mark, "stay"), None);
    wait_escaped(&mark, ANSWER);
    serve.kill();
    wait_gone(&mark, GONE);
}

/// Holds a call at `step` (`LNK_HOLD`), checks that `held` processes of Link Run's carry the
/// call's marker there and nothing else does, SIGKILLs serve, and checks that they go and the
/// program never runs.
fn held_call_dies_with_serve(sandbox: Sandbox, step: &str, held: usize) {
    let setup = Setup::new(sandbox);
    let hold = setup.path("held");
    let hook = format!("{step}={}", hold.display());
    let mut serve = setup
        .serve()
        .timeout("60s")
        .start_env(&[("LNK_HOLD", std::ffi::OsStr::new(&hook))]);
    let mark = marker();
    serve.send_call(escaping(&mark, "stay"), None);
    wait_file(&hold, ANSWER);
    let there = with_marker(&mark);
    assert_eq!(reapers(&mark).len(), held, "held at {step}: {there:#?}");
    assert_eq!(
        there.len(),
        held,
        "only the reaper runs at {step}: {there:#?}"
    );
    serve.kill();
    wait_gone(&mark, GONE);
}

fn a_call_held_before_its_fork_dies_with_serve(sandbox: Sandbox) {
    held_call_dies_with_serve(sandbox, "call-reaper", 1);
}

fn a_call_held_before_its_exec_dies_with_serve(sandbox: Sandbox) {
    // The reaper and its fork, which will become the sandbox.
    held_call_dies_with_serve(sandbox, "call-exec", 2);
}

/// A sandbox that cannot be executed (its program went away after serve started) is told as
/// such: the call's answer says why, not "exited with code 127".
#[test]
fn a_sandbox_that_cannot_be_executed_is_said_so() {
    let setup = Setup::new(Sandbox::Passthrough);
    let copy = setup.path("vanishing-sandbox");
    std::fs::copy(env!("CARGO_BIN_EXE_lnk-test-passthrough"), &copy).unwrap();
    let mut serve = setup
        .serve()
        .sandbox(vec![crate::sandbox::path_str(&copy)])
        .start();
    std::fs::remove_file(&copy).unwrap();
    let result = serve.call(json!({"program": "true"}));
    assert!(crate::serve::is_error(&result), "{result}");
    let said = text(&result);
    assert!(
        said.contains("could not be started") && said.contains("No such file or directory"),
        "{said}"
    );
    assert!(!said.contains("127"), "{said}");
}

/// A descriptor that serve inherited from its host (one without close-on-exec) does not reach
/// the sandbox or the program: the reaper marks everything above stderr close-on-exec.
fn a_descriptor_serve_inherited_does_not_reach_the_program(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let leaked = setup.path("leaked-into-serve");
    std::fs::write(&leaked, b"").unwrap();
    // Opened without O_CLOEXEC: serve inherits it (so would anything this test process starts
    // meanwhile; it is a read-only descriptor of an empty file, closed once serve runs).
    let fd = rustix::fs::open(
        &leaked,
        rustix::fs::OFlags::RDONLY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    let mut serve = setup.serve().start();
    drop(fd);
    let serve_has_it = std::fs::read_dir(format!("/proc/{}/fd", serve.pid()))
        .unwrap()
        .flatten()
        .any(|entry| std::fs::read_link(entry.path()).ok().as_deref() == Some(leaked.as_path()));
    assert!(serve_has_it, "the test's descriptor did not reach serve");
    let result = serve.call(json!({"program": "sh", "args": ["-c", "ls -l /proc/$$/fd"]}));
    let listing = text(&result);
    assert!(listing.contains("0 ->"), "{listing}");
    assert!(
        !listing.contains("leaked-into-serve"),
        "the program holds serve's inherited descriptor: {listing}"
    );
}
