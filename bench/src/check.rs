//! `lnk-bench check`: what the sandbox check costs at start, under the README's recommended
//! line. serve's time to its first answer (from spawning it to the answer to `initialize`) is
//! measured with the check and with `--no-sandbox-check`, the two interleaved; the check's cost
//! is the median of the paired differences. The probe's own time, as `lnk-link-run check`
//! reports it, is shown beside (target: under 50 ms added).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::bins::sibling;
use crate::report::{Report, Row};
use crate::serve::{Serve, ServeArgs};
use crate::stats::{self, Summary};

/// The target: what the check may add to serve's start.
const TARGET_MS: f64 = 50.0;
/// Starts of each kind before the timed ones (caches warm).
const WARMUP: usize = 3;

/// How often to start serve.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Timed starts of each kind (with and without the check), and runs of `check`.
    #[arg(long, default_value_t = 20)]
    pub starts: usize,
}

/// Runs the benchmark and prints its table.
pub fn run(options: &Options) -> Result<()> {
    let run = sibling("lnk-link-run")?;
    let bwrap = PathBuf::from("/usr/bin/bwrap");
    if !bwrap.is_file() {
        bail!("/usr/bin/bwrap is missing: the check's cost is measured under bubblewrap");
    }
    let root = tempfile::Builder::new()
        .prefix("lnk-bench-check-")
        .tempdir()
        .context("creating a temporary folder")?;
    let files = root.path().join("files");
    std::fs::create_dir(&files).context("creating the files folder")?;
    let prefix = crate::line::recommended(&files, &[], &bwrap)?;
    let programs = Path::new("/usr/bin:/bin");
    let args = |name: &str, sandbox_check: bool| ServeArgs {
        binary: &run,
        files: &files,
        programs,
        output: "64KiB",
        allowed: &["true"],
        extra: Vec::new(),
        sandbox: prefix.clone(),
        sandbox_check,
        log: root.path().join(format!("serve-{name}.log")),
    };
    let first_answer = |checked: bool| -> Result<Duration> {
        let name = if checked { "checked" } else { "unchecked" };
        let started = Instant::now();
        let serve = Serve::start(name, &args(name, checked))?;
        let took = started.elapsed();
        drop(serve);
        Ok(took)
    };
    for _ in 0..WARMUP {
        first_answer(true)?;
        first_answer(false)?;
    }
    let mut with = Vec::new();
    let mut without = Vec::new();
    for i in 0..options.starts {
        // Alternate which goes first, so that neither always follows the other.
        let (a, b) = if i % 2 == 0 {
            (true, false)
        } else {
            (false, true)
        };
        for checked in [a, b] {
            let took = first_answer(checked)?;
            if checked {
                with.push(took);
            } else {
                without.push(took);
            }
        }
    }
    let mut probe = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..options.starts {
        probe.push(probe_time(&run, &files, &prefix)?);
        bare.push(bwrap_true(&prefix)?);
    }
    let added: Vec<f64> = with
        .iter()
        .zip(&without)
        .map(|(w, wo)| stats::diff_ms(*w, *wo))
        .collect();
    let (added_median, added_p90) = stats::median_p90(&added);
    let mut report = Report::new(format!(
        "Link Run sandbox check benchmark: serve under the README's recommended line \
         ({}), {} starts of each kind",
        bwrap.display(),
        options.starts
    ));
    report.section("serve's time to its first answer (spawn to the answer to initialize)");
    report.row(Row::times("with the sandbox check", &Summary::of(&with)));
    report.row(Row::times(
        "with --no-sandbox-check",
        &Summary::of(&without),
    ));
    report.row(Row::value_n(
        "added by the check (paired differences)",
        added.len(),
        format!("{added_median:.3} ms"),
        format!("{added_p90:.3} ms"),
        Some((format!("< {TARGET_MS} ms"), added_median < TARGET_MS)),
    ));
    report.row(Row::times(
        "the probe alone (`lnk-link-run check`'s figure)",
        &Summary::of(&probe),
    ));
    report.row(Row::times(
        "baseline: the same line running /bin/true",
        &Summary::of(&bare),
    ));
    report.print();
    Ok(())
}

/// The probe's own time, from `lnk-link-run check`'s last line ("the probe took N ms; …").
fn probe_time(run: &Path, files: &Path, prefix: &[OsString]) -> Result<Duration> {
    let out = Command::new(run)
        .arg("check")
        .arg("--files")
        .arg(files)
        .args(["--programs-path", "/usr/bin:/bin", "--timeout", "10s"])
        .args(["--output", "64KiB", "--program", "true", "--"])
        .args(prefix)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .context("running lnk-link-run check")?;
    if !out.status.success() {
        bail!(
            "the recommended line does not pass the check here:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let ms = text
        .lines()
        .find_map(|line| line.strip_prefix("the probe took "))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .context("check did not say how long the probe took")?;
    Ok(Duration::from_millis(ms))
}

/// How long the line takes to run `/bin/true`: what any sandboxed program pays.
fn bwrap_true(prefix: &[OsString]) -> Result<Duration> {
    let prefix = crate::line::by_hand(prefix);
    let (program, args) = prefix.split_first().context("an empty sandbox line")?;
    let started = Instant::now();
    let status = Command::new(program)
        .args(args)
        .args(["--", "/bin/true"])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running the line")?;
    let took = started.elapsed();
    if !status.success() {
        bail!("the recommended line cannot run /bin/true here: {status}");
    }
    Ok(took)
}
