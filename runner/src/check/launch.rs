//! serve's side of running the probe: through the sandbox as a call runs (the same prefix and
//! `--var`s, in the files folder, with an empty environment, in a session of its own, killed
//! with the thread that started it), with the request on its stdin. It does not go through a
//! reaper: the probe leaves nothing behind, and what its sandbox might is killed with its
//! process group once it has answered.
//!
//! The probe is this very executable, reached inside through an inherited descriptor
//! (`/proc/self/fd/<n>`), so a sandbox that does not show the folder `lnk-link-run` is installed
//! in can still run it; it needs a `/proc` inside and the libraries the binary links to.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use rustix::process::{Pid, Signal, kill_process_group};

use lnk_proc::reaper::layers::Layers;

use super::wire::{ANSWER_PREFIX, Answer, Request, SUBCOMMAND};
use crate::config::Config;

/// How long the probe may take before serve gives up on it.
pub const PROBE_DEADLINE: Duration = Duration::from_secs(15);
/// The most of the probe's stdout and stderr kept.
const MAX_OUTPUT: u64 = 1 << 20;

/// What running the probe gave.
#[derive(Debug)]
pub struct Ran {
    /// The answer, when the probe gave one.
    pub answer: Option<Answer>,
    /// How the sandbox process ended (`None` when it was killed at the deadline).
    pub status: Option<ExitStatus>,
    /// The last line the sandbox or the probe wrote on stderr, for a message.
    pub stderr: String,
    /// How long it took, from spawn to the sandbox's end.
    pub elapsed: Duration,
    /// What the probe's proxy counted (with `--net-allow`).
    pub network: Option<lnk_common::network::Network>,
}

/// Runs the probe with `request` through `config`'s sandbox.
pub fn run(config: &Config, request: &Request) -> std::io::Result<Ran> {
    let exe = rustix::fs::open(
        "/proc/self/exe",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let program = format!("/proc/self/fd/{}", exe.as_raw_fd());
    let line = config
        .command_line(Path::new(&program), &[SUBCOMMAND])
        .map_err(std::io::Error::other)?;
    let argv = line.words;
    let workdir = crate::call::workdir::open(&config.files, ".")
        .map_err(|err| std::io::Error::other(err.to_string()))?;
    let Some((sandbox, args)) = argv.split_first() else {
        return Err(std::io::Error::other("an empty sandbox"));
    };
    let mut command = Command::new(sandbox);
    command
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let layers = match config.layers() {
        caches if caches.is_empty() => None,
        caches => Some(Layers::new(&caches)?),
    };
    // In the files folder, as the leader of a session (and so a process group) of its own
    // without a controlling terminal, as a call's sandbox starts, with `exe` open across the
    // exec (so `/proc/self/fd/<n>` is this executable inside), with the cache layers a call's
    // sandbox gets, and `SIGKILL` on the death of this thread.
    lnk_proc::spawn::InChild {
        folder: Some(workdir.handle),
        layers,
        new_session: true,
        keep_open: vec![exe],
        parent_death: Some(Signal::KILL),
    }
    .arrange(&mut command);
    // After the executable's descriptor is kept: the passed ones go above it.
    line.passed.pass_to(&mut command)?;
    let started = Instant::now();
    let mut child = command.spawn()?;
    // The descriptors the child was given copies of.
    drop(command);
    let group = Pid::from_child(&child);
    let (readers, done_rx) = exchange(
        "sandbox probe",
        request,
        child.stdin.take(),
        child.stdout.take(),
        child.stderr.take(),
    )?;
    let outputs = done_rx.recv_timeout(PROBE_DEADLINE).ok();
    // The probe never leaves anything running; whatever its sandbox left in the group goes
    // now, before the leader is reaped (its zombie keeps the group's id from being reused).
    let _ = kill_process_group(group, Signal::KILL);
    let status = child.wait()?;
    let elapsed = started.elapsed();
    let (out, err) = match outputs {
        Some(outputs) => outputs,
        // The readers may wait on pipes that something outside the group holds: leave them.
        None => {
            drop(readers);
            return Ok(Ran {
                answer: None,
                status: None,
                stderr: String::new(),
                elapsed,
                network: None,
            });
        }
    };
    let _ = readers.join();
    let (answer, stderr) = read_answer(&out, &err);
    Ok(Ran {
        answer,
        status: Some(status),
        stderr,
        elapsed,
        network: None,
    })
}

/// Runs the probe through `reaper` (a cold one or a spare's, started at `started`): `request`
/// to it, its answer read, then whatever its sandbox left killed and the reaper awaited. Its
/// answer, its last stderr line and how long it took.
pub(super) fn through_reaper(
    name: &str,
    request: &Request,
    mut reaper: lnk_proc::reaper::Reaper,
    started: Instant,
) -> std::io::Result<(Option<Answer>, String, Duration)> {
    let (_readers, done_rx) = exchange(
        name,
        request,
        reaper.child.stdin.take(),
        reaper.child.stdout.take(),
        reaper.child.stderr.take(),
    )?;
    let outputs = done_rx.recv_timeout(PROBE_DEADLINE).ok();
    // The probe leaves nothing running; the reaper kills what its sandbox may have left.
    reaper.stop();
    reaper.finish()?;
    let elapsed = started.elapsed();
    let (out, err) = outputs.unwrap_or_default();
    let (answer, stderr) = read_answer(&out, &err);
    Ok((answer, stderr, elapsed))
}

/// The probe's stdout and stderr, as read.
pub(super) type Outputs = (Vec<u8>, Vec<u8>);

/// Serves the probe's pipes on a thread of their own: `request` written to its stdin (small,
/// well under a pipe's buffer, so this never waits on a probe that reads nothing), its stdout
/// and stderr read to their end, at most [`MAX_OUTPUT`] of each. Both outputs come through the
/// receiver once the probe has closed them.
pub(super) fn exchange(
    name: &str,
    request: &Request,
    stdin: Option<ChildStdin>,
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
) -> std::io::Result<(JoinHandle<()>, mpsc::Receiver<Outputs>)> {
    let request = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    let (done_tx, done_rx) = mpsc::channel();
    let readers = std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(&request);
            }
            let err_reader = stderr.map(|pipe| std::thread::spawn(move || read_all(pipe)));
            let out = stdout.map(read_all).unwrap_or_default();
            let err = err_reader
                .and_then(|reader| reader.join().ok())
                .unwrap_or_default();
            let _ = done_tx.send((out, err));
        })?;
    Ok((readers, done_rx))
}

/// The probe's answer in its stdout, if it gave one, and the last line of its stderr.
pub(super) fn read_answer(out: &[u8], err: &[u8]) -> (Option<Answer>, String) {
    let answer = String::from_utf8_lossy(out)
        .lines()
        .find_map(|line| line.strip_prefix(ANSWER_PREFIX).map(str::to_owned))
        .and_then(|json| serde_json::from_str(&json).ok());
    let stderr = String::from_utf8_lossy(err)
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_owned();
    (answer, stderr)
}

fn read_all(pipe: impl Read) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut pipe = pipe.take(MAX_OUTPUT);
    let _ = pipe.read_to_end(&mut bytes);
    bytes
}
