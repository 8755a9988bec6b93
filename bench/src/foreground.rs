//! `lnk-bench foreground`: per-call overhead, an output flood, and concurrency, each against a
//! baseline measured in the same run; warm and cold calls against a peer server, in the
//! patterns calls come in ([`patterns`]), and idle warm spares ([`idle`]).

mod baselines;
mod concurrency;
mod flood;
mod idle;
mod patterns;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::bins::sibling;
use crate::procs;
use crate::report::{Report, Row};
use crate::serve::{Serve, ServeArgs};
use crate::stats::{self, Summary};

/// The flood serve's `--output`.
const FLOOD_OUTPUT: &str = "64KiB";
/// Calls before the timed ones, so that caches and the allocator are warm.
const WARMUP: usize = 20;
/// The programs every serve may run.
const ALLOWED: [&str; 4] = ["true", "lnk-bench-flood", "sleep", "echo"];

/// What to measure, and how often.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Sequential `command` calls of `true` (and as many direct spawns).
    #[arg(long, default_value_t = 1000)]
    pub calls: usize,
    /// Sequential calls under bubblewrap, when `bwrap` is on PATH (0 skips them).
    #[arg(long, default_value_t = 200)]
    pub bwrap_calls: usize,
    /// Bytes the flood writer writes.
    #[arg(long, default_value_t = 1 << 30)]
    pub flood_bytes: u64,
    /// Floods through serve (and as many through `cat`).
    #[arg(long, default_value_t = 5)]
    pub flood_runs: usize,
    /// Calls of `sleep 1` sent at once.
    #[arg(long, default_value_t = 32)]
    pub concurrent: usize,
    /// Rounds of the concurrent calls.
    #[arg(long, default_value_t = 3)]
    pub rounds: usize,
    /// Consecutive calls of `echo hi` per target and round in the warm/cold/peer comparison
    /// (0 skips the pattern).
    #[arg(long, default_value_t = 300)]
    pub compare_calls: usize,
    /// Spaced calls (100 ms apart) per target and round (0 skips the pattern).
    #[arg(long, default_value_t = 100)]
    pub spaced_calls: usize,
    /// Bursts of each size per target and round (0 skips them).
    #[arg(long, default_value_t = 15)]
    pub burst_rounds: usize,
    /// The sizes of the bursts: the first is held against the peer, the others warm against
    /// cold.
    #[arg(long, value_delimiter = ',', default_values_t = [8, 32])]
    pub burst_sizes: Vec<usize>,
    /// The pause before each burst (the model's thinking, in which spares are refilled).
    #[arg(long, default_value_t = 250)]
    pub burst_pause_ms: u64,
    /// Rounds of every pattern; each figure is the median of the per-round medians.
    #[arg(long, default_value_t = 2)]
    pub pattern_rounds: usize,
    /// Only the warm/cold/peer comparison and the idle spares.
    #[arg(long)]
    pub compare_only: bool,
    /// Idle warm spares measured.
    #[arg(long, default_value_t = 10)]
    pub idle_spares: usize,
    /// For how long the idle spares are measured, in seconds (0 skips it).
    #[arg(long, default_value_t = 60)]
    pub idle_secs: u64,
    /// Another build's `lnk-link-run`, measured warm beside this one in the comparison (rows
    /// "baseline build: …", and this build minus it per phase): a change's effect, in one run.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Where the peer (mcp-server-commands 0.5.0) is installed from npm.
    #[arg(long, default_value_os_t = baselines::default_cache())]
    pub peer_cache: PathBuf,
}

/// The binaries next to this one.
struct Bins {
    run: PathBuf,
    passthrough: PathBuf,
    flood: PathBuf,
}

impl Bins {
    fn find() -> Result<Bins> {
        Ok(Bins {
            run: sibling("lnk-link-run")?,
            passthrough: sibling("lnk-test-passthrough")?,
            flood: sibling("lnk-bench-flood")?,
        })
    }
}

/// The temporary folders of one run.
struct Place {
    root: tempfile::TempDir,
    files: PathBuf,
    programs: PathBuf,
    true_path: PathBuf,
}

impl Place {
    fn new(bins: &Bins) -> Result<Place> {
        let root = tempfile::Builder::new()
            .prefix("lnk-bench-")
            .tempdir()
            .context("creating a temporary folder")?;
        let files = root.path().join("files");
        let programs = root.path().join("programs");
        std::fs::create_dir(&files).context("creating the files folder")?;
        std::fs::create_dir(&programs).context("creating the programs folder")?;
        let true_path = system_program("true")?;
        let links = [
            ("true", true_path.clone()),
            ("sleep", system_program("sleep")?),
            ("echo", system_program("echo")?),
            ("lnk-bench-flood", bins.flood.clone()),
        ];
        for (name, target) in links {
            std::os::unix::fs::symlink(&target, programs.join(name))
                .with_context(|| format!("linking {name} to {}", target.display()))?;
        }
        Ok(Place {
            root,
            files,
            programs,
            true_path,
        })
    }

    fn log(&self, name: &str) -> PathBuf {
        self.root.path().join(format!("serve-{name}.log"))
    }

    fn serve_args<'a>(
        &'a self,
        bins: &'a Bins,
        name: &str,
        sandbox: Vec<OsString>,
    ) -> ServeArgs<'a> {
        ServeArgs {
            binary: &bins.run,
            files: &self.files,
            programs: &self.programs,
            output: FLOOD_OUTPUT,
            allowed: &ALLOWED,
            extra: Vec::new(),
            sandbox_check: sandbox
                .first()
                .is_some_and(|p| Path::new(p) != bins.passthrough.as_path()),
            sandbox,
            log: self.log(name),
        }
    }
}

pub(crate) fn system_program(name: &str) -> Result<PathBuf> {
    ["/bin", "/usr/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("no {name} in /bin or /usr/bin"))
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Runs the foreground benchmark and prints its report.
pub fn run(options: &Options) -> Result<()> {
    let bins = Bins::find()?;
    let place = Place::new(&bins)?;
    let marker = place.root.path().to_string_lossy().into_owned();
    let mut report = Report::new(format!(
        "Link Run foreground benchmark: {} CPUs; sandbox prefix {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        bins.passthrough.display()
    ));
    let outcome = measure(options, &bins, &place, &mut report);
    // Every serve is shut down (or killed by its Drop) by now: nothing of the run may remain
    // once their spares, told of serve's end, have killed their warm sandboxes (a matter of
    // milliseconds).
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut left = procs::running_with(&marker);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        left = procs::running_with(&marker);
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

fn measure(options: &Options, bins: &Bins, place: &Place, report: &mut Report) -> Result<()> {
    if !options.compare_only {
        measure_overheads(options, bins, place, report)?;
    }
    patterns::patterns(report, bins, place, options)?;
    if options.idle_secs > 0 {
        idle::idle(report, bins, place, options)?;
    }
    Ok(())
}

/// Items 1 to 4.
fn measure_overheads(
    options: &Options,
    bins: &Bins,
    place: &Place,
    report: &mut Report,
) -> Result<()> {
    let passthrough = vec![bins.passthrough.clone().into_os_string()];

    let serve = Serve::start(
        "calls",
        &place.serve_args(bins, "calls", passthrough.clone()),
    )?;
    let direct = || {
        let mut command = Command::new(&bins.passthrough);
        command.arg("--").arg(&place.true_path);
        command
    };
    let serve = per_call(
        report,
        "1. per-call overhead",
        true,
        serve,
        options.calls,
        direct,
    )?;
    let hwm = procs::status_bytes(serve.pid(), "VmHWM")?;
    serve.shutdown()?;
    report.row(Row::value(
        "peak RSS of this serve (VmHWM)",
        mib(hwm),
        String::new(),
        None,
    ));

    let serve = Serve::start(
        "flood",
        &place.serve_args(bins, "flood", passthrough.clone()),
    )?;
    flood::flood(report, serve, bins, options)?;

    let serve = Serve::start("sleeps", &place.serve_args(bins, "sleeps", passthrough))?;
    concurrency::concurrency(report, serve, options)?;

    if options.bwrap_calls > 0 {
        match on_path("bwrap") {
            None => report.note("bubblewrap: `bwrap` is not on PATH; skipped"),
            Some(bwrap) => {
                if let Err(err) = bubblewrap(report, bins, place, &bwrap, options.bwrap_calls) {
                    report.note(&format!("bubblewrap: not measured: {err:#}"));
                }
            }
        }
    }
    Ok(())
}

/// Runs a sandboxed `true` directly, as `serve` would but without it: piped output, waited.
fn spawn_true(command: &mut Command) -> Result<()> {
    let out = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .context("spawning the sandbox prefix directly")?;
    if !out.status.success() {
        bail!(
            "the direct spawn exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Item 1: `calls` sequential `command` calls of `true`, interleaved with as many direct
/// spawns of the same argv (`direct` builds it), and as many direct spawns made the way serve
/// makes them. The order within each triple rotates, so drift and noise fall on all alike.
fn per_call(
    report: &mut Report,
    title: &str,
    target: bool,
    mut serve: Serve,
    calls: usize,
    direct: impl Fn() -> Command,
) -> Result<Serve> {
    let limit = Duration::from_secs(30);
    let timed = |what: &mut dyn FnMut() -> Result<()>| -> Result<Duration> {
        let start = Instant::now();
        what()?;
        Ok(start.elapsed())
    };
    let mut via_serve = Vec::with_capacity(calls);
    let mut plain = Vec::with_capacity(calls);
    let mut like_serve = Vec::with_capacity(calls);
    let mut cpu = Duration::ZERO;
    for i in 0..WARMUP.min(calls) + calls {
        let counted = i >= WARMUP.min(calls);
        for step in 0..3 {
            match (i + step) % 3 {
                0 => {
                    let cpu_before = procs::cpu_time(serve.pid())?;
                    let took = timed(&mut || {
                        let answer = serve.call("true", &[], limit)?;
                        if answer.exit_code != Some(0)
                            || answer.signal.is_some()
                            || answer.timed_out
                        {
                            bail!("`true` through serve did not exit 0: {answer:?}");
                        }
                        Ok(())
                    })?;
                    if counted {
                        via_serve.push(took);
                        cpu += procs::cpu_time(serve.pid())?.saturating_sub(cpu_before);
                    }
                }
                1 => {
                    let took = timed(&mut || spawn_true(&mut direct()))?;
                    if counted {
                        plain.push(took);
                    }
                }
                _ => {
                    let took = timed(&mut || spawn_true(spawn_like_serve(&mut direct())))?;
                    if counted {
                        like_serve.push(took);
                    }
                }
            }
        }
    }
    let s = Summary::of(&via_serve);
    let d = Summary::of(&plain);
    let l = Summary::of(&like_serve);
    let paired: Vec<f64> = via_serve
        .iter()
        .zip(&plain)
        .map(|(a, b)| stats::diff_ms(*a, *b))
        .collect();
    let (paired_median, paired_p90) = stats::median_p90(&paired);
    let overhead = stats::diff_ms(s.median, d.median);
    report.section(&format!("{title}: `command` of `true`, one session"));
    report.row(Row::times("serve: write request -> read answer", &s));
    report.row(Row::times("direct: spawn prefix + true, wait", &d));
    report.row(Row::value(
        "overhead: median(serve) - median(direct)",
        format!("{overhead:.3} ms"),
        String::new(),
        target.then(|| ("< 1 ms".into(), overhead < 1.0)),
    ));
    report.row(Row::value(
        "overhead: paired differences",
        format!("{paired_median:.3} ms"),
        format!("{paired_p90:.3} ms"),
        None,
    ));
    report.row(Row::value(
        "ratio serve / direct (medians)",
        format!(
            "{:.2}x",
            stats::ms(s.median) / stats::ms(d.median).max(1e-9)
        ),
        String::new(),
        None,
    ));
    report.row(Row::times("diagnosis: direct, spawned as serve does", &l));
    report.row(Row::value(
        "  of the overhead: serve's spawn method",
        format!("{:.3} ms", stats::diff_ms(l.median, d.median)),
        String::new(),
        None,
    ));
    report.row(Row::value(
        "  of the overhead: the rest (protocol, thread)",
        format!("{:.3} ms", stats::diff_ms(s.median, l.median)),
        String::new(),
        None,
    ));
    report.row(Row::value(
        "serve's CPU time per call (user+sys)",
        format!("{:.3} ms", stats::ms(cpu) / calls.max(1) as f64),
        String::new(),
        None,
    ));
    Ok(serve)
}

/// Spawns as serve does (runner/src/call/spawn.rs): a process group of its own and a parent-death
/// signal set between fork and exec. The `pre_exec` hook makes std fork instead of using
/// `posix_spawn` (which the plain direct spawn uses), so the difference to the plain spawn is
/// the cost of that choice.
#[allow(unsafe_code)]
fn spawn_like_serve(command: &mut Command) -> &mut Command {
    command.process_group(0);
    // SAFETY: the hook runs in the child between fork and exec; it makes one system call
    // (prctl), which is async-signal-safe, and allocates nothing.
    unsafe {
        command.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            Ok(())
        })
    }
}

/// Item 1 again under bubblewrap (extra information, no target), with the recommended line
/// and with the same line less `{protected}` (the protected paths' binds, found for each
/// sandbox): what protecting them costs a call.
fn bubblewrap(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    bwrap: &Path,
    calls: usize,
) -> Result<()> {
    // The README's recommended line, plus a read-only view of the programs folder.
    let prefix: Vec<OsString> =
        crate::line::recommended(&place.files, std::slice::from_ref(&place.programs), bwrap)?;
    let title = "4. extra, no target: per-call overhead under bubblewrap";
    bubblewrap_line(report, (bins, place), &prefix, calls, title)?;
    let title = "4b. extra, no target: the same, without {protected} (no protected paths)";
    bubblewrap_line(
        report,
        (bins, place),
        &crate::line::by_hand(&prefix),
        calls,
        title,
    )
}

/// Item 4 under the sandbox line `prefix`.
fn bubblewrap_line(
    report: &mut Report,
    (bins, place): (&Bins, &Place),
    prefix: &[OsString],
    calls: usize,
    title: &str,
) -> Result<()> {
    let calls_prefix = prefix.to_vec();
    let prefix = crate::line::by_hand(prefix);
    let (program, args) = prefix.split_first().context("an empty bwrap prefix")?;
    spawn_true(
        Command::new(program)
            .args(args)
            .arg("--")
            .arg(&place.true_path),
    )
    .context("bwrap cannot run /bin/true here")?;
    let protected = calls_prefix.iter().any(|w| w == crate::line::PROTECTED);
    let mut serve_args = place.serve_args(bins, "bwrap", calls_prefix);
    // Without the protected paths the check refuses the line (as it should): only the cost is
    // compared here.
    serve_args.sandbox_check &= protected;
    let serve = Serve::start("bwrap", &serve_args)?;
    let direct = || {
        let mut command = Command::new(program);
        command.args(args).arg("--").arg(&place.true_path);
        command
    };
    let serve = per_call(report, title, false, serve, calls, direct)?;
    serve.shutdown()
}

pub(crate) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}
