//! A warm sandbox's stub, as the tests find it: the processes below serve that run
//! `lnk-link-run warm-stub`, and a call's stdout once it ran.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::bins::link_run;
use crate::containment::{argv_of, children_of};
use crate::procs::wait_dead;
use crate::results::ran;
use crate::serve::ANSWER;

/// Every process below `pid`, in no order.
pub fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(parent) = todo.pop() {
        for child in children_of(parent) {
            found.push(child);
            todo.push(child);
        }
    }
    found
}

/// The device and inode of a file, as `stat -L -c %d:%i` prints them.
pub fn file_id(path: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    format!("{}:{}", meta.dev(), meta.ino())
}

/// The stubs below `serve`, waiting: processes running `lnk-link-run` whose last argument is
/// `warm-stub` (bubblewrap's own processes run bwrap, with the same words).
pub fn stubs(serve: i32) -> Vec<i32> {
    let runner = file_id(&link_run());
    let mut stubs: Vec<i32> = descendants(serve)
        .into_iter()
        .filter(|pid| argv_of(*pid).last().is_some_and(|arg| arg == "warm-stub"))
        .filter(|pid| {
            let exe = std::path::PathBuf::from(format!("/proc/{pid}/exe"));
            std::fs::metadata(&exe).is_ok() && file_id(&exe) == runner
        })
        .collect();
    stubs.sort_unstable();
    stubs
}

/// Waits until serve has `count` stubs waiting, none of them in `not`.
pub fn wait_stubs(serve: i32, count: usize, not: &[i32]) -> Vec<i32> {
    let deadline = Instant::now() + ANSWER;
    loop {
        let found: Vec<i32> = stubs(serve)
            .into_iter()
            .filter(|pid| !not.contains(pid))
            .collect();
        if found.len() >= count {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "serve has {} stubs waiting, not {count}",
            found.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A call's stdout, checking that it ran to exit 0.
pub fn stdout_of(result: &Value) -> String {
    let value = ran(result);
    assert_eq!(value["exit_code"], 0, "{result}");
    value["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("no stdout: {result}"))
        .to_owned()
}

/// The spare reapers below `serve` (`reap --spare`).
pub fn spare_reapers(serve: i32) -> Vec<i32> {
    descendants(serve)
        .into_iter()
        .filter(|pid| argv_of(*pid).iter().any(|arg| arg == "--spare"))
        .collect()
}

/// A shell script that SIGSTOPs each of `pids` but itself.
pub fn stop_script(pids: &[i32]) -> String {
    let list = pid_words(pids);
    format!("for p in {list}; do [ $p = $$ ] || kill -STOP $p 2>/dev/null; done; true")
}

/// `pids` as a shell reads a list of words: `1 2 3`.
pub fn pid_words(pids: &[i32]) -> String {
    pids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Asserts that each of `pids`, found below a serve that was then killed, is dead within
/// [`GONE`].
pub fn assert_all_die(pids: Vec<i32>) {
    for pid in pids {
        assert!(
            wait_dead(pid, GONE),
            "{pid} ({:?}) outlived serve",
            argv_of(pid)
        );
    }
}

/// How long the processes of a serve that was killed may take to be gone.
pub const GONE: Duration = Duration::from_secs(10);
