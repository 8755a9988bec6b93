//! Finding the tests' processes in `/proc` by a unique marker argument, and proving them gone.
//! Pids are no use for this under bubblewrap (its PID namespace numbers them differently), but the
//! host's `/proc` sees every process with its arguments.
use std::sync::atomic::{AtomicU32, Ordering};
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
