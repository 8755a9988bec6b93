//! Nothing of a call outlives it, with or without a PID namespace: what its program starts in a
//! session of its own, double-forked, under `nohup` or ignoring SIGTERM is gone after the call's
//! end (and counted as leftovers), its timeout, its cancellation and serve's SIGKILL. And a call
//! stopped at each step of its start, then serve SIGKILLed there, leaves nothing and runs
//! nothing. serve's spare reaper (a call's reaper started ahead of the call) runs nothing
//! unless it gets a call whole, and dies with serve.
use std::time::Duration;

use serde_json::json;

use std::io::Read;

use lnk_tests::bins::procs;
use lnk_tests::containment::{
    argv_of, children_of, escaping, every_sandbox_warm_and_cold, parent_of, wait_escaped,
    wait_pid_file,
};
use lnk_tests::procs::{alive, marker, wait_dead, wait_gone, with_marker};
use lnk_tests::results::{ran, text};
use lnk_tests::sandbox::Sandbox;
use lnk_tests::serve::ANSWER;
use lnk_tests::setup::Setup;

// Each both with warm calls (the default) and cold ones.
every_sandbox_warm_and_cold!(
    escapes_die_at_the_calls_end,
    escapes_die_at_the_timeout,
    escapes_die_at_cancellation,
    escapes_die_with_serve_killed,
    a_call_held_before_its_fork_dies_with_serve,
    a_call_held_before_its_exec_dies_with_serve,
    a_descriptor_serve_inherited_does_not_reach_the_program,
    stdin_is_dev_null_without_input_and_a_pipe_with_it,
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

/// Holds a call at `step` (`LNK_HOLD`), checks that only Link Run's reaper (and at
/// `call-exec` its fork, which will become the sandbox) runs there, SIGKILLs serve, and checks
/// that they go and the program never runs. The first call takes the spare reaper that serve
/// started with itself, whose command line does not name the call: the held process is known
/// by the pid it writes in the hold's file.
fn held_call_dies_with_serve(sandbox: Sandbox, step: &str) {
    let setup = Setup::new(sandbox);
    let hold = setup.path("held");
    let hook = format!("{step}={}", hold.display());
    let mut serve = setup
        .serve()
        .timeout("60s")
        .start_env(&[("LNK_HOLD", std::ffi::OsStr::new(&hook))]);
    let mark = marker();
    serve.send_call(escaping(&mark, "stay"), None);
    let held = wait_pid_file(&hold, ANSWER);
    let reaper = if step == "call-exec" {
        parent_of(held).unwrap_or_else(|| panic!("the held fork {held} has no parent"))
    } else {
        held
    };
    let argv = argv_of(reaper);
    assert_eq!(
        argv.get(1..3),
        Some(&["reap".to_owned(), "--spare".to_owned()][..]),
        "the held call's reaper is serve's spare: {argv:?}"
    );
    assert_eq!(parent_of(reaper), Some(serve.pid()), "{argv:?}");
    // Held before its fork, a warm spare's reaper still has its warm sandbox (which has run
    // nothing of the call): it must die with serve too. Held before the exec, the call started
    // cold (a hold between fork and exec needs a fork of the reaper's own).
    let children = children_of(reaper);
    let warm: Vec<i32> = children
        .iter()
        .copied()
        .filter(|child| argv_of(*child).last().is_some_and(|arg| arg == "warm-stub"))
        .collect();
    let expected: Vec<i32> = if step == "call-exec" {
        vec![held]
    } else {
        warm.clone()
    };
    assert_eq!(children, expected, "the reaper's children at {step}");
    let there = with_marker(&mark);
    assert!(
        there.iter().all(|p| p.pid == reaper || p.pid == held),
        "only the reaper runs at {step}: {there:#?}"
    );
    serve.kill();
    assert!(wait_dead(reaper, GONE), "the held reaper outlived serve");
    assert!(wait_dead(held, GONE), "the held process outlived serve");
    for sandbox in warm {
        assert!(wait_dead(sandbox, GONE), "the warm sandbox outlived serve");
    }
    wait_gone(&mark, GONE);
}

fn a_call_held_before_its_fork_dies_with_serve(sandbox: Sandbox) {
    held_call_dies_with_serve(sandbox, "call-reaper");
}

fn a_call_held_before_its_exec_dies_with_serve(sandbox: Sandbox) {
    // The reaper and its fork, which will become the sandbox.
    held_call_dies_with_serve(sandbox, "call-exec");
}

/// serve keeps spare reapers started ahead of the next calls (`SPARES`, its own children,
/// waiting); a call takes one and another takes its place; and they die with serve, SIGKILLed,
/// having run nothing.
#[test]
fn a_spare_waits_for_the_next_call_and_dies_with_serve() {
    let setup = Setup::new(Sandbox::Passthrough);
    let mut serve = setup.serve().start();
    let before = wait_spares(serve.pid(), &[]);
    let result = serve.call(json!({"program": "true"}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    let deadline = std::time::Instant::now() + GONE;
    let taken = loop {
        let ended: Vec<i32> = before.iter().copied().filter(|p| !alive(*p)).collect();
        if !ended.is_empty() {
            break ended;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the spare that took the call did not end with it"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(taken.len(), 1, "one spare took the one call: {taken:?}");
    let after = wait_spares(serve.pid(), &taken);
    serve.kill();
    for spare in after {
        assert!(wait_dead(spare, GONE), "a spare outlived serve's SIGKILL");
    }
}

/// A spare runs nothing when its control socket ends before its call's spec is whole (serve
/// went away or gave up on it): it exits with 125 and never reports a start, and the program
/// its spec names never runs.
#[test]
fn a_spare_whose_control_socket_ends_runs_nothing() {
    let mark = marker();
    let procs = procs();
    let body: Vec<u8> = [
        "--stop-grace-ms",
        "0",
        "--leftover-grace-ms",
        "1000",
        "--",
        &procs,
        "linger-main",
        &mark,
        "300",
    ]
    .iter()
    .flat_map(|arg| arg.bytes().chain([0]))
    .collect();
    let mut spec = u32::try_from(body.len()).unwrap().to_le_bytes().to_vec();
    spec.extend_from_slice(&body);
    for cut in [0, 3, spec.len() - 1] {
        let (mut spare, mut reports, control) = start_spare();
        let mut line = [0u8; 6];
        reports.read_exact(&mut line).unwrap();
        assert_eq!(&line, b"ready\n", "the spare says it is ready");
        rustix::io::write(&control, &spec[..cut]).unwrap();
        drop(control);
        let status = spare.wait().unwrap();
        assert_eq!(status.code(), Some(125), "cut at {cut}: {status}");
        let mut rest = String::new();
        reports.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "", "cut at {cut}: the spare reported more");
        assert!(
            with_marker(&mark).is_empty(),
            "cut at {cut}: the program ran"
        );
    }
}

/// Starts `lnk-link-run reap --spare` as serve does, with a report pipe at fd 3 and a control
/// socket at fd 4: the spare, the read end of its reports, and the test's end of the socket.
#[allow(unsafe_code)]
fn start_spare() -> (std::process::Child, std::fs::File, std::os::fd::OwnedFd) {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let (reports, report_end) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).unwrap();
    let (control, control_end) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::STREAM,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .unwrap();
    // Above 4, so that placing them at 3 and 4 clobbers neither.
    let report_end = rustix::io::fcntl_dupfd_cloexec(&report_end, 10).unwrap();
    let control_end = rustix::io::fcntl_dupfd_cloexec(&control_end, 10).unwrap();
    let (report_raw, control_raw) = (report_end.as_raw_fd(), control_end.as_raw_fd());
    let mut command = std::process::Command::new(lnk_tests::bins::link_run());
    command
        .args(["reap", "--spare"])
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: between fork and exec the closure only makes two dup2 system calls on
    // descriptors this process keeps open until `spawn` returns; dup2 clears close-on-exec on
    // its target, and the `OwnedFd`s standing for 3 and 4 are never dropped (never closed).
    unsafe {
        command.pre_exec(move || {
            for (from, to) in [(report_raw, 3), (control_raw, 4)] {
                let mut target =
                    std::mem::ManuallyDrop::new(std::os::fd::FromRawFd::from_raw_fd(to));
                rustix::io::dup2(std::os::fd::BorrowedFd::borrow_raw(from), &mut target)?;
            }
            Ok(())
        });
    }
    let spare = command.spawn().unwrap();
    drop((report_end, control_end));
    (spare, std::fs::File::from(reports), control)
}

/// How many spares serve keeps (`runner/src/call/spares/`).
const SPARES: usize = 4;

/// Waits until `serve` has its [`SPARES`] spare reapers (its own children, `reap --spare`),
/// none of them in `not`, and gives their pids.
fn wait_spares(serve: i32, not: &[i32]) -> Vec<i32> {
    let deadline = std::time::Instant::now() + ANSWER;
    loop {
        let spares: Vec<i32> = children_of(serve)
            .into_iter()
            .filter(|pid| !not.contains(pid))
            .filter(|pid| argv_of(*pid).get(1..3) == Some(&["reap".into(), "--spare".into()][..]))
            .collect();
        assert!(
            spares.len() <= SPARES,
            "serve has too many spares: {spares:?}"
        );
        if spares.len() == SPARES {
            return spares;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "serve has {} spare reapers of {SPARES}",
            spares.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A sandbox that cannot be executed (its program went away after serve started) is told as
/// such: the call's answer says why, not "exited with code 127". Cold starts: a warm sandbox
/// started before the program went away would run the call.
#[test]
fn a_sandbox_that_cannot_be_executed_is_said_so() {
    let setup = Setup::new(Sandbox::Passthrough);
    let copy = setup.path("vanishing-sandbox");
    std::fs::copy(env!("CARGO_BIN_EXE_lnk-test-passthrough"), &copy).unwrap();
    let mut serve = setup
        .serve()
        .env("LNK_COLD_START", "1")
        .sandbox(vec![lnk_tests::sandbox::path_str(&copy)])
        .start();
    std::fs::remove_file(&copy).unwrap();
    let result = serve.call(json!({"program": "true"}));
    assert!(lnk_tests::results::is_error(&result), "{result}");
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

/// A call without `input` reads `/dev/null`, one with it a pipe that holds the input, whether
/// its reaper was a spare (whose stdin is a pipe until it gets its call) or not: calls one
/// after the other take spares, calls at once start reapers of their own too.
fn stdin_is_dev_null_without_input_and_a_pipe_with_it(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let script = "if [ -c /dev/stdin ]; then echo char; else echo other; fi; cat";
    let without = json!({"program": "sh", "args": ["-c", script]});
    let with = json!({"program": "sh", "args": ["-c", script], "input": "the input"});
    for _ in 0..2 {
        let result = serve.call(without.clone());
        assert_eq!(ran(&result)["stdout"], "char\n", "{result}");
        let result = serve.call(with.clone());
        assert_eq!(ran(&result)["stdout"], "other\nthe input", "{result}");
    }
    let ids: Vec<(i64, bool)> = (0..6)
        .map(|n| {
            let input = n % 2 == 0;
            let call = if input { with.clone() } else { without.clone() };
            (serve.send_call(call, None), input)
        })
        .collect();
    for (id, input) in ids {
        let result = serve.call_result(id, ANSWER);
        let expected = if input { "other\nthe input" } else { "char\n" };
        assert_eq!(ran(&result)["stdout"], expected, "{result}");
    }
}

/// A program that SIGSTOPs its own reaper (possible where the sandbox shares serve's PID
/// namespace, as the pass-through prefix does) still has its call end at its timeout, as a
/// timeout: serve wakes the reaper when it asks it to stop.
#[test]
fn a_reaper_stopped_by_its_program_still_ends_the_call_at_its_timeout() {
    let setup = Setup::new(Sandbox::Passthrough);
    let mut serve = setup.serve().timeout("1s").start();
    let mark = marker();
    // Under the pass-through prefix the shell's parent is its reaper.
    let script = r#"kill -STOP $PPID; exec "$0" linger "$1" 60"#;
    let result = serve.call(json!({"program": "sh", "args": ["-c", script, procs(), mark]}));
    let value = ran(&result);
    assert_eq!(value["timed_out"], true, "{result}");
    wait_gone(&mark, GONE);
}
