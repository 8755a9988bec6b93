//! `stop` with `signal`: each signal alone reaches a program that traps it,
//! through the sandbox (the program, not bubblewrap, gets it: a bubblewrap that got TERM, INT,
//! HUP or QUIT would end the run), `stop` answers at once, and the run ends only when the
//! program does. And on a `tty` run, Ctrl-\ and Ctrl-Z typed with `write` reach the program as
//! SIGQUIT and SIGTSTP, and CONT lets a program Ctrl-Z stopped go on.
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::stdin::{wait_output, written};
use lnk_tests::procs::{proc_field, wait_for_role, wait_gone};
use lnk_tests::results::{is_error, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::tools::{listed, start, stop, stopped_run, tool_within, wait_ended};

both_sandboxes!(
    each_signal_reaches_a_program_that_traps_it,
    kill_ends_the_run_and_bad_signals_are_refused,
    ctrl_backslash_and_ctrl_z_reach_the_program,
);

/// The signals a program can trap, as `stop` names them.
const TRAPPED: [&str; 6] = ["INT", "HUP", "TERM", "QUIT", "USR1", "USR2"];

/// `stop` with a signal: its result, which must come at once.
fn signal(serve: &mut Serve, id: &str, name: &str) -> Value {
    let asked = Instant::now();
    let result = tool_within(
        serve,
        "stop",
        json!({"id": id, "signal": name}),
        None,
        Duration::from_secs(10),
    );
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "stop with a signal answers at once: {:?}",
        asked.elapsed()
    );
    result
}

fn each_signal_reaches_a_program_that_traps_it(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let traps: String = TRAPPED
        .iter()
        .map(|s| format!("trap 'echo got-{s}' {s}; "))
        .collect();
    let script = format!("{traps}echo armed; while :; do sleep 0.1; done");
    let id = start(&mut serve, json!({"program": "sh", "args": ["-c", script]}));
    wait_output(&mut serve, &id, "armed", ANSWER);
    for name in TRAPPED {
        let result = signal(&mut serve, &id, name);
        assert!(!is_error(&result), "{name}: {result}");
        let value = structured(&result);
        assert_eq!(value["state"], "running", "{name}: {value}");
        assert_eq!(value["sent_signal"], name, "{value}");
        assert!(
            value["processes_signalled"].as_u64().unwrap_or(0) >= 1,
            "{value}"
        );
        assert!(
            text(&result).contains(&format!("sent SIG{name}")),
            "{result}"
        );
        wait_output(&mut serve, &id, &format!("got-{name}"), ANSWER);
    }
    // The run, and so the sandbox, went on through all of them.
    assert_eq!(listed(&mut serve, &id)["state"], "running");
    // `SIG` may lead, in any case.
    let result = signal(&mut serve, &id, "sigusr1");
    assert_eq!(structured(&result)["sent_signal"], "USR1", "{result}");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
}

fn kill_ends_the_run_and_bad_signals_are_refused(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(
        &mut serve,
        json!({"program": "lnk-test-procs", "args": ["linger", mark, "120"]}),
    );
    wait_for_role(&mark, "linger", ANSWER);
    for (name, says) in [
        (json!("STOP"), "must be one of"),
        (json!("9"), "must be one of"),
        (json!(15), "must be one of"),
    ] {
        let refused = tool_within(
            &mut serve,
            "stop",
            json!({"id": id, "signal": name}),
            None,
            ANSWER,
        );
        assert!(
            is_error(&refused) && text(&refused).contains(says),
            "{refused}"
        );
    }
    let result = signal(&mut serve, &id, "KILL");
    assert_eq!(
        structured(&result)["state"],
        "running",
        "answered at once: {result}"
    );
    let run = wait_ended(&mut serve, &id, ANSWER);
    // Killed by SIGKILL: said by the signal itself, or by a sandbox's exit code 128 + 9.
    assert!(
        run["signal"] == 9 || run["exit_code"] == 137,
        "the program died of SIGKILL: {run}"
    );
    assert_eq!(run["state"], "exited", "{run}");
    wait_gone(&mark, Duration::from_secs(10));
    // A run that has ended gets no signal, and that is no error.
    let result = signal(&mut serve, &id, "TERM");
    assert!(!is_error(&result), "{result}");
    assert!(text(&result).contains("has ended"), "{result}");
    assert_eq!(structured(&result)["processes_signalled"], 0, "{result}");
}

/// A `tty` program that traps SIGQUIT and SIGTSTP, then reads a line and exits 7.
const TRAPS: &str = "trap 'echo got-quit' QUIT; trap 'echo got-tstp' TSTP; echo armed; \
                     while :; do read line && break; done; echo \"read: $line\"; exit 7";

fn ctrl_backslash_and_ctrl_z_reach_the_program(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", TRAPS], "tty": true}),
    );
    wait_output(&mut serve, &id, "armed", ANSWER);
    assert_eq!(written(&mut serve, &id, "\u{1c}", false), 1);
    wait_output(&mut serve, &id, "got-quit", ANSWER);
    assert_eq!(written(&mut serve, &id, "\u{1a}", false), 1);
    wait_output(&mut serve, &id, "got-tstp", ANSWER);
    // The sandbox neither died of SIGQUIT nor stopped: the program reads on.
    written(&mut serve, &id, "done\n", false);
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["exit_code"], 7, "{run}");

    // A program that does not trap it is stopped by Ctrl-Z, and CONT lets it go on. Under
    // bubblewrap's `--new-session` the program leads a session of its own, whose process group
    // is orphaned: the kernel discards a terminal's stop signals to such a group (as on a
    // person's terminal), so there Ctrl-Z stops nothing, and nothing else either.
    let mark = bg.marker();
    let id = start(
        &mut serve,
        json!({"program": "lnk-test-procs", "args": ["linger", mark, "120"], "tty": true}),
    );
    let program = wait_for_role(&mark, "linger", ANSWER);
    bg.wait_record(&id, ANSWER, |r| !r["sandbox"]["pgid"].is_null());
    let state = || {
        proc_field(program.pid, "status", "State:")
            .unwrap_or_default()
            .chars()
            .next()
    };
    assert_eq!(written(&mut serve, &id, "\u{1a}", false), 1);
    let deadline = Instant::now() + ANSWER;
    if sandbox == Sandbox::Passthrough {
        while state() != Some('T') {
            assert!(
                Instant::now() < deadline,
                "Ctrl-Z did not stop the program: {:?}",
                state()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    } else {
        std::thread::sleep(Duration::from_millis(500));
        assert_ne!(state(), Some('T'), "an orphaned group is not stopped");
    }
    signal(&mut serve, &id, "CONT");
    while state() == Some('T') {
        assert!(Instant::now() < deadline, "CONT did not wake the program");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(lnk_tests::procs::alive(program.pid));
    assert_eq!(listed(&mut serve, &id)["state"], "running");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, Duration::from_secs(10));
}
