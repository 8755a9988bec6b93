//! What `/proc` says about the machine and its processes: the boot id and a process's start time.
//!
//! Together they make a process identity that survives pid reuse: a pid names the same process
//! only if the machine has not rebooted (same boot id) and the process now at that pid started
//! at the same clock tick as the one recorded. A sweep kills a dead supervisor's process group
//! only when its leader is that same process, or gone ([`check_process`]).

use std::fs;
use std::io::ErrorKind;
use std::path::PathBuf;

use lnk_common::ProcessId;
use lnk_common::error::{Error, Op};

/// Where Linux gives the boot id: a UUID that changes at every boot.
pub const BOOT_ID_PATH: &str = "/proc/sys/kernel/random/boot_id";

/// The field of `/proc/<pid>/stat` that holds `starttime` (1-based, as `proc(5)` counts).
const STARTTIME_FIELD: usize = 22;
/// The field of `/proc/<pid>/stat` that holds `num_threads`.
const THREADS_FIELD: usize = 20;
/// The first field after the `(comm)` field is field 3 (`state`).
const FIRST_FIELD_AFTER_COMM: usize = 3;

/// This boot's id, trimmed (e.g. `6b0c2a52-…`). Read once per process: a process never
/// outlives its boot, and `start` reads it for every run.
pub fn boot_id() -> Result<String, Error> {
    static BOOT_ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    if let Some(id) = BOOT_ID.get() {
        return Ok(id.clone());
    }
    let text =
        fs::read_to_string(BOOT_ID_PATH).map_err(|e| Error::io(Op::Read, BOOT_ID_PATH, e))?;
    let id = text.trim();
    if id.is_empty() {
        return Err(Error::Proc {
            path: BOOT_ID_PATH.into(),
            problem: "it is empty",
        });
    }
    Ok(BOOT_ID.get_or_init(|| id.to_owned()).clone())
}

/// The start time of process `pid`, in clock ticks after boot (`/proc/<pid>/stat` field 22);
/// `None` when there is no such process.
///
/// Only ever compared for equality, so the tick length does not matter. A zombie still has its
/// start time.
pub fn start_time(pid: ProcessId) -> Result<Option<u64>, Error> {
    let path = PathBuf::from(format!("/proc/{pid}/stat"));
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        // ESRCH: the process went away between open and read.
        Err(e)
            if e.kind() == ErrorKind::NotFound
                || e.raw_os_error() == Some(rustix::io::Errno::SRCH.raw_os_error()) =>
        {
            return Ok(None);
        }
        Err(e) => return Err(Error::io(Op::Read, path, e)),
    };
    parse_start_time(&text).map(Some).ok_or(Error::Proc {
        path,
        problem: "no starttime field after the command name",
    })
}

/// Field 22 of a `/proc/<pid>/stat` line.
///
/// The command name (field 2) is in parentheses and may itself hold spaces and parentheses
/// (`(a) b (c)`), so the fields are counted from the **last** `)`.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let (_, after_comm) = stat.rsplit_once(')')?;
    after_comm
        .split_ascii_whitespace()
        .nth(STARTTIME_FIELD - FIRST_FIELD_AFTER_COMM)?
        .parse()
        .ok()
}

/// The fields of a `/proc/<pid>/stat` line that say whose a process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Field 3: `R`, `S`, `D`, `Z` (zombie), `X` (dead), …
    pub state: u8,
    /// Field 4: the parent's pid.
    pub ppid: i32,
    /// Field 5: the process group id.
    pub pgrp: i32,
    /// Field 6: the session id.
    pub session: i32,
    /// Field 22: the start time, clock ticks after boot.
    pub start_time: u64,
}

impl Stat {
    /// Parses a `/proc/<pid>/stat` line. Fields are counted after the **last** `)`, since the
    /// command name (field 2) may hold spaces and parentheses.
    pub fn parse(stat: &[u8]) -> Option<Stat> {
        let after = stat.iter().rposition(|b| *b == b')')?;
        let rest = std::str::from_utf8(&stat[after + 1..]).ok()?;
        let mut fields = rest.split_ascii_whitespace();
        let state = *fields.next()?.as_bytes().first()?;
        let ppid = fields.next()?.parse().ok()?;
        let pgrp = fields.next()?.parse().ok()?;
        let session = fields.next()?.parse().ok()?;
        // Fields 7 to 21 lie between the session and the start time.
        let start_time = fields
            .nth(STARTTIME_FIELD - FIRST_FIELD_AFTER_COMM - 4)?
            .parse()
            .ok()?;
        Some(Stat {
            state,
            ppid,
            pgrp,
            session,
            start_time,
        })
    }

    /// Reads process `pid`'s line; `None` when there is no such process (or it cannot be read).
    pub fn of(pid: i32) -> Option<Stat> {
        Stat::parse(&fs::read(format!("/proc/{pid}/stat")).ok()?)
    }

    /// Whether the process has ended (a zombie, or dead).
    pub fn is_dead(&self) -> bool {
        self.state == b'Z' || self.state == b'X'
    }
}

/// The pids in `/proc` (processes, not threads), in no particular order, read as the walk goes
/// (a caller may stop early): the one walk of `/proc` every caller makes. An error when `/proc`
/// cannot be read at all; an entry that cannot be read is skipped.
pub fn pids() -> std::io::Result<impl Iterator<Item = i32>> {
    let entries = fs::read_dir("/proc")?;
    Ok(entries.filter_map(|entry| pid_of(&entry.ok()?.file_name())))
}

/// The pid a `/proc` entry's name is, if it is one (all digits, and a pid's range).
fn pid_of(name: &std::ffi::OsStr) -> Option<i32> {
    let name = name.to_str()?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok().filter(|pid| *pid > 0)
}

/// Every pid in `/proc` (processes, not threads), in no particular order; none when `/proc`
/// cannot be read.
pub fn all_pids() -> Vec<i32> {
    pids().map(Iterator::collect).unwrap_or_default()
}

/// How many threads this process has (`/proc/self/stat` field 20); `None` when that cannot be
/// read, or is another process's (a `/proc` of another PID namespace).
pub fn threads_of_this_process() -> Option<u64> {
    let stat = fs::read("/proc/self/stat").ok()?;
    let pid: i32 = std::str::from_utf8(stat.split(|b| *b == b' ').next()?)
        .ok()?
        .parse()
        .ok()?;
    if pid != rustix::process::getpid().as_raw_nonzero().get() {
        return None;
    }
    let after = stat.iter().rposition(|b| *b == b')')?;
    let rest = std::str::from_utf8(&stat[after + 1..]).ok()?;
    rest.split_ascii_whitespace()
        .nth(THREADS_FIELD - FIRST_FIELD_AFTER_COMM)?
        .parse()
        .ok()
}

/// What is at a recorded pid now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// The recorded process (same start time), still there (maybe as a zombie).
    Same,
    /// Another process that got the pid since: never signal it.
    Other,
    /// No process has that pid.
    Gone,
}

/// Whether the process recorded as (`pid`, `recorded_start`) is still the one at `pid`.
///
/// Meaningful only on the boot that recorded it: compare boot ids first.
pub fn check_process(pid: ProcessId, recorded_start: u64) -> Result<Liveness, Error> {
    Ok(match start_time(pid)? {
        None => Liveness::Gone,
        Some(t) if t == recorded_start => Liveness::Same,
        Some(_) => Liveness::Other,
    })
}

/// Whether process group `pgid` has a member that is not a zombie.
///
/// `kill(-pgid, 0)` answers quickly but counts zombies too: members killed together with
/// their parent stay in the group until whoever inherited them reaps them, which some init
/// processes do late. So when it says "members", `/proc` is read to see whether any of them
/// still runs. When `/proc` cannot be read, the group is taken to live (so that it gets killed
/// rather than forgotten).
pub fn group_has_running_members(pgid: ProcessId) -> bool {
    let Some(group) = rustix::process::Pid::from_raw(pgid.get()) else {
        return false;
    };
    if rustix::process::test_kill_process_group(group).is_err() {
        return false;
    }
    let Ok(mut pids) = pids() else {
        return true;
    };
    pids.any(|pid| {
        fs::read(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| running_in_group(&stat, pgid.get()))
            .unwrap_or(false)
    })
}

/// From a `/proc/<pid>/stat` line: whether the process runs (is not a zombie) in group
/// `wanted`. Fields are read after the last `)`, since the command name may hold anything.
pub fn running_in_group(stat: &[u8], wanted: i32) -> Option<bool> {
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
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::process::Command;

    use super::*;

    const STAT_TAIL: &str =
        "S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 424242 20 21 22 23 24 25\n";

    #[test]
    fn parses_a_plain_stat_line() {
        assert_eq!(
            parse_start_time(&format!("1234 (sleep) {STAT_TAIL}")),
            Some(424242)
        );
    }

    #[test]
    fn parses_a_command_name_with_spaces_and_parentheses() {
        for comm in ["(a b)", "(x) y (z)", "((()", "())) S 9 9"] {
            let line = format!("77 ({comm}) {STAT_TAIL}");
            assert_eq!(parse_start_time(&line), Some(424242), "{line}");
        }
    }

    #[test]
    fn refuses_truncated_lines() {
        assert_eq!(parse_start_time("12 (x) S 1 2"), None);
        assert_eq!(parse_start_time("no parenthesis"), None);
        assert_eq!(parse_start_time(""), None);
    }

    #[test]
    fn boot_id_is_stable_and_trimmed() {
        let id = boot_id().unwrap();
        assert_eq!(id, boot_id().unwrap());
        assert_eq!(id.trim(), id);
        assert_eq!(id.len(), 36, "{id}");
    }

    #[test]
    fn this_process_has_a_stable_start_time() {
        let me = ProcessId::this().unwrap();
        let t = start_time(me).unwrap().unwrap();
        assert_eq!(start_time(me).unwrap(), Some(t));
        assert_eq!(check_process(me, t).unwrap(), Liveness::Same);
        assert_eq!(check_process(me, t + 1).unwrap(), Liveness::Other);
    }

    #[test]
    fn a_reaped_child_is_gone() {
        let mut child = Command::new("true").spawn().unwrap();
        let pid = ProcessId::new(i64::from(child.id())).unwrap();
        // Unreaped (running or a zombie), the child still has its start time.
        let started = start_time(pid).unwrap().unwrap();
        assert_eq!(check_process(pid, started).unwrap(), Liveness::Same);
        child.wait().unwrap();
        // Reaped: the pid is free. (Reuse within this instant would need the whole pid space to
        // wrap; if it happened the answer would be Other, never Same.)
        assert_ne!(check_process(pid, started).unwrap(), Liveness::Same);
        assert_eq!(start_time(pid).unwrap(), None);
    }

    #[test]
    fn a_child_with_a_strange_name_is_read_correctly() {
        let dir = tempfile::tempdir().unwrap();
        let strange = dir.path().join("a) b (c");
        std::os::unix::fs::symlink("/bin/sleep", &strange).unwrap();
        let mut child = Command::new(&strange).arg("30").spawn().unwrap();
        let pid = ProcessId::new(i64::from(child.id())).unwrap();
        // Wait (toward a deadline) until the exec shows the strange name in the stat line.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let stat_path = format!("/proc/{pid}/stat");
        let line = loop {
            let line = fs::read_to_string(&stat_path).unwrap();
            if line.contains("(a) b (c)") || std::time::Instant::now() > deadline {
                break line;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        };
        let t = start_time(pid).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(line.contains("(a) b (c)"), "{line}");
        assert_eq!(t, parse_start_time(&line));
        assert!(t.is_some());
        assert_eq!(start_time(pid).unwrap(), None);
    }

    #[test]
    fn parses_the_fields_that_say_whose_a_process_is() {
        let line = format!("77 ((x) y) {STAT_TAIL}");
        let stat = Stat::parse(line.as_bytes()).unwrap();
        assert_eq!(
            stat,
            Stat {
                state: b'S',
                ppid: 1,
                pgrp: 2,
                session: 3,
                start_time: 424242
            }
        );
        assert!(!stat.is_dead());
        assert!(Stat::parse(b"12 (x) S 1 2").is_none());
        let me = Stat::of(ProcessId::this().unwrap().get()).unwrap();
        assert_eq!(
            me.start_time,
            start_time(ProcessId::this().unwrap()).unwrap().unwrap()
        );
        // A session led from outside this pid namespace reads as 0 (as in a container), which
        // nix returns as it is where rustix's getsid refuses it.
        assert_eq!(me.session, nix::unistd::getsid(None).unwrap().as_raw());
    }

    #[test]
    fn the_walk_finds_this_process_and_its_threads_are_counted() {
        let me = ProcessId::this().unwrap().get();
        assert!(pids().unwrap().any(|pid| pid == me));
        assert!(all_pids().contains(&me));
        assert_eq!(pid_of(std::ffi::OsStr::new("self")), None);
        assert_eq!(pid_of(std::ffi::OsStr::new("+12")), None);
        assert_eq!(pid_of(std::ffi::OsStr::new("0")), None);
        assert_eq!(pid_of(std::ffi::OsStr::new("12")), Some(12));
        // This test's thread and the harness's main thread at least (others' tests may run
        // beside it), and one more made here.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        assert!(threads_of_this_process().unwrap() >= 3);
        drop(tx);
        let _ = other.join().unwrap();
    }

    #[test]
    fn reads_group_membership_after_the_name() {
        let stat = b"42 (a) b (c)) S 1 77 77 0 -1";
        assert_eq!(running_in_group(stat, 77), Some(true));
        assert_eq!(running_in_group(stat, 78), Some(false));
        assert_eq!(running_in_group(b"42 (x) Z 1 77 77 0", 77), Some(false));
    }

    #[test]
    fn sees_a_live_group_and_not_a_gone_one() {
        use std::os::unix::process::CommandExt;
        let mut child = Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pgid = ProcessId::new(i64::from(child.id())).unwrap();
        assert!(group_has_running_members(pgid));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!group_has_running_members(pgid));
    }
}
