//! Item 6 of `lnk-bench background`: a state folder that keeps 100,000
//! ended runs while 1,000 run — `start`, a `list` page (and serve's PSS and RSS), a sweep with nothing
//! due, `stop --state` of the 1,000; and a sweep that expires 8,000 runs with their output.
//!
//! The kept runs are written as the state folder's format says (`lnk_common`'s docs): a record,
//! a lock file and the index's names (links of the lock) each, ended a second ago, told, kept an
//! hour.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::background::{Bins, Place, start_run, wait_ended, wait_gone};
use crate::procs;
use crate::report::{Report, Row};
use crate::stats::Summary;

/// The sizes of item 6.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Ended runs the state folder keeps.
    #[arg(long, default_value_t = 100_000)]
    pub kept: usize,
    /// Runs running meanwhile (each a `sleep`).
    #[arg(long, default_value_t = 1000)]
    pub running: usize,
    /// Runs past their keep that one sweep expires, with their output files.
    #[arg(long, default_value_t = 8000)]
    pub expire: usize,
    /// Slots beyond the running runs (`--background` is `--running` plus these): with none,
    /// the last starts find every other slot held.
    #[arg(long, default_value_t = 50)]
    pub spare_slots: u32,
    /// Also time `list` pages over as many kept runs started within one minute (a burst),
    /// in an index of version 1 (then upgraded) and of this version.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub burst: bool,
}

mod burst;
mod fabricate;

use fabricate::{IndexVersion, Kept, Spread, fabricate, make_state};

const HOUR_MS: u64 = 3_600_000;
const LIMIT: Duration = Duration::from_secs(60);
/// Timed calls of each kind.
const TIMED: usize = 20;

/// Writes the file system holding `folder` back to the disk (`syncfs`).
fn write_back(folder: &Path) -> Result<()> {
    let open =
        std::fs::File::open(folder).with_context(|| format!("opening {}", folder.display()))?;
    rustix::fs::syncfs(&open)
        .with_context(|| format!("writing {} back to the disk", folder.display()))
}

/// How long a changed state folder is left before the sweeps that are timed: a sweep keeps the
/// folder's time as the last look's only once it is 100 ms old (the supervisor's `sweep::unindexed::due::SETTLE`).
const SETTLE: Duration = Duration::from_millis(200);

/// One `lnk-link-supervise <args>`, which must succeed quietly; how long it took.
fn supervise(bin: &Path, args: &[&std::ffi::OsStr]) -> Result<Duration> {
    let begun = Instant::now();
    let out = Command::new(bin)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running lnk-link-supervise")?;
    let took = begun.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("unexpected argument '--routine'") {
        // A build from before routine sweeps (measured beside this one): its sweeps were all
        // routine.
        let older: Vec<&std::ffi::OsStr> =
            args.iter().copied().filter(|a| *a != "--routine").collect();
        return supervise(bin, &older);
    }
    if !out.status.success() {
        bail!(
            "lnk-link-supervise {:?} exited with {}: {}",
            args,
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(took)
}

/// Item 6.
pub fn run(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    template: &Value,
    options: &Options,
) -> Result<()> {
    let state = place.root.path().join("scale");
    make_state(&state, IndexVersion::V2)?;
    let made = Instant::now();
    fabricate(&Kept {
        state: &state,
        files: None,
        template,
        n: options.kept,
        prefix: "kept",
        ended_ago_ms: 1000,
        spread: Spread::Hour,
        version: IndexVersion::V2,
    })?;
    let fabricated = made.elapsed();
    // Written back before anything is timed: a folder that keeps 100,000 runs was not made
    // all at once, and the timed calls must not queue behind the writeback of its making.
    write_back(&state)?;
    let cap = u32::try_from(options.running)
        .unwrap_or(u32::MAX)
        .saturating_add(options.spare_slots);
    let mut serve = place.serve_capped(bins, "scale", &state, false, cap)?;
    let sleeping = state.to_string_lossy().into_owned();
    let mut ids = Vec::with_capacity(options.running);
    // Each start's time as the runs pile up: what a start does must not grow with them.
    let mut piling = Vec::with_capacity(options.running);
    for _ in 0..options.running {
        let (id, took) = start_run(&mut serve, "sleep", &["600"])?;
        ids.push(id);
        piling.push(took);
    }
    // Every supervisor up (its run recorded with its group).
    let deadline = Instant::now() + LIMIT;
    for id in &ids {
        loop {
            let path = state.join(format!("{id}.json"));
            let record: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
            if record["group"].is_object() {
                break;
            }
            if record["status"]["state"] != "running" {
                bail!("run {id} ended before it ran: {record}");
            }
            if Instant::now() > deadline {
                bail!("run {id} did not start within {LIMIT:?}: {record}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    let mut starts = Vec::with_capacity(TIMED);
    for _ in 0..TIMED {
        let (id, took) = start_run(&mut serve, "true", &[])?;
        wait_ended(&state, &id, LIMIT, Duration::from_millis(1))?;
        starts.push(took);
    }
    let mut lists = Vec::with_capacity(TIMED);
    for _ in 0..TIMED {
        let (value, took) = serve.call_tool("list", &json!({"limit": 20}), None, LIMIT)?;
        if value["runs"].as_array().map_or(0, Vec::len) != 20 {
            bail!("`list` did not answer a page of 20: {value}");
        }
        lists.push(took);
    }
    let rss = procs::status_bytes(serve.pid(), "VmRSS")?;
    let pss = procs::pss_bytes(serve.pid())?;
    // The starts above changed the folder: the first sweep after them reads its top level for
    // records no index names (timed apart; the last such look, serve's, is made old enough
    // first), then the folder is left as it is.
    std::thread::sleep(SETTLE);
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(11 * 60);
    std::fs::File::options()
        .write(true)
        .open(state.join("index/looked"))
        .and_then(|f| f.set_times(std::fs::FileTimes::new().set_accessed(long_ago)))
        .context("making the last look at the state folder old")?;
    // As serve starts them: routine, so that only a due look reads the folder's top level.
    let sweep = || {
        supervise(
            &bins.supervise,
            &["sweep".as_ref(), state.as_os_str(), "--routine".as_ref()],
        )
    };
    let looked = sweep()?;
    std::thread::sleep(SETTLE);
    let mut sweeps = Vec::with_capacity(5);
    for _ in 0..5 {
        sweeps.push(sweep()?);
    }
    let stop = supervise(
        &bins.supervise,
        &["stop".as_ref(), "--state".as_ref(), state.as_os_str()],
    )?;
    // What is left of the runs: their supervisors (by the state folder on their command
    // line) and their programs (by the programs folder on theirs).
    let serve_pid = serve.pid();
    let left: Vec<(u32, String)> =
        wait_gone(&format!("supervise {}", ids[0]), Duration::from_secs(5))
            .into_iter()
            .chain(procs::running_with("lnk-link-supervise supervise"))
            .filter(|(pid, cmdline)| *pid != serve_pid && cmdline.contains(&sleeping))
            .collect();
    let programs = place
        .root
        .path()
        .join("programs")
        .to_string_lossy()
        .into_owned();
    let sleeping_left = procs::running_with(&programs)
        .into_iter()
        .filter(|(pid, cmdline)| *pid != serve_pid && cmdline.contains("sleep 600"))
        .count();
    serve.shutdown()?;

    // Expiring: runs ended two hours ago (past their keep of an hour), with output files;
    // once fresh from the page cache, once written back to the disk first, as runs an hour
    // old are (removing a file whose blocks are on the disk frees them, which a disk mounted
    // with `discard` makes wait for the device).
    let (expired, records_left, outputs_left) =
        expire(bins, place, template, options, "gone", false)?;
    let (expired_synced, synced_records_left, synced_outputs_left) =
        expire(bins, place, template, options, "sync", true)?;
    report.section(&format!(
        "6. scale: {} ended runs kept (written in {:.1} s), {} running (`sleep`)",
        options.kept,
        fabricated.as_secs_f64(),
        options.running
    ));
    let hundreds: Vec<Duration> = piling
        .chunks(100)
        .map(|chunk| Summary::of(chunk).median)
        .collect();
    if let (Some(first), Some(last)) = (hundreds.first(), hundreds.last()) {
        let shown: Vec<String> = hundreds
            .iter()
            .map(|m| format!("{:.1}", m.as_secs_f64() * 1000.0))
            .collect();
        report.row(Row::value(
            &format!(
                "`start` of `sleep` as the {} start, median of each hundred",
                options.running
            ),
            format!("{} ms", shown.join(" ")),
            format!(
                "last / first: {:.2}",
                last.as_secs_f64() / first.as_secs_f64()
            ),
            Some((
                "<= 5 ms, flat".into(),
                *last <= Duration::from_millis(5)
                    && last.as_secs_f64() <= 1.5 * first.as_secs_f64(),
            )),
        ));
    }
    let s = Summary::of(&starts);
    report.row(Row::times_target(
        "`start` of `true`",
        &s,
        "< 5 ms",
        s.median < Duration::from_millis(5),
    ));
    let l = Summary::of(&lists);
    report.row(Row::times_target(
        "`list` of a 20-run page",
        &l,
        "< 20 ms",
        l.median < Duration::from_millis(20),
    ));
    if options.burst {
        burst::run(report, bins, place, template, options, l.median)?;
    }
    // PSS is what serve costs the machine, and what the target is on; RSS beside it counts
    // the pages it shares (its code, libc) whole.
    report.row(Row::value(
        "  serve's PSS after them (RSS beside it)",
        format!(
            "{:.1} MiB (RSS {:.1} MiB)",
            pss as f64 / f64::from(1 << 20),
            rss as f64 / f64::from(1 << 20)
        ),
        String::new(),
        Some(("< 16 MiB".into(), pss < 16 << 20)),
    ));
    let w = Summary::of(&sweeps);
    report.row(Row::times_target(
        "`sweep` with nothing due",
        &w,
        "< 100 ms",
        w.median < Duration::from_millis(100),
    ));
    report.row(Row::value(
        "  the first after the folder changed (its top level read)",
        format!("{:.0} ms", looked.as_secs_f64() * 1000.0),
        String::new(),
        None,
    ));
    report.row(Row::value(
        &format!("`stop --state` of the {} running", options.running),
        format!("{:.2} s", stop.as_secs_f64()),
        format!("left: {} supervisors, {sleeping_left} programs", left.len()),
        Some((
            "< 3 s, nothing left".into(),
            stop < Duration::from_secs(3) && left.is_empty() && sleeping_left == 0,
        )),
    ));
    report.row(Row::value(
        &format!("one sweep expiring {} runs with output", options.expire),
        format!("{:.2} s", expired.as_secs_f64()),
        format!("left: {records_left} records, {outputs_left} outputs"),
        Some((
            "< 2 s".into(),
            expired < Duration::from_secs(2) && records_left == 0 && outputs_left == 0,
        )),
    ));
    report.row(Row::value(
        "  the same, its files written back to the disk first",
        format!("{:.2} s", expired_synced.as_secs_f64()),
        format!("left: {synced_records_left} records, {synced_outputs_left} outputs"),
        Some((
            "< 2 s".into(),
            expired_synced < Duration::from_secs(2)
                && synced_records_left == 0
                && synced_outputs_left == 0,
        )),
    ));
    Ok(())
}

/// One sweep expiring `options.expire` runs made for it (ids `<prefix>…`), their files first
/// written back to the disk when `synced`: how long it took, and the records and output files
/// it left.
fn expire(
    bins: &Bins,
    place: &Place,
    template: &Value,
    options: &Options,
    prefix: &str,
    synced: bool,
) -> Result<(Duration, usize, usize)> {
    let expiring = place.root.path().join(format!("expiring-{prefix}"));
    make_state(&expiring, IndexVersion::V2)?;
    fabricate(&Kept {
        state: &expiring,
        files: Some(&place.files),
        template,
        n: options.expire,
        prefix,
        ended_ago_ms: 2 * HOUR_MS,
        spread: Spread::Hour,
        version: IndexVersion::V2,
    })?;
    if synced {
        write_back(&expiring)?;
    }
    let expired = supervise(&bins.supervise, &["sweep".as_ref(), expiring.as_os_str()])?;
    let records_left = std::fs::read_dir(&expiring)?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
        .count();
    let outputs_left = std::fs::read_dir(place.files.join("background"))?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
        .count();
    Ok((expired, records_left, outputs_left))
}
