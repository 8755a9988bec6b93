//! Item 5 of `lnk-bench foreground` (issue 22): `echo hi` at the client, one call in flight,
//! interleaved in one run: Link Run warm and cold (`LNK_COLD_START=1`) under the README's
//! recommended bubblewrap line and with the pass-through prefix, a direct spawn of each argv,
//! the least a process started ahead of its call costs (`sh` woken to `exec echo hi`), and the
//! peer to beat, mcp-server-commands 0.5.0 (installed from npm into a cache folder,
//! run as its README says: its `build/index.js` under node). Back to back, spaced 100 ms
//! apart, and both again with one core kept busy by a CPU hog the bench starts and kills.
//! Then 32 calls at once, warm and cold under bubblewrap.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::{Bins, Options, Place, baselines, on_path};
use crate::report::{Report, Row};
use crate::serve::Serve;
use crate::stats::{self, Summary};

/// Calls of each target before the timed ones.
const WARMUP: usize = 20;
/// How long one call may take.
const LIMIT: Duration = Duration::from_secs(30);
/// The row of [`How::Waiting`].
const WAITING: &str = "started ahead: sh woken, exec echo hi";
/// The peer's row.
const PEER_ROW: &str = "peer: mcp-server-commands 0.5.0";

/// One thing measured.
struct Target {
    name: &'static str,
    how: How,
    samples: Vec<Duration>,
}

enum How {
    /// An MCP server: the `tools/call` params of `echo hi`.
    Server(Serve, Value),
    /// A direct spawn of this argv, output piped and waited for.
    Direct(Vec<OsString>),
    /// The least a call to a process started ahead of it can cost: `sh`, started before the
    /// timed call (and before the spacing), waiting on its stdin; the call is a line written
    /// to it, on which it `exec`s this argv, output piped and waited for. No server, no
    /// sandbox: what a warm call's hand-off would be with nothing else on its path.
    Waiting(Vec<OsString>, Option<Child>),
}

impl Target {
    fn server(name: &'static str, serve: Serve, params: Value) -> Target {
        Target {
            name,
            how: How::Server(serve, params),
            samples: Vec::new(),
        }
    }

    /// One `echo hi`, timed from writing the request (or spawning) to the answer (or exit).
    fn once(&mut self) -> Result<Duration> {
        match &mut self.how {
            How::Server(serve, params) => {
                let (result, took) = serve.request("tools/call", params, LIMIT)?;
                if result.get("isError") == Some(&Value::Bool(true))
                    || !result.to_string().contains("hi")
                {
                    bail!("{}: `echo hi` answered {result}", self.name);
                }
                Ok(took)
            }
            How::Direct(argv) => {
                let (program, args) = argv.split_first().context("an empty argv")?;
                let start = Instant::now();
                let out = Command::new(program)
                    .args(args)
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .output()
                    .with_context(|| format!("{}: spawning", self.name))?;
                let took = start.elapsed();
                said_hi(self.name, &out)?;
                Ok(took)
            }
            How::Waiting(argv, ready) => {
                let mut child = match ready.take() {
                    Some(child) => child,
                    None => baselines::start_waiting(argv)?,
                };
                let start = Instant::now();
                let mut stdin = child.stdin.take().context("the waiting sh's stdin")?;
                stdin
                    .write_all(b"go\n")
                    .with_context(|| format!("{}: waking it", self.name))?;
                drop(stdin);
                let out = child
                    .wait_with_output()
                    .with_context(|| format!("{}: waiting", self.name))?;
                let took = start.elapsed();
                said_hi(self.name, &out)?;
                // The next one waits through the spacing, as a spare does.
                *ready = Some(baselines::start_waiting(argv)?);
                Ok(took)
            }
        }
    }
}

/// Whether a process of `name` ran `echo hi` to its end.
fn said_hi(name: &str, out: &std::process::Output) -> Result<()> {
    if !out.status.success() || out.stdout != b"hi\n" {
        bail!("{name}: {} {:?}", out.status, out.stderr);
    }
    Ok(())
}

/// A process that keeps one core busy until dropped.
struct Hog(Child);

impl Hog {
    fn start() -> Result<Hog> {
        let child = Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .context("starting the CPU hog")?;
        Ok(Hog(child))
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn lnk_params() -> Value {
    json!({"name": "command", "arguments": {"program": "echo", "args": ["hi"]}})
}

/// Starts a Link Run serve for the comparison, warm or cold.
fn lnk(bins: &Bins, place: &Place, name: &str, prefix: Vec<OsString>, cold: bool) -> Result<Serve> {
    let cold_env = [("LNK_COLD_START", std::ffi::OsStr::new("1"))];
    let env: &[(&str, &std::ffi::OsStr)] = if cold { &cold_env } else { &[] };
    Serve::start_with_env(name, &place.serve_args(bins, name, prefix), env)
}

/// Starts another build's serve (`--baseline`), warm, for the comparison.
fn baseline(
    bins: &Bins,
    place: &Place,
    binary: &Path,
    name: &str,
    prefix: Vec<OsString>,
) -> Result<Serve> {
    let mut args = place.serve_args(bins, name, prefix);
    args.binary = binary;
    Serve::start_with_env(name, &args, &[])
}

/// The rows of `--baseline`, each with the row of this build it is compared with.
const BASELINE_ROWS: [(&str, &str); 2] = [
    ("baseline build: warm, bwrap", "Link Run warm, bwrap"),
    (
        "baseline build: warm, pass-through",
        "Link Run warm, pass-through",
    ),
];

/// Runs item 5 and its reports.
pub(super) fn compare(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    options: &Options,
) -> Result<()> {
    let calls = options.compare_calls;
    let echo = super::system_program("echo")?.into_os_string();
    let hi: OsString = "hi".into();
    let pass = vec![bins.passthrough.clone().into_os_string()];
    let mut targets = Vec::new();
    let bwrap_prefix = match on_path("bwrap") {
        Some(bwrap) => Some(crate::line::recommended(
            &place.files,
            std::slice::from_ref(&place.programs),
            &bwrap,
        )?),
        None => {
            report.note("bubblewrap: `bwrap` is not on PATH; its rows are missing");
            None
        }
    };
    if let Some(prefix) = &bwrap_prefix {
        let warm = lnk(bins, place, "warm-bwrap", prefix.clone(), false)?;
        targets.push(Target::server("Link Run warm, bwrap", warm, lnk_params()));
        let cold = lnk(bins, place, "cold-bwrap", prefix.clone(), true)?;
        targets.push(Target::server("Link Run cold, bwrap", cold, lnk_params()));
        let mut argv = crate::line::by_hand(prefix);
        argv.extend(["--".into(), echo.clone(), hi.clone()]);
        if let Some(binary) = &options.baseline {
            let other = baseline(bins, place, binary, "baseline-bwrap", prefix.clone())?;
            targets.push(Target::server(BASELINE_ROWS[0].0, other, lnk_params()));
        }
        targets.push(Target {
            name: "direct: bwrap line, echo hi",
            how: How::Direct(argv),
            samples: Vec::new(),
        });
    }
    let warm = lnk(bins, place, "warm-pass", pass.clone(), false)?;
    targets.push(Target::server(
        "Link Run warm, pass-through",
        warm,
        lnk_params(),
    ));
    if let Some(binary) = &options.baseline {
        let other = baseline(bins, place, binary, "baseline-pass", pass.clone())?;
        targets.push(Target::server(BASELINE_ROWS[1].0, other, lnk_params()));
    }
    let cold = lnk(bins, place, "cold-pass", pass.clone(), true)?;
    targets.push(Target::server(
        "Link Run cold, pass-through",
        cold,
        lnk_params(),
    ));
    let mut argv = pass;
    argv.extend(["--".into(), echo.clone(), hi.clone()]);
    targets.push(Target {
        name: "direct: pass-through, echo hi",
        how: How::Direct(argv),
        samples: Vec::new(),
    });
    targets.push(Target {
        name: "direct: echo hi",
        how: How::Direct(vec![echo.clone(), hi.clone()]),
        samples: Vec::new(),
    });
    targets.push(Target {
        name: WAITING,
        how: How::Waiting(vec![echo, hi], None),
        samples: Vec::new(),
    });
    match baselines::peer_command(&options.peer_cache) {
        Ok(command) => {
            let log = place.root.path().join("peer.log");
            let file = File::create(&log).context("creating the peer's log")?;
            let peer = Serve::start_command("peer", command, file, &log)?;
            let params = json!({"name": "run_command", "arguments": {"command": "echo hi"}});
            targets.push(Target::server(PEER_ROW, peer, params));
        }
        Err(err) => report.note(&format!("the peer is not measured: {err:#}")),
    }

    let phases = [
        ("back to back", Duration::ZERO, false),
        ("spaced 100 ms", Duration::from_millis(100), false),
        ("back to back, one core busy", Duration::ZERO, true),
        (
            "spaced 100 ms, one core busy",
            Duration::from_millis(100),
            true,
        ),
    ];
    let mut medians: Vec<Vec<(&'static str, Duration)>> = Vec::new();
    for (label, spacing, hog) in phases {
        let _hog = if hog { Some(Hog::start()?) } else { None };
        for target in &mut targets {
            target.samples.clear();
        }
        let n = targets.len();
        for i in 0..WARMUP + calls {
            for k in 0..n {
                let target = &mut targets[(i + k) % n];
                if !spacing.is_zero() {
                    std::thread::sleep(spacing);
                }
                let took = target.once()?;
                if i >= WARMUP {
                    target.samples.push(took);
                }
            }
        }
        report.section(&format!(
            "5. `echo hi` at the client, one call in flight, {calls} calls each, interleaved: \
             {label}"
        ));
        let mut row = Vec::new();
        for target in &targets {
            let summary = Summary::of(&target.samples);
            report.row(Row::times(target.name, &summary));
            row.push((target.name, summary.median));
        }
        ratios(report, &row);
        against_baseline(report, &row);
        medians.push(row);
    }
    summary(report, &medians);
    if let Some(prefix) = bwrap_prefix {
        at_once(report, bins, place, prefix, options)?;
    }
    for target in targets {
        if let How::Server(serve, _) = target.how {
            serve.shutdown()?;
        }
    }
    Ok(())
}

fn median_of(row: &[(&str, Duration)], name: &str) -> Option<f64> {
    row.iter()
        .find(|(n, _)| *n == name)
        .map(|(_, d)| stats::ms(*d))
}

/// The ratios the issue sets targets for, in one phase.
fn ratios(report: &mut Report, row: &[(&str, Duration)]) {
    let Some(peer) = median_of(row, PEER_ROW) else {
        return;
    };
    for (name, target) in [
        ("Link Run warm, bwrap", Some(1.2)),
        ("Link Run cold, bwrap", None),
        ("Link Run warm, pass-through", Some(0.9)),
        ("Link Run cold, pass-through", None),
    ] {
        if let Some(ms) = median_of(row, name) {
            let ratio = ms / peer.max(1e-9);
            report.row(Row::value(
                &format!("ratio {name} / peer"),
                format!("{ratio:.2}x"),
                String::new(),
                target.map(|t| (format!("<= {t}x"), ratio <= t)),
            ));
        }
    }
}

/// This build against `--baseline`, in one phase: the difference of the medians.
fn against_baseline(report: &mut Report, row: &[(&str, Duration)]) {
    for (other, this) in BASELINE_ROWS {
        if let (Some(a), Some(b)) = (median_of(row, other), median_of(row, this)) {
            report.row(Row::value(
                &format!("{this} - {other}"),
                format!("{:+.3} ms", b - a),
                String::new(),
                None,
            ));
        }
    }
}

/// Across phases: spaced against back to back, and busy against quiet.
fn summary(report: &mut Report, medians: &[Vec<(&'static str, Duration)>]) {
    let [quiet, spaced, busy, busy_spaced] = medians else {
        return;
    };
    report.section("5. summary: spaced against back to back, one core busy against quiet");
    // What every process pays on this machine when calls come apart, for comparison: the
    // least a process started ahead of its call pays, a direct spawn, the peer.
    let gap = |name: &str| Some(median_of(spaced, name)? - median_of(quiet, name)?);
    for name in [WAITING, "direct: echo hi", PEER_ROW] {
        if let Some(slower) = gap(name) {
            report.row(Row::value(
                &format!("{name}: spaced - back to back"),
                format!("{slower:.3} ms"),
                String::new(),
                None,
            ));
        }
    }
    for name in ["Link Run warm, bwrap", "Link Run warm, pass-through"] {
        if let Some(slower) = gap(name) {
            report.row(Row::value(
                &format!("{name}: spaced - back to back"),
                format!("{slower:.3} ms"),
                String::new(),
                Some(("<= 0.3 ms".into(), slower <= 0.3)),
            ));
            // Link Run's own part: beyond what a process started ahead of its call pays.
            if let Some(floor) = gap(WAITING) {
                report.row(Row::value(
                    &format!("{name}: the same, beyond the started-ahead row's"),
                    format!("{:.3} ms", slower - floor),
                    String::new(),
                    None,
                ));
            }
        }
        let peer = PEER_ROW;
        for (quiet_row, busy_row, how) in [
            (quiet, busy, "back to back"),
            (spaced, busy_spaced, "spaced"),
        ] {
            let ratio =
                |row: &[(&str, Duration)]| Some(median_of(row, name)? / median_of(row, peer)?);
            if let (Some(q), Some(b)) = (ratio(quiet_row), ratio(busy_row)) {
                let change = b / q.max(1e-9);
                report.row(Row::value(
                    &format!("{name}: busy ratio / quiet ratio, {how}"),
                    format!("{change:.2} ({q:.2}x -> {b:.2}x)"),
                    String::new(),
                    Some(("<= 1.2".into(), change <= 1.2)),
                ));
            }
        }
    }
}

/// 32 calls (`--concurrent`) of `echo hi` at once under bubblewrap, warm and cold, in rounds.
fn at_once(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    prefix: Vec<OsString>,
    options: &Options,
) -> Result<()> {
    let n = options.concurrent;
    report.section(&format!(
        "5. {n} calls of `echo hi` at once under bubblewrap, {} rounds",
        options.rounds
    ));
    for cold in [false, true] {
        let name = if cold { "cold" } else { "warm" };
        let mut serve = lnk(
            bins,
            place,
            &format!("{name}-at-once"),
            prefix.clone(),
            cold,
        )?;
        let mut rounds = Vec::new();
        let mut slowest = 0;
        for _ in 0..options.rounds {
            // The spares are started again after each round.
            std::thread::sleep(Duration::from_millis(500));
            let ids: Vec<u64> = (0..n).map(|_| serve.take_id()).collect();
            let start = Instant::now();
            for id in &ids {
                serve.send_command(*id, "echo", &["hi"])?;
            }
            let mut waiting: HashSet<u64> = ids.iter().copied().collect();
            while !waiting.is_empty() {
                let (id, answer) = serve.read_answer(LIMIT)?;
                if !waiting.remove(&id) || answer.exit_code != Some(0) {
                    bail!("call {id} at once: {answer:?}");
                }
                slowest = slowest.max(answer.elapsed_ms);
            }
            rounds.push(start.elapsed());
        }
        serve.shutdown()?;
        let s = Summary::of(&rounds);
        report.row(Row::times(
            &format!("{name}: until all {n} answers arrived"),
            &s,
        ));
        report.row(Row::value(
            &format!("{name}: slowest call's own elapsed_ms"),
            format!("{slowest} ms"),
            String::new(),
            None,
        ));
    }
    Ok(())
}
