//! A program against its own reaper and the spares, where it can see them (the pass-through
//! prefix: no PID namespace): a leftover that stops the reaper after the program's end, or
//! kills it, spares stopped and then thrown away, and a report forged through `/proc`. Each
//! call is still answered, in time, with what really happened.
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lnk_tests::procs::{marker, wait_gone};
use lnk_tests::results::ran;
use lnk_tests::sandbox::Sandbox;
use lnk_tests::serve::{Serve, cold_starts};
use lnk_tests::setup::Setup;
use lnk_tests::stubs::{spare_reapers, stop_script, stubs, wait_stubs};

/// A call whose program exits with code 5, leaving behind a shell (its `$0` the marker, so
/// that it can be found) that sends a signal to the call's reaper (the program's parent under
/// the pass-through prefix) 0.3 s later; serve still runs.
struct LeftoverSignalled {
    _setup: Setup,
    _serve: Serve,
    result: Value,
    took: Duration,
    mark: String,
}

fn a_leftover_signals_its_reaper(signal: &str) -> LeftoverSignalled {
    let setup = Setup::new(Sandbox::Passthrough);
    let mut serve = setup.serve().timeout("60s").start();
    let mark = marker();
    let script = format!(
        "sh -c 'sleep 0.3; kill -{signal} $1; sleep 30; :' {mark} $PPID >/dev/null 2>&1 & exit 5"
    );
    let started = Instant::now();
    let id = serve.send_call(json!({"program": "sh", "args": ["-c", script]}), None);
    let result = serve.call_result(id, Duration::from_secs(20));
    LeftoverSignalled {
        _setup: setup,
        _serve: serve,
        result,
        took: started.elapsed(),
        mark,
    }
}

/// The leftover stops the reaper: the reaper is woken and stops what is left 2 s after the end
/// at the latest (a second of leftover grace and one to say it is done), and the call is
/// answered as it ended.
fn a_leftover_that_stops_its_reaper_does_not_hold_the_answer() {
    let LeftoverSignalled {
        result, took, mark, ..
    } = a_leftover_signals_its_reaper("STOP");
    let value = ran(&result);
    assert_eq!(value["exit_code"], 5, "{result}");
    assert_eq!(value["timed_out"], false, "{result}");
    assert!(took < Duration::from_secs(8), "answered after {took:?}");
    assert_eq!(value["leftovers_killed"], true, "{result}");
    wait_gone(&mark, Duration::from_secs(10));
}

/// The leftover SIGKILLs the reaper: what the reaper could no longer kill, serve kills as it
/// reaps it, and the answer says leftovers were killed.
fn a_leftover_that_kills_its_reaper_is_killed_and_said() {
    let LeftoverSignalled { result, mark, .. } = a_leftover_signals_its_reaper("KILL");
    let value = ran(&result);
    assert_eq!(value["exit_code"], 5, "{result}");
    assert_eq!(value["timed_out"], false, "{result}");
    assert_eq!(value["leftovers_killed"], true, "{result}");
    wait_gone(&mark, Duration::from_secs(10));
}

#[test]
fn a_leftover_that_kills_its_reaper_is_killed_and_said_warm() {
    a_leftover_that_kills_its_reaper_is_killed_and_said();
}

#[test]
fn a_leftover_that_kills_its_reaper_is_killed_and_said_cold() {
    cold_starts(a_leftover_that_kills_its_reaper_is_killed_and_said);
}

#[test]
fn a_leftover_that_stops_its_reaper_does_not_hold_the_answer_warm() {
    a_leftover_that_stops_its_reaper_does_not_hold_the_answer();
}

#[test]
fn a_leftover_that_stops_its_reaper_does_not_hold_the_answer_cold() {
    cold_starts(a_leftover_that_stops_its_reaper_does_not_hold_the_answer);
}

/// A call's program stops every spare reaper and stub waiting for later calls; then the files
/// folder is replaced, so that serve throws the spares away (their sandboxes show the old
/// one). A stopped spare is woken to hear it: the next call is answered at once (cold), never
/// held by a spare that cannot end.
#[test]
fn stopped_spares_thrown_away_do_not_hold_a_call() {
    let setup = Setup::new(Sandbox::Passthrough);
    let mut serve = setup.serve().timeout("5s").start();
    wait_stubs(serve.pid(), 4, &[]);
    let mut waiting = spare_reapers(serve.pid());
    waiting.extend(stubs(serve.pid()));
    let script = stop_script(&waiting);
    ran(&serve.call(json!({"program": "sh", "args": ["-c", &script]})));
    let files = &setup.files;
    let old = files.with_extension("old");
    std::fs::rename(files, &old).unwrap();
    std::fs::create_dir(files).unwrap();
    let started = Instant::now();
    let id = serve.send_call(json!({"program": "echo", "args": ["hi"]}), None);
    let result = serve.call_result(id, Duration::from_secs(30));
    let took = started.elapsed();
    assert_eq!(ran(&result)["stdout"], "hi\n", "{result}");
    assert!(took < Duration::from_secs(8), "answered after {took:?}");
}

/// As an ordinary user (`nobody`) under the pass-through prefix, a program opens its reaper's
/// report pipe through `/proc` to say the call is done while it goes on: the reaper is not
/// dumpable, so it cannot, and the answer waits for the program's real end.
#[test]
fn a_program_cannot_forge_its_reapers_report() {
    if !rustix::process::geteuid().is_root() {
        return;
    }
    const NOBODY: u32 = 65534;
    let setup = Setup::new(Sandbox::Passthrough);
    let root = setup.root.path();
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    chown_all(root, NOBODY);
    let mut serve = setup.serve().timeout("20s").run_as(NOBODY).start();
    let script = "printf 'exited code 0\\ndone\\n' >/proc/$PPID/fd/3 && echo forged; \
                  sleep 1; echo ended >&2; exit 3";
    let result = serve.call(json!({"program": "sh", "args": ["-c", script]}));
    let value = ran(&result);
    assert_eq!(value["stdout"], "", "{result}");
    assert_eq!(
        value["stderr"].as_str().map(|e| e.ends_with("ended\n")),
        Some(true),
        "{result}"
    );
    assert_eq!(value["exit_code"], 3, "{result}");
}

fn chown_all(path: &std::path::Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_all(&entry.unwrap().path(), uid);
        }
    }
}
