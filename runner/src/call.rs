//! One foreground call: run the sandbox, keep its output's head and tail, and end it on time.
//!
//! A call thread runs [`run`]: it spawns the sandbox as the leader of a new process group and
//! then waits in one `poll` on the output pipes, the input pipe, a pidfd of the leader and the
//! call's wake-up eventfd, so a single thread sees output, the exit, the deadline, progress
//! ticks and cancellation. The thread lives until the leader is reaped, which the
//! parent-death signal requires.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};
use rustix::process::{Pid, PidfdFlags, Signal, kill_process_group, pidfd_open};

use crate::capture::HeadTail;
use crate::watchdog::Watchdog;
use crate::{group, spawn};

/// How long after the sandbox process exits the processes it left in its group may go on
/// before they are killed, and the longest the answer waits for pipes they hold.
pub const LEFTOVER_GRACE: Duration = Duration::from_secs(1);
/// A deadline for limits so long that adding them to the clock would overflow: about 30 years.
const FAR_AWAY: Duration = Duration::from_secs(1 << 30);
/// How often a call that asked for progress hears of it.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// While the leader is gone, the pipes are closed and the group still has members, how often
/// the group is looked at again to notice that it emptied.
const GROUP_RECHECK: Duration = Duration::from_millis(20);
/// Bytes read from a pipe at a time.
const READ_CHUNK: usize = 128 * 1024;
/// Reads from one pipe per wake-up at most.
const READS_PER_WAKE: usize = 16;
/// The pipe size asked for, so that a fast writer needs fewer wake-ups.
const PIPE_SIZE: usize = 1024 * 1024;

/// What another thread holds to cancel a call in flight.
#[derive(Debug)]
pub struct CallControl {
    cancelled: AtomicBool,
    wake: OwnedFd,
}

impl CallControl {
    /// A control with its wake-up eventfd.
    pub fn new() -> io::Result<Self> {
        let wake = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(Self {
            cancelled: AtomicBool::new(false),
            wake,
        })
    }

    /// Asks the call to kill its group at once and end without an answer.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
        // A full counter (impossible here) or a closed fd only means a wake-up is pending.
        let _ = rustix::io::write(&self.wake, &1u64.to_ne_bytes());
    }

    /// Whether [`CallControl::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }
}

/// How the sandbox process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
}

impl From<ExitStatus> for Exit {
    fn from(status: ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            // Neither: a stopped or continued status, which `wait` does not report here.
            (None, None) => Exit::Signal(0),
        }
    }
}

/// A finished call.
#[derive(Debug)]
pub struct Outcome {
    /// How the sandbox process ended.
    pub exit: Exit,
    /// Whether the call's time ran out and its group was killed.
    pub timed_out: bool,
    /// Whether processes were still in its group a second after it exited, and were killed.
    pub leftovers_killed: bool,
    /// From the start to the sandbox process's end.
    pub elapsed: Duration,
    /// Its stdout.
    pub stdout: HeadTail,
    /// Its stderr.
    pub stderr: HeadTail,
}

/// How a call ended.
#[derive(Debug)]
pub enum Ended {
    /// It ran to its end (or its timeout).
    Finished(Outcome),
    /// It was cancelled: its group was killed and no answer is due.
    Cancelled,
}

/// What to run and under which limits.
#[derive(Debug)]
pub struct CallSpec {
    /// The full argv, sandbox first.
    pub argv: Vec<std::ffi::OsString>,
    /// The working folder.
    pub cwd: crate::workdir::WorkDir,
    /// Bytes for stdin; `None` gives an empty stdin.
    pub input: Option<Vec<u8>>,
    /// The time limit.
    pub timeout: Duration,
    /// The output kept per stream.
    pub output: u64,
}

/// Runs one call to its end. `progress` hears the elapsed time and the bytes seen about once
/// a second.
pub fn run(
    spec: CallSpec,
    control: &CallControl,
    watchdog: Option<&Watchdog>,
    progress: Option<&mut dyn FnMut(Duration, u64)>,
) -> io::Result<Ended> {
    let start = Instant::now();
    let mut child = spawn::spawn(&spec.argv, spec.cwd.handle.as_fd(), spec.input.is_some())?;
    let group = Pid::from_child(&child);
    if let Some(watchdog) = watchdog {
        watchdog.watch(group);
    }
    let ended = supervise(spec, control, progress, start, &mut child, group);
    if let Some(watchdog) = watchdog {
        watchdog.forget(group);
    }
    ended
}

/// Runs a started call to its end: the loop over its pipes, its exit, its time and its group.
fn supervise(
    spec: CallSpec,
    control: &CallControl,
    mut progress: Option<&mut dyn FnMut(Duration, u64)>,
    start: Instant,
    child: &mut std::process::Child,
    group: Pid,
) -> io::Result<Ended> {
    let pidfd = match pidfd_open(group, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(err) => {
            let _ = kill_process_group(group, Signal::KILL);
            let _ = child.wait();
            return Err(err.into());
        }
    };
    let mut call = Running {
        stdout: child.stdout.take(),
        stderr: child.stderr.take(),
        stdin: child.stdin.take(),
        input: spec.input.unwrap_or_default(),
        input_at: 0,
        out: HeadTail::new(spec.output),
        err: HeadTail::new(spec.output),
        buf: vec![0; READ_CHUNK],
    };
    for pipe in [
        call.stdout.as_ref().map(|p| p.as_fd()),
        call.stderr.as_ref().map(|p| p.as_fd()),
    ]
    .into_iter()
    .flatten()
    {
        // A larger pipe only saves wake-ups; the default size works too.
        let _ = rustix::pipe::fcntl_setpipe_size(pipe, PIPE_SIZE);
        // Non-blocking, so a wake-up reads all that is there before polling again.
        rustix::io::ioctl_fionbio(pipe, true)?;
    }
    if let Some(stdin) = &call.stdin {
        rustix::io::ioctl_fionbio(stdin, true)?;
    }

    // A limit too far away to count is as good as none (it cannot overflow the clock).
    let deadline = start.checked_add(spec.timeout).unwrap_or(start + FAR_AWAY);
    let mut next_progress = start + PROGRESS_EVERY;
    let mut exited: Option<(Exit, Instant)> = None;
    let mut killed = false;
    let mut timed_out = false;
    let mut leftovers_killed = false;
    let mut group_empty = false;
    loop {
        let now = Instant::now();
        if !killed && (control.is_cancelled() || (exited.is_none() && now >= deadline)) {
            timed_out = !control.is_cancelled();
            killed = true;
            let _ = kill_process_group(group, Signal::KILL);
        }
        if let Some((_, at)) = exited {
            // The leader is reaped, so the group's id stays ours only while members hold it.
            if !group_empty {
                group_empty = !group::has_running_members(group);
            }
            if group_empty && call.pipes_closed() {
                break;
            }
            if now >= at + LEFTOVER_GRACE {
                if !group_empty && kill_process_group(group, Signal::KILL).is_ok() && !killed {
                    leftovers_killed = true;
                }
                call.drain_available();
                break;
            }
        }

        let mut wake_at = next_progress;
        match exited {
            None if !killed => wake_at = wake_at.min(deadline),
            None => {}
            Some((_, at)) => {
                wake_at = wake_at.min(at + LEFTOVER_GRACE);
                if call.pipes_closed() {
                    wake_at = wake_at.min(now + GROUP_RECHECK);
                }
            }
        }
        let mut fds = Vec::with_capacity(5);
        let slots = call.poll_fds(&mut fds);
        let pidfd_slot = exited.is_none().then(|| {
            fds.push(PollFd::new(&pidfd, PollFlags::IN));
            fds.len() - 1
        });
        fds.push(PollFd::new(&control.wake, PollFlags::IN));
        let wait = wake_at.saturating_duration_since(now);
        // A wait too long for a timespec (it cannot happen: waits are bounded) waits without end.
        let timeout = Timespec::try_from(wait).ok();
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(err) => {
                let _ = kill_process_group(group, Signal::KILL);
                let _ = child.wait();
                return Err(err.into());
            }
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        let leader_done = pidfd_slot.is_some_and(|slot| ready[slot]);
        drop(fds);
        call.service(&slots, &ready);
        if ready.last().copied().unwrap_or(false) {
            let mut counter = [0u8; 8];
            let _ = rustix::io::read(&control.wake, &mut counter);
        }
        if leader_done && let Some(status) = child.try_wait()? {
            exited = Some((Exit::from(status), Instant::now()));
        }
        let now = Instant::now();
        if let Some(report) = progress.as_deref_mut()
            && now >= next_progress
            && !control.is_cancelled()
        {
            report(start.elapsed(), call.out.total() + call.err.total());
            // Ticks missed while this thread could not run are skipped, not caught up.
            while next_progress <= now {
                next_progress += PROGRESS_EVERY;
            }
        }
    }
    if control.is_cancelled() {
        return Ok(Ended::Cancelled);
    }
    let (exit, at) = match exited {
        Some(done) => done,
        // The loop ends only after the leader was reaped.
        None => (Exit::from(child.wait()?), Instant::now()),
    };
    Ok(Ended::Finished(Outcome {
        exit,
        timed_out,
        leftovers_killed,
        elapsed: at.duration_since(start),
        stdout: call.out,
        stderr: call.err,
    }))
}

/// Which entry of the poll set is which pipe.
#[derive(Debug, Default)]
struct Slots {
    stdout: Option<usize>,
    stderr: Option<usize>,
    stdin: Option<usize>,
}

/// The pipes of a running call and what came through them.
struct Running {
    stdout: Option<ChildStdout>,
    stderr: Option<ChildStderr>,
    stdin: Option<ChildStdin>,
    input: Vec<u8>,
    input_at: usize,
    out: HeadTail,
    err: HeadTail,
    buf: Vec<u8>,
}

impl Running {
    fn pipes_closed(&self) -> bool {
        self.stdout.is_none() && self.stderr.is_none()
    }

    fn poll_fds<'a>(&'a self, fds: &mut Vec<PollFd<'a>>) -> Slots {
        let mut slots = Slots::default();
        if let Some(pipe) = &self.stdout {
            fds.push(PollFd::new(pipe, PollFlags::IN));
            slots.stdout = Some(fds.len() - 1);
        }
        if let Some(pipe) = &self.stderr {
            fds.push(PollFd::new(pipe, PollFlags::IN));
            slots.stderr = Some(fds.len() - 1);
        }
        if let Some(pipe) = &self.stdin {
            fds.push(PollFd::new(pipe, PollFlags::OUT));
            slots.stdin = Some(fds.len() - 1);
        }
        slots
    }

    /// Reads what is ready and writes input where there is room.
    fn service(&mut self, slots: &Slots, ready: &[bool]) {
        let is_ready = |slot: Option<usize>| slot.is_some_and(|i| ready[i]);
        if is_ready(slots.stdout) {
            read_into(&mut self.stdout, &mut self.out, &mut self.buf);
        }
        if is_ready(slots.stderr) {
            read_into(&mut self.stderr, &mut self.err, &mut self.buf);
        }
        if is_ready(slots.stdin) {
            self.feed_input();
        }
        if self.stdin.is_some() && self.input_at >= self.input.len() {
            self.stdin = None; // all written: close it, so the program sees the end
        }
    }

    fn feed_input(&mut self) {
        let Some(pipe) = &mut self.stdin else { return };
        match pipe.write(&self.input[self.input_at..]) {
            Ok(n) => self.input_at += n,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            // The program closed its stdin (EPIPE) or the pipe failed: stop feeding it.
            Err(_) => self.stdin = None,
        }
    }

    /// Reads whatever is already in the pipes, without waiting for more.
    fn drain_available(&mut self) {
        for _ in 0..64 {
            let mut fds = Vec::with_capacity(2);
            let slots = self.poll_fds(&mut fds);
            if fds.is_empty() {
                return;
            }
            let zero = Timespec::default();
            if !matches!(poll(&mut fds, Some(&zero)), Ok(n) if n > 0) {
                return;
            }
            let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
            drop(fds);
            self.service(
                &Slots {
                    stdin: None,
                    ..slots
                },
                &ready,
            );
        }
    }
}

/// Reads what the pipe holds, a bounded number of chunks, so one fast stream cannot starve
/// the other or the deadline.
fn read_into<P: Read>(pipe: &mut Option<P>, kept: &mut HeadTail, buf: &mut [u8]) {
    for _ in 0..READS_PER_WAKE {
        let Some(reader) = pipe else { return };
        match reader.read(buf) {
            Ok(0) => *pipe = None,
            Ok(n) => kept.push(&buf[..n]),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
            Err(_) => *pipe = None,
        }
    }
}
