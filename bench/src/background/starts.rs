//! Items 1 and 2: `start` answered, and from `start` to the program running.

use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use serde_json::{Value, json};

use super::figures::{ms_row, now_ns, ns_diff_ms, read_stamp};
use super::place::Place;
use super::runs::{END_LIMIT, WARMUP, record_state, start_run, wait_ended};
use crate::report::{Report, Row};
use crate::serve::Serve;
use crate::stats::{self, Summary};

/// Item 1: `starts` starts of `true`, each after the previous run was recorded ended. Returns
/// a record of one of them, the template of item 4's records.
pub(super) fn starts(
    report: &mut Report,
    serve: &mut Serve,
    place: &Place,
    n: usize,
) -> Result<Value> {
    let mut answered = Vec::with_capacity(n);
    let mut template = None;
    for i in 0..WARMUP + n {
        let (id, took) = start_run(serve, "true", &[])?;
        let record = wait_ended(&place.state, &id, END_LIMIT, Duration::from_millis(1))?;
        if record_state(&record) != "exited" || record["status"]["exit"]["code"] != json!(0) {
            bail!("`true` in the background did not exit 0: {record}");
        }
        if i >= WARMUP {
            answered.push(took);
        }
        template.get_or_insert(record);
    }
    let s = Summary::of(&answered);
    report.section(&format!(
        "1. `start` of `true` ({n} starts, one session, each after the previous run ended)"
    ));
    report.row(Row::times_target(
        "write `start` -> read its answer",
        &s,
        "< 10 ms",
        s.median < Duration::from_millis(10),
    ));
    let quarter = (n / 4).max(1).min(answered.len());
    let first = Summary::of(&answered[..quarter]);
    let last = Summary::of(&answered[answered.len() - quarter..]);
    report.row(Row::times(
        &format!("  the first {quarter} ({WARMUP} older records)"),
        &first,
    ));
    report.row(Row::times(
        &format!(
            "  the last {quarter} ({} older records)",
            WARMUP + n - quarter
        ),
        &last,
    ));
    template.ok_or_else(|| anyhow!("no run was started"))
}

/// Item 2: runs of the stamp writer; from just before the `start` request is written to the
/// time the program stamps when it runs.
pub(super) fn to_running(
    report: &mut Report,
    serve: &mut Serve,
    place: &Place,
    n: usize,
) -> Result<()> {
    let mut to_program = Vec::with_capacity(n);
    let mut after_answer = Vec::with_capacity(n);
    let mut answered = Vec::with_capacity(n);
    for i in 0..WARMUP.min(n) + n {
        let name = format!("stamp-run-{i}");
        let before = now_ns();
        let (id, took) = start_run(serve, "lnk-bench-stamp", &[&name])?;
        let stamp = read_stamp(&place.files, &name, END_LIMIT)?;
        wait_ended(&place.state, &id, END_LIMIT, Duration::from_millis(1))?;
        if i >= WARMUP.min(n) {
            to_program.push(ns_diff_ms(stamp, before));
            after_answer.push(ns_diff_ms(stamp, before + took.as_nanos()));
            answered.push(stats::ms(took));
        }
    }
    report.section(&format!(
        "2. from `start` to the program running ({n} runs of a program that stamps the time)"
    ));
    report.row(ms_row(
        "write `start` -> program's first instruction",
        &to_program,
        Some(("< 20 ms", 20.0)),
    ));
    report.row(ms_row("  of which: write -> answer read", &answered, None));
    report.row(ms_row(
        "  of which: answer read -> program",
        &after_answer,
        None,
    ));
    Ok(())
}
