//! Whether a call's process group still has running members (zombies do not count; see
//! [`lnk_common::proc_info::group_has_running_members`]).

use lnk_common::proc_info::{ProcessId, group_has_running_members};
use rustix::process::Pid;

/// Whether a process other than a zombie is in group `pgid`.
pub fn has_running_members(pgid: Pid) -> bool {
    ProcessId::new(i64::from(pgid.as_raw_nonzero().get())).is_ok_and(group_has_running_members)
}
