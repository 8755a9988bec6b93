//! A test helper that starts processes the tests can find in `/proc` by a unique marker
//! argument, so a test can prove they are gone (pids are no use under a PID namespace).
//!
//! - `lnk-test-procs linger <marker> <secs>`: sleeps `secs` seconds, then exits 0. Any role that
//!   begins with `linger` (`linger-setsid`, `linger-deaf`, …) does the same: the containment tests
//!   name each way out of a call by its role, so that a survivor says how it got out.
//! - `lnk-test-procs tree <marker> <secs>`: starts `linger <marker> <secs>` as a child that shares
//!   its stdout and stderr, prints `started`, then lingers itself: a program with a grandchild.
//! - `lnk-test-procs leave <marker> <secs>`: starts `linger <marker> <secs>` as a child that keeps
//!   stdout and stderr open, prints `started`, and exits 0 at once: it leaves a leftover holding
//!   the pipes.
//! - `lnk-test-procs leave-quiet <marker> <secs>`: as `leave`, but the leftover's stdio is
//!   `/dev/null`, so only the process group ties it to the call.
use std::io::Write;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [role, marker, secs] = args.as_slice() else {
        eprintln!("usage: lnk-test-procs linger|tree|leave|leave-quiet <marker> <secs>");
        return ExitCode::from(2);
    };
    let Ok(secs) = secs.parse::<u64>() else {
        eprintln!("lnk-test-procs: bad seconds {secs:?}");
        return ExitCode::from(2);
    };
    match role.as_str() {
        linger if linger.starts_with("linger") => {
            std::thread::sleep(Duration::from_secs(secs));
            ExitCode::SUCCESS
        }
        "tree" | "leave" | "leave-quiet" => {
            if let Err(err) = start_child(marker, secs, role == "leave-quiet") {
                eprintln!("lnk-test-procs: cannot start a child: {err}");
                return ExitCode::from(1);
            }
            if role == "tree" {
                std::thread::sleep(Duration::from_secs(secs));
            }
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("lnk-test-procs: unknown role {role:?}");
            ExitCode::from(2)
        }
    }
}

/// Starts `linger` as a child, never waited for, and says so on stdout.
fn start_child(marker: &str, secs: u64, quiet: bool) -> std::io::Result<()> {
    let mut child = Command::new(std::env::current_exe()?);
    child.args(["linger", marker, &secs.to_string()]);
    if quiet {
        child
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    }
    // The child is deliberately not waited for: it is the leftover the test looks for.
    let _child = child.spawn()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "started")?;
    out.flush()
}
