//! Item 8: `read` that waits — from the program's write of the text waited for to the answer
//! at the client, and what many waiting reads cost while nothing is written.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::json;

use super::figures::{ms_row, now_ns, ns_diff_ms};
use super::options::Options;
use super::place::{Bins, Place};
use super::runs::{CALL_LIMIT, WARMUP, start_run};
use crate::procs;
use crate::report::{Report, Row};

/// How long a latency run's program sleeps before it prints `ready`: long enough that the
/// read is waiting by then.
const READY_AFTER_MS: &str = "300";

/// Item 8, on the state folder of items 1 to 3.
pub(super) fn waits(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    options: &Options,
) -> Result<()> {
    let mut serve = place.serve(bins, "waits", &place.state, false)?;
    let mut latencies = Vec::with_capacity(options.waits);
    for i in 0..WARMUP.min(options.waits) + options.waits {
        let (id, _) = start_run(&mut serve, "lnk-bench-ready", &[READY_AFTER_MS, "600"])?;
        let (value, _) = serve.call_tool(
            "read",
            &json!({"id": id, "offset": 0, "wait_ms": 10_000, "until": "ready "}),
            None,
            CALL_LIMIT,
        )?;
        let arrived = now_ns();
        if value["matched"] != true {
            bail!("the waiting read did not see `ready`: {value}");
        }
        let text = value["text"].as_str().unwrap_or_default();
        let stamp: u128 = text
            .trim()
            .strip_prefix("ready ")
            .and_then(|ns| ns.parse().ok())
            .with_context(|| format!("no stamp in {text:?}"))?;
        if i >= WARMUP.min(options.waits) {
            latencies.push(ns_diff_ms(arrived, stamp));
        }
        serve.call_tool("stop", &json!({"id": id}), None, CALL_LIMIT)?;
    }
    report.section(&format!(
        "8. `read` that waits ({} reads, each for `ready` printed 300 ms after its start)",
        options.waits
    ));
    report.row(ms_row(
        "the program's write of `ready` -> the answer read",
        &latencies,
        Some(("< 5 ms", 5.0)),
    ));

    // Many reads waiting on one run that writes nothing.
    let n = options.idle_reads;
    let (id, _) = start_run(&mut serve, "sleep", &["600"])?;
    let mut calls = Vec::with_capacity(n);
    for _ in 0..n {
        let params =
            json!({"name": "read", "arguments": {"id": id, "wait_ms": 60_000, "until": "never"}});
        calls.push(serve.send_request("tools/call", &params)?);
    }
    // Settled: every read is waiting.
    std::thread::sleep(Duration::from_secs(1));
    let before = procs::cpu_time(serve.pid())?;
    std::thread::sleep(Duration::from_secs(options.idle_secs));
    let after = procs::cpu_time(serve.pid())?;
    for call in calls {
        serve.notify("notifications/cancelled", &json!({"requestId": call}))?;
    }
    serve.call_tool("stop", &json!({"id": id}), None, CALL_LIMIT)?;
    serve.shutdown()?;
    let spent = after.saturating_sub(before);
    report.row(Row::value(
        &format!("{n} reads waiting {} s: serve's CPU", options.idle_secs),
        format!("{:.3} s", spent.as_secs_f64()),
        String::new(),
        Some(("< 0.5 s".to_owned(), spent < Duration::from_millis(500))),
    ));
    Ok(())
}
