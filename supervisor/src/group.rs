//! The run's process group: killing it, and whether it still has running members.

use lnk_common::proc_info::{self, ProcessId};
use rustix::process::{Pid, Signal, kill_process_group};

/// A process group of a run (its id is its leader's pid).
#[derive(Debug, Clone, Copy)]
pub struct Group(ProcessId);

impl Group {
    /// The group whose id is `pgid`.
    pub fn of(pgid: ProcessId) -> Self {
        Group(pgid)
    }

    /// Sends SIGKILL to every member; whether any was there.
    pub fn kill(self) -> bool {
        Pid::from_raw(self.0.get()).is_some_and(|pid| kill_process_group(pid, Signal::KILL).is_ok())
    }

    /// Whether a member that is not a zombie is left.
    pub fn has_running_members(self) -> bool {
        proc_info::group_has_running_members(self.0)
    }
}
