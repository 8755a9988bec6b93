//! Runs on a terminal of their own (`tty`): `isatty` holds inside the sandbox, the
//! size is the one asked, a prompt that asks only on a terminal asks and is answered, Ctrl-C
//! typed with `write` is SIGINT, and the output file keeps what the terminal showed.
use std::time::Duration;

use serde_json::json;

use crate::stdin::{channel, wait_output, written};
use lnk_tests::bins::link_supervise;
use lnk_tests::bins::procs;
use lnk_tests::procs::{sigkill, wait_group_gone, wait_no_supervisor, wait_supervisor};
use lnk_tests::procs::{wait_for_role, wait_gone};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{read_ok, start, wait_ended};

both_sandboxes!(
    a_terminal_of_its_own,
    a_terminal_takes_its_whole_input_at_the_start,
    a_prompt_asks_only_on_a_terminal,
    ctrl_c_is_sigint,
    a_terminal_run_is_capped_timed_and_swept_like_any_other,
    a_terminal_is_the_runs_alone,
);

/// The most input a terminal's run takes at its start (4 KiB, lines of `x`) is all typed, and
/// the run goes on: it is not lost on a terminal that could not take it at once.
fn a_terminal_takes_its_whole_input_at_the_start(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let line = format!("{}\n", "x".repeat(63));
    // The limit `tools.md` gives: 4 KiB.
    let input = line.repeat(4096 / 64);
    assert_eq!(input.len(), 4096);
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "wc -l; echo LINES-COUNTED"], "tty": true, "input": input}),
    );
    written(&mut serve, &id, "", true);
    let output = wait_output(&mut serve, &id, "LINES-COUNTED", ANSWER);
    assert!(output.contains("64\r\n"), "{output:?}");
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["state"], "exited", "{run}");
}

fn a_terminal_of_its_own(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "tty": true, "cols": 100, "rows": 30}),
    );
    written(
        &mut serve,
        &id,
        "test -t 0 && test -t 1 && test -t 2 && echo TTY-$((1+1)); stty size\n",
        false,
    );
    let output = wait_output(&mut serve, &id, "30 100", ANSWER);
    // What the terminal showed: the echo of what was typed, then the answers, each line ended
    // the terminal's way.
    assert!(output.contains("TTY-2\r\n30 100\r\n"), "{output:?}");
    assert!(output.contains("stty size"), "the echo is kept: {output:?}");
    // eof on a terminal is Ctrl-D: the shell ends.
    assert_eq!(written(&mut serve, &id, "", true), 0);
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(
        (run["state"].as_str(), run["exit_code"].as_i64()),
        (Some("exited"), Some(0)),
        "{run}"
    );
    wait_no_supervisor(&id, ANSWER);
    assert!(!channel(&bg, &id).exists());
    let record = bg.record(&id).unwrap();
    assert_eq!(
        record["launch"]["stdin"],
        json!({"mode": {"tty": {"cols": 100, "rows": 30}}})
    );
}

/// A program that asks `Continue? [y/N]` only when its stdin is a terminal.
const ASKS: &str = "if [ -t 0 ]; then printf 'Continue? [y/N] '; read answer; \
                    [ \"$answer\" = y ] && echo went-on && exit 0; exit 1; fi; echo never-asked";

fn a_prompt_asks_only_on_a_terminal(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let on_tty = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", ASKS], "tty": true}),
    );
    wait_output(&mut serve, &on_tty, "Continue? [y/N] ", ANSWER);
    written(&mut serve, &on_tty, "y\n", false);
    let run = wait_ended(&mut serve, &on_tty, ANSWER);
    assert_eq!(run["exit_code"], 0, "{run}");
    let output = read_ok(&mut serve, json!({"id": on_tty, "offset": 0})).0;
    assert_eq!(output, "Continue? [y/N] y\r\nwent-on\r\n");

    let piped = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", ASKS], "interactive": true}),
    );
    let run = wait_ended(&mut serve, &piped, ANSWER);
    assert_eq!(run["exit_code"], 0, "{run}");
    let output = read_ok(&mut serve, json!({"id": piped, "offset": 0})).0;
    assert_eq!(output, "never-asked\n");
}

fn ctrl_c_is_sigint(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(
        &mut serve,
        json!({"program": "lnk-test-procs", "args": ["linger", mark, "120"], "tty": true}),
    );
    wait_for_role(&mark, "linger", ANSWER);
    bg.wait_record(&id, ANSWER, |r| !r["sandbox"]["pgid"].is_null());
    assert_eq!(written(&mut serve, &id, "\u{3}", false), 1);
    let run = wait_ended(&mut serve, &id, ANSWER);
    // Killed by SIGINT: said by the signal itself, or by a sandbox's exit code 128 + 2.
    assert_eq!(run["state"], "exited", "{run}");
    assert!(
        run["signal"] == 2 || run["exit_code"] == 130,
        "Ctrl-C is SIGINT: {run}"
    );
    wait_gone(&mark, Duration::from_secs(10));
    wait_no_supervisor(&id, ANSWER);

    // A program that traps SIGINT gets it and goes on, the sandbox with it: Ctrl-C reaches
    // the program, not the sandbox.
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", TRAPS], "tty": true}),
    );
    wait_output(&mut serve, &id, "armed", ANSWER);
    written(&mut serve, &id, "\u{3}", false);
    wait_output(&mut serve, &id, "got-int", ANSWER);
    written(&mut serve, &id, "done\n", false);
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["exit_code"], 7, "{run}");
    let output = read_ok(&mut serve, json!({"id": id, "offset": 0})).0;
    assert!(output.contains("read: done"), "{output:?}");
}

/// A program that traps SIGINT, then reads a line and exits 7.
const TRAPS: &str = "trap 'echo got-int' INT; echo armed; \
                     while :; do read line && break; done; echo \"read: $line\"; exit 7";

fn a_terminal_run_is_capped_timed_and_swept_like_any_other(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        timeout: "3s",
        output: "8KiB",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let mark = bg.marker();
    // About 16 KiB of lines through the terminal, then a program that lingers past the
    // timeout.
    let script = "i=0; while [ $i -lt 400 ]; do echo line-$i-abcdefghijklmnopqrstuvwxyz; \
                  i=$((i+1)); done; exec \"$1\" linger \"$2\" 60";
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, "sh", procs(), mark], "tty": true}),
    );
    wait_for_role(&mark, "linger", ANSWER);
    let run = wait_ended(&mut serve, &id, Duration::from_secs(15));
    assert_eq!(run["state"], "timed_out", "{run}");
    let total = run["output_bytes"].as_u64().unwrap();
    assert_eq!(
        total,
        // 400 lines of 32 characters and "\r\n", and their numbers: 1,090 digits.
        400 * 34 + 1090,
        "every byte counted, \\r included: {run}"
    );
    assert!(
        run["dropped_bytes"].as_u64().unwrap() > 0,
        "rotated at the cap: {run}"
    );
    let (tail, value) = read_ok(&mut serve, json!({"id": id, "offset": 0}));
    assert!(value["skipped"].as_u64().unwrap() > 0, "{value}");
    assert_eq!(value["next_offset"], total, "{value}");
    assert!(
        tail.ends_with("line-399-abcdefghijklmnopqrstuvwxyz\r\n"),
        "{tail:?}"
    );
    assert!(std::fs::metadata(bg.output_path(&id)).unwrap().len() <= 8192);
    wait_gone(&mark, Duration::from_secs(10));
    wait_no_supervisor(&id, ANSWER);

    // A terminal run whose supervisor is SIGKILLed: the sweep records it lost, removes its
    // channel, and nothing of it is left.
    let mark = bg.marker();
    let id = start(
        &mut serve,
        json!({"program": "lnk-test-procs", "args": ["linger", mark, "120"], "tty": true}),
    );
    wait_for_role(&mark, "linger", ANSWER);
    let supervisor = wait_supervisor(&id, ANSWER);
    let (pgid, _) = bg.group(&id);
    sigkill(supervisor.pid);
    let _ = lnk_tests::procs::wait_dead(supervisor.pid, ANSWER);
    let swept = std::process::Command::new(link_supervise())
        .arg("sweep")
        .arg(&bg.state)
        .status()
        .unwrap();
    assert!(swept.success());
    assert_eq!(bg.record(&id).unwrap()["status"]["state"], "lost");
    assert!(!channel(&bg, &id).exists());
    wait_gone(&mark, Duration::from_secs(10));
    wait_group_gone(pgid, Duration::from_secs(10));
}

/// Under the recommended line, a run's program sees no other terminal than its own, and
/// cannot fake typed input into its own (`TIOCSTI`): it is not its controlling terminal.
fn a_terminal_is_the_runs_alone(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let other = start(
        &mut serve,
        json!({"program": "lnk-test-procs", "args": ["linger", mark, "120"], "tty": true}),
    );
    let lingering = wait_for_role(&mark, "linger", ANSWER);
    // The other run's terminal, as the host names it.
    let theirs = std::fs::read_link(format!("/proc/{}/fd/0", lingering.pid)).unwrap();
    assert!(theirs.starts_with("/dev/pts/"), "{theirs:?}");
    let id = start(&mut serve, json!({"program": "sh", "tty": true}));
    let tiocsti = "import fcntl, termios\ntry:\n    fcntl.ioctl(0, termios.TIOCSTI, b'#')\n    \
                   print('TIOCSTI-WORKED')\nexcept OSError as e:\n    print('TIOCSTI-FAILED', e.errno)";
    let line = format!(
        "ls /dev/pts; (echo x > {theirs}) 2>/dev/null && echo OPENED-THEIRS; \
         (exec 3</dev/tty) 2>/dev/null && echo HAS-DEV-TTY; \
         /usr/bin/python3 -c \"$(printf '%b' '{}')\"; echo END-$((40+2))\n",
        tiocsti.replace('\n', "\\n").replace('\'', "'\\''"),
        theirs = theirs.display()
    );
    written(&mut serve, &id, &line, false);
    let output = wait_output(&mut serve, &id, "END-42", ANSWER);
    // What came after the echo of the line typed.
    let output = output
        .split_once("$((40+2))\r\n")
        .map_or(output.as_str(), |(_, answers)| answers)
        .to_owned();
    if sandbox == Sandbox::Passthrough {
        // No sandbox: the user's own processes can reach any of the user's terminals (that is
        // what the sandbox is for), and the terminal is the program's controlling terminal,
        // so TIOCSTI may type into it: into the program's own stdin, nothing else.
    } else {
        assert!(!output.contains("OPENED-THEIRS"), "{output:?}");
        assert!(!output.contains("HAS-DEV-TTY"), "{output:?}");
        assert!(output.contains("TIOCSTI-FAILED"), "{output:?}");
        // Only the sandbox's own /dev/pts: none of the host's terminals.
        let listed = output
            .split("\r\n")
            .find(|line| line.contains("ptmx") && !line.contains("ls /dev/pts"))
            .unwrap_or_default();
        assert_eq!(listed.trim_start_matches("# ").trim(), "ptmx", "{output:?}");
    }
    // An Enter first: a TIOCSTI that worked left a character on the line, and Ctrl-D ends
    // only an empty one.
    written(&mut serve, &id, "\n", true);
    wait_ended(&mut serve, &id, ANSWER);
    lnk_tests::tools::stop(&mut serve, &other);
    wait_gone(&mark, Duration::from_secs(10));
}
