//! Whether a call's process group still has running members.
//!
//! `kill(-pgid, 0)` answers quickly but counts zombies too: members killed together with
//! their parent stay in the group until whoever inherited them reaps them, which some init
//! processes do late. So when the quick test says "members", `/proc` is read to see whether
//! any of them is still running.

use rustix::process::{Pid, test_kill_process_group};

/// Whether a process other than a zombie is in group `pgid`.
pub fn has_running_members(pgid: Pid) -> bool {
    if test_kill_process_group(pgid).is_err() {
        return false;
    }
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true; // cannot tell: assume the group lives, so it is killed at the deadline
    };
    let wanted = pgid.as_raw_nonzero().get();
    entries.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        std::fs::read(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| running_in_group(&stat, wanted))
            .unwrap_or(false)
    })
}

/// From a `/proc/<pid>/stat` line: whether the process runs (is not a zombie) in group
/// `wanted`. The command name may hold spaces and parentheses, so fields are read after the
/// last `)`.
fn running_in_group(stat: &[u8], wanted: i32) -> Option<bool> {
    let after = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[after + 1..]).ok()?;
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?;
    let _ppid = fields.next()?;
    let pgrp: i32 = fields.next()?.parse().ok()?;
    Some(pgrp == wanted && state != "Z" && state != "X")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_state_and_group_after_the_name() {
        let stat = b"42 (a) b (c)) S 1 77 77 0 -1";
        assert_eq!(running_in_group(stat, 77), Some(true));
        assert_eq!(running_in_group(stat, 78), Some(false));
        let zombie = b"42 (x) Z 1 77 77 0";
        assert_eq!(running_in_group(zombie, 77), Some(false));
    }

    #[test]
    fn sees_a_live_group_and_not_a_gone_one() {
        use std::os::unix::process::CommandExt;
        let Ok(mut child) = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
        else {
            return;
        };
        let pgid = Pid::from_child(&child);
        assert!(has_running_members(pgid));
        let _ = child.kill();
        let _ = child.wait();
        assert!(!has_running_members(pgid));
    }
}
