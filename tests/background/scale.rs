//! What `serve` holds for runs, and what a start depends on (issues 9 and 12): nothing per
//! live run in `serve` (no thread, no child); a start is never refused because someone else —
//! a sweep, a `list`, a `stop` — is testing a run's lock at that moment.
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::json;

use crate::procs::{wait_for_role, wait_gone};
use crate::runs::{
    Bg, Flags, meta, poll, procs_args, start, stop, tool, wait_no_supervisor, wait_supervisor,
};
use crate::sandbox::Sandbox;
use crate::serve::{ANSWER, is_error};

/// The threads of `pid`.
fn threads(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|entries| entries.count())
        .unwrap_or(0)
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
            seen = threads(serve_pid);
            seen <= at_most
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
    // tool threads end with their calls; the supervisors are nobody's children here).
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
        let id = crate::runs::started(&result);
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
