//! The caps: `--background` is never exceeded however many starts race from several sessions;
//! `--background-timeout` ends a run as `timed_out`; `--background-output` keeps the output file
//! bounded through rotations while `read` offsets stay true and the counts add up; and the
//! refusals: `--hops`, a malformed thread, and what `command` refuses; starts without a thread
//! when there is no way in.
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lnk_tests::bins::write;
use lnk_tests::procs::{wait_for_role, wait_gone};
use lnk_tests::procs::{wait_group_gone, wait_no_supervisor};
use lnk_tests::results::{is_error, ok, structured, text};
use lnk_tests::runs::{Bg, Flags, unit};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::tools::{
    PROMPT, listed, meta, procs_args, read, read_ok, send_tool, start, started, stop, stopped_run,
    tool, wait_ended,
};

both_sandboxes!(
    racing_starts_never_exceed_background,
    timeout_ends_a_run_as_timed_out,
    output_cap_bounds_the_file_and_offsets_stay_true,
    refusals_at_hops_and_starts_without_a_thread,
);

/// The markers among `markers` that a live `lnk-test-procs linger <marker>` carries, from one
/// pass over `/proc`.
fn lingering(markers: &HashSet<String>) -> HashSet<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        panic!("cannot read /proc");
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let mut argv = raw.split(|b| *b == 0);
            let _program = argv.next()?;
            (argv.next()? == b"linger").then_some(())?;
            let mark = String::from_utf8_lossy(argv.next()?).into_owned();
            markers.contains(&mark).then_some(mark)
        })
        .collect()
}

fn racing_starts_never_exceed_background(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        background: 3,
        ..Flags::default()
    };
    let mut serves: Vec<Serve> = (0..4).map(|_| bg.serve(&flags).start()).collect();
    let marks: Vec<String> = (0..20).map(|_| bg.marker()).collect();

    // Counts the lingering runs all along, in the background.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = Arc::clone(&done);
        let marks: HashSet<String> = marks.iter().cloned().collect();
        std::thread::spawn(move || {
            let mut peak = HashSet::new();
            while !done.load(Ordering::Relaxed) {
                let now = lingering(&marks);
                if now.len() > peak.len() {
                    peak = now;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };

    // 4 sessions × 5 starts, all sent before any answer is awaited.
    let mut asked = Vec::new();
    for (i, mark) in marks.iter().enumerate() {
        let serve = i % serves.len();
        let id = send_tool(
            &mut serves[serve],
            "start",
            procs_args("linger", mark, 120),
            Some(meta(None)),
        );
        asked.push((serve, id, mark.clone()));
    }
    let mut accepted = Vec::new();
    let mut refused = Vec::new();
    for (serve, id, mark) in asked {
        let result = serves[serve].call_result(id, ANSWER);
        if is_error(&result) {
            refused.push(text(&result));
        } else {
            accepted.push((started(&result), mark));
        }
    }
    // The accepted runs all come up, and stay the only ones.
    for (_, mark) in &accepted {
        wait_for_role(mark, "linger", ANSWER);
    }
    let running: Vec<String> = bg
        .record_ids()
        .into_iter()
        .filter(|id| {
            bg.record(id)
                .is_some_and(|r| r["status"]["state"] == "running")
        })
        .collect();
    done.store(true, Ordering::Relaxed);
    let peak = sampler.join().unwrap();

    assert_eq!(
        accepted.len(),
        3,
        "exactly --background starts are accepted while they run; refusals: {refused:#?}"
    );
    assert_eq!(refused.len(), 17);
    assert!(
        refused.iter().all(|t| !t.trim().is_empty()),
        "a refusal says why: {refused:#?}"
    );
    assert!(
        peak.len() <= 3,
        "{} runs lingered at once: {peak:?}",
        peak.len()
    );
    assert_eq!(running.len(), 3, "running records: {running:?}");
    assert_eq!(bg.record_ids().len(), 3, "a refused start wrote no record");

    for (id, mark) in &accepted {
        let run = stopped_run(&stop(&mut serves[0], id));
        assert_eq!(run["state"], "stopped", "{run}");
        wait_gone(mark, Duration::from_secs(10));
        // A run counts as running while its supervisor holds its lock.
        wait_no_supervisor(id, Duration::from_secs(10));
    }
    for mark in &marks {
        wait_gone(mark, Duration::from_secs(5));
    }
    // With the runs ended, a start is accepted again.
    let mark = bg.marker();
    let id = start(&mut serves[1], procs_args("linger", &mark, 120));
    wait_for_role(&mark, "linger", ANSWER);
    stopped_run(&stop(&mut serves[1], &id));
    wait_gone(&mark, Duration::from_secs(10));
}

fn timeout_ends_a_run_as_timed_out(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        timeout: "1s",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let mark = bg.marker();
    let asked = Instant::now();
    let id = start(&mut serve, procs_args("tree", &mark, 120));
    let (pgid, _leader) = bg.group(&id);
    let run = wait_ended(&mut serve, &id, Duration::from_secs(20));
    let took = asked.elapsed();
    assert_eq!(run["state"], "timed_out", "{run}");
    assert!(!run["ended_at"].is_null(), "{run}");
    assert!(
        took >= Duration::from_millis(900),
        "ended after {took:?}, before its 1 s timeout"
    );
    wait_gone(&mark, Duration::from_secs(10));
    wait_group_gone(pgid, Duration::from_secs(10));
    wait_no_supervisor(&id, Duration::from_secs(10));
    assert_eq!(bg.record(&id).unwrap()["status"]["state"], "timed_out");
}

/// Checks a `read` at `asked` (an offset) against the pattern; returns its `next_offset`.
fn check_read(unit: &[u8], asked: Option<u64>, bytes: &str, value: &Value) -> u64 {
    let next = value["next_offset"]
        .as_u64()
        .unwrap_or_else(|| panic!("next_offset: {value}"));
    let dropped = value["dropped_bytes"].as_u64().unwrap();
    let skipped = value["skipped"].as_u64().unwrap();
    let len = bytes.len() as u64;
    assert!(len <= next, "{len} bytes end at {next}: {value}");
    let from = next - len;
    assert!(
        from >= dropped,
        "bytes read from {from}, below dropped {dropped}: {value}"
    );
    assert!(
        value["output_bytes"].as_u64().unwrap() >= next,
        "read past output_bytes: {value}"
    );
    if let Some(asked) = asked {
        if skipped == 0 {
            assert_eq!(from, asked, "read where asked: {value}");
        } else {
            assert!(
                from > asked && skipped <= from - asked,
                "skipped {skipped} of the bytes from {asked}, read from {from}: {value}"
            );
        }
        assert!(
            value["offset"] == asked || value["offset"] == from,
            "offset is where it was asked or where it read: {value}"
        );
    }
    // Where the bytes came from decides what they are: a stale offset would show here.
    let expected = bursts(unit, from, bytes.len());
    if bytes != expected {
        let first_bad = bytes
            .bytes()
            .zip(expected.bytes())
            .position(|(a, b)| a != b);
        panic!(
            "bytes read at {from} are not the writer's bytes there (first differs at +{first_bad:?}): {value}"
        );
    }
    next
}

/// A `read` that may be refused while rotations follow each other fast: the runner then says
/// to try again (its retries are bounded), which this does, counting the refusals, for up to
/// [`PROMPT`].
fn read_retrying(serve: &mut Serve, arguments: Value, refusals: &mut u32) -> (String, Value) {
    let deadline = Instant::now() + PROMPT;
    loop {
        let result = read(serve, arguments.clone());
        if !is_error(&result) {
            return (text(&result), structured(&result).clone());
        }
        assert!(
            text(&result).contains("try again") && Instant::now() < deadline,
            "read {arguments} was refused: {result}"
        );
        *refusals += 1;
    }
}

/// How many bursts the writer of the output test writes, and how many bytes each.
const BURSTS: u64 = 100;
const BURST: u64 = 100_000;

/// Bytes `[from, from + len)` of `BURSTS` bursts of `lnk-test-write 1 BURST <unit>`: each burst
/// starts the unit over.
fn bursts(unit: &[u8], from: u64, len: usize) -> String {
    let n = unit.len() as u64;
    (from..from + len as u64)
        .map(|at| char::from(unit[usize::try_from(at % BURST % n).unwrap()]))
        .collect()
}

fn output_cap_bounds_the_file_and_offsets_stay_true(sandbox: Sandbox) {
    const CAP: u64 = 64 * 1024;
    const TOTAL: u64 = BURSTS * BURST;
    let bg = Bg::new(sandbox);
    let flags = Flags {
        output: "64KiB",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).output("16KiB").start();
    let background = bg.setup.files.join("background");

    // Samples every output file's size, all along.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let done = Arc::clone(&done);
        let background = background.clone();
        std::thread::spawn(move || {
            let (mut peak, mut samples) = (0u64, 0u64);
            while !done.load(Ordering::Relaxed) {
                for entry in std::fs::read_dir(&background)
                    .into_iter()
                    .flatten()
                    .flatten()
                {
                    let is_out = entry
                        .file_name()
                        .to_str()
                        .is_some_and(|n| n.ends_with(".out"));
                    if let (true, Ok(meta)) = (is_out, entry.metadata()) {
                        peak = peak.max(meta.len());
                        samples += 1;
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            (peak, samples)
        })
    };

    let unit = unit();
    // 100 bursts of 100,000 bytes as fast as they go, 10 ms apart: each burst passes the cap,
    // and the run lasts long enough to be read while it rotates.
    let script = format!(
        "i=0; while [ $i -lt {BURSTS} ]; do \"$1\" 1 {BURST} {}; \"$2\" 0.01; i=$((i+1)); done",
        hex::encode(&unit)
    );
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, "sh", write(), "/usr/bin/sleep"]}),
    );
    // Read on while it writes: through next_offset, and the tail.
    let (mut offset, mut reads, mut rotated_reads, mut refusals) = (0u64, 0u32, 0u32, 0u32);
    loop {
        let (bytes, value) = read_retrying(
            &mut serve,
            json!({"id": id, "offset": offset, "limit": 8192}),
            &mut refusals,
        );
        offset = check_read(&unit, Some(offset), &bytes, &value);
        let rotated = value["dropped_bytes"].as_u64().unwrap() > 0;
        let (bytes, value) =
            read_retrying(&mut serve, json!({"id": id, "limit": 4096}), &mut refusals);
        check_read(&unit, None, &bytes, &value);
        reads += 1;
        if value["state"] != "running" {
            break;
        }
        if rotated {
            rotated_reads += 1;
        }
    }
    let run = wait_ended(&mut serve, &id, ANSWER);
    wait_no_supervisor(&id, Duration::from_secs(10));
    done.store(true, Ordering::Relaxed);
    let (peak, samples) = sampler.join().unwrap();
    eprintln!(
        "{reads} read pairs while running ({rotated_reads} after a rotation, {refusals} refusals to try again); {samples} size samples, peak {peak}"
    );
    assert!(
        rotated_reads > 0,
        "no read while the run ran after a rotation ({reads} read pairs)"
    );

    assert_eq!(run["state"], "exited", "{run}");
    assert_eq!(run["exit_code"], 0, "{run}");
    assert!(
        peak <= 2 * CAP,
        "the output file grew to {peak} bytes, over twice the cap {CAP} (one rotation step)"
    );
    let len = std::fs::symlink_metadata(bg.output_path(&id))
        .unwrap()
        .len();
    assert!(
        len <= 2 * CAP,
        "the output file ends at {len} bytes, cap {CAP}"
    );
    let (output, dropped) = (
        run["output_bytes"].as_u64().unwrap(),
        run["dropped_bytes"].as_u64().unwrap(),
    );
    assert_eq!(output, TOTAL, "every byte is counted: {run}");
    assert_eq!(
        dropped + len,
        output,
        "dropped + the file's length: {run}, file {len}"
    );
    let record = bg.record(&id).unwrap();
    assert_eq!(record["output"]["written_bytes"], TOTAL, "{record}");
    assert_eq!(record["output"]["dropped_bytes"], dropped, "{record}");

    // After the end: the tail, then offsets below, at and above what was dropped.
    let (bytes, value) = read_ok(&mut serve, json!({"id": id}));
    assert_eq!(check_read(&unit, None, &bytes, &value), TOTAL, "{value}");
    assert_eq!(
        bytes.len(),
        16 * 1024,
        "the limit defaults to --output: {value}"
    );
    let (bytes, value) = read_ok(&mut serve, json!({"id": id, "offset": 0, "limit": 100}));
    check_read(&unit, Some(0), &bytes, &value);
    assert!(
        value["skipped"].as_u64().unwrap() > 0,
        "offset 0 was dropped: {value}"
    );
    for at in [dropped, dropped + 1, TOTAL - 89, TOTAL - 1] {
        let (bytes, value) = read_ok(&mut serve, json!({"id": id, "offset": at, "limit": 1000}));
        check_read(&unit, Some(at), &bytes, &value);
        assert_eq!(value["skipped"], 0, "{value}");
    }
}

fn refusals_at_hops_and_starts_without_a_thread(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        hops: 2,
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let mark = bg.marker();
    let linger = procs_args("linger", &mark, 120);
    let thread = |hops: Value| json!({"link.local/thread": "th-x", "link.local/hops": hops});
    let cases: Vec<(Option<Value>, Value, &str)> = vec![
        (
            Some(json!({"link.local/thread": 7})),
            linger.clone(),
            "thread",
        ),
        (Some(thread(json!(2))), linger.clone(), "hops"),
        (Some(json!({"link.local/hops": 2})), linger.clone(), "hops"),
        (Some(thread(json!(9))), linger.clone(), "hops"),
        (
            Some(meta(None)),
            json!({"program": "rm", "args": ["-rf", "x"]}),
            "lnk-test-procs",
        ),
        (
            Some(meta(None)),
            json!({"program": "lnk-test-procs", "args": ["linger", mark, "120"], "dir": ".."}),
            "",
        ),
        (
            Some(meta(None)),
            json!({"program": "lnk-test-procs", "args": ["linger", mark, "120"], "dir": "/"}),
            "",
        ),
    ];
    for (meta, arguments, says) in cases {
        let result = tool(&mut serve, "start", arguments.clone(), meta.clone());
        assert!(is_error(&result), "{meta:?} {arguments}: {result}");
        let why = text(&result);
        assert!(
            why.to_lowercase().contains(says),
            "the refusal of {meta:?} {arguments} says `{says}`: {why}"
        );
    }
    assert!(
        lnk_tests::procs::with_marker(&mark).is_empty(),
        "a refused start ran"
    );
    assert_eq!(
        bg.record_ids(),
        Vec::<String>::new(),
        "a refused start wrote a record"
    );

    // Below --hops, without hops (0), and — with no way in, so nobody is told — without a
    // conversation or any `_meta` at all (hosts such as Claude Code, Codex and Gemini CLI send
    // none), runs start.
    for meta in [
        Some(thread(json!(1))),
        Some(json!({"link.local/thread": "th-x"})),
        Some(json!({})),
        Some(json!({"link.local/thread": ""})),
        None,
    ] {
        let mark = bg.marker();
        let result = tool(&mut serve, "start", procs_args("linger", &mark, 120), meta);
        let id = started(&result);
        wait_for_role(&mark, "linger", ANSWER);
        assert_eq!(stopped_run(&stop(&mut serve, &id))["state"], "stopped");
        wait_gone(&mark, Duration::from_secs(10));
        assert_eq!(listed(&mut serve, &id)["state"], "stopped");
    }
    let record_hops: Vec<Value> = bg
        .record_ids()
        .iter()
        .filter_map(|id| bg.record(id))
        .map(|r| r["launch"]["hops"].clone())
        .collect();
    assert!(
        record_hops.contains(&json!(1)) && record_hops.contains(&json!(0)),
        "the records keep the hops: {record_hops:?}"
    );
    // The server keeps serving.
    ok(&serve.request("tools/list", json!({})));
}
