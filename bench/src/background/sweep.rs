//! Item 4: a sweep and a `list` over a state folder of many ended records.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::figures::now_ns;
use super::options::Options;
use super::place::{AGENT, Bins, Place};
use super::runs::{CALL_LIMIT, END_LIMIT, WARMUP, start_run, wait_ended};
use crate::procs;
use crate::report::{Report, Row};
use crate::stats::Summary;

/// `--background-keep`, in milliseconds (the fabricated records carry it too).
const KEEP_MS: u64 = 3_600_000;

/// Item 4: a state folder of `records` ended, told, young records made from `template`:
/// `lnk-link-supervise sweep` over it, and `list` through a serve; then, with no target,
/// `start` with that many records beside it.
pub(super) fn sweep_and_list(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    template: &Value,
    options: &Options,
) -> Result<()> {
    let n = options.records;
    fabricate(place, template, n)?;
    let mut sweeps = Vec::with_capacity(options.sweeps);
    for i in 0..1 + options.sweeps {
        let begun = Instant::now();
        let out = Command::new(&bins.supervise)
            .arg("sweep")
            .arg(&place.swept)
            // As serve starts them.
            .arg("--routine")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("running lnk-link-supervise sweep")?;
        let took = begun.elapsed();
        if !out.status.success() || !out.stderr.is_empty() {
            bail!(
                "the sweep exited with {} and said: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        if i > 0 {
            sweeps.push(took);
        }
    }
    let left = count_records(&place.swept)?;
    if left != n {
        bail!("the sweeps should have left the {n} records alone; {left} are left");
    }

    let mut serve = place.serve(bins, "swept", &place.swept, false)?;
    // serve sweeps at its start, beside its first answers; let that sweep finish first.
    let swept = place.swept.to_string_lossy().into_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    while procs::running_with("lnk-link-supervise sweep")
        .iter()
        .any(|(_, cmdline)| cmdline.contains(&swept))
    {
        if Instant::now() >= deadline {
            bail!("serve's own sweep of {swept} did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut lists = Vec::with_capacity(options.sweeps);
    let mut list_bytes = 0;
    for i in 0..1 + options.sweeps {
        let (value, took) = serve.call_tool("list", &json!({}), None, CALL_LIMIT)?;
        // A page: 20 runs unless asked (the folder keeps more).
        let runs = value["runs"].as_array().map_or(0, Vec::len);
        if runs != n.min(20) {
            bail!(
                "`list` showed {runs} runs, expected a page of {}",
                n.min(20)
            );
        }
        if i > 0 {
            lists.push(took);
        }
        list_bytes = serve.last_answer_bytes();
    }
    let mut beside = Vec::new();
    for i in 0..WARMUP.min(options.starts) + 20.min(options.starts) {
        let (id, took) = start_run(&mut serve, "true", &[])?;
        wait_ended(&place.swept, &id, END_LIMIT, Duration::from_millis(1))?;
        if i >= WARMUP.min(options.starts) {
            beside.push(took);
        }
    }
    serve.shutdown()?;

    let s = Summary::of(&sweeps);
    let l = Summary::of(&lists);
    report.section(&format!(
        "4. a state folder of {n} ended, told, young records (nothing to do)"
    ));
    report.row(Row::times_target(
        "`lnk-link-supervise sweep`, the whole process",
        &s,
        "< 1 s",
        s.median < Duration::from_secs(1),
    ));
    report.row(Row::times_target(
        "`list` (a page) through serve: write -> answer read",
        &l,
        "< 300 ms",
        l.median < Duration::from_millis(300),
    ));
    report.row(Row::value(
        "  the size of `list`'s answer",
        format!("{:.1} MB", list_bytes as f64 / 1e6),
        String::new(),
        None,
    ));
    report.row(Row::times(
        &format!("  no target: `start` of `true` beside {n}"),
        &Summary::of(&beside),
    ));
    Ok(())
}

/// Writes `n` records shaped like `template` (a real record) into the swept state folder, with
/// their lock files: ended a second ago, exited 0, told, kept an hour.
fn fabricate(place: &Place, template: &Value, n: usize) -> Result<()> {
    let state = &place.swept;
    std::fs::create_dir(state).with_context(|| format!("creating {}", state.display()))?;
    std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700))?;
    let now_ms = u64::try_from(now_ns() / 1_000_000)?;
    let mut record = template.clone();
    record["launch"]["limits"]["keep_ms"] = json!(KEEP_MS);
    record["launch"]["tell_to"] = json!({
        "way_in": place.way_in, "agent": AGENT, "keyring": place.keyring,
    });
    for i in 0..n {
        let id = format!("bench{i:015}");
        let started = now_ms - 60_000 + i as u64;
        record["id"] = json!(id);
        record["started_at_ms"] = json!(started);
        record["status"] =
            json!({"state": "exited", "ended_at_ms": started + 5, "exit": {"code": 0}});
        record["telling"] = json!({"told": true, "attempts": 1, "last_attempt_at_ms": started + 6});
        let json = serde_json::to_vec(&record)?;
        let path = state.join(format!("{id}.json"));
        std::fs::write(&path, json).with_context(|| format!("writing {}", path.display()))?;
        let lock = state.join(format!("{id}.lock"));
        std::fs::write(&lock, b"").with_context(|| format!("writing {}", lock.display()))?;
    }
    Ok(())
}

fn count_records(state: &Path) -> Result<usize> {
    let mut n = 0;
    for entry in std::fs::read_dir(state)? {
        if entry?.file_name().to_string_lossy().ends_with(".json") {
            n += 1;
        }
    }
    Ok(n)
}
