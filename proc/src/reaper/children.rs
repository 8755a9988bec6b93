//! A child subreaper's children: listing them, reaping the dead, and killing all of them.
//!
//! Only **children** are ever signalled by pid: a child's pid cannot be reused until its parent
//! reaps it, so a signal to it cannot reach anyone else. Deeper descendants are reached when
//! their parent dies: as a child subreaper (`PR_SET_CHILD_SUBREAPER`), this process inherits
//! them, so killing "everything" is killing every child, over and over, until none is left.

use std::io;

use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, WaitOptions, kill_process, waitid};

/// Makes the calling process a child subreaper: orphans among its descendants become its
/// children instead of init's.
pub fn become_subreaper() -> io::Result<()> {
    rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
    Ok(())
}

/// The calling process's children, zombies included, read from its main thread's
/// `/proc/self/task/<pid>/children` (the reapers and the supervisor have one thread, so that is
/// all of them); a scan of `/proc` by parent pid where the kernel has no such file.
pub fn children() -> io::Result<Vec<Pid>> {
    let me = rustix::process::getpid();
    let path = format!("/proc/self/task/{}/children", me.as_raw_nonzero());
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(text
            .split_ascii_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .filter_map(Pid::from_raw)
            .collect()),
        Err(err) if err.kind() == io::ErrorKind::NotFound => children_by_scan(),
        Err(err) => Err(err),
    }
}

/// The children of this process from a scan of `/proc/<pid>/stat` (field 4, the parent).
fn children_by_scan() -> io::Result<Vec<Pid>> {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut found = Vec::new();
    for pid in crate::proc_info::pids()? {
        let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
            continue;
        };
        if crate::proc_info::Stat::parse(&stat).is_some_and(|s| s.ppid == me) {
            found.extend(Pid::from_raw(pid));
        }
    }
    Ok(found)
}

/// Reaps `pid` if it is a zombie child; whether it was.
pub fn reap_if_dead(pid: Pid) -> bool {
    matches!(
        rustix::process::waitpid(Some(pid), WaitOptions::NOHANG),
        Ok(Some(_)) | Err(Errno::CHILD)
    )
}

/// Sends `signal` to a child (a pid that cannot have been reused: it is not reaped yet).
pub fn signal_child(pid: Pid, signal: Signal) {
    // ESRCH cannot happen for an unreaped child; any error means there is nothing to signal.
    let _ = kill_process(pid, signal);
}

/// Kills every child with SIGKILL and reaps it, again and again, until this process has no
/// children left; what each one leaves is reparented here (a child subreaper) and is killed in
/// the next round. Blocks until the last one has died. How many were killed.
///
/// That none is left is the kernel's word (`waitid` finds no child), not `/proc`'s list, which
/// may skip a child ("it doesn't guarantee to provide precise results", says the kernel's
/// documentation of `children`): a child the kernel still counts but the list did not show is
/// looked for by its parent in every `/proc/<pid>/stat`.
///
/// For a process that has nothing else to wait for: the supervisor, after its gate ended; a
/// reaper, at its end, once its own watch saw nothing left (then normally none).
pub fn kill_all_children() -> io::Result<usize> {
    let mut signalled = std::collections::HashSet::new();
    loop {
        let mut listed = children()?;
        match waitid(
            WaitId::All,
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ) {
            Err(Errno::CHILD) => return Ok(signalled.len()),
            Err(Errno::INTR) => continue,
            Err(err) => return Err(err.into()),
            // One has ended, or some live on: those listed are killed, and when the list
            // showed none of those the kernel counts, the scan finds them.
            Ok(_) => {}
        }
        if listed.is_empty() {
            listed = children_by_scan()?;
        }
        for child in listed {
            // Again each round: a second SIGKILL to a dying child does nothing.
            signal_child(child, Signal::KILL);
            signalled.insert(child);
        }
        match waitid(WaitId::All, WaitIdOptions::EXITED) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(Errno::CHILD) => return Ok(signalled.len()),
            Err(err) => return Err(err.into()),
        }
    }
}

/// A descendant found by [`descendants`], pinned by a pidfd, so that a signal through
/// [`Descendant::signal`] reaches that very process or no one.
#[derive(Debug)]
pub struct Descendant {
    /// Its pid.
    pub pid: Pid,
    pidfd: std::os::fd::OwnedFd,
}

impl Descendant {
    /// `pid`, pinned by a pidfd. Only for a pid that cannot have changed hands: a child not
    /// yet reaped, or a process the caller has proven after pinning it.
    pub fn pin(pid: Pid) -> Option<Descendant> {
        use rustix::process::{PidfdFlags, pidfd_open};
        let pidfd = pidfd_open(pid, PidfdFlags::empty()).ok()?;
        Some(Descendant { pid, pidfd })
    }

    /// Sends `signal` through the pidfd (an error means it has ended).
    pub fn signal(&self, signal: Signal) {
        let _ = rustix::process::pidfd_send_signal(&self.pidfd, signal);
    }

    /// Whether it has not ended (its pidfd is readable once it has).
    pub fn alive(&self) -> bool {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        let mut fds = [PollFd::new(&self.pidfd, PollFlags::IN)];
        matches!(poll(&mut fds, Some(&Timespec::default())), Ok(0))
    }

    /// The program it runs now (`/proc/<pid>/exe`), when that can be read.
    pub fn exe(&self) -> Option<std::path::PathBuf> {
        std::fs::read_link(format!("/proc/{}/exe", self.pid.as_raw_nonzero())).ok()
    }
}

/// Every live descendant of this process, children first, each pinned by a pidfd and proven
/// a descendant: a pid read from a parent's `children` file is taken only if, once pinned,
/// `/proc` says its parent is that parent, which is itself pinned and still alive (a pid that
/// changed hands in between has another parent).
pub fn descendants() -> Vec<Descendant> {
    let children = children().unwrap_or_default();
    walk(children.into_iter().filter_map(Descendant::pin).collect())
}

/// `root` and every live descendant of it, proven as [`descendants`] proves them: for a process
/// that is not this one's, pinned and proven by the caller (a run's gate, by its recorded start
/// time).
pub fn descendants_of(root: Descendant) -> Vec<Descendant> {
    walk(vec![root])
}

/// `found` and the descendants of each, breadth first.
fn walk(mut found: Vec<Descendant>) -> Vec<Descendant> {
    use rustix::process::{PidfdFlags, pidfd_open};
    let mut next = 0;
    while next < found.len() {
        let parent_at = next;
        let parent = found[next].pid;
        let parent_raw = parent.as_raw_nonzero().get();
        next += 1;
        for pid in children_of(parent) {
            if found.iter().any(|d| d.pid == pid) {
                continue;
            }
            let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
                continue;
            };
            // Read after the pidfd was taken, and trusted only if the pinned parent is still
            // alive afterwards: then no other process can have had the parent's pid meanwhile,
            // and a pid that changed hands before the pidfd was taken has another parent.
            let is_child = crate::proc_info::Stat::of(pid.as_raw_nonzero().get())
                .is_some_and(|stat| stat.ppid == parent_raw && !stat.is_dead());
            if is_child && found[parent_at].alive() {
                found.push(Descendant { pid, pidfd });
            }
        }
    }
    found
}

/// Sends `signal` to every live process below `root` (not `root` itself) but the sandbox's own,
/// those running `sandbox_exe` (bubblewrap and its init: one that dies of a signal ends what
/// runs inside it at once): the run's programs, whatever session or group they are in. How many
/// were signalled.
pub fn signal_programs(
    root: Descendant,
    sandbox_exe: Option<&std::path::Path>,
    signal: Signal,
) -> usize {
    let root_pid = root.pid;
    let mut signalled = 0;
    for descendant in descendants_of(root) {
        if descendant.pid == root_pid {
            continue;
        }
        let exe = descendant.exe();
        if exe.is_some() && exe.as_deref() == sandbox_exe {
            continue;
        }
        descendant.signal(signal);
        signalled += 1;
    }
    signalled
}

/// The children of another process, from its threads' `children` files (empty when they
/// cannot be read).
fn children_of(pid: Pid) -> Vec<Pid> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", pid.as_raw_nonzero())) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_ascii_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .filter_map(Pid::from_raw)
                .collect::<Vec<_>>()
        })
        .collect()
}
