//! Killing processes that no living reaper holds, by what `/proc` proves about them.
//!
//! After a reaper's crash its processes are no one's children that could be signalled safely,
//! and a group id whose leader is gone may belong to someone else after pid reuse. A process is
//! signalled here only when its own `/proc/<pid>/stat` proves it belongs to what is being
//! cleaned up (a session whose leader is still unreaped, or a run's recorded session and groups
//! and start time), read after a pidfd was taken on it, and the signal goes through that pidfd:
//! if the pid changed hands in between, the signal reaches no one.

use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

use crate::proc_info::{Stat, all_pids};

/// How many scans of `/proc` at most: each kills what it finds; the next looks for what those
/// started meanwhile.
const ROUNDS: usize = 50;

/// Sends SIGKILL to every live process whose pid and stat line satisfy `proven`, scanning
/// `/proc` again until a scan finds none (or [`ROUNDS`] scans). How many were signalled.
pub fn kill_proven(proven: impl Fn(i32, &Stat) -> bool) -> usize {
    let me = rustix::process::getpid().as_raw_nonzero().get();
    let mut signalled = 0;
    for _ in 0..ROUNDS {
        let mut found = 0;
        for pid in all_pids() {
            if pid == me || !Stat::of(pid).is_some_and(|s| !s.is_dead() && proven(pid, &s)) {
                continue;
            }
            let Some(raw) = Pid::from_raw(pid) else {
                continue;
            };
            let Ok(pidfd) = pidfd_open(raw, PidfdFlags::empty()) else {
                continue;
            };
            // Looked at again now that the pidfd pins the process: if the pid changed hands
            // before the pidfd was taken, this is where it shows.
            if Stat::of(pid).is_some_and(|s| !s.is_dead() && proven(pid, &s)) {
                found += 1;
                // ESRCH: it died meanwhile, or the pid changed hands after the look.
                let _ = pidfd_send_signal(&pidfd, Signal::KILL);
            }
        }
        signalled += found;
        if found == 0 {
            break;
        }
        // Give the killed a moment to go before looking again (they are not our children: no
        // signal tells when).
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    signalled
}

/// Kills every process of session `sid` (SIGKILL), for a parent that holds the session's
/// leader unreaped, so that the session id cannot have been reused.
pub fn kill_session(sid: Pid) -> usize {
    let sid = sid.as_raw_nonzero().get();
    kill_proven(|_, stat| stat.session == sid)
}
