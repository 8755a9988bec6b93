//! `gate`: a background run's reaper, the first process of the run.
//!
//! The supervisor starts `lnk-link-supervise gate … -- <sandbox>…` as the leader of a new
//! session (so of a new process group too), with an empty environment, SIGTERM at the
//! supervisor's death, its signals blocked, a pipe as its stdin and a report pipe as its fd 3
//! ([`lnk_proc::reaper::Launch`]). The gate waits for one byte on stdin, which the supervisor
//! writes only once the record names the gate's group and session; if the pipe closes first (the
//! supervisor died before it could record them) or a stop comes, it exits and nothing runs. Once
//! opened, it is the run's reaper ([`lnk_proc::reaper`]): it forks the sandbox into a process
//! group of its own, holds everything the sandbox starts as a child subreaper, stops it all with
//! SIGTERM then SIGKILL two seconds later when the supervisor asks (SIGTERM to the gate) or dies,
//! kills leftovers a second after the sandbox's end, and reports the sandbox's start, exit and a
//! failed exec to the supervisor.
//!
//! (The SPEC has the gate `exec` the sandbox. It stays alive as the reaper instead: a process
//! group does not hold what calls `setsid` or a sandbox's `--new-session`, and only an ancestor
//! that lives can catch those; see the README's Containment.)

use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::process::{ExitCode, Stdio};

use anyhow::{Context, Result};
use lnk_proc::reaper::hold::{self, Step};
use lnk_proc::reaper::{LEFTOVER_GRACE, Launch, LaunchStep, Options, RUN_STOP_GRACE, Reaper};

use lnk_common::record::Record;
/// The byte the supervisor writes to open its gate.
pub use lnk_proc::reaper::OPEN;

/// The hidden subcommand that makes `lnk-link-supervise` a run's gate; `main` takes it before
/// anything else.
pub const GATE: &str = "gate";

/// Runs a gate from the arguments after `gate`: it always waits for the open byte first.
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let mut options = match Options::parse(args) {
        Ok(options) => options,
        Err(problem) => {
            tracing::error!("gate: {problem}");
            return ExitCode::from(lnk_proc::reaper::USAGE_EXIT);
        }
    };
    options.wait_open = true;
    lnk_proc::reaper::run(&options)
}

/// Starts the gate of `record`'s run in the folder `cwd` is a handle on, with `gate_read` as
/// its stdin (the open byte comes there), `out_write` as its stdout and stderr (the run's
/// output), and `run_stdin` (above fd 4), when given, as its fd 4: the sandbox's stdin once the
/// gate is opened (else `/dev/null`). A run with a proxy gives `net`, the sandbox's end of the
/// proxy's channel: the gate gets it as its fd 5 and starts the sandbox with the stub in it,
/// which hands the proxy its listener. The gate is the supervisor's child, a [`Reaper`]: it
/// leads the run's session and group.
pub fn start(
    record: &Record,
    cwd: &OwnedFd,
    gate_read: OwnedFd,
    out_write: OwnedFd,
    run_stdin: Option<OwnedFd>,
    net: Option<OwnedFd>,
) -> Result<Reaper> {
    let mut options = Options::new(record.launch.argv(), RUN_STOP_GRACE, LEFTOVER_GRACE);
    options.wait_open = true;
    options.run_stdin = run_stdin.is_some();
    // The run's own cache layers, made in the sandbox's process before its exec.
    options.caches = record.launch.caches.clone();
    options.hold_start = hold::path_for(Step::RunReaper);
    options.hold_exec = hold::path_for(Step::RunExec);
    if net.is_some() {
        options.net = true;
        options.stub = Some(record.launch.sandbox.len());
    }
    let out_write = File::from(out_write);
    let err_write = out_write.try_clone().context("sharing the output pipe")?;
    // The supervisor's environment (serve's, inherited) reaches neither the gate nor the
    // sandbox: the launch clears it, and the gate execs the sandbox with an empty one.
    Launch::new(lnk_common::commands::SUPERVISOR, GATE)
        .args(options.to_args())
        .stdio(
            Stdio::from(gate_read),
            Stdio::from(out_write),
            Stdio::from(err_write),
        )
        .cwd(cwd.as_fd())
        .run_stdin(run_stdin.as_ref().map(AsFd::as_fd))
        .net(net.as_ref().map(AsFd::as_fd))
        .spawn()
        .map_err(|failed| {
            let context = match failed.step {
                LaunchStep::Descriptors => "making the gate's report pipe",
                LaunchStep::Spawn => "starting the gate",
                LaunchStep::Reports => "reading the gate's reports",
            };
            anyhow::Error::new(failed.error).context(context)
        })
}
