//! `lnk-bench background`: background runs through `lnk-link-run serve --state`, supervised by
//! `lnk-link-supervise`. Measures, in one run, the targets of issues 3 and 4: `start` answered,
//! from `start` to the program running, a 1 GiB flood into a 1 MiB output cap (the file's peak
//! size, throughput, the supervisor's peak RSS), a sweep and a `list` over 10,000 records, and
//! the time from a run's end to a stand-in way in holding the message.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};

use crate::bins::sibling;
use crate::foreground::{mib, system_program};
use crate::procs;
use crate::report::{Report, Row};
use crate::serve::{Serve, ServeArgs};
use crate::stats::{self, Summary};

/// `--background-output` of every serve here.
const OUTPUT_CAP: u64 = 1 << 20;
/// The same, as the flag reads it.
const OUTPUT_CAP_FLAG: &str = "1MiB";
/// `--background-keep`, in milliseconds (the fabricated records carry it too).
const KEEP_MS: u64 = 3_600_000;
/// The agent id whose key signs what the runs tell.
const AGENT: &str = "bench";
/// The programs every serve may run.
const ALLOWED: [&str; 4] = ["true", "sleep", "lnk-bench-stamp", "lnk-bench-flood"];
/// Starts before the timed ones, so that caches and the allocator are warm.
const WARMUP: usize = 10;
/// The limit on any one tool call.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// How long a run that should end at once may take to be recorded ended.
const END_LIMIT: Duration = Duration::from_secs(20);
/// How long the processes of the benchmark may take to be gone after the last serve exits.
const LEFTOVER_WAIT: Duration = Duration::from_secs(15);
/// The answer of the stand-in way in.
const WAY_IN_ANSWER: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";

/// What to measure, and how often.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Timed `start` calls of `true`, one after another (item 1).
    #[arg(long, default_value_t = 200)]
    pub starts: usize,
    /// Timed runs of the stamp writer, from `start` to the program running (item 2).
    #[arg(long, default_value_t = 50)]
    pub to_running: usize,
    /// Bytes the flood writer writes in the background (item 3).
    #[arg(long, default_value_t = 1 << 30)]
    pub flood_bytes: u64,
    /// Background floods (item 3).
    #[arg(long, default_value_t = 3)]
    pub flood_runs: usize,
    /// Ended, told, young records in the swept state folder (item 4).
    #[arg(long, default_value_t = 10_000)]
    pub records: usize,
    /// Timed sweeps, and as many timed `list` calls, of that folder (item 4).
    #[arg(long, default_value_t = 5)]
    pub sweeps: usize,
    /// Timed runs from their end to the stand-in way in holding the message (item 5).
    #[arg(long, default_value_t = 20)]
    pub tells: usize,
    /// Only item 6 (its figures alone, a run at a time).
    #[arg(long)]
    pub scale_only: bool,
    /// The scale of item 6 (issue 9): runs kept and running, runs expired at once.
    #[command(flatten)]
    pub scale: crate::scale::Options,
    /// Where the temporary folders go (state folders, files folder, keyring, way in); it
    /// should be a local disk like the one a real state folder lies on. Default: $TMPDIR.
    #[arg(long, value_name = "DIR")]
    pub tmp: Option<PathBuf>,
}

/// The binaries next to this one.
pub(crate) struct Bins {
    run: PathBuf,
    pub(crate) supervise: PathBuf,
    passthrough: PathBuf,
    flood: PathBuf,
    stamp: PathBuf,
}

impl Bins {
    fn find() -> Result<Bins> {
        Ok(Bins {
            run: sibling("lnk-link-run")?,
            supervise: sibling("lnk-link-supervise")?,
            passthrough: sibling("lnk-test-passthrough")?,
            flood: sibling("lnk-bench-flood")?,
            stamp: sibling("lnk-bench-stamp")?,
        })
    }
}

/// The temporary folders of one run.
pub(crate) struct Place {
    pub(crate) root: tempfile::TempDir,
    pub(crate) files: PathBuf,
    programs: PathBuf,
    keyring: PathBuf,
    way_in: PathBuf,
    /// Items 1 to 3.
    state: PathBuf,
    /// Item 4: the fabricated records.
    swept: PathBuf,
    /// Item 5: runs that tell.
    telling: PathBuf,
}

impl Place {
    fn new(bins: &Bins, tmp: Option<&Path>) -> Result<Place> {
        let mut builder = tempfile::Builder::new();
        builder.prefix("lnk-bench-bg-");
        let root = match tmp {
            Some(dir) => builder.tempdir_in(dir),
            None => builder.tempdir(),
        }
        .context("creating a temporary folder")?;
        let at = |name: &str| root.path().join(name);
        let place = Place {
            files: at("files"),
            programs: at("programs"),
            keyring: at("keyring"),
            way_in: at("way-in.sock"),
            state: at("state"),
            swept: at("swept"),
            telling: at("telling"),
            root,
        };
        for dir in [&place.files, &place.programs] {
            std::fs::create_dir(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let links = [
            ("true", system_program("true")?),
            ("sleep", system_program("sleep")?),
            ("lnk-bench-flood", bins.flood.clone()),
            ("lnk-bench-stamp", bins.stamp.clone()),
        ];
        for (name, target) in links {
            std::os::unix::fs::symlink(&target, place.programs.join(name))
                .with_context(|| format!("linking {name} to {}", target.display()))?;
        }
        Ok(place)
    }

    fn log(&self, name: &str) -> PathBuf {
        self.root.path().join(format!("serve-{name}.log"))
    }

    /// A serve over `state`, telling the stand-in way in when `tell` is set.
    fn serve(&self, bins: &Bins, name: &str, state: &Path, tell: bool) -> Result<Serve> {
        self.serve_capped(bins, name, state, tell, 1000)
    }

    /// [`Place::serve`] with `--background cap`.
    pub(crate) fn serve_capped(
        &self,
        bins: &Bins,
        name: &str,
        state: &Path,
        tell: bool,
        cap: u32,
    ) -> Result<Serve> {
        let cap = cap.to_string();
        let mut extra: Vec<OsString> = vec!["--state".into(), state.into()];
        for (flag, value) in [
            ("--background", cap.as_str()),
            ("--background-timeout", "60s"),
            ("--background-output", OUTPUT_CAP_FLAG),
            ("--background-keep", "1h"),
            ("--hops", "5"),
        ] {
            extra.push(flag.into());
            extra.push(value.into());
        }
        if tell {
            extra.extend([
                "--way-in".into(),
                self.way_in.clone().into(),
                "--as".into(),
                AGENT.into(),
                "--keyring".into(),
                self.keyring.clone().into(),
            ]);
        }
        Serve::start(
            name,
            &ServeArgs {
                binary: &bins.run,
                files: &self.files,
                programs: &self.programs,
                output: "64KiB",
                allowed: &ALLOWED,
                extra,
                sandbox: vec![bins.passthrough.clone().into_os_string()],
                sandbox_check: false,
                log: self.log(name),
            },
        )
    }
}

/// Runs the background benchmark and prints its report.
pub fn run(options: &Options) -> Result<()> {
    let bins = Bins::find()?;
    let place = Place::new(&bins, options.tmp.as_deref())?;
    let marker = place.root.path().to_string_lossy().into_owned();
    let mut report = Report::new(format!(
        "Link Run background benchmark: {} CPUs; sandbox prefix {}; folders in {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bins.passthrough.display(),
        place.root.path().display()
    ));
    let outcome = measure(options, &bins, &place, &mut report);
    // Every serve is shut down (or killed by its Drop) by now; the supervisors end by
    // themselves once their runs have ended. Nothing of the benchmark may remain.
    let mut left = wait_gone(&marker, LEFTOVER_WAIT);
    if !left.is_empty() {
        // Runs still running (after an error): stop them, so that nothing outlives the bench.
        for state in [&place.state, &place.swept, &place.telling] {
            if state.is_dir() {
                let _ = Command::new(&bins.supervise)
                    .arg("stop")
                    .arg("--state")
                    .arg(state)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
        left = wait_gone(&marker, LEFTOVER_WAIT);
    }
    report.print();
    outcome?;
    if !left.is_empty() {
        let list: Vec<String> = left.iter().map(|(p, c)| format!("{p} {c}")).collect();
        bail!("processes were left running: {}", list.join("; "));
    }
    println!("\nleft running after the benchmark: nothing");
    Ok(())
}

/// Waits up to `within` until no process has `marker` in its command line; what is left.
pub(crate) fn wait_gone(marker: &str, within: Duration) -> Vec<(u32, String)> {
    let deadline = Instant::now() + within;
    loop {
        let left = procs::running_with(marker);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn measure(options: &Options, bins: &Bins, place: &Place, report: &mut Report) -> Result<()> {
    let mut serve = place.serve(bins, "runs", &place.state, false)?;
    if options.scale_only {
        let (id, _) = start_run(&mut serve, "true", &[])?;
        let template = wait_ended(&place.state, &id, END_LIMIT, Duration::from_millis(1))?;
        serve.shutdown()?;
        return crate::scale::run(report, bins, place, &template, &options.scale);
    }
    let template = starts(report, &mut serve, place, options.starts)?;
    to_running(report, &mut serve, place, options.to_running)?;
    flood(report, &mut serve, place, options)?;
    serve.shutdown()?;

    sweep_and_list(report, bins, place, &template, options)?;
    telling(report, bins, place, options.tells)?;
    crate::scale::run(report, bins, place, &template, &options.scale)
}

/// The `_meta` every `start` carries.
fn meta() -> Value {
    json!({"link.local/thread": "bench", "link.local/hops": 0})
}

/// One `start`: the run's id and the time from writing the request to reading the answer.
pub(crate) fn start_run(
    serve: &mut Serve,
    program: &str,
    args: &[&str],
) -> Result<(String, Duration)> {
    let (value, took) = serve.call_tool(
        "start",
        &json!({"program": program, "args": args}),
        Some(&meta()),
        CALL_LIMIT,
    )?;
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("`start` answered without an id: {value}"))?;
    Ok((id.to_owned(), took))
}

/// The run's record as it is on disk now.
fn load_record(state: &Path, id: &str) -> Result<Value> {
    let path = state.join(format!("{id}.json"));
    let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not JSON", path.display()))
}

fn record_state(record: &Value) -> &str {
    record["status"]["state"].as_str().unwrap_or("")
}

fn record_u64(record: &Value, pointer: &str) -> Result<u64> {
    record
        .pointer(pointer)
        .and_then(Value::as_u64)
        .ok_or_else(|| anyhow!("the record has no {pointer}: {record}"))
}

/// Polls the run's record every `every` until it is no longer `running`; the record.
pub(crate) fn wait_ended(
    state: &Path,
    id: &str,
    within: Duration,
    every: Duration,
) -> Result<Value> {
    let deadline = Instant::now() + within;
    loop {
        // The record is replaced by rename, so a read sees a whole one or none.
        if let Ok(record) = load_record(state, id)
            && record_state(&record) != "running"
        {
            return Ok(record);
        }
        if Instant::now() >= deadline {
            bail!("run {id} was not recorded ended within {within:?}");
        }
        std::thread::sleep(every);
    }
}

/// CLOCK_REALTIME now, in nanoseconds since the epoch.
fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Waits for the stamp file `name` in the files folder; the time it holds (nanoseconds).
fn read_stamp(files: &Path, name: &str, within: Duration) -> Result<u128> {
    let path = files.join(name);
    let deadline = Instant::now() + within;
    loop {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                return text
                    .trim()
                    .parse()
                    .with_context(|| format!("{} holds no time: {text:?}", path.display()));
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
            Err(err) => return Err(err).with_context(|| format!("reading {}", path.display())),
        }
        if Instant::now() >= deadline {
            bail!("the program never wrote {}", path.display());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Nanoseconds `later - earlier` as signed milliseconds.
fn ns_diff_ms(later: u128, earlier: u128) -> f64 {
    (later as f64 - earlier as f64) / 1e6
}

fn ms_row(label: &str, values: &[f64], target: Option<(&str, f64)>) -> Row {
    let (median, p90) = stats::median_p90(values);
    Row::value_n(
        label,
        values.len(),
        format!("{median:.3} ms"),
        format!("{p90:.3} ms"),
        target.map(|(text, limit)| (text.to_owned(), median < limit)),
    )
}

/// Item 1: `starts` starts of `true`, each after the previous run was recorded ended. Returns
/// a record of one of them, the template of item 4's records.
fn starts(report: &mut Report, serve: &mut Serve, place: &Place, n: usize) -> Result<Value> {
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
fn to_running(report: &mut Report, serve: &mut Serve, place: &Place, n: usize) -> Result<()> {
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

/// The pid of run `id`'s supervisor, found by its command line.
fn find_supervisor(id: &str, within: Duration) -> Result<u32> {
    let needle = format!("lnk-link-supervise supervise {id}");
    let deadline = Instant::now() + within;
    loop {
        if let Some((pid, _)) = procs::running_with(&needle).first() {
            return Ok(*pid);
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
fn flood(report: &mut Report, serve: &mut Serve, place: &Place, options: &Options) -> Result<()> {
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

/// Item 4: a state folder of `records` ended, told, young records made from `template`:
/// `lnk-link-supervise sweep` over it, and `list` through a serve; then, with no target,
/// `start` with that many records beside it.
fn sweep_and_list(
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

/// A message the stand-in way in got, and when it had the whole line.
struct Arrival {
    at_ns: u128,
    line: String,
}

/// A stand-in for the bridge's way in: a Unix-socket listener that reads one line per
/// connection, notes when it arrived, and answers `result`.
struct WayIn {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    messages: Receiver<Arrival>,
}

impl WayIn {
    fn start(path: &Path) -> Result<WayIn> {
        let listener =
            UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let (send, messages) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("way in".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(mut stream) = stream else { continue };
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut line = String::new();
                    if BufReader::new(&stream).read_line(&mut line).is_err() {
                        continue;
                    }
                    let at_ns = now_ns();
                    let _ = stream.write_all(WAY_IN_ANSWER);
                    if send.send(Arrival { at_ns, line }).is_err() {
                        break;
                    }
                }
            })
            .context("starting the way in")?;
        Ok(WayIn {
            path: path.to_owned(),
            stop,
            thread: Some(thread),
            messages,
        })
    }

    /// The next message from run `id` (others are skipped), within `within`.
    fn next_from(&self, id: &str, within: Duration) -> Result<Arrival> {
        let deadline = Instant::now() + within;
        let from = format!("run:{id}");
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let arrival = match self.messages.recv_timeout(wait) {
                Ok(arrival) => arrival,
                Err(RecvTimeoutError::Timeout) => bail!("run {id} was not told within {within:?}"),
                Err(RecvTimeoutError::Disconnected) => bail!("the way in stopped"),
            };
            let message: Value = serde_json::from_str(&arrival.line).with_context(|| {
                format!("the way in got a line that is not JSON: {}", arrival.line)
            })?;
            let body: Value = message["params"]["body"]
                .as_str()
                .map(serde_json::from_str)
                .transpose()?
                .ok_or_else(|| anyhow!("a message without a body: {message}"))?;
            if body["from"] == json!(from) {
                return Ok(arrival);
            }
        }
    }
}

impl Drop for WayIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread, which sees the flag and ends.
        let _ = UnixStream::connect(&self.path);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Item 5: runs of the stamp writer that tell a stand-in way in; from the program's end to the
/// message held there.
fn telling(report: &mut Report, bins: &Bins, place: &Place, n: usize) -> Result<()> {
    let keygen = Command::new(&bins.supervise)
        .arg("keygen")
        .arg("--keyring")
        .arg(&place.keyring)
        .args(["--as", AGENT])
        .stdin(Stdio::null())
        .output()
        .context("running lnk-link-supervise keygen")?;
    if !keygen.status.success() {
        bail!("keygen failed: {}", String::from_utf8_lossy(&keygen.stderr));
    }
    let way_in = WayIn::start(&place.way_in)?;
    let mut serve = place.serve(bins, "telling", &place.telling, true)?;
    let mut from_program = Vec::with_capacity(n);
    let mut from_record = Vec::with_capacity(n);
    let mut to_record = Vec::with_capacity(n);
    for i in 0..WARMUP.min(n) + n {
        let name = format!("stamp-tell-{i}");
        let (id, _) = start_run(&mut serve, "lnk-bench-stamp", &[&name])?;
        let arrival = way_in.next_from(&id, END_LIMIT)?;
        let stamp = read_stamp(&place.files, &name, END_LIMIT)?;
        let record = wait_ended(&place.telling, &id, END_LIMIT, Duration::from_millis(1))?;
        let ended_ns = u128::from(record_u64(&record, "/status/ended_at_ms")?) * 1_000_000;
        if i >= WARMUP.min(n) {
            from_program.push(ns_diff_ms(arrival.at_ns, stamp));
            from_record.push(ns_diff_ms(arrival.at_ns, ended_ns));
            to_record.push(ns_diff_ms(ended_ns, stamp));
        }
    }
    serve.shutdown()?;
    drop(way_in);
    report.section(&format!(
        "5. telling: {n} runs of a program that stamps the time and exits, to a stand-in way in"
    ));
    report.row(ms_row(
        "program's end -> message held by the way in",
        &from_program,
        Some(("< 50 ms", 50.0)),
    ));
    report.row(ms_row(
        "  of which: end -> record's ended_at (1 ms res.)",
        &to_record,
        None,
    ));
    report.row(ms_row(
        "  of which: record's ended_at -> message held",
        &from_record,
        None,
    ));
    Ok(())
}

fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes.div_ceil(1024))
}
