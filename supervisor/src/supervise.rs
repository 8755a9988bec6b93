//! `supervise <id> --state <dir>`: one background run's supervisor, for the run's whole life.
//!
//! In order:
//! 1. block the stop signal and open its signalfd ([`lnk_proc::run::wake`]), before anything
//!    else; take over the run's lock from stdin (`start` locked it and handed it over) and hold it
//!    until exit — the kernel frees it however this process dies, which is how a sweep knows;
//!    become a child subreaper, so that what a killed gate leaves is reparented here;
//! 2. open the output file under the files folder (through a folder handle, no links);
//! 3. start the run's gate ([`crate::gate`]), the run's reaper, as the leader of a new session
//!    and process group, its stdout and stderr on one pipe;
//! 4. write the group and the session (the gate's pid, its start time, the boot id) and this
//!    supervisor (its pid and start time, which a stop signals) into the record, then open the
//!    gate — so no process of the run exists that the record does not
//!    name; the gate forks the sandbox, whose own group is recorded as soon as the gate reports it;
//! 5. copy the pipe into the output file, rotating at the cap, and sleep in one `poll` until
//!    something happens ([`watch`]); at the timeout, when `<id>.stop` is asked for (looked at
//!    once, then at each stop signal), or on
//!    SIGTERM/SIGINT/SIGHUP (then the run is `lost`), ask the gate to stop the run: SIGTERM to
//!    it all, SIGKILL two seconds later;
//! 6. once the gate has ended (it kills leftovers a second after the sandbox's end), kill
//!    whatever it left reparented here (a gate that was killed), and read the rest of the pipe;
//!    An interactive run's stdin channel is in that same `poll` ([`stdin`]);
//! 7. record the end, then tell it (when the run has a way in).

mod proxy;
mod quit;
mod stdin;
mod tty;
mod watch;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use lnk_common::ProcessId;
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::lock::LockGuard;
use lnk_common::record::{
    FileId, Group as RecordGroup, Record, SandboxGroup, Supervisor as RecordSupervisor,
};
use lnk_common::safe_open::FilesDir;
use lnk_common::status::Status;
use lnk_common::time::UnixMs;
use lnk_proc::proc_info;
use lnk_proc::reaper::{self, Reaper};
use lnk_proc::run::wake::WakeListener;
use rustix::event::{PollFd, PollFlags, poll};
use rustix::fs::inotify::{self, CreateFlags, WatchFlags};
use rustix::pipe::{PipeFlags, pipe_with};

use crate::gate::OPEN;
use crate::output::OutputFile;
use crate::tell;
use quit::Quit;
use watch::{Ending, Run};

/// A deadline for limits so long that adding them to the clock would overflow: about 30 years.
const FAR_AWAY: Duration = Duration::from_secs(1 << 30);
/// The pipe size asked for, so a fast writer needs fewer wake-ups.
const PIPE_SIZE: usize = 1024 * 1024;

/// Supervises run `id` of `state` to its end; with `input`, the run's input waits on fd 3.
pub fn run(id: &str, state: PathBuf, input: bool) -> Result<()> {
    // First: a stop signal from now on waits in the descriptor (the record names this process
    // only later, so none can come before).
    let stop = WakeListener::new().context("listening for a stop")?;
    let input = input.then(stdin::take_input).transpose()?;
    let id = RunId::parse(id)?;
    let state = StateDir::open(&state)?;
    let lock =
        LockGuard::adopt_stdin(&state, &id).context("taking over the run's lock from stdin")?;
    let quit = Quit::new().context("setting up SIGTERM, SIGINT and SIGHUP")?;
    reaper::become_subreaper().context("becoming a child subreaper")?;
    let mut record = Record::load(&state, &id)?;
    if !record.status.is_running() {
        tracing::info!(%id, "the run has ended already; nothing to supervise");
        return Ok(());
    }
    let result = supervise(&state, &mut record, &quit, &stop, input);
    // Whether the end is in the record (else it may be in the lock file, for a sweep).
    let mut end_stored = result.is_ok();
    if let Err(err) = &result {
        tracing::error!(%id, "{err:#}");
        if record.status.is_running() {
            record.status = Status::Lost {
                ended_at_ms: UnixMs::now(),
                exit: None,
            };
            // The agent is told why (the log is not its to read).
            if record.failure.is_none() {
                record.failure = Some(format!("its supervisor failed: {err:#}"));
            }
            record
                .store_ended(&state)
                .context("recording the run lost")?;
            lnk_common::index::file_end(&state, &record);
            end_stored = true;
        }
    }
    // A run ended by a signal to its supervisor is left untold: whoever stops supervisors
    // (a shutdown) is not the moment to talk; a later sweep tells it.
    if !quit.asked() {
        tell::tell_if_due(&state, &mut record);
    }
    if end_stored {
        // The room kept for a full disk is given back now that the end is stored, so that an
        // ended run holds no block but its record and its output (removing a file frees its
        // blocks, which some disks make slow).
        lock.release_reserve();
        state.trim_log(&id);
    }
    drop(lock);
    result
}

fn supervise(
    state: &StateDir,
    record: &mut Record,
    quit: &Quit,
    stop: &WakeListener,
    input: Option<std::fs::File>,
) -> Result<()> {
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
    // The run's output comes through a pipe, or, on a terminal, from the terminal's master.
    let terminal = match record.launch.stdin.tty() {
        Some(size) => Some(tty::Terminal::open(size)?),
        None => None,
    };
    let (out_read, out_write) = match &terminal {
        Some(terminal) => (terminal.master.try_clone()?, terminal.slave.try_clone()?),
        None => {
            let (read, write) = pipe_with(PipeFlags::CLOEXEC)?;
            let _ = rustix::pipe::fcntl_setpipe_size(&read, PIPE_SIZE);
            (read, write)
        }
    };
    // The pipe's identity proves a process the run's to a sweep once the gate is gone; a
    // terminal's does not (its number is soon another terminal's), so a run on one names none.
    let output_pipe = match &terminal {
        Some(_) => None,
        None => Some(
            rustix::fs::fstat(&out_read)
                .map(|stat| FileId {
                    dev: stat.st_dev,
                    ino: stat.st_ino,
                })
                .context("looking at the run's output pipe")?,
        ),
    };
    // Removed (its channel too) whenever this returns.
    let mut run_stdin = stdin::RunStdin::set_up(state, record, input, terminal.as_ref())?;
    // The run's proxy, when it has one: held here for the run's whole life.
    let (proxy, sandbox_end) = match proxy::start(record)? {
        Some((proxy, sandbox_end)) => (Some(proxy), Some(sandbox_end)),
        None => (None, None),
    };
    let mut gate = crate::gate::start(
        record,
        &cwd,
        gate_read,
        out_write,
        run_stdin.for_gate.take(),
        sandbox_end,
    )?;
    // The run holds its side of the terminal now; once it lets go, the master reads its end.
    drop(terminal);
    let started = Instant::now();
    if let Err(err) = record_group(state, record, &gate, output_pipe) {
        // The gate was not opened: closing its pipe ends it, and nothing ran.
        drop(gate_write);
        end_gate(&mut gate);
        return Err(err);
    }
    hold_gate_for_tests(quit);
    if quit.asked() {
        // Told to quit before the run began: the gate is closed unopened below, so the gate
        // exits and nothing runs.
        tracing::info!(id = %record.id, "a signal came before the gate opened; nothing runs");
    } else if let Err(err) = rustix::io::write(&gate_write, &[OPEN]) {
        // The gate died before it could be opened: its end is seen below.
        tracing::warn!(%err, "the gate could not be opened");
    }
    drop(gate_write);

    // A limit too far away to count is as good as none (it cannot overflow the clock).
    let deadline = started
        .checked_add(record.launch.limits.timeout())
        .unwrap_or(started + FAR_AWAY);
    let sandbox_exe = lnk_proc::run::signal::sandbox_exe(record);
    let watched = Run {
        state,
        record: &mut *record,
        quit,
        gate: &mut gate,
        stop,
        output: &mut output,
        pipe: Some(std::fs::File::from(out_read)),
        deadline,
        stdin: &mut run_stdin,
        sandbox_exe,
    }
    .watch();
    // Nothing reads the run's stdin any more: its channel goes now, so that a `write` from
    // here on finds none and reads the end in the record.
    run_stdin.end();
    if watched.is_err() {
        // Whatever failed, nothing of the run may go on unsupervised.
        gate.stop();
    }
    end_gate(&mut gate);
    // Everything of the run is dead: its proxy's figures are whole.
    record.network = proxy.map(lnk_proc::net::Proxy::finish);
    let watched = watched?;

    let ended_at_ms = UnixMs::now();
    let exit = watched.exit;
    record.status = match (&watched.failure, watched.ending) {
        (Some(_), _) => Status::Lost {
            ended_at_ms,
            exit: None,
        },
        (None, Ending::ByItself) => match exit {
            Some(exit) => Status::Exited { ended_at_ms, exit },
            // The gate ended without the sandbox's end: it was killed.
            None => Status::Lost {
                ended_at_ms,
                exit: None,
            },
        },
        (None, Ending::TimedOut) => Status::TimedOut { ended_at_ms, exit },
        (None, Ending::Stopped) => Status::Stopped { ended_at_ms, exit },
        (None, Ending::Lost) => Status::Lost { ended_at_ms, exit },
    };
    if let Some(failure) = &watched.failure {
        // The agent reads the output file: the reason goes there too.
        let line = format!("lnk-link-supervise: {failure}\n");
        if let Err(err) = output.append(line.as_bytes(), state, record) {
            tracing::warn!("{err:#}");
        }
    }
    // Output dropped for want of room is said in the output file if there is room by now.
    output.finish(state, record);
    record.failure = watched.failure;
    record.store_ended(state)?;
    lnk_common::index::file_end(state, record);
    tracing::info!(id = %record.id, state = record.status.state().as_str(), "run ended");
    Ok(())
}

/// Reaps the gate (it has ended, or ends now that it was asked or its pipe closed), then kills
/// whatever was reparented here: the processes of a gate that was killed.
fn end_gate(gate: &mut Reaper) {
    match gate.child.wait() {
        Ok(status) if !status.success() => {
            tracing::info!(%status, "the gate ended so");
        }
        Ok(_) => {}
        Err(err) => tracing::warn!(%err, "waiting for the gate"),
    }
    match reaper::kill_all_children() {
        Ok(0) => {}
        Ok(killed) => {
            tracing::warn!(
                killed,
                "killed processes of the run that its gate left behind"
            )
        }
        Err(err) => tracing::warn!(%err, "killing what the gate left"),
    }
}

/// Names the group, the session and this supervisor in the record, durably, before the gate
/// opens. From this write on, a stop signals this process; one asked before is seen by the
/// watch's first look at `<id>.stop`.
/// `output_pipe` is the identity of the pipe the gate and the run write their output to (none
/// for a run on a terminal): with the gate gone, a sweep signals only processes that hold it.
fn record_group(
    state: &StateDir,
    record: &mut Record,
    gate: &Reaper,
    output_pipe: Option<FileId>,
) -> Result<()> {
    let pid = gate.pid().ok_or_else(|| anyhow!("the gate has no pid"))?;
    let leader = ProcessId::new(i64::from(pid.as_raw_nonzero().get())).context("the gate's pid")?;
    let start_time = proc_info::start_time(leader)?
        .ok_or_else(|| anyhow!("the gate (pid {}) is gone already", leader.get()))?;
    record.group = Some(RecordGroup {
        pgid: leader,
        leader_pid: leader,
        leader_start_time: start_time,
    });
    record.sandbox = Some(SandboxGroup {
        session: leader,
        pgid: None,
        output_pipe,
    });
    let me = ProcessId::this()?;
    let my_start = proc_info::start_time(me)?
        .ok_or_else(|| anyhow!("this supervisor (pid {}) has no start time", me.get()))?;
    record.supervisor = Some(RecordSupervisor {
        pid: me,
        start_time: my_start,
    });
    record.boot_id = proc_info::boot_id()?;
    record.store(state)?;
    Ok(())
}

/// The test hook `LNK_SUPERVISE_HOLD_GATE` ([`lnk_proc::reaper::hold::gate_path`], only in a
/// build with the `test-hooks` feature): waits, without polling, until its path exists or a
/// signal comes.
fn hold_gate_for_tests(quit: &Quit) {
    let Some(path) = lnk_proc::reaper::hold::gate_path() else {
        return;
    };
    if let Err(err) = wait_for_file(&path, quit) {
        tracing::warn!(%err, path = %path.display(), "the gate's hold could not be watched");
    }
}

fn wait_for_file(path: &Path, quit: &Quit) -> std::io::Result<()> {
    let folder = path.parent().unwrap_or(Path::new("/"));
    let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK)?;
    let events = WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::CLOSE_WRITE;
    inotify::add_watch(&inotify, folder, events)?;
    // Looked at after the watch is set, so that a file made just before is not missed.
    let quit_fd = quit.fd();
    while !path.exists() && !quit.asked() {
        let mut fds = [
            PollFd::new(&inotify, PollFlags::IN),
            PollFd::new(&quit_fd, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
        let mut buf = [0u8; 1024];
        while matches!(rustix::io::read(&inotify, &mut buf), Ok(n) if n > 0) {}
    }
    Ok(())
}
