//! Item 7: background runs as MCP tasks beside the swept folder's records — `tasks/get` of a
//! running and of an ended run, and a `start` that declares the Tasks extension against one
//! that does not, interleaved in one session.

use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::options::Options;
use super::place::{Bins, Place};
use super::runs::{CALL_LIMIT, END_LIMIT, WARMUP, meta, start_run, wait_ended};
use crate::report::{Report, Row};
use crate::serve::Serve;
use crate::stats::Summary;

/// A 2026-07-28 request's `_meta`, declaring the Tasks extension or not.
pub(super) fn modern_meta(declares: bool) -> Value {
    let extensions = if declares {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": extensions,
        "io.modelcontextprotocol/clientInfo": {"name": "lnk-bench", "version": env!("CARGO_PKG_VERSION")},
    })
}

/// `tasks/get` (or another task method) of `task`: its result and its time.
fn task_request(serve: &mut Serve, method: &str, task: &str) -> Result<(Value, Duration)> {
    serve.request(
        method,
        &json!({"taskId": task, "_meta": modern_meta(true)}),
        CALL_LIMIT,
    )
}

/// A 2026-07-28 `start` of `true`, declaring the extension or not: the run's id and the time.
fn modern_start(serve: &mut Serve, declares: bool) -> Result<(String, Duration)> {
    let mut params = json!({"name": "start", "arguments": {"program": "true"}});
    let mut with = modern_meta(declares);
    for (key, value) in meta().as_object().into_iter().flatten() {
        with[key] = value.clone();
    }
    params["_meta"] = with;
    let (result, took) = serve.request("tools/call", &params, CALL_LIMIT)?;
    let id = if declares {
        result["taskId"].as_str()
    } else {
        result["structuredContent"]["id"].as_str()
    };
    match id {
        Some(id) => Ok((id.to_owned(), took)),
        None => bail!("`start` (declared: {declares}) answered {result}"),
    }
}

/// Item 7, over the swept folder of `options.records` records.
pub(super) fn tasks(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    options: &Options,
) -> Result<()> {
    let n = options.tasks;
    let mut serve = place.serve(bins, "tasks", &place.swept, false)?;
    let (running, _) = start_run(&mut serve, "sleep", &["600"])?;
    let (ended, _) = start_run(&mut serve, "true", &[])?;
    wait_ended(&place.swept, &ended, END_LIMIT, Duration::from_millis(1))?;
    let (mut of_running, mut of_ended) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + n {
        for (task, times, status) in [
            (&running, &mut of_running, "working"),
            (&ended, &mut of_ended, "completed"),
        ] {
            let (result, took) = task_request(&mut serve, "tasks/get", task)?;
            if result["status"] != status {
                bail!("tasks/get of {task}: {result}, expected {status}");
            }
            if i >= WARMUP {
                times.push(took);
            }
        }
    }
    let (mut declared, mut plain) = (Vec::new(), Vec::new());
    for i in 0..WARMUP + n {
        // Which goes first alternates, so that neither always follows the other's end.
        let order = if i % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for declares in order {
            let (id, took) = modern_start(&mut serve, declares)?;
            wait_ended(&place.swept, &id, END_LIMIT, Duration::from_millis(1))?;
            if i >= WARMUP {
                if declares { &mut declared } else { &mut plain }.push(took);
            }
        }
    }
    task_request(&mut serve, "tasks/cancel", &running)?;
    serve.shutdown()?;

    let records = options.records;
    report.section(&format!(
        "7. background runs as MCP tasks, beside {records} kept records ({n} of each, interleaved)"
    ));
    let target = |s: &Summary| s.median < Duration::from_millis(2);
    let g = Summary::of(&of_running);
    report.row(Row::times_target(
        "`tasks/get` of a running run: write -> answer read",
        &g,
        "< 2 ms",
        target(&g),
    ));
    let g = Summary::of(&of_ended);
    report.row(Row::times_target(
        "`tasks/get` of an ended run (its result, the output's ends)",
        &g,
        "< 2 ms",
        target(&g),
    ));
    let d = Summary::of(&declared);
    let p = Summary::of(&plain);
    report.row(Row::times("`start` without the extension", &p));
    let ratio = d.median.as_secs_f64() / p.median.as_secs_f64().max(1e-9);
    report.row(Row::times_target(
        "`start` declaring it (answered with a task)",
        &d,
        &format!("within 10 % (ratio {ratio:.2})"),
        ratio <= 1.10,
    ));
    Ok(())
}
