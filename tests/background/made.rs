//! A sandbox still being made when its run's reapers die. Under the
//! recommended line, bubblewrap's process inside the PID namespace gets its own
//! `--die-with-parent` only once its namespaces are made, so the death of bubblewrap's process
//! outside does not end it before then: it is reparented past the dead gate and supervisor, goes
//! on, and starts the program in a session of its own (`--new-session`), outside the session the
//! record names. The sweep finds it all the same, by the output pipe the run gave it.
//!
//! The test holds bubblewrap there with `--block-fd 0` on an interactive run (the inner process
//! waits for the run's stdin, which its supervisor holds, before its `setsid` and its
//! `--die-with-parent`), and kills the gate and the supervisor as a crash would.
use std::time::Duration;

use rustix::process::Signal;
use serde_json::json;

use lnk_tests::procs::wait_supervisor;
use lnk_tests::procs::{poll, signal, wait_dead, wait_for_role, wait_gone, with_marker};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::Sandbox;
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::start;

/// How long what is left may take to be gone after the sweep.
const GONE: Duration = Duration::from_secs(10);

#[test]
fn a_sandbox_being_made_when_both_reapers_die_is_swept() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let bg = Bg::new(Sandbox::Bwrap);
    // The recommended line, its inner process held on the run's stdin before it is made.
    let mut line = bg.setup.sandbox_argv(&bg.setup.files);
    let dashes = line.len() - 1;
    assert_eq!(line[dashes], "--");
    line.splice(dashes..dashes, ["--block-fd".to_owned(), "0".to_owned()]);
    let mut serve = bg
        .serve(&Flags::default())
        .sandbox(line)
        // The check's probe and the warm sandboxes would wait on their stdin too.
        .flags(&["--no-sandbox-check"])
        .env("LNK_COLD_START", "1")
        .start();
    let mark = bg.marker();
    let id = start(
        &mut serve,
        json!({"program": "lnk-test-procs", "args": ["tree", &mark, "120"], "interactive": true}),
    );
    // Both of bubblewrap's processes, the inner one waiting.
    let bwraps = || {
        with_marker(&mark)
            .into_iter()
            .filter(|p| p.argv.first().is_some_and(|a| a.ends_with("bwrap")))
            .count()
    };
    assert!(poll(ANSWER, || bwraps() == 2), "{:?}", with_marker(&mark));
    let supervisor = wait_supervisor(&id, ANSWER);
    let (_, gate) = bg.group(&id);
    // A crash of both reapers: the gate first (bubblewrap's outer process dies with it, the
    // inner one is reparented to the supervisor, a child subreaper, stopped), then the
    // supervisor (the inner one goes to init, and the run's stdin ends: it goes on).
    signal(supervisor.pid, Signal::STOP);
    signal(gate, Signal::KILL);
    assert!(wait_dead(gate, ANSWER), "the gate lives");
    signal(supervisor.pid, Signal::KILL);
    assert!(wait_dead(supervisor.pid, ANSWER), "the supervisor lives");
    // The program runs, in the sandbox's session of its own.
    let program = wait_for_role(&mark, "linger", ANSWER);
    let session = std::fs::read_to_string(format!("/proc/{}/stat", program.pid))
        .ok()
        .and_then(|stat| {
            let rest = stat[stat.rfind(')')? + 1..].to_owned();
            rest.split_whitespace().nth(3)?.parse::<i32>().ok()
        });
    assert_ne!(
        session,
        Some(gate),
        "the program is in the run's recorded session"
    );

    crate::contained::sweep(&bg);
    let record = bg.record(&id).unwrap_or_else(|| panic!("no record"));
    assert_eq!(record["status"]["state"], "lost", "{record}");
    wait_gone(&mark, GONE);
}
