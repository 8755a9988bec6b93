//! A program starts as a program expects to: no signal blocked, none of the standard ones
//! ignored. The reapers block SIGHUP, SIGINT, SIGTERM and SIGCHLD to hear them on a signal fd,
//! and a child inherits a blocked mask (and ignored signals) across exec; a program that
//! inherited them would never see `stop`'s graceful SIGTERM, and an event loop that waits for
//! SIGCHLD would never see its own children end.
use std::time::Duration;

use serde_json::json;

use lnk_tests::results::{ran, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, both_sandboxes_warm_and_cold};
use lnk_tests::setup::Setup;
use lnk_tests::tools::{start, wait_ended};

both_sandboxes_warm_and_cold!(a_call_starts_with_no_signal_blocked_or_ignored);
both_sandboxes!(a_run_starts_with_no_signal_blocked_or_ignored);

/// The program: prints its own status, `SigBlk` and `SigIgn` among it.
fn reader() -> serde_json::Value {
    json!({"program": "cat", "args": ["/proc/self/status"]})
}

/// The mask of one `Sig…:` line of `/proc/<pid>/status`, in hex.
fn mask(status: &str, field: &str) -> u64 {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("no {field} line in {status:?}"));
    u64::from_str_radix(line.trim(), 16).unwrap_or_else(|e| panic!("{field} {line:?}: {e}"))
}

/// Signals 1 to 31: bits 0 to 30. (glibc's posix_spawn leaves its own two internal real-time
/// signals, 32 and 33, ignored in the child; a glibc program installs its handlers for them at
/// start, so they are not the program's concern.)
const STANDARD: u64 = 0x7fff_ffff;

fn assert_clean(status: &str) {
    assert_eq!(mask(status, "SigBlk:"), 0, "signals blocked: {status:?}");
    assert_eq!(
        mask(status, "SigIgn:") & STANDARD,
        0,
        "standard signals ignored: {status:?}"
    );
}

fn a_call_starts_with_no_signal_blocked_or_ignored(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let result = serve.call(reader());
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    assert_clean(&text(&result));
}

fn a_run_starts_with_no_signal_blocked_or_ignored(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(&mut serve, reader());
    let run = wait_ended(&mut serve, &id, Duration::from_secs(30));
    assert_eq!(run["exit_code"], 0, "{run}");
    let output = std::fs::read_to_string(bg.output_path(&id)).unwrap();
    assert_clean(&output);
}
