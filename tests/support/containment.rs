//! What the containment tests share: a program that gets out of its call's process group in
//! each way the issue lists, the wait for all of them, and the tests run under three sandboxes
//! (the pass-through prefix; bubblewrap with `--new-session` and no PID namespace; the tests'
//! usual bubblewrap, with a PID namespace).
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::bins::procs;
use crate::procs::{Proc, wait_for_role, with_marker};

/// The ways out, each a `lnk-test-procs` role that only lingers, so that a survivor's command
/// line says how it got out.
pub const ESCAPES: &[&str] = &[
    "linger-setsid",
    "linger-forked",
    "linger-nohup",
    "linger-deaf",
];

/// `sh -c` text: starts one process per way out — in a session of its own (`setsid -f`),
/// double-forked (a subshell that backgrounds it and exits), under `nohup … &`, and one that
/// ignores SIGTERM — each with its stdio on `/dev/null` so that only Link Run's reapers tie it
/// to the call; prints `started`; then ends (`leave`) or lingers itself (`stay`). With a fourth
/// argument, a path, it first traps SIGTERM to write that file and exit 0 (`trap`).
const SCRIPT: &str = r#"
P=$1; M=$2; MODE=$3; CLEAN=$4
setsid -f "$P" linger-setsid "$M" 300 </dev/null >/dev/null 2>&1
( "$P" linger-forked "$M" 300 </dev/null >/dev/null 2>&1 & )
nohup "$P" linger-nohup "$M" 300 </dev/null >/dev/null 2>&1 &
( trap '' TERM; exec "$P" linger-deaf "$M" 300 ) </dev/null >/dev/null 2>&1 &
echo started
case $MODE in
  stay) exec "$P" linger-main "$M" 300 ;;
  trap) trap 'echo cleaned up > "$CLEAN"; exit 0' TERM
        "$P" linger-main "$M" 300 </dev/null >/dev/null 2>&1 &
        wait ;;
esac
"#;

/// A `command`/`start` argument object for the escaping program.
pub fn escaping(mark: &str, mode: &str) -> Value {
    json!({"program": "sh", "args": ["-c", SCRIPT, "sh", procs(), mark, mode]})
}

/// As [`escaping`], trapping SIGTERM to write `clean` (the program is then `linger-main` under a
/// shell that waits for it).
pub fn escaping_with_trap(mark: &str, clean: &Path) -> Value {
    let clean = clean
        .to_str()
        .unwrap_or_else(|| panic!("test paths are UTF-8: {clean:?}"));
    json!({"program": "sh", "args": ["-c", SCRIPT, "sh", procs(), mark, "trap", clean]})
}

/// Waits until each way out runs, and checks that the deaf one does ignore SIGTERM.
pub fn wait_escaped(mark: &str, within: Duration) -> Vec<Proc> {
    let found: Vec<Proc> = ESCAPES
        .iter()
        .map(|role| wait_for_role(mark, role, within))
        .collect();
    let deaf = &found[3];
    assert!(
        ignores_sigterm(deaf.pid),
        "{deaf:?} does not ignore SIGTERM"
    );
    found
}

/// Whether `pid` ignores SIGTERM (`SigIgn` in `/proc/<pid>/status`).
fn ignores_sigterm(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (15 - 1)) != 0)
}

/// The processes carrying `mark` that are a reaper of Link Run's (`… reap …` or `… gate …`),
/// the sandbox's held process included (a fork of its reaper has the reaper's command line).
pub fn reapers(mark: &str) -> Vec<Proc> {
    with_marker(mark)
        .into_iter()
        .filter(|p| p.argv.get(1).is_some_and(|a| a == "reap" || a == "gate"))
        .collect()
}

/// Waits until a hold's file holds a pid and a newline (the held process's), and gives it.
pub fn wait_pid_file(path: &Path, within: Duration) -> i32 {
    let deadline = Instant::now() + within;
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Some(pid) = text.strip_suffix('\n').and_then(|t| t.parse().ok()) {
            return pid;
        }
        assert!(
            Instant::now() < deadline,
            "{path:?} held no pid within {within:?}: {text:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A process's arguments (empty when it is gone or a zombie).
pub fn argv_of(pid: i32) -> Vec<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// A process's parent, from `/proc/<pid>/stat` (`None` when it is gone).
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name, which ends with the last ')': the state, then the parent.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The live (not zombie) processes whose parent is `pid`, in pid order.
pub fn children_of(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot read /proc");
    };
    let mut children: Vec<i32> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| parent_of(*child) == Some(pid) && crate::procs::alive(*child))
        .collect();
    children.sort_unstable();
    children
}

/// Waits until a file exists (a hold's announcement).
pub fn wait_file(path: &Path, within: Duration) {
    let deadline = Instant::now() + within;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{path:?} did not appear within {within:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Makes, for each named test body `fn name(sandbox: Sandbox)`, a module `name` with three
/// tests: `passthrough`, `bwrap_shared_pid` (bubblewrap with `--new-session`, no PID
/// namespace) and `bwrap` (with one).
#[macro_export]
macro_rules! every_sandbox {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                $crate::sandbox_test!(passthrough, $name, Passthrough, warm);
                $crate::sandbox_test!(bwrap_shared_pid, $name, BwrapSharedPid, warm);
                $crate::sandbox_test!(bwrap, $name, Bwrap, warm);
            }
        )+
    };
}
pub use crate::every_sandbox;

/// As [`every_sandbox`], and each with cold calls too ([`crate::serve::cold_starts`]):
/// `passthrough_cold`, `bwrap_shared_pid_cold` and `bwrap_cold` beside the warm three.
#[macro_export]
macro_rules! every_sandbox_warm_and_cold {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                $crate::sandbox_test!(passthrough, $name, Passthrough, warm);
                $crate::sandbox_test!(bwrap_shared_pid, $name, BwrapSharedPid, warm);
                $crate::sandbox_test!(bwrap, $name, Bwrap, warm);
                $crate::sandbox_test!(passthrough_cold, $name, Passthrough, cold);
                $crate::sandbox_test!(bwrap_shared_pid_cold, $name, BwrapSharedPid, cold);
                $crate::sandbox_test!(bwrap_cold, $name, Bwrap, cold);
            }
        )+
    };
}
pub use crate::every_sandbox_warm_and_cold;
