//! Item 9: `watch` as an MCP task, beside the swept folder's kept records — from the program's
//! write of the line watched for to `tasks/get` answering `completed`, and what many watches
//! cost while nothing is written.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::figures::{ms_row, now_ns, ns_diff_ms};
use super::options::Options;
use super::place::{Bins, Place};
use super::runs::{CALL_LIMIT, WARMUP, start_run};
use super::tasks::modern_meta;
use crate::procs;
use crate::report::{Report, Row};
use crate::serve::Serve;

/// How long a latency run's program sleeps before it prints `ready`: long enough that the
/// watch waits by then.
const READY_AFTER_MS: &str = "300";

/// A `watch` whose request declares the Tasks extension: the watch's task id.
fn watch(serve: &mut Serve, arguments: &Value) -> Result<String> {
    let params = json!({"name": "watch", "arguments": arguments, "_meta": modern_meta(true)});
    let (created, _) = serve.request("tools/call", &params, CALL_LIMIT)?;
    match created["taskId"].as_str() {
        Some(id) if created["resultType"] == "task" => Ok(id.to_owned()),
        _ => bail!("`watch` answered no task: {created}"),
    }
}

/// `tasks/get` of `task`.
fn get(serve: &mut Serve, task: &str) -> Result<Value> {
    let params = json!({"taskId": task, "_meta": modern_meta(true)});
    Ok(serve.request("tasks/get", &params, CALL_LIMIT)?.0)
}

/// Item 9, over the swept folder of `options.records` records.
pub(super) fn watches(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    options: &Options,
) -> Result<()> {
    let mut serve = place.serve(bins, "watches", &place.swept, false)?;
    let mut latencies = Vec::with_capacity(options.watches);
    let mut polls = 0usize;
    for i in 0..WARMUP.min(options.watches) + options.watches {
        let (id, _) = start_run(&mut serve, "lnk-bench-ready", &[READY_AFTER_MS, "600"])?;
        let task = watch(
            &mut serve,
            &json!({"id": id, "until": "ready ", "offset": 0}),
        )?;
        // Asked again and again, back to back: the first `completed` is read as soon as the
        // watch has stored its end.
        let (done, arrived) = loop {
            let got = get(&mut serve, &task)?;
            let arrived = now_ns();
            polls += 1;
            match got["status"].as_str() {
                Some("working") => {}
                Some("completed") => break (got, arrived),
                _ => bail!("the watch of {id} ended otherwise: {got}"),
            }
        };
        let line = done["result"]["structuredContent"]["line"]
            .as_str()
            .unwrap_or_default();
        let stamp: u128 = line
            .strip_prefix("ready ")
            .and_then(|ns| ns.parse().ok())
            .with_context(|| format!("no stamp in the watch's line {line:?}: {done}"))?;
        if i >= WARMUP.min(options.watches) {
            latencies.push(ns_diff_ms(arrived, stamp));
        }
        serve.call_tool("stop", &json!({"id": id}), None, CALL_LIMIT)?;
    }
    report.section(&format!(
        "9. `watch` as a task, beside {} kept records ({} watches, each for `ready` printed 300 ms \
         after its run's start; `tasks/get` asked back to back, {polls} in all)",
        options.records, options.watches
    ));
    report.row(ms_row(
        "the program's write of `ready` -> `tasks/get` read `completed`",
        &latencies,
        Some(("< 5 ms", 5.0)),
    ));

    // Many watches waiting on one run that writes nothing.
    let n = options.idle_watches;
    let (id, _) = start_run(&mut serve, "sleep", &["600"])?;
    for _ in 0..n {
        watch(&mut serve, &json!({"id": id, "until": "never"}))?;
    }
    // Settled: every watch waits.
    std::thread::sleep(Duration::from_secs(1));
    let before = procs::cpu_time(serve.pid())?;
    std::thread::sleep(Duration::from_secs(options.idle_secs));
    let after = procs::cpu_time(serve.pid())?;
    serve.call_tool("stop", &json!({"id": id}), None, CALL_LIMIT)?;
    serve.shutdown()?;
    let spent = after.saturating_sub(before);
    let per_minute = spent.as_secs_f64() * 60.0 / options.idle_secs.max(1) as f64;
    report.row(Row::value(
        &format!("{n} watches waiting {} s: serve's CPU", options.idle_secs),
        format!(
            "{:.3} s ({per_minute:.3} CPU-s per minute)",
            spent.as_secs_f64()
        ),
        String::new(),
        Some((
            "0 CPU-s per minute".to_owned(),
            spent < Duration::from_millis(10),
        )),
    ));
    Ok(())
}
