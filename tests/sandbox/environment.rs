//! The attack: serve's environment holds what the host put there (API tokens, `HOME`, `LNK_*`),
//! and the sandbox process used to inherit it. `--clearenv` clears only the program's
//! environment: bubblewrap's own process is pid 1 inside, and `/proc/1/environ` showed it all.
//! serve now starts a call's sandbox, and the supervisor's gate a run's, with an empty
//! environment; variables reach programs through `--var` alone.
use std::time::Duration;

use serde_json::json;

use lnk_tests::procs::marker;
use lnk_tests::results::{ran, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, both_sandboxes_warm_and_cold};
use lnk_tests::setup::Setup;
use lnk_tests::tools::{start, wait_ended};

both_sandboxes_warm_and_cold!(a_call_sees_nothing_of_serves_environment);
both_sandboxes!(a_run_sees_nothing_of_serves_environment);

/// What a program prints of the environments it can reach: its own, its sandbox process's (pid 1
/// in bubblewrap's PID namespace; itself under the pass-through prefix, which execs it), and
/// under bubblewrap every process's in the sandbox.
fn reader(sandbox: Sandbox) -> serde_json::Value {
    let script = match sandbox {
        Sandbox::Passthrough => "env; cat /proc/self/environ",
        Sandbox::Bwrap | Sandbox::BwrapSharedPid => {
            "env; cat /proc/1/environ; for f in /proc/[0-9]*/environ; do cat \"$f\"; done"
        }
    };
    json!({"program": "sh", "args": ["-c", script]})
}

fn a_call_sees_nothing_of_serves_environment(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let secret = marker();
    let mut serve = setup.serve().env("LNK_TEST_API_TOKEN", &secret).start();
    let result = serve.call(reader(sandbox));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    let stdout = text(&result);
    assert!(
        !stdout.contains(&secret) && !stdout.contains("LNK_TEST_API_TOKEN"),
        "a call read serve's environment: {stdout:?}"
    );
    assert!(
        !stdout.contains("HOME=") && !stdout.contains("PATH="),
        "a call's sandbox started with an environment: {stdout:?}"
    );
    // `--var` is still the way in.
    let mut serve = setup
        .serve()
        .env("LNK_TEST_API_TOKEN", &secret)
        .var("GIVEN=yes")
        .start();
    let result = serve.call(json!({"program": "env"}));
    let shown = text(&result);
    assert!(
        shown.lines().any(|l| l == "GIVEN=yes") && !shown.contains("PATH="),
        "{shown}"
    );
}

fn a_run_sees_nothing_of_serves_environment(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let secret = marker();
    let mut serve = bg
        .serve(&Flags::default())
        .env("LNK_TEST_API_TOKEN", &secret)
        .start();
    let id = start(&mut serve, reader(sandbox));
    let run = wait_ended(&mut serve, &id, Duration::from_secs(30));
    assert_eq!(run["exit_code"], 0, "{run}");
    let output = std::fs::read_to_string(bg.output_path(&id)).unwrap();
    assert!(
        !output.contains(&secret) && !output.contains("LNK_TEST_API_TOKEN"),
        "a run read serve's environment: {output:?}"
    );
    assert!(
        !output.contains("HOME=") && !output.contains("PATH="),
        "a run's sandbox started with an environment: {output:?}"
    );
}
