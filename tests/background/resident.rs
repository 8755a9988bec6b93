//! What an idle run costs in memory (issue 9): once the run has settled, its supervisor and
//! its gate give back the pages of code their start touched, so each holds little more than
//! its own memory while it sleeps; a run that printed and went quiet gives them back a second
//! after, its read buffer too, with one wake-up and no more; a run woken after that still
//! keeps its output whole and stops as asked; and a supervisor into which a library was
//! preloaded sheds nothing (the library's code could change its mappings unseen).
use std::time::Duration;

use serde_json::json;

use lnk_tests::bins::procs;
use lnk_tests::procs::{poll, proc_field, sleeps, wait_supervisor};
use lnk_tests::procs::{wait_for_role, wait_gone};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{procs_args, start, stop, stopped_run};

both_sandboxes!(
    an_idle_supervisor_and_gate_give_back_their_code_pages,
    a_run_that_printed_then_went_quiet_gives_them_back_once,
    a_supervisor_with_a_preloaded_library_sheds_nothing,
);

/// Far above what a settled supervisor or gate keeps mapped of files (under 200 KiB here),
/// far below what its start maps (about 2.5 MiB).
const SETTLED_FILE_KIB: u64 = 1024;

/// A field of `/proc/<pid>/smaps_rollup`, in KiB.
fn rollup_kib(pid: i32, name: &str) -> u64 {
    proc_field(pid, "smaps_rollup", name)
        .and_then(|value| value.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in the smaps_rollup of pid {pid}"))
}

/// What `pid` has mapped of files (its code and its libraries'), in KiB.
fn file_backed_kib(pid: i32) -> u64 {
    rollup_kib(pid, "Rss:") - rollup_kib(pid, "Anonymous:")
}

/// Waits until `pid` maps less than [`SETTLED_FILE_KIB`] of files.
fn wait_settled(pid: i32, what: &str) {
    let settled = poll(ANSWER, || file_backed_kib(pid) < SETTLED_FILE_KIB);
    assert!(
        settled,
        "the {what} (pid {pid}) still maps {} KiB of files {ANSWER:?} after its run settled",
        file_backed_kib(pid)
    );
}

fn an_idle_supervisor_and_gate_give_back_their_code_pages(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    bg.wait_record(&id, ANSWER, |r| r["sandbox"]["pgid"].is_i64());
    let supervisor = wait_supervisor(&id, ANSWER);
    let (_, gate) = bg.group(&id);
    wait_settled(supervisor.pid, "supervisor");
    wait_settled(gate, "gate");
    // Woken by the stop, both map back what they need and end the run as asked.
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, ANSWER);
}

fn a_run_that_printed_then_went_quiet_gives_them_back_once(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    // In the files folder, the run's working folder.
    let go_on = bg.setup.files.join("go-on");
    // 20,000 lines at once, then quiet until the test says so, then one line more, then
    // lingering.
    // The marker is the shell's own argument (`$1`), so that a failed test's guard finds the
    // shell too, and not only what it execs.
    let script = format!(
        "seq 1 20000; echo printed; while [ ! -e go-on ]; do sleep 0.1; done; \
         echo again; exec '{}' linger \"$1\" 120",
        procs()
    );
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, "sh", mark]}),
    );
    let output = bg.output_path(&id);
    let printed = poll(ANSWER, || {
        std::fs::read_to_string(&output).is_ok_and(|text| text.ends_with("printed\n"))
    });
    assert!(printed, "the run's output never ended in `printed`");
    let supervisor = wait_supervisor(&id, ANSWER);
    wait_settled(supervisor.pid, "supervisor");
    // Shed once: no wake-up comes after it while the run is quiet (its `sleep 0.1` loop is
    // the shell's, not the supervisor's).
    std::thread::sleep(Duration::from_millis(300));
    let before = sleeps(supervisor.pid);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        sleeps(supervisor.pid),
        before,
        "the supervisor woke up again after it gave back its pages"
    );
    // Woken by more output, read into the buffer it gave back: the output stays whole.
    std::fs::write(&go_on, b"").unwrap_or_else(|err| panic!("writing {go_on:?}: {err}"));
    wait_for_role(&mark, "linger", ANSWER);
    let again = poll(ANSWER, || {
        std::fs::read_to_string(&output).is_ok_and(|text| text.ends_with("printed\nagain\n"))
    });
    let text = std::fs::read_to_string(&output).unwrap_or_default();
    assert!(
        again,
        "the output does not end in `printed`, `again`: …{}",
        tail(&text)
    );
    let expected: String = (1..=20000).map(|n| format!("{n}\n")).collect();
    assert!(
        text.starts_with(&expected),
        "the first 20,000 lines are not whole: …{}",
        tail(&text)
    );
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, ANSWER);
}

/// The last 200 bytes of `text`, for a message.
fn tail(text: &str) -> &str {
    let mut from = text.len().saturating_sub(200);
    while !text.is_char_boundary(from) {
        from += 1;
    }
    &text[from..]
}

/// The path of this test process's libc, as mapped: a library every Link Run binary loads, so
/// preloading it changes nothing but the environment.
fn libc_path() -> String {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .unwrap_or_else(|err| panic!("reading /proc/self/maps: {err}"));
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.contains("/libc.so") || path.contains("/libc-"))
        .unwrap_or_else(|| panic!("no libc mapped in {maps}"))
        .to_owned()
}

fn a_supervisor_with_a_preloaded_library_sheds_nothing(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg
        .serve(&Flags::default())
        .env("LD_PRELOAD", libc_path())
        .env("RUST_LOG", "lnk_common::resident=debug")
        .start();
    let mark = bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    bg.wait_record(&id, ANSWER, |r| r["sandbox"]["pgid"].is_i64());
    let supervisor = wait_supervisor(&id, ANSWER);
    let log = bg.state.join(format!("{id}.log"));
    let said = poll(ANSWER, || {
        std::fs::read_to_string(&log).is_ok_and(|text| text.contains("a library is preloaded"))
    });
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        said,
        "the supervisor's log does not say why it shed nothing: {text}"
    );
    assert!(
        !text.contains("unmapped the code pages"),
        "a supervisor with a preloaded library shed its pages: {text}"
    );
    assert!(
        file_backed_kib(supervisor.pid) >= SETTLED_FILE_KIB,
        "the supervisor maps only {} KiB of files",
        file_backed_kib(supervisor.pid)
    );
    // Its gate's environment is cleared: the preload never reaches it, and it sheds.
    let (_, gate) = bg.group(&id);
    wait_settled(gate, "gate");
    assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
    wait_gone(&mark, ANSWER);
}
