//! What `serve` holds for runs, and what a start depends on (issues 9 and 12): nothing per
//! live run in `serve` (no thread, no child); a start is never refused because someone else —
//! a sweep, a `list`, a `stop` — is testing a run's lock at that moment; more supervisors at
//! once than a user may hold inotify instances all run, and all stop.
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use lnk_tests::bins::link_supervise;
use lnk_tests::procs::{fd_targets, poll, thread_names, wait_no_supervisor, wait_supervisor};
use lnk_tests::procs::{wait_for_role, wait_gone, with_marker};
use lnk_tests::results::is_error;
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{PROMPT, list_within, meta, procs_args, start, stop, stopped_run, tool};

/// The threads of `pid`, but for call threads waiting for a call (serve keeps up to four,
/// named so, however many runs live: `runner/src/serve/threads.rs`), and how many of those.
fn threads(pid: i32) -> (usize, usize) {
    let names = thread_names(pid);
    let idle = names.iter().filter(|name| *name == "call (idle)").count();
    (names.len() - idle, idle)
}

/// The children of `pid` (over all its threads), zombies included, but for serve's own
/// helper (its watchdog or reaper, `lnk-link-run` itself), as `pid: command line`.
fn children(pid: i32) -> Vec<String> {
    all_children(pid)
        .into_iter()
        .filter_map(|child| {
            let cmdline = std::fs::read(format!("/proc/{child}/cmdline")).unwrap_or_default();
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let ours = cmdline
                .split(' ')
                .next()
                .is_some_and(|p| p.ends_with("lnk-link-run"))
                && !cmdline.contains("supervise");
            (!ours).then(|| format!("{child}: {cmdline}"))
        })
        .collect()
}

fn all_children(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|task| std::fs::read_to_string(task.path().join("children")).ok())
        .flat_map(|text| {
            text.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

#[test]
fn serve_holds_nothing_per_live_run() {
    let bg = Bg::new(Sandbox::Passthrough);
    let flags = Flags {
        background: 12,
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    // One run first, so that whatever serve makes once (a thread pool, a sweep) is made.
    let first = bg.marker();
    let mut ids = vec![start(&mut serve, procs_args("linger", &first, 120))];
    wait_for_role(&first, "linger", ANSWER);
    let settled = |serve_pid: i32, at_most: usize| {
        let mut seen = 0;
        let ok = poll(ANSWER, || {
            let idle;
            (seen, idle) = threads(serve_pid);
            seen <= at_most && idle <= 4
        });
        (ok, seen)
    };
    let (_, before) = settled(serve.pid(), usize::MAX);
    let marks: Vec<String> = (0..10).map(|_| bg.marker()).collect();
    for mark in &marks {
        ids.push(start(&mut serve, procs_args("linger", mark, 120)));
    }
    for (mark, id) in marks.iter().zip(&ids[1..]) {
        wait_for_role(mark, "linger", ANSWER);
        wait_supervisor(id, ANSWER);
    }
    // Eleven runs live: serve has no more threads than with one, and no child at all (its
    // tool threads end with their calls, or wait for the next call; the supervisors are
    // nobody's children here).
    let (ok, after) = settled(serve.pid(), before);
    assert!(
        ok,
        "serve has {after} threads with 11 runs alive, {before} with one"
    );
    let kids = children(serve.pid());
    assert!(kids.is_empty(), "serve has children: {kids:?}");
    for id in &ids {
        stop(&mut serve, id);
        wait_no_supervisor(id, ANSWER);
    }
    for mark in marks.iter().chain([&first]) {
        wait_gone(mark, ANSWER);
    }
    assert!(
        children(serve.pid()).is_empty(),
        "{:?}",
        children(serve.pid())
    );
}

#[test]
fn a_start_is_never_refused_because_a_lock_is_being_tested() {
    let bg = Bg::new(Sandbox::Passthrough);
    let flags = Flags {
        background: 1,
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    // Someone (as a sweep, a `list` or a `stop` does) takes every run's lock for a moment,
    // over and over, all along.
    let done = Arc::new(AtomicBool::new(false));
    let prober = {
        let (done, state) = (Arc::clone(&done), bg.state.clone());
        std::thread::spawn(move || {
            let mut probes = 0u64;
            while !done.load(Ordering::Relaxed) {
                let Ok(entries) = std::fs::read_dir(&state) else {
                    continue;
                };
                for entry in entries.filter_map(Result::ok) {
                    if !entry.file_name().to_string_lossy().ends_with(".lock")
                        || entry.file_name() == "start.lock"
                    {
                        continue;
                    }
                    if let Ok(file) = std::fs::File::open(entry.path())
                        && file.try_lock().is_ok()
                    {
                        probes += 1;
                        std::thread::sleep(Duration::from_millis(2));
                        drop(file);
                    }
                }
            }
            probes
        })
    };
    let mut refused = Vec::new();
    for i in 0..15 {
        let result = tool(
            &mut serve,
            "start",
            json!({"program": "sh", "args": ["-c", format!("echo {i}")]}),
            Some(meta(None)),
        );
        if is_error(&result) {
            refused.push(result);
            continue;
        }
        let id = lnk_tests::tools::started(&result);
        bg.wait_record(&id, ANSWER, |r| r["status"]["state"] != "running");
        wait_no_supervisor(&id, ANSWER);
    }
    done.store(true, Ordering::Relaxed);
    let probes = prober.join().unwrap();
    assert!(probes > 0, "the locks were never probed");
    assert!(
        refused.is_empty(),
        "starts refused while no run ran ({probes} probes): {refused:#?}"
    );
}

/// Where Linux caps the inotify instances of one user.
const INOTIFY_INSTANCES: &str = "/proc/sys/fs/inotify/max_user_instances";
/// At most this many runs at once, however high a machine's inotify cap: the test then shows
/// less than it means to, and says so.
const MANY_CAP: usize = 300;
/// How long the many runs have to start, and to end, on a loaded machine.
const MANY_WAIT: Duration = Duration::from_secs(180);

/// How many supervisors to run at once: more than one user may hold inotify instances (each
/// supervisor once took one, and the 129th run of a user went `lost`), so that any object of
/// that kind per run fails the test wherever it runs.
fn more_than_inotify_allows() -> usize {
    let cap = std::fs::read_to_string(INOTIFY_INSTANCES)
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok())
        .unwrap_or(128);
    let many = cap.saturating_add(12);
    if many > MANY_CAP {
        eprintln!(
            "{INOTIFY_INSTANCES} is {cap}: running {MANY_CAP} supervisors, fewer than it allows"
        );
    }
    many.min(MANY_CAP)
}

/// The pids of the live supervisors of these runs (`lnk-link-supervise supervise <id> …`), in
/// one look at `/proc`.
fn supervisors_of(ids: &[String]) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot read /proc");
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let argv: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
            argv.get(1).is_some_and(|a| *a == b"supervise")
                && argv
                    .get(2)
                    .is_some_and(|a| ids.iter().any(|id| id.as_bytes() == *a))
        })
        .collect()
}

#[test]
fn more_supervisors_than_a_user_has_inotify_instances_all_run_and_all_stop() {
    let n = more_than_inotify_allows();
    let bg = Bg::new(Sandbox::Passthrough);
    let flags = Flags {
        background: u32::try_from(n + 8).unwrap_or(u32::MAX),
        timeout: "10m",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let mark = bg.marker();
    let ids: Vec<String> = (0..n)
        .map(|_| start(&mut serve, procs_args("linger", &mark, 600)))
        .collect();
    let programs = || {
        with_marker(&mark)
            .iter()
            .filter(|p| p.argv.get(1).is_some_and(|a| a == "linger"))
            .count()
    };
    let all_run = poll(MANY_WAIT, || programs() == n);
    assert!(all_run, "{} of {n} runs' programs run", programs());
    let running = list_within(&mut serve, PROMPT);
    let not_running: Vec<_> = running.iter().filter(|r| r["state"] != "running").collect();
    assert!(not_running.is_empty(), "runs not running: {not_running:#?}");
    assert_eq!(running.len(), n);
    assert_eq!(supervisors_of(&ids).len(), n, "a supervisor per run");
    // Each record names its supervisor, which a stop signals; no supervisor holds an inotify
    // instance, and each listens on a signalfd.
    for id in &ids {
        let record = bg.wait_record(id, ANSWER, |r| r["supervisor"]["pid"].is_i64());
        let pid = record["supervisor"]["pid"]
            .as_i64()
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or_else(|| panic!("a pid: {record}"));
        let fds: Vec<String> = fd_targets(pid).iter().map(|t| path_str(t)).collect();
        assert!(
            !fds.iter().any(|t| t.contains("inotify")),
            "supervisor {pid} holds an inotify instance: {fds:?}"
        );
        assert!(
            fds.iter().any(|t| t.contains("signalfd")),
            "supervisor {pid} has no signalfd: {fds:?}"
        );
    }

    // One by the `stop` tool, the rest by `stop --state`.
    let first = stopped_run(&stop(&mut serve, &ids[0]));
    assert_eq!(first["state"], "stopped", "{first}");
    let status = Command::new(link_supervise())
        .args(["stop", "--state", &path_str(&bg.state)])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|err| panic!("running stop --state: {err}"));
    assert!(status.success(), "stop --state failed: {status}");
    let ended = list_within(&mut serve, PROMPT);
    assert_eq!(ended.len(), n);
    let not_stopped: Vec<_> = ended.iter().filter(|r| r["state"] != "stopped").collect();
    assert!(
        not_stopped.is_empty(),
        "{} of {n} runs not recorded stopped: {not_stopped:#?}",
        not_stopped.len()
    );
    // Nothing is left: no program, no gate, no supervisor.
    wait_gone(&mark, MANY_WAIT);
    let gone = poll(MANY_WAIT, || supervisors_of(&ids).is_empty());
    assert!(gone, "supervisors still run: {:?}", supervisors_of(&ids));
}
