//! `gate`: a background run's reaper, the first process of the run.
//!
//! The supervisor starts `lnk-link-supervise gate … -- <sandbox>…` as the leader of a new
//! session (so of a new process group too), with an empty environment, SIGTERM at the
//! supervisor's death, its signals blocked, a pipe as its stdin and a report pipe as its fd 3
//! ([`lnk_proc::reaper::launch`]). The gate waits for one byte on stdin, which the supervisor
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
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};

use anyhow::{Context, Result};
use lnk_proc::reaper::children::{Descendant, signal_programs};
use lnk_proc::reaper::hold::{self, Step};
use lnk_proc::reaper::{LEFTOVER_GRACE, Options, RUN_STOP_GRACE, Reports, launch, report};

use lnk_common::record::Record;
/// The byte the supervisor writes to open its gate.
pub use lnk_proc::reaper::OPEN;
use rustix::process::{Pid, Signal, kill_process};

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

/// A run's gate, started: the supervisor's child.
#[derive(Debug)]
pub struct Gate {
    /// The gate process.
    pub child: Child,
    /// What it reports.
    pub reports: Reports,
}

impl Gate {
    /// Starts the gate of `record`'s run in the folder `cwd` is a handle on, with `gate_read`
    /// as its stdin (the open byte comes there), `out_write` as its stdout and stderr (the
    /// run's output), and `run_stdin` (above fd 4), when given, as its fd 4: the sandbox's
    /// stdin once the gate is opened (else `/dev/null`). A run with a proxy gives `net`, the
    /// sandbox's end of the proxy's channel: the gate gets it as its fd 5 and starts the
    /// sandbox with the stub in it, which hands the proxy its listener.
    pub fn start(
        record: &Record,
        cwd: &OwnedFd,
        gate_read: OwnedFd,
        out_write: OwnedFd,
        run_stdin: Option<OwnedFd>,
        net: Option<OwnedFd>,
    ) -> Result<Gate> {
        let (read, write) = report::pipe().context("making the gate's report pipe")?;
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
        // `/proc/self/exe` is this very executable even when its file was replaced since.
        let mut command = Command::new("/proc/self/exe");
        command
            .arg0(lnk_common::commands::SUPERVISOR)
            .arg(GATE)
            .args(options.to_args())
            .stdin(Stdio::from(gate_read))
            .stdout(Stdio::from(out_write))
            .stderr(Stdio::from(err_write));
        // The supervisor's environment (serve's, inherited) reaches neither the gate nor the
        // sandbox: `prepare` clears it, and the gate execs the sandbox with an empty one.
        launch::prepare_gate(
            &mut command,
            Some(cwd.as_fd()),
            &write,
            run_stdin.as_ref(),
            net.as_ref(),
        );
        let child = command.spawn().context("starting the gate")?;
        drop((write, run_stdin, net));
        let reports = Reports::new(read).context("reading the gate's reports")?;
        Ok(Gate { child, reports })
    }

    /// The gate's pid: it leads the run's session and group.
    pub fn pid(&self) -> Option<Pid> {
        Pid::from_raw(i32::try_from(self.child.id()).ok()?)
    }

    /// Asks the gate to stop the run: SIGTERM to everything, SIGKILL two seconds later. And
    /// wakes it (SIGCONT), should a program of the run have stopped it: a sandbox that shares
    /// the supervisor's PID namespace lets one SIGSTOP its own gate.
    pub fn stop(&self) {
        self.signal(Signal::TERM);
        self.signal(Signal::CONT);
    }

    /// Sends `signal` to the run's programs, every process below the gate but the sandbox's
    /// own, those running `sandbox_exe` (Ctrl-C, Ctrl-\ or Ctrl-Z typed on its terminal):
    /// [`lnk_proc::reaper::children::signal_programs`]. How many were signalled.
    pub fn signal_programs(&self, signal: Signal, sandbox_exe: Option<&std::path::Path>) -> usize {
        // Not reaped yet, so its pid is still the gate's.
        match self.pid().and_then(Descendant::pin) {
            Some(gate) => signal_programs(gate, sandbox_exe, signal),
            None => 0,
        }
    }

    /// Kills the gate itself, for one that does not end when asked (what it held is then
    /// reparented to the supervisor, a child subreaper, which kills it).
    pub fn kill(&self) {
        self.signal(Signal::KILL);
    }

    fn signal(&self, signal: Signal) {
        if let Some(pid) = self.pid() {
            // Unreaped, so still the gate; an error means it has exited already.
            let _ = kill_process(pid, signal);
        }
    }
}
