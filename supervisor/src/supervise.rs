//! `supervise <id> --state <dir>`: one background run's supervisor, for the run's whole life.
//!
//! In order:
//! 1. take over the run's lock from stdin (`start` locked it and handed it over) and hold it
//!    until exit — the kernel frees it however this process dies, which is how a sweep knows;
//! 2. open the output file under the files folder (through a folder handle, no links);
//! 3. start `lnk-link-supervise gate -- <sandbox> -- <program> <args>` as the leader of a new
//!    process group, with `PR_SET_PDEATHSIG`, its stdout and stderr on one pipe;
//! 4. write the group (pgid, leader pid and start time, boot id) into the record, then open
//!    the gate — so no process of the run exists that the record does not name;
//! 5. copy the pipe into the output file, rotating at the cap; stop the group at the timeout,
//!    when `<id>.stop` appears, or on SIGTERM/SIGINT/SIGHUP (then the run is `lost`);
//! 6. once the sandbox process has exited, kill what it left in its group a second later;
//! 7. record the end, then tell it (when the run has a way in).

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::lock::LockGuard;
use lnk_common::proc_info::{self, ProcessId};
use lnk_common::record::{Group as RecordGroup, Record};
use lnk_common::safe_open::FilesDir;
use lnk_common::status::{Exit, Status};
use lnk_common::time::UnixMs;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::pipe::{PipeFlags, pipe_with};
use rustix::process::{Pid, PidfdFlags, pidfd_open};

use crate::gate;
use crate::group::Group;
use crate::output::OutputFile;
use crate::tell;

/// How long the run's group may outlive the sandbox process before it is killed, and the
/// longest the output pipe is read after that exit.
const LEFTOVER_GRACE: Duration = Duration::from_secs(1);
/// A deadline for limits so long that adding them to the clock would overflow: about 30 years.
const FAR_AWAY: Duration = Duration::from_secs(1 << 30);
/// How often `<id>.stop` is looked for.
const STOP_POLL: Duration = Duration::from_millis(100);
/// Bytes read from the pipe at a time.
const READ_CHUNK: usize = 256 * 1024;
/// The pipe size asked for, so a fast writer needs fewer wake-ups.
const PIPE_SIZE: usize = 1024 * 1024;
/// Test hook: when set to a path, the gate opens only once that path exists, so a test can
/// kill the supervisor between recording the group and opening the gate.
pub const HOLD_GATE_ENV: &str = "LNK_SUPERVISE_HOLD_GATE";

/// The sandbox process's exit (unknown for a status `wait` cannot read) and when it was seen.
type LeaderExit = (Option<Exit>, Instant);

/// Why the run ended, as far as the supervisor is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    ByItself,
    TimedOut,
    Stopped,
    Lost,
}

/// Supervises run `id` of `state` to its end.
pub fn run(id: &str, state: PathBuf) -> Result<()> {
    let id = RunId::parse(id)?;
    let state = StateDir::open(&state)?;
    let lock =
        LockGuard::adopt_stdin(&state, &id).context("taking over the run's lock from stdin")?;
    let signals = Signals::new().context("setting up SIGTERM, SIGINT and SIGHUP")?;
    let mut record = Record::load(&state, &id)?;
    if !record.status.is_running() {
        tracing::info!(%id, "the run has ended already; nothing to supervise");
        return Ok(());
    }
    let result = supervise(&state, &mut record, &signals);
    if let Err(err) = &result {
        tracing::error!(%id, "{err:#}");
        if record.status.is_running() {
            record.status = Status::Lost {
                ended_at_ms: UnixMs::now(),
                exit: None,
            };
            record
                .store_ended(&state)
                .context("recording the run lost")?;
        }
    }
    // A run ended by a signal to its supervisor is left untold: whoever stops supervisors
    // (a shutdown) is not the moment to talk; a later sweep tells it.
    if !signals.pending() {
        tell::tell_if_due(&state, &mut record);
    }
    drop(lock);
    result
}

fn supervise(state: &StateDir, record: &mut Record, signals: &Signals) -> Result<()> {
    let files = FilesDir::open(&record.launch.files)?;
    // The working folder, opened from the files folder without following any link: the
    // agent may have put a link in its place since `start`.
    let relative = record
        .launch
        .program
        .cwd
        .strip_prefix(&record.launch.files)
        .context("the run's working folder is not inside its files folder")?
        .to_owned();
    let cwd = files
        .open_dir_beneath(&relative)
        .context("opening the run's working folder")?;
    let background = files.ensure_background_dir()?;
    let mut output = OutputFile::open(background, record)?;

    let (gate_read, gate_write) = pipe_with(PipeFlags::CLOEXEC)?;
    let (out_read, out_write) = pipe_with(PipeFlags::CLOEXEC)?;
    let _ = rustix::pipe::fcntl_setpipe_size(&out_read, PIPE_SIZE);
    let mut child = start_gate(record, &cwd, gate_read, out_write)?;
    let leader = ProcessId::new(i64::from(child.id())).context("the gate's pid")?;
    let group = Group::of(leader);
    let started = Instant::now();
    let recorded = record_group(state, record, leader);
    if let Err(err) = recorded {
        group.kill();
        let _ = child.wait();
        return Err(err);
    }
    hold_gate_for_tests(signals);
    let mut gate_write = File::from(gate_write);
    if signals.pending() {
        // Told to quit before the run began: the gate is closed unopened below, so the gate
        // exits and nothing runs.
        tracing::info!(id = %record.id, "a signal came before the gate opened; nothing runs");
    } else if let Err(err) = gate_write.write_all(&[gate::OPEN]) {
        // The gate died before it could be opened: the wait below reaps it.
        tracing::warn!(%err, "the gate could not be opened");
    }
    drop(gate_write);

    let watched = watch(
        state,
        record,
        signals,
        &mut child,
        group,
        started,
        out_read,
        &mut output,
    );
    let (ending, exited) = match watched {
        Ok(watched) => watched,
        Err(err) => {
            // Whatever failed, nothing of the run may go on unsupervised.
            group.kill();
            let _ = child.wait();
            return Err(err);
        }
    };
    let exit = match exited {
        Some((exit, _)) => exit,
        None => Exit::from_status(child.wait()?),
    };
    let ended_at_ms = UnixMs::now();
    record.status = match ending {
        Ending::ByItself => match exit {
            Some(exit) => Status::Exited { ended_at_ms, exit },
            None => Status::Lost {
                ended_at_ms,
                exit: None,
            },
        },
        Ending::TimedOut => Status::TimedOut { ended_at_ms, exit },
        Ending::Stopped => Status::Stopped { ended_at_ms, exit },
        Ending::Lost => Status::Lost { ended_at_ms, exit },
    };
    record.store_ended(state)?;
    tracing::info!(id = %record.id, state = record.status.state().as_str(), "run ended");
    Ok(())
}

/// Copies the output and watches the run until it and its group are done; how it ended.
#[allow(clippy::too_many_arguments)]
fn watch(
    state: &StateDir,
    record: &mut Record,
    signals: &Signals,
    child: &mut Child,
    group: Group,
    started: Instant,
    out_read: OwnedFd,
    output: &mut OutputFile,
) -> Result<(Ending, Option<LeaderExit>)> {
    let pidfd = pidfd_open(Pid::from_child(child), PidfdFlags::empty())?;
    // A limit too far away to count is as good as none (it cannot overflow the clock).
    let deadline = started
        .checked_add(record.launch.limits.timeout())
        .unwrap_or(started + FAR_AWAY);
    let mut pipe = Some(File::from(out_read));
    let mut buf = vec![0u8; READ_CHUNK];
    let mut ending = Ending::ByItself;
    let mut killed = false;
    let mut exited: Option<LeaderExit> = None;
    let mut next_stop_check = Instant::now();
    loop {
        let now = Instant::now();
        if !killed && exited.is_none() {
            let asked = if signals.pending() {
                Some(Ending::Lost)
            } else if now >= deadline {
                Some(Ending::TimedOut)
            } else if now >= next_stop_check {
                next_stop_check = now + STOP_POLL;
                state.stop_requested(&record.id)?.then_some(Ending::Stopped)
            } else {
                None
            };
            if let Some(why) = asked {
                ending = why;
                killed = true;
                group.kill();
            }
        }
        if let Some((_, at)) = exited {
            let group_gone = killed || !group.has_running_members();
            if group_gone && pipe.is_none() {
                break;
            }
            if now >= at + LEFTOVER_GRACE {
                if group.has_running_members() {
                    tracing::info!(id = %record.id, "killing what the run left running");
                    group.kill();
                }
                drain(&mut pipe, &mut buf, output, state, record)?;
                break;
            }
        }
        let wake_at = match exited {
            None if killed => now + STOP_POLL,
            None => deadline.min(next_stop_check),
            Some((_, at)) => (at + LEFTOVER_GRACE).min(now + Duration::from_millis(20)),
        };
        let wait = wake_at.saturating_duration_since(now);
        // A wait too long for a timespec (it cannot happen: waits are bounded) waits without end.
        let timeout = Timespec::try_from(wait).ok();
        let mut fds = Vec::with_capacity(3);
        fds.push(PollFd::new(signals.fd(), PollFlags::IN));
        let pidfd_slot = exited.is_none().then(|| {
            fds.push(PollFd::new(&pidfd, PollFlags::IN));
            fds.len() - 1
        });
        let pipe_slot = pipe.as_ref().map(|p| {
            fds.push(PollFd::new(p, PollFlags::IN));
            fds.len() - 1
        });
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        drop(fds);
        if pipe_slot.is_some_and(|slot| ready[slot]) {
            read_once(&mut pipe, &mut buf, output, state, record)?;
        }
        if pidfd_slot.is_some_and(|slot| ready[slot])
            && let Some(status) = child.try_wait()?
        {
            exited = Some((Exit::from_status(status), Instant::now()));
        }
    }
    Ok((ending, exited))
}

/// Starts the gate, which will become the sandbox, as the leader of a new group.
fn start_gate(
    record: &Record,
    cwd: &OwnedFd,
    gate_read: OwnedFd,
    out_write: OwnedFd,
) -> Result<Child> {
    let out_write = File::from(out_write);
    let err_write = out_write.try_clone()?;
    // `/proc/self/exe` is this very executable even when its file was replaced since.
    let mut command = Command::new("/proc/self/exe");
    command
        .arg0("lnk-link-supervise")
        .arg("gate")
        .arg("--")
        .args(record.launch.argv().into_iter().map(OsString::from))
        .env_remove(HOLD_GATE_ENV)
        .stdin(Stdio::from(gate_read))
        .stdout(Stdio::from(out_write))
        .stderr(Stdio::from(err_write))
        .process_group(0);
    in_folder_dying_with_parent(&mut command, cwd);
    command.spawn().context("starting the gate")
}

/// Starts the child in the folder `cwd` is a handle on (`fchdir`, no path resolved again),
/// and arranges `SIGKILL` for it when this thread (the supervisor's only one that spawns)
/// dies.
#[allow(unsafe_code)]
fn in_folder_dying_with_parent(command: &mut Command, cwd: &OwnedFd) {
    use std::os::fd::{AsRawFd, BorrowedFd};
    let parent = rustix::process::getpid();
    let cwd = cwd.as_raw_fd();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed: three system calls (fchdir, prctl, getppid) and an
    // `io::Error` built from a raw errno, which does not allocate. It takes no lock. `cwd` is
    // a descriptor the caller keeps open until `spawn` returns, so it is open in the child
    // (close-on-exec closes it only at the exec).
    unsafe {
        command.pre_exec(move || {
            rustix::process::fchdir(BorrowedFd::borrow_raw(cwd))?;
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            if rustix::process::getppid() != Some(parent) {
                return Err(io::Error::from_raw_os_error(
                    rustix::io::Errno::SRCH.raw_os_error(),
                ));
            }
            Ok(())
        });
    }
}

/// Names the group in the record, durably, before the gate opens.
fn record_group(state: &StateDir, record: &mut Record, leader: ProcessId) -> Result<()> {
    let start_time = proc_info::start_time(leader)?
        .ok_or_else(|| anyhow!("the gate (pid {}) is gone already", leader.get()))?;
    record.group = Some(RecordGroup {
        pgid: leader,
        leader_pid: leader,
        leader_start_time: start_time,
    });
    record.boot_id = proc_info::boot_id()?;
    record.store(state)?;
    Ok(())
}

fn hold_gate_for_tests(signals: &Signals) {
    let Some(path) = std::env::var_os(HOLD_GATE_ENV) else {
        return;
    };
    let path = PathBuf::from(path);
    while !path.exists() && !signals.pending() {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn read_once(
    pipe: &mut Option<File>,
    buf: &mut [u8],
    output: &mut OutputFile,
    state: &StateDir,
    record: &mut Record,
) -> Result<()> {
    let Some(reader) = pipe else { return Ok(()) };
    match reader.read(buf) {
        Ok(0) => *pipe = None,
        Ok(n) => output.append(&buf[..n], state, record)?,
        Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
        Err(err) => {
            tracing::warn!(%err, "reading the run's output failed");
            *pipe = None;
        }
    }
    Ok(())
}

/// Reads what is already in the pipe, without waiting for more.
fn drain(
    pipe: &mut Option<File>,
    buf: &mut [u8],
    output: &mut OutputFile,
    state: &StateDir,
    record: &mut Record,
) -> Result<()> {
    for _ in 0..256 {
        let Some(reader) = pipe.as_ref() else {
            return Ok(());
        };
        let mut fds = [PollFd::new(reader, PollFlags::IN)];
        let zero = Timespec::default();
        if !matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0) {
            return Ok(());
        }
        read_once(pipe, buf, output, state, record)?;
    }
    Ok(())
}

/// SIGTERM, SIGINT and SIGHUP, turned into a readable pipe.
struct Signals {
    read: OwnedFd,
}

impl Signals {
    fn new() -> io::Result<Self> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        for signal in [
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGHUP,
        ] {
            signal_hook::low_level::pipe::register(signal, write.try_clone()?)?;
        }
        Ok(Self { read })
    }

    fn fd(&self) -> &OwnedFd {
        &self.read
    }

    /// Whether a signal came (since the start; the pipe is never emptied).
    fn pending(&self) -> bool {
        let mut fds = [PollFd::new(&self.read, PollFlags::IN)];
        let zero = Timespec::default();
        matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0)
    }
}
