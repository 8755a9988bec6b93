//! Item 6 of `lnk-bench foreground`: idle warm spares. A serve under the README's
//! recommended line keeps `--idle-spares` spares (`LNK_SPARES`), each a reaper with its
//! sandbox and stub waiting; over `--idle-secs` they must use no CPU. Their memory is reported
//! as PSS (`/proc/<pid>/smaps_rollup`: shared pages divided among their users).

use std::collections::HashMap;
use std::ffi::OsString;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{Bins, Options, Place, mib, on_path};
use crate::procs;
use crate::report::{Report, Row};
use crate::serve::Serve;

/// Every process below `pid`.
fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
                continue;
            };
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok());
            if let Some(parent) = parent {
                parents.entry(parent).or_default().push(child);
            }
        }
    }
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(parent) = todo.pop() {
        for child in parents.get(&parent).into_iter().flatten() {
            found.push(*child);
            todo.push(*child);
        }
    }
    found.sort_unstable();
    found
}

/// Whether `pid` is a stub waiting: its last argument `warm-stub`, its program lnk-link-run.
fn is_stub(pid: u32, runner: &std::path::Path) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let last = cmdline
        .split(|b| *b == 0)
        .rfind(|a| !a.is_empty())
        .map(<[u8]>::to_vec);
    last.as_deref() == Some(b"warm-stub")
        && std::fs::canonicalize(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == runner)
}

/// A process's PSS in bytes.
fn pss(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/smaps_rollup");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("{path} has no Pss"))?;
    Ok(kb * 1024)
}

/// Runs item 6 and reports it.
pub(super) fn idle(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    options: &Options,
) -> Result<()> {
    let Some(bwrap) = on_path("bwrap") else {
        report.note("idle spares: `bwrap` is not on PATH; skipped");
        return Ok(());
    };
    let prefix: Vec<OsString> =
        crate::line::recommended(&place.files, std::slice::from_ref(&place.programs), &bwrap)?;
    let count = options.idle_spares;
    let spares = count.to_string();
    let serve = Serve::start_with_env(
        "idle",
        &place.serve_args(bins, "idle", prefix),
        &[("LNK_SPARES", std::ffi::OsStr::new(&spares))],
    )?;
    let runner = std::fs::canonicalize(&bins.run).context("the runner's path")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let below = loop {
        let below = descendants(serve.pid());
        let stubs = below.iter().filter(|pid| is_stub(**pid, &runner)).count();
        if stubs >= count {
            break below;
        }
        if Instant::now() > deadline {
            bail!("serve has {stubs} stubs waiting of {count}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    // Settled: what starting them cost is not counted.
    std::thread::sleep(Duration::from_secs(1));
    let cpu =
        |pids: &[u32]| -> Duration { pids.iter().filter_map(|p| procs::cpu_time(*p).ok()).sum() };
    let before_spares = cpu(&below);
    let before_serve = procs::cpu_time(serve.pid())?;
    std::thread::sleep(Duration::from_secs(options.idle_secs));
    let after = descendants(serve.pid());
    let spares_cpu = cpu(&below).saturating_sub(before_spares);
    let serve_cpu = procs::cpu_time(serve.pid())?.saturating_sub(before_serve);
    let total_pss: u64 = below.iter().filter_map(|p| pss(*p).ok()).sum();
    let serve_pss = pss(serve.pid())?;
    serve.shutdown()?;
    report.section(&format!(
        "6. {count} idle warm spares under bubblewrap for {} s ({} processes below serve)",
        options.idle_secs,
        below.len()
    ));
    report.row(Row::value(
        "CPU time of the spares and their sandboxes",
        format!("{:.1} ms", spares_cpu.as_secs_f64() * 1000.0),
        String::new(),
        Some((
            "0 ms (no CPU)".into(),
            spares_cpu < Duration::from_millis(20),
        )),
    ));
    report.row(Row::value(
        "CPU time of serve itself meanwhile",
        format!("{:.1} ms", serve_cpu.as_secs_f64() * 1000.0),
        String::new(),
        None,
    ));
    report.row(Row::value(
        "the same processes after the wait",
        if after == below {
            "unchanged".into()
        } else {
            format!("{} now", after.len())
        },
        String::new(),
        None,
    ));
    report.row(Row::value(
        "PSS of the spares and their sandboxes",
        mib(total_pss),
        format!("{} per spare", mib(total_pss / count.max(1) as u64)),
        None,
    ));
    report.row(Row::value(
        "PSS of serve",
        mib(serve_pss),
        String::new(),
        None,
    ));
    Ok(())
}
