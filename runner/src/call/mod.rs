//! One foreground call: run the sandbox under its reaper, keep its output's head and tail, and
//! end it on time.
//!
//! A call thread runs [`run`]: it starts the call's reaper ([`spawn`]), which forks the sandbox
//! as the leader of a new process group and holds everything the sandbox starts (see
//! [`lnk_proc::reaper`]). The thread then waits in one `poll` on the output pipes, the input
//! pipe, the reaper's report pipe and the call's wake-up eventfd, so a single thread sees output,
//! the exit, the deadline, progress ticks and cancellation. At the timeout and on cancellation it
//! signals its own child, the reaper (a pid that cannot be reused while unreaped), which kills
//! everything of the call. The thread lives until the reaper is reaped, which the parent-death
//! signal requires: if `serve` dies, its reapers get SIGTERM and kill their calls.
//!
//! The room holds a call's parts: the program and folder it runs in are checked by the
//! `command` tool with [`crate::program`] and [`workdir`]; [`spawn`] starts its reaper, under a
//! spare started ahead ([`spares`], warm or cold as [`warmth`] says) or a new one
//! ([`reaper_launch`]); [`pipes`] and [`input`] move its bytes, [`capture`] keeps their head and tail;
//! [`render`] makes the answer; [`unreaped`] reaps what answered calls left; [`control`]
//! cancels one.

pub mod capture;
mod control;
pub mod input;
mod pipes;
pub mod reaper_launch;
pub mod render;
pub mod spares;
pub mod spawn;
pub mod unreaped;
pub mod warmth;
pub mod workdir;

pub use control::CallControl;

use std::io;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lnk_proc::net::AllowList;
use lnk_proc::reaper::{Event, REAPER_STUCK, Reaper};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::call::capture::HeadTail;
use crate::call::pipes::Running;
use crate::net::CallProxy;

/// How a sandbox process ended: `Code(n)` or `Signal(n)`, as the reaper saw it.
pub use lnk_common::status::Exit;
/// How long after the sandbox process exits the processes it left may go on before they are
/// killed, and the longest the answer waits for pipes they hold.
pub use lnk_proc::reaper::LEFTOVER_GRACE;

/// A deadline for limits so long that adding them to the clock would overflow: about 30 years.
const FAR_AWAY: Duration = Duration::from_secs(1 << 30);
/// How often a call that asked for progress hears of it.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// How long past the deadline a timeout waits for the reaper to report that the sandbox
/// started (it does within a millisecond) before it stops the call anyway: a program that
/// SIGSTOPs its reaper before the report would otherwise hold the call past its timeout.
const START_REPORT_WAIT: Duration = Duration::from_secs(1);
/// How long past the leftover grace after the sandbox's end the reaper may take to say it is
/// `done` (it does within a millisecond of killing the leftovers) before it is stopped: a
/// leftover that stops its reaper would otherwise hold the call's answer for ever.
const END_REPORT_WAIT: Duration = Duration::from_secs(1);

/// At the end, once no call runs: the spares' sandboxes stopped, and the protected paths'
/// placeholders removed when no other process still needs them
/// ([`crate::sandbox_line::protected::leave`]).
pub fn sandboxes_done() {
    spares::stop_all();
    crate::sandbox_line::protected::leave();
}

/// A finished call.
#[derive(Debug)]
pub struct CallOutcome {
    /// How the sandbox process ended.
    pub exit: Exit,
    /// Whether the call's time ran out and everything of it was killed.
    pub timed_out: bool,
    /// Whether processes of the call were still running a second after it exited (in its
    /// group, or having left it), and were killed.
    pub leftovers_killed: bool,
    /// From the start to the sandbox process's end.
    pub elapsed: Duration,
    /// Its stdout.
    pub stdout: HeadTail,
    /// Its stderr.
    pub stderr: HeadTail,
    /// What its programs did through the proxy; `None` without `--net-allow`.
    pub network: Option<Box<lnk_common::network::Network>>,
}

/// Why a call that was handed to a sandbox started ahead of it did not run: its answer says
/// so, since a cold start could do no better.
#[derive(Debug, Clone, Copy, thiserror::Error)]
pub enum NotRun {
    /// The sandbox's stub refused the working folder on its way in: it changed (a link, not a
    /// folder, or gone) after the call arrived and was checked.
    #[error("changed while the call started ({})", io::Error::from_raw_os_error(*.0))]
    FolderChanged(i32),
    /// The sandbox's stub did not take the call in time, and was killed.
    #[error(
        "the sandbox started ahead of the call did not confirm the program's start within {:?} \
         (a program stopped it, or the machine is starved), and was killed",
        lnk_proc::reaper::HAND_OFF_LIMIT
    )]
    StubStuck,
}

/// Why a call has no end of its program's to answer with.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Its arguments are too long for one command line (`E2BIG`, at the reaper's start or the
    /// sandbox's exec): nothing ran.
    #[error("the arguments are too long for one command line ({0})")]
    ArgumentsTooLong(io::Error),
    /// A sandbox started ahead of it did not run it, for this reason.
    #[error(transparent)]
    NotRun(NotRun),
    /// Its sandbox or its reaper could not be started, or failed: the server's setup.
    #[error("the sandbox could not be started ({0})")]
    Sandbox(io::Error),
}

impl From<io::Error> for CallError {
    /// A system call's failure on the way: too-long arguments when the kernel said so, else
    /// the sandbox's failure.
    fn from(err: io::Error) -> Self {
        if err.raw_os_error() == Some(rustix::io::Errno::TOOBIG.raw_os_error()) {
            CallError::ArgumentsTooLong(err)
        } else {
            CallError::Sandbox(err)
        }
    }
}

/// How a call ended.
#[derive(Debug)]
pub enum Ended {
    /// It ran to its end (or its timeout).
    Finished(CallOutcome),
    /// It was cancelled: everything of it was killed and no answer is due.
    Cancelled,
}

/// What to run and under which limits.
#[derive(Debug)]
pub struct CallSpec {
    /// The full argv, sandbox first.
    pub argv: Vec<std::ffi::OsString>,
    /// The cache folders the sandbox gets a layer of its own over.
    pub caches: Vec<std::path::PathBuf>,
    /// The descriptors the sandbox line names.
    pub passed: crate::sandbox_line::pass::Passed,
    /// What the sandbox line protects ([`crate::sandbox_line::Expanded::protected`]).
    pub protected: crate::sandbox_line::Protected,
    /// The working folder.
    pub cwd: crate::call::workdir::WorkDir,
    /// Bytes for stdin; `None` gives an empty stdin.
    pub input: Option<crate::call::input::Input>,
    /// The time limit.
    pub timeout: Duration,
    /// The output kept per stream.
    pub output: u64,
    /// The hosts its programs may reach through a proxy of its own (`--net-allow`), and how
    /// many of `argv`'s first words are its sandbox's.
    pub net: Option<(Arc<AllowList>, usize)>,
}

/// Runs one call to its end. `progress` hears the elapsed time and the bytes seen about once
/// a second.
pub fn run(
    mut spec: CallSpec,
    control: &CallControl,
    progress: Option<&mut dyn FnMut(Duration, u64)>,
) -> Result<Ended, CallError> {
    let start = Instant::now();
    // A proxy of the call's own, when it has one: started before its sandbox, ended after.
    let mut proxy = match &spec.net {
        Some((allow, words)) => Some(CallProxy::start(
            allow,
            spec.timeout.saturating_add(LEFTOVER_GRACE),
            *words,
        )?),
        None => None,
    };
    // The descriptors the line names are the reaper's once it is started: not held here for
    // the call's length (many calls at once would hold many).
    let passed = std::mem::take(&mut spec.passed);
    let mut reaper = spawn::spawn(
        &spec.argv,
        (&passed, &spec.protected),
        &spec.caches,
        spec.cwd.handle.as_fd(),
        &spec.cwd.path,
        spec.input.is_some(),
        proxy.as_ref().and_then(CallProxy::hand_off),
    )?;
    drop(passed);
    if let Some(proxy) = &mut proxy {
        proxy.handed();
    }
    let watched = watch(spec, control, progress, start, &mut reaper);
    if watched.is_err() {
        reaper.stop();
    }
    // However the watch ended, the reaper is reaped here (after it killed everything), and
    // what it may have left in its session is killed first if it did not end as it should;
    // one that said `done` (everything of the call is dead) after the call's answer.
    let reaped = match &watched {
        Ok(seen) if seen.done => {
            crate::call::unreaped::reap_after_answer(reaper);
            Ok(0)
        }
        _ => reaper.finish(),
    };
    // Everything of the call is dead: nothing uses its proxy any more.
    let network = proxy.map(|proxy| Box::new(proxy.finish()));
    let mut watched = watched?;
    // Processes of the call that outlived a reaper killed before it could kill them (a
    // leftover that killed it) were killed as it was reaped: leftovers all the same.
    if reaped? > 0 {
        watched.leftovers_killed = true;
    }
    if control.is_cancelled() {
        return Ok(Ended::Cancelled);
    }
    let Some((exit, at)) = watched.exited else {
        return Err(watched.no_exit());
    };
    Ok(Ended::Finished(CallOutcome {
        exit,
        timed_out: watched.timed_out,
        leftovers_killed: watched.leftovers_killed,
        elapsed: at.duration_since(start),
        stdout: watched.out,
        stderr: watched.err,
        network,
    }))
}

/// What the watch of a call saw.
struct WatchedCall {
    exited: Option<(Exit, Instant)>,
    timed_out: bool,
    leftovers_killed: bool,
    /// The errno of a sandbox that could not be executed, or of a reaper that could not set up.
    failed: Option<i32>,
    /// Why a warm sandbox did not run the call.
    not_run: Option<NotRun>,
    /// The reaper said everything of the call is dead and reaped: only its own exit is left.
    done: bool,
    started: bool,
    out: HeadTail,
    err: HeadTail,
}

impl WatchedCall {
    /// The error for a call whose sandbox never reported an end.
    fn no_exit(&self) -> CallError {
        if let Some(not_run) = self.not_run {
            return CallError::NotRun(not_run);
        }
        match self.failed {
            Some(errno) => io::Error::from_raw_os_error(errno).into(),
            None if self.started => CallError::Sandbox(io::Error::other(
                "the call's reaper ended before its sandbox did; what was left in the call's \
                 session was killed",
            )),
            None => CallError::Sandbox(io::Error::other(
                "the call's reaper ended before it started the sandbox",
            )),
        }
    }
}

/// Runs a started call to its end: the loop over its pipes, its reports, its time and its
/// cancellation. Returns once the reaper has ended and the pipes are closed (or a second after
/// the sandbox's exit, for pipes that something else holds).
fn watch(
    spec: CallSpec,
    control: &CallControl,
    mut progress: Option<&mut dyn FnMut(Duration, u64)>,
    start: Instant,
    reaper: &mut Reaper,
) -> io::Result<WatchedCall> {
    let mut call = Running::open(spec.input, spec.output, reaper)?;
    // A limit too far away to count is as good as none (it cannot overflow the clock).
    let deadline = start.checked_add(spec.timeout).unwrap_or(start + FAR_AWAY);
    let mut next_progress = start + PROGRESS_EVERY;
    let mut seen = WatchedCall {
        exited: None,
        timed_out: false,
        leftovers_killed: false,
        failed: None,
        not_run: None,
        done: false,
        started: false,
        out: HeadTail::new(0),
        err: HeadTail::new(0),
    };
    let mut phase = CallPhase::Running;
    loop {
        let now = Instant::now();
        let Some(next) = next_phase(phase, now, &mut seen, control, deadline, reaper, &mut call)
        else {
            break;
        };
        phase = next;
        let wake_at = next_progress.min(match phase {
            CallPhase::Running if let Some((_, at)) = seen.exited => {
                at + LEFTOVER_GRACE + END_REPORT_WAIT
            }
            CallPhase::Running if seen.exited.is_none() && seen.started => deadline,
            CallPhase::Running if seen.exited.is_none() => deadline + START_REPORT_WAIT,
            CallPhase::Stopping { since } => since + REAPER_STUCK,
            CallPhase::Draining { until } => until,
            CallPhase::Running | CallPhase::ReaperKilled => next_progress,
        });
        let mut fds = Vec::with_capacity(5);
        let slots = call.poll_fds(&mut fds);
        let draining = matches!(phase, CallPhase::Draining { .. });
        let reports_slot = (!draining).then(|| {
            fds.push(PollFd::new(&reaper.reports, PollFlags::IN));
            fds.len() - 1
        });
        fds.push(PollFd::new(&control.wake, PollFlags::IN));
        let wait = wake_at.saturating_duration_since(now);
        // A wait too long for a timespec (it cannot happen: waits are bounded) waits without end.
        let timeout = Timespec::try_from(wait).ok();
        match poll(&mut fds, timeout.as_ref()) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
        let ready: Vec<bool> = fds.iter().map(|fd| !fd.revents().is_empty()).collect();
        let reports_ready = reports_slot.is_some_and(|slot| ready[slot]);
        drop(fds);
        call.service(&slots, &ready);
        if ready.last().copied().unwrap_or(false) {
            let mut counter = [0u8; 8];
            let _ = rustix::io::read(&control.wake, &mut counter);
        }
        if reports_ready && heard(reaper, &mut seen)? {
            let ended_at = Instant::now();
            let until = seen
                .exited
                .map_or(ended_at, |(_, at)| (at + LEFTOVER_GRACE).max(ended_at));
            phase = CallPhase::Draining { until };
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
    seen.out = call.out;
    seen.err = call.err;
    Ok(seen)
}

/// The call's next phase at `now`: a cancel or the timeout asks the reaper to stop, once; a
/// reaper that does not end in time after it is killed; once it ended, the pipes are read
/// until they close or their time is up. `None`: the call is over.
fn next_phase(
    phase: CallPhase,
    now: Instant,
    seen: &mut WatchedCall,
    control: &CallControl,
    deadline: Instant,
    reaper: &mut Reaper,
    call: &mut Running,
) -> Option<CallPhase> {
    Some(match phase {
        CallPhase::Running => {
            // A timeout waits for the sandbox to have started (a matter of a millisecond), so
            // that what it reports is the sandbox's own end, killed.
            let time_up = seen.exited.is_none()
                && ((seen.started && now >= deadline) || now >= deadline + START_REPORT_WAIT);
            let end_overdue = seen
                .exited
                .is_some_and(|(_, at)| now >= at + LEFTOVER_GRACE + END_REPORT_WAIT);
            if end_overdue && !control.is_cancelled() {
                tracing::warn!("a call's reaper did not end after its sandbox did; stopping it");
            }
            if control.is_cancelled() || time_up || end_overdue {
                seen.timed_out = time_up && !control.is_cancelled();
                reaper.stop();
                CallPhase::Stopping { since: now }
            } else {
                CallPhase::Running
            }
        }
        CallPhase::Stopping { since } if now >= since + REAPER_STUCK => {
            // Once: its end comes through its report pipe, which the poll waits on.
            tracing::warn!("a call's reaper did not end after it was asked to; killing it");
            reaper.kill();
            CallPhase::ReaperKilled
        }
        CallPhase::Draining { until } => {
            // The reaper ended: everything it held is dead. Pipes still open are held by
            // something that escaped it; they get until a second after the sandbox's exit.
            if call.pipes_closed() {
                return None;
            }
            if now >= until {
                call.drain_available();
                return None;
            }
            CallPhase::Draining { until }
        }
        other => other,
    })
}

/// What the reaper reported: into `seen`; whether it is over (`done`, or its report pipe
/// closed).
fn heard(reaper: &mut Reaper, seen: &mut WatchedCall) -> io::Result<bool> {
    for event in reaper.reports.read()? {
        match event {
            // A spare's, read before it was handed the call.
            Event::Ready => {}
            Event::Started(_) => seen.started = true,
            Event::Exited(exit) => seen.exited = Some((exit, Instant::now())),
            Event::Leftovers => seen.leftovers_killed = true,
            Event::ExecFailed(errno) | Event::Failed(errno) => seen.failed = Some(errno),
            Event::FolderRefused(errno) => seen.not_run = Some(NotRun::FolderChanged(errno)),
            Event::StubStuck => seen.not_run = Some(NotRun::StubStuck),
            Event::Done => seen.done = true,
        }
    }
    Ok(seen.done || reaper.reports.ended())
}

/// Where a call stands with its reaper.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallPhase {
    /// The call runs (its sandbox may still be starting).
    Running,
    /// The call was cancelled or timed out at `since`, and its reaper asked to stop it.
    Stopping { since: Instant },
    /// The reaper did not end in time after it was asked to, and was killed.
    ReaperKilled,
    /// The reaper ended (everything it held is dead); pipes something else still holds are
    /// read until `until`: a second after the sandbox's exit.
    Draining { until: Instant },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_long_arguments_are_told_apart_from_a_sandbox_failure() {
        let too_long = CallError::from(io::Error::from_raw_os_error(libc::E2BIG));
        assert!(
            matches!(too_long, CallError::ArgumentsTooLong(_)),
            "{too_long:?}"
        );
        let missing = CallError::from(io::Error::from_raw_os_error(libc::ENOENT));
        assert!(matches!(missing, CallError::Sandbox(_)), "{missing:?}");
        let stuck = WatchedCall {
            exited: None,
            timed_out: false,
            leftovers_killed: false,
            failed: Some(libc::E2BIG),
            not_run: Some(NotRun::StubStuck),
            done: false,
            started: false,
            out: HeadTail::new(0),
            err: HeadTail::new(0),
        };
        assert!(matches!(
            stuck.no_exit(),
            CallError::NotRun(NotRun::StubStuck)
        ));
    }
}
