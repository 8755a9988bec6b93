//! What is done for a run whose supervisor is gone: its lock is free, its record still says
//! `running`. The run becomes `lost`, and what is left of it is killed — but only what is surely
//! its own:
//!
//! - nothing at all when the record is from another boot, or when the recorded leader's pid
//!   now belongs to another process (another start time);
//! - when the leader (the run's gate) is still the recorded process, it is sent SIGTERM through
//!   a pidfd and given a few seconds to end: a gate that lives stops its run (SIGTERM, SIGKILL
//!   two seconds later) and exits. It usually has begun already: its supervisor's death sent it
//!   SIGTERM;
//! - then each process still left is signalled only if `/proc` proves it the run's, started no
//!   earlier than the gate **and** either in the recorded session and started before a moment
//!   at which the gate was seen alive, or a child of the gate while it lives (a child
//!   subreaper: what leaves the run's session is reparented to it), or holding the run's output
//!   pipe (any descriptor of a process of the session; the stdout or stderr of any other,
//!   which is where the run put it, so that looking costs two `stat`s a process). Its group
//!   does not matter, so a sandbox whose own group was not recorded yet (its supervisor died as
//!   it started) is found all the same; and neither does its session for the pipe: a
//!   sandbox's process that made a session of its own (bubblewrap's `--new-session`, `setsid`)
//!   is found by the stdout and stderr the run gave it. That is what
//!   finds a sandbox whose gate is gone while it was still being made: bubblewrap's process
//!   inside its PID namespace gets its own `--die-with-parent` only once its namespaces are
//!   made, so the death of the process outside does not end it before then, and it runs on in
//!   a session of its own;
//! - a gate that is still alive then (it did not end within the wait) is killed last, once
//!   nothing of the run is left under it: killed first, it would hand what it holds to init.
//!
//! Why those two. Linux gives a pid number to a new process only once no process uses it as its
//! pid, its group or its session. So while the gate (pid `S`, the session's leader) is alive, or
//! any process is still in session `S`, nobody else can make a session `S`. A process of
//! session `S` that started before a moment at which the gate was seen alive inherited the
//! session from the run (a session can be entered only by being born in it; `setsid` makes one
//! whose id is the caller's own pid). Once the gate is gone, though, the run's session and groups
//! may have ended and their ids been taken by another program that called `setsid` (every daemon
//! does): "in the session and the group, started after the run" is then met by that program's
//! processes too. What an unrelated process does not have by accident is the run's output pipe
//! (its identity is in the record): the run's processes hold it as their stdout and stderr unless
//! they closed it. A process that matches the session and the time but holds no such pipe is
//! **left running**, said in the sweep's log and in the record's `left_running`: a
//! leftover that is left is better than another program's process killed.
//!
//! A group id whose leader is gone is never killed wholesale. Records of older gates (no
//! `sandbox` field: the gate became the sandbox by `exec`) name no session; their group is
//! killed only while its recorded leader still holds its id.

use std::os::fd::OwnedFd;
use std::time::Duration;

use lnk_common::layout::StateDir;
use lnk_common::lock::LockGuard;
use lnk_common::record::{FileId, Group, Record};
use lnk_common::status::Status;
use lnk_common::time::UnixMs;
use lnk_proc::proc_info::{self, Liveness, Stat};
use lnk_proc::reaper::kill_proven;
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, Signal, kill_process_group, pidfd_open, pidfd_send_signal};

/// How long a living gate is given to stop its run and end: its stop grace, and some.
const LEADER_WAIT: Duration = Duration::from_secs(5);
/// The most descriptors of one process looked at for the run's output pipe.
const MAX_FDS_LOOKED_AT: usize = 4096;

/// What [`kill_run`] did.
#[derive(Debug, Default)]
pub struct Reclaimed {
    /// Whether anything was signalled.
    pub signalled: bool,
    /// Processes that look like the run's (in its session, started after its gate) but that
    /// nothing proves its own: left running.
    pub left: Vec<i32>,
}

impl Reclaimed {
    /// What is said of [`Reclaimed::left`] in the log and the record, if anything was left.
    pub fn left_running(&self) -> Option<String> {
        if self.left.is_empty() {
            return None;
        }
        let pids: Vec<String> = self.left.iter().map(i32::to_string).collect();
        Some(format!(
            "{} process(es) of the run's session were left running (pids {}): its gate was \
             gone, and none holds the run's output pipe, so nothing proves them the run's rather \
             than another program's that took the session's id after pid reuse",
            self.left.len(),
            pids.join(", ")
        ))
    }
}

/// Marks a running record `lost` (the caller holds its lock, as `_lock` proves) and kills what
/// is left of the run when it is surely its own. Whether anything was signalled.
pub fn mark_lost(state: &StateDir, record: &mut Record, _lock: &LockGuard) -> anyhow::Result<bool> {
    let reclaimed = kill_run(record);
    // An interactive run's stdin channel, which its supervisor would have removed.
    let channel = state.stdin_channel(&record.id);
    if let Err(err) = std::fs::remove_file(&channel)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(id = %record.id, "removing {}: {err}", channel.display());
    }
    record.status = Status::Lost {
        ended_at_ms: UnixMs::now(),
        exit: None,
    };
    if let Some(left) = reclaimed.left_running() {
        record.left_running = Some(left);
    }
    record.store(state)?;
    lnk_common::index::file_end(state, record);
    tracing::info!(id = %record.id, killed = reclaimed.signalled, "a run whose supervisor is gone is recorded lost");
    Ok(reclaimed.signalled)
}

/// Kills what is left of the run, by the rules of the module docs.
pub fn kill_run(record: &Record) -> Reclaimed {
    let mut done = Reclaimed::default();
    let Some(group) = record.group else {
        return done;
    };
    match proc_info::boot_id() {
        Ok(boot) if boot == record.boot_id => {}
        Ok(_) => {
            tracing::info!(id = %record.id, "the record is from another boot; its pids are not its own");
            return done;
        }
        Err(err) => {
            tracing::warn!(id = %record.id, "{}", lnk_common::Causes(&err));
            return done;
        }
    }
    // Taken before the leader is looked at: if it is seen alive, its session's id was the run's
    // at least until this moment.
    let before_look = ticks_now();
    let leader_seen = match proc_info::check_process(group.leader_pid, group.leader_start_time) {
        Ok(Liveness::Same) => {
            done.signalled = stop_leader(&group);
            true
        }
        Ok(Liveness::Gone) => false,
        Ok(Liveness::Other) => {
            tracing::info!(id = %record.id, pid = group.leader_pid.get(), "the leader's pid belongs to another process now");
            return done;
        }
        Err(err) => {
            tracing::warn!(id = %record.id, "{}", lnk_common::Causes(&err));
            return done;
        }
    };
    let Some(sandbox) = record.sandbox else {
        // An older gate's group: its id is the run's only while the leader holds it.
        let holds = matches!(
            proc_info::check_process(group.leader_pid, group.leader_start_time),
            Ok(Liveness::Same)
        );
        if holds && let Some(pgid) = Pid::from_raw(group.pgid.get()) {
            done.signalled |= kill_process_group(pgid, Signal::KILL).is_ok();
        }
        return done;
    };
    let session = sandbox.session.get();
    let leader = group.leader_pid.get();
    let after_gate = |stat: &Stat| stat.start_time >= group.leader_start_time;
    let looks_like_the_runs = |stat: &Stat| stat.session == session && after_gate(stat);
    let born_while_seen =
        |stat: &Stat| leader_seen && before_look.is_some_and(|t| stat.start_time < t);
    // A gate that did not end when asked holds the run still: pinned, and killed last.
    let living_leader = leader_seen.then(|| pin_living(&group)).flatten();
    let leader_lives = || {
        living_leader
            .as_ref()
            .is_some_and(|pidfd| !has_ended(pidfd))
    };
    let killed = kill_proven(|pid, stat| {
        let in_session = stat.session == session;
        pid != leader
            && after_gate(stat)
            && ((in_session && born_while_seen(stat))
                || (stat.ppid == leader && leader_lives())
                || sandbox.output_pipe.is_some_and(|pipe| {
                    // Every descriptor of the session's processes; the stdout and stderr alone
                    // of any other (two `stat`s), which is where the run put its pipe.
                    if in_session {
                        holds_file(pid, pipe)
                    } else {
                        has_as_stdio(pid, pipe)
                    }
                }))
    });
    if killed > 0 {
        tracing::info!(id = %record.id, killed, "killed what was left of the run");
        done.signalled = true;
    }
    if let Some(pidfd) = &living_leader
        && !has_ended(pidfd)
        && pidfd_send_signal(pidfd, Signal::KILL).is_ok()
    {
        tracing::warn!(id = %record.id, pid = leader, "the run's gate did not end when asked; killed, last");
        done.signalled = true;
    }
    done.left = proc_info::all_pids()
        .into_iter()
        .filter(|pid| Stat::of(*pid).is_some_and(|s| !s.is_dead() && looks_like_the_runs(&s)))
        .collect();
    if let Some(left) = done.left_running() {
        tracing::warn!(id = %record.id, "{left}");
    }
    done
}

/// Now, in the clock ticks after boot that `/proc/<pid>/stat` gives start times in (rounded
/// down, as the kernel rounds them). `None` when the clock cannot be read.
fn ticks_now() -> Option<u64> {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    let per_second = u128::from(rustix::param::clock_ticks_per_second());
    let nanos =
        u128::try_from(now.tv_sec).ok()? * 1_000_000_000 + u128::try_from(now.tv_nsec).ok()?;
    u64::try_from(nanos * per_second / 1_000_000_000).ok()
}

/// Whether process `pid` has a descriptor open on the file `file` (looked at through
/// `/proc/<pid>/fd`, which needs the same user; a process that cannot be looked at holds
/// nothing as far as this knows).
fn holds_file(pid: i32, file: FileId) -> bool {
    let folder = format!("/proc/{pid}/fd");
    let Ok(entries) = std::fs::read_dir(&folder) else {
        return false;
    };
    entries.flatten().take(MAX_FDS_LOOKED_AT).any(|entry| {
        rustix::fs::stat(entry.path())
            .is_ok_and(|stat| stat.st_dev == file.dev && stat.st_ino == file.ino)
    })
}

/// Whether process `pid` has the file `file` as its stdout or stderr.
fn has_as_stdio(pid: i32, file: FileId) -> bool {
    [1, 2].iter().any(|fd| {
        rustix::fs::stat(format!("/proc/{pid}/fd/{fd}"))
            .is_ok_and(|stat| stat.st_dev == file.dev && stat.st_ino == file.ino)
    })
}

/// A pidfd on the recorded leader if it is still that process and has not ended.
fn pin_living(group: &Group) -> Option<OwnedFd> {
    let pid = Pid::from_raw(group.leader_pid.get())?;
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).ok()?;
    // Looked at once the pidfd pins it: a pid that changed hands shows another start time.
    let same = matches!(
        proc_info::check_process(group.leader_pid, group.leader_start_time),
        Ok(Liveness::Same)
    );
    (same && !has_ended(&pidfd)).then_some(pidfd)
}

/// Whether the process a pidfd pins has ended (its pidfd is readable then, reaped or not).
fn has_ended(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    !matches!(poll(&mut fds, Some(&Timespec::default())), Ok(0))
}

/// Sends the recorded leader SIGTERM and waits, at most [`LEADER_WAIT`], for it to end. The
/// pidfd is taken first and the start time looked at after, so the signal reaches the
/// recorded process or no one. Whether it was signalled.
fn stop_leader(group: &Group) -> bool {
    let Some(pid) = Pid::from_raw(group.leader_pid.get()) else {
        return false;
    };
    let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
        return false;
    };
    if !matches!(
        proc_info::check_process(group.leader_pid, group.leader_start_time),
        Ok(Liveness::Same)
    ) {
        return false;
    }
    if pidfd_send_signal(&pidfd, Signal::TERM).is_err() {
        return false;
    }
    // The pidfd is readable once the process has ended (reaped or not).
    let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
    let timeout = Timespec::try_from(LEADER_WAIT).ok();
    loop {
        match poll(&mut fds, timeout.as_ref()) {
            Err(rustix::io::Errno::INTR) => {}
            _ => return true,
        }
    }
}
