//! Finding the tests' processes in `/proc` by a unique marker argument, and proving them gone.
//! Pids are no use for this under bubblewrap (its PID namespace numbers them differently), but the
//! host's `/proc` sees every process with its arguments. Also a run's processes as `/proc` shows
//! them: its supervisors, its group, its descriptors, and signals sent to them.
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use rustix::process::{Pid, Signal, kill_process};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A marker no other process on the machine carries: this test process, a counter, the time.
pub fn marker() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "lnkmark-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// A live process and its arguments.
#[derive(Debug, Clone)]
pub struct Proc {
    /// Its pid in the host's namespace.
    pub pid: i32,
    /// Its arguments, `argv[0]` first.
    pub argv: Vec<String>,
}

/// Every live (not zombie) process with `marker` among its arguments.
pub fn with_marker(marker: &str) -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot read /proc");
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            // A zombie's cmdline reads empty, so dead but unreaped processes drop out here.
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            argv.iter()
                .any(|a| a == marker)
                .then_some(Proc { pid, argv })
        })
        .collect()
}

/// Waits until a `lnk-test-procs <role> <marker> ...` process runs (not the sandbox or the
/// pass-through prefix, whose arguments also hold the marker) and returns it.
pub fn wait_for_role(marker: &str, role: &str, within: Duration) -> Proc {
    let deadline = Instant::now() + within;
    loop {
        let found = with_marker(marker).into_iter().find(|p| {
            p.argv.get(1).is_some_and(|a| a == role) && p.argv.get(2).is_some_and(|a| a == marker)
        });
        if let Some(proc) = found {
            return proc;
        }
        assert!(
            Instant::now() < deadline,
            "no `{role} {marker}` process started within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until no process carries `marker`; fails naming the survivors at the deadline.
pub fn wait_gone(marker: &str, within: Duration) {
    let deadline = Instant::now() + within;
    loop {
        let left = with_marker(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still running {within:?} later: {left:#?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a process with this pid is alive (present and not a zombie).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the command name, which ends with the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until the process is no longer alive, up to `within`; whether it ended. A process
/// that is exiting loses its command line before it becomes a zombie, so a look by marker
/// can miss it while it is still, for a moment, alive.
pub fn wait_dead(pid: i32, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    while alive(pid) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    true
}

/// The peak resident set size of a process, in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|err| panic!("cannot read the status of {pid}: {err}"));
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in the status of {pid}"))
}

/// SIGKILLs a pid, ignoring that it may be gone.
pub fn sigkill(pid: i32) {
    signal(pid, Signal::KILL);
}

/// Sends a signal to a pid, ignoring that it may be gone.
pub fn signal(pid: i32, sig: Signal) {
    if let Some(pid) = Pid::from_raw(pid) {
        let _gone = kill_process(pid, sig);
    }
}

/// Polls `done` every 20 ms until it holds (true) or the time is up (false).
pub fn poll(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Fails unless `pid` stays alive for all of `window` (a bounded check that something does
/// *not* happen: a process dying after its parent's death).
pub fn stays_alive(pid: i32, window: Duration, what: &str) {
    let deadline = Instant::now() + window;
    while Instant::now() < deadline {
        assert!(alive(pid), "{what} (pid {pid}) died");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The live `lnk-link-supervise supervise <id>` processes: the supervisors themselves, not
/// the first process serve starts for one, which forks the supervisor away and exits at once
/// (its parent is serve; the supervisor's is that first process, or whoever adopted it).
pub fn supervisors(id: &str) -> Vec<Proc> {
    with_marker(id)
        .into_iter()
        .filter(|p| p.argv.iter().any(|a| a == "supervise"))
        .filter(|p| !parent_is_serve(p.pid))
        .collect()
}

/// Whether process `pid`'s parent is an `lnk-link-run serve`.
fn parent_is_serve(pid: i32) -> bool {
    let Some(ppid) = proc_field(pid, "status", "PPid:").and_then(|v| v.parse::<i32>().ok()) else {
        return false;
    };
    std::fs::read(format!("/proc/{ppid}/cmdline")).is_ok_and(|cmdline| {
        let mut words = cmdline.split(|b| *b == 0);
        words
            .next()
            .is_some_and(|exe| exe.ends_with(b"lnk-link-run"))
            && words.any(|w| w == b"serve")
    })
}

/// Waits for the supervisor of `id` and returns it.
pub fn wait_supervisor(id: &str, within: Duration) -> Proc {
    let mut found = None;
    let ok = poll(within, || {
        found = supervisors(id).into_iter().next();
        found.is_some()
    });
    assert!(
        ok,
        "no `lnk-link-supervise supervise {id}` within {within:?}"
    );
    found.unwrap_or_else(|| unreachable!("found"))
}

/// Waits until no supervisor of `id` runs.
pub fn wait_no_supervisor(id: &str, within: Duration) {
    let gone = poll(within, || supervisors(id).is_empty());
    assert!(
        gone,
        "the supervisor of {id} still runs {within:?} later: {:?}",
        supervisors(id)
    );
}

/// The live (not zombie) pids whose process group is `pgid`.
pub fn in_group(pgid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot read /proc");
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // After the command name: state, ppid, pgrp.
            let Some((_, rest)) = stat.rsplit_once(')') else {
                return false;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            fields.first().is_some_and(|s| *s != "Z")
                && fields.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
        })
        .collect()
}

/// Waits until no process of the group `pgid` is left.
pub fn wait_group_gone(pgid: i32, within: Duration) {
    let gone = poll(within, || in_group(pgid).is_empty());
    assert!(
        gone,
        "processes of the run's group {pgid} still run {within:?} later: {:?}",
        in_group(pgid)
    );
}

/// Where each open descriptor of `pid` points (`readlink /proc/<pid>/fd/*`).
pub fn fd_targets(pid: i32) -> Vec<PathBuf> {
    let dir = format!("/proc/{pid}/fd");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("cannot read {dir}: {err}"));
    entries
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .collect()
}

/// A field of `/proc/<pid>/<file>` (`status`, `smaps_rollup`), its value trimmed.
pub fn proc_field(pid: i32, file: &str, name: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix(name).map(|v| v.trim().to_owned()))
}

/// `voluntary_ctxt_switches` of a process: how often it went to sleep.
pub fn sleeps(pid: i32) -> u64 {
    proc_field(pid, "status", "voluntary_ctxt_switches:")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no voluntary_ctxt_switches for {pid}"))
}

/// The names (`comm`) of the threads of `pid`, read lossily (a name is cut at 15 bytes).
pub fn thread_names(pid: i32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("comm")).ok())
        .map(|name| String::from_utf8_lossy(&name).trim_end().to_owned())
        .collect()
}

/// The CPU time process `pid` has used (user and system, all its threads), from
/// `/proc/<pid>/stat`.
pub fn cpu_time(pid: i32) -> Duration {
    let path = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    // After the command name, which may hold spaces and parentheses: utime is the 12th field,
    // stime the 13th.
    let after = stat.rfind(')').unwrap_or_else(|| panic!("{path}: {stat}"));
    let fields: Vec<u64> = stat[after + 1..]
        .split_ascii_whitespace()
        .map(|field| field.parse().unwrap_or(0))
        .collect();
    let ticks = fields.get(11).copied().unwrap_or(0) + fields.get(12).copied().unwrap_or(0);
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Duration::from_secs_f64(ticks as f64 / per_second as f64)
}

/// The ids of the threads of `pid` whose name starts with `prefix`.
pub fn threads_named(pid: i32, prefix: &str) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                .is_ok_and(|name| name.starts_with(prefix))
        })
        .collect()
}

/// Voluntary context switches of thread `tid` of `pid`: how often it went to sleep.
pub fn thread_sleeps(pid: i32, tid: i32) -> u64 {
    proc_field(
        pid,
        &format!("task/{tid}/status"),
        "voluntary_ctxt_switches:",
    )
    .and_then(|n| n.parse().ok())
    .unwrap_or(0)
}

/// How many inotify instances process `pid` holds.
pub fn inotify_instances(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().contains("inotify"))
                .count()
        })
        .unwrap_or(0)
}
