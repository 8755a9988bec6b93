//! Item 3: a flood into the output cap: the file's peak size, the throughput, the
//! supervisor's peak RSS.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use super::figures::kib;
use super::options::Options;
use super::place::{OUTPUT_CAP, OUTPUT_CAP_FLAG, Place};
use super::runs::{CALL_LIMIT, load_record, record_state, record_u64, start_run};
use crate::foreground::mib;
use crate::procs;
use crate::report::{Report, Row};
use crate::serve::Serve;
use crate::stats;

/// Stats the file at `path` about every millisecond until told to stop: the largest size
/// seen, and how many samples.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(u64, u64)>,
}

impl Sampler {
    fn start(path: PathBuf) -> Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("size sampler".into())
            .spawn(move || {
                let mut peak = 0;
                let mut samples = 0;
                while !flag.load(Ordering::Relaxed) {
                    if let Ok(meta) = std::fs::symlink_metadata(&path) {
                        peak = peak.max(meta.len());
                        samples += 1;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                (peak, samples)
            })
            .context("starting the size sampler")?;
        Ok(Sampler { stop, thread })
    }

    fn finish(self) -> Result<(u64, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| anyhow!("the size sampler panicked"))
    }
}

/// The pid of run `id`'s supervisor, found by its command line: the process that forked
/// itself away (`--detached`), not its first one, serve's child, which exits at once (on a
/// loaded machine it was seen first, and its end taken for the supervisor's).
fn find_supervisor(id: &str, within: Duration) -> Result<u32> {
    let needle = format!("lnk-link-supervise supervise {id}");
    let deadline = Instant::now() + within;
    let serves_child = |pid: u32| {
        let parent = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                let after = stat
                    .rsplit_once(')')?
                    .1
                    .split_whitespace()
                    .nth(1)?
                    .to_owned();
                after.parse::<u32>().ok()
            });
        parent.is_none_or(|parent| {
            std::fs::read_to_string(format!("/proc/{parent}/comm"))
                .is_ok_and(|comm| comm.starts_with("lnk-link-run"))
        })
    };
    loop {
        if let Some((pid, _)) = procs::running_with(&needle)
            .into_iter()
            .find(|(pid, _)| !serves_child(*pid))
        {
            return Ok(pid);
        }
        if Instant::now() >= deadline {
            bail!("no supervisor of run {id} was found");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What one background flood showed.
struct FloodRun {
    peak_file: u64,
    samples: u64,
    /// Bytes per second over the record's `started_at_ms` .. `ended_at_ms`.
    record_rate: f64,
    /// Bytes per second from writing `start` to seeing the record ended.
    wall_rate: f64,
    hwm: u64,
}

/// Item 3: `flood_runs` runs writing `flood_bytes` as fast as they can into the 1 MiB cap.
pub(super) fn flood(
    report: &mut Report,
    serve: &mut Serve,
    place: &Place,
    options: &Options,
) -> Result<()> {
    let bytes = options.flood_bytes;
    let mut runs = Vec::with_capacity(options.flood_runs);
    for _ in 0..options.flood_runs {
        let run = flood_once(serve, place, bytes);
        runs.push(run?);
    }
    let figures = |f: &dyn Fn(&FloodRun) -> f64| -> Vec<f64> { runs.iter().map(f).collect() };
    let median = |values: &[f64]| stats::median_p90(values).0;
    let worst_low = |values: &[f64]| values.iter().copied().fold(f64::INFINITY, f64::min);
    let worst_high = |values: &[f64]| values.iter().copied().fold(0.0, f64::max);
    let peaks = figures(&|r| r.peak_file as f64);
    let samples = runs.iter().map(|r| r.samples).min().unwrap_or(0);
    let rates = figures(&|r| r.record_rate / 1e6);
    let walls = figures(&|r| r.wall_rate / 1e6);
    let hwms = figures(&|r| r.hwm as f64);
    let worst_peak = worst_high(&peaks) as u64;
    let rate = median(&rates);
    let hwm = median(&hwms);
    // The cap plus one rotation step, as the tests allow it.
    let step_limit = 2 * OUTPUT_CAP;
    report.section(&format!(
        "3. a background flood: {bytes} bytes into --background-output {OUTPUT_CAP_FLAG}, {} runs \
         (p90 column: the worst run)",
        options.flood_runs
    ));
    report.row(Row::value_n(
        "output file's peak size (stat every ~1 ms)",
        runs.len(),
        kib(median(&peaks) as u64),
        kib(worst_peak),
        Some(("<= 2 MiB".into(), worst_peak <= step_limit)),
    ));
    report.row(Row::value(
        &format!("  never over the cap itself ({samples}+ stats/run)"),
        if worst_peak <= OUTPUT_CAP {
            "yes"
        } else {
            "no"
        }
        .into(),
        String::new(),
        None,
    ));
    report.row(Row::value_n(
        "throughput: bytes / (ended_at - started_at)",
        runs.len(),
        format!("{rate:.0} MB/s"),
        format!("{:.0} MB/s", worst_low(&rates)),
        Some((">= 300 MB/s".into(), rate >= 300.0)),
    ));
    report.row(Row::value_n(
        "  wall: write `start` -> record seen ended",
        runs.len(),
        format!("{:.0} MB/s", median(&walls)),
        format!("{:.0} MB/s", worst_low(&walls)),
        None,
    ));
    report.row(Row::value_n(
        "supervisor's peak RSS (VmHWM)",
        runs.len(),
        mib(hwm as u64),
        mib(worst_high(&hwms) as u64),
        Some(("< 8 MiB".into(), hwm < f64::from(8 << 20))),
    ));
    Ok(())
}

fn flood_once(serve: &mut Serve, place: &Place, bytes: u64) -> Result<FloodRun> {
    let count = bytes.to_string();
    let begun = Instant::now();
    let (id, _) = start_run(serve, "lnk-bench-flood", &[&count])?;
    let sampler = Sampler::start(place.files.join("background").join(format!("{id}.out")))?;
    let watched = watch_flood(place, &id, begun);
    let sampled = sampler.finish();
    if watched.is_err() {
        // Whatever failed, the run must not go on writing.
        let _ = serve.call_tool("stop", &json!({"id": id}), None, CALL_LIMIT);
    }
    let (record, seen_ended, hwm) = watched?;
    let (peak_file, samples) = sampled?;
    let written = record_u64(&record, "/output/written_bytes")?;
    if record_state(&record) != "exited" || written != bytes {
        bail!("the flood should have exited having written {bytes} bytes: {record}");
    }
    let started = record_u64(&record, "/started_at_ms")?;
    let ended = record_u64(&record, "/status/ended_at_ms")?;
    let took = Duration::from_millis(ended.saturating_sub(started).max(1));
    Ok(FloodRun {
        peak_file,
        samples,
        record_rate: bytes as f64 / took.as_secs_f64(),
        wall_rate: bytes as f64 / seen_ended.as_secs_f64().max(1e-9),
        hwm,
    })
}

/// Watches a flood to its end: the final record, when it was seen ended (since `begun`), and
/// the supervisor's VmHWM as last read before it exited.
fn watch_flood(place: &Place, id: &str, begun: Instant) -> Result<(Value, Duration, u64)> {
    let supervisor = find_supervisor(id, Duration::from_secs(5))?;
    let deadline = begun + Duration::from_secs(300);
    let mut hwm = 0;
    let mut seen_ended = None;
    loop {
        // VmHWM only grows, so the last value read before the supervisor exits is its peak.
        let alive = match procs::status_bytes(supervisor, "VmHWM") {
            Ok(bytes) => {
                hwm = hwm.max(bytes);
                true
            }
            // Gone, or a zombie (which has no VmHWM).
            Err(_) => false,
        };
        if seen_ended.is_none()
            && let Ok(record) = load_record(&place.state, id)
            && record_state(&record) != "running"
        {
            seen_ended = Some(begun.elapsed());
        }
        if !alive {
            break;
        }
        if Instant::now() >= deadline {
            bail!("the flood {id} did not end within {:?}", deadline - begun);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let record = load_record(&place.state, id)?;
    if record_state(&record) == "running" {
        bail!("the supervisor of {id} is gone and its record still says running");
    }
    let seen_ended = seen_ended.unwrap_or_else(|| begun.elapsed());
    if hwm == 0 {
        bail!("the supervisor of {id} ended before its memory could be read");
    }
    Ok((record, seen_ended, hwm))
}
