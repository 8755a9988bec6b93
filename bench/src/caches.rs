//! `lnk-bench caches`: what the agent's cache layers cost a call. `echo hi` through `serve`
//! under the README's recommended line, warm and cold (`LNK_COLD_START=1`), with two `--cache`
//! folders bound by `{caches}` (each sandbox then gets two overlays of its own, made between
//! the sandbox process's fork and its exec) against none, the four interleaved in one run,
//! back to back and spaced 100 ms apart. The cost is the difference of the medians, with and
//! without, each way; and the sandbox check's start (its probe runs under the layers too).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::report::{Report, Row};
use crate::serve::{Serve, ServeArgs};
use crate::stats::{self, Summary};

/// Calls of each target before the timed ones.
const WARMUP: usize = 20;
/// How long one call may take.
const LIMIT: Duration = Duration::from_secs(30);
/// Files in each cache folder (a small registry's worth of entries).
const FILES_PER_CACHE: usize = 200;

/// How often to call.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Timed calls of each target, per phase.
    #[arg(long, default_value_t = 300)]
    pub calls: usize,
    /// Timed starts of serve with and without the caches (time to its first answer).
    #[arg(long, default_value_t = 10)]
    pub starts: usize,
}

/// One serve measured.
struct Target {
    name: &'static str,
    serve: Serve,
    samples: Vec<Duration>,
}

/// The folders of one run.
struct Place {
    root: tempfile::TempDir,
    files: PathBuf,
    programs: PathBuf,
    caches: [PathBuf; 2],
}

impl Place {
    fn new() -> Result<Place> {
        let root = tempfile::Builder::new()
            .prefix("lnk-bench-caches-")
            .tempdir()
            .context("creating a temporary folder")?;
        let files = root.path().join("files");
        let programs = root.path().join("programs");
        std::fs::create_dir(&files).context("creating the files folder")?;
        std::fs::create_dir(&programs).context("creating the programs folder")?;
        let echo = crate::foreground::system_program("echo")?;
        std::os::unix::fs::symlink(&echo, programs.join("echo")).context("linking echo")?;
        let caches = [root.path().join("registry"), root.path().join("npm")];
        for cache in &caches {
            for i in 0..FILES_PER_CACHE {
                let dir = cache.join(format!("pkg-{}", i % 20));
                std::fs::create_dir_all(&dir).context("making a cache folder")?;
                std::fs::write(dir.join(format!("file-{i}")), b"cached bytes")
                    .context("filling a cache folder")?;
            }
        }
        Ok(Place {
            root,
            files,
            programs,
            caches,
        })
    }

    /// serve's arguments: the recommended line, with the caches when `cached`.
    fn args<'a>(&'a self, run: &'a Path, name: &str, cached: bool) -> Result<ServeArgs<'a>> {
        let bwrap = Path::new("/usr/bin/bwrap");
        let mut sandbox =
            crate::line::recommended(&self.files, std::slice::from_ref(&self.programs), bwrap)?;
        let mut extra: Vec<OsString> = Vec::new();
        if cached {
            let files = self.files.as_os_str();
            let at = sandbox
                .windows(3)
                .position(|w| w[0] == "--bind" && w[1] == files && w[2] == files)
                .context("the recommended line does not bind the files folder")?;
            sandbox.insert(at + 3, "{caches}".into());
            for cache in &self.caches {
                extra.extend(["--cache".into(), cache.clone().into_os_string()]);
            }
        }
        Ok(ServeArgs {
            binary: run,
            files: &self.files,
            programs: &self.programs,
            output: "64KiB",
            allowed: &["echo"],
            extra,
            sandbox,
            sandbox_check: true,
            log: self.root.path().join(format!("serve-{name}.log")),
        })
    }
}

/// Runs the benchmark and prints its table.
pub fn run(options: &Options) -> Result<()> {
    if !Path::new("/usr/bin/bwrap").is_file() {
        bail!("/usr/bin/bwrap is missing: the layers are measured under bubblewrap");
    }
    let run = crate::bins::sibling("lnk-link-run")?;
    let place = Place::new()?;
    let mut report = Report::new(format!(
        "Link Run cache layers: {} CPUs; two --cache folders of {FILES_PER_CACHE} files each \
         against none, under the recommended line",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    ));
    let result = measure(options, &run, &place, &mut report);
    report.print();
    result
}

fn measure(options: &Options, run: &Path, place: &Place, report: &mut Report) -> Result<()> {
    let cold = [("LNK_COLD_START", std::ffi::OsStr::new("1"))];
    let start = |name: &'static str, cached: bool, is_cold: bool| -> Result<Target> {
        let env: &[(&str, &std::ffi::OsStr)] = if is_cold { &cold } else { &[] };
        let serve = Serve::start_with_env(name, &place.args(run, name, cached)?, env)?;
        Ok(Target {
            name,
            serve,
            samples: Vec::new(),
        })
    };
    let mut targets = vec![
        start("warm, no caches", false, false)?,
        start("warm, two caches", true, false)?,
        start("cold, no caches", false, true)?,
        start("cold, two caches", true, true)?,
    ];
    let params = json!({"name": "command", "arguments": {"program": "echo", "args": ["hi"]}});
    for (label, spacing) in [
        ("back to back", Duration::ZERO),
        ("spaced 100 ms", Duration::from_millis(100)),
    ] {
        for target in &mut targets {
            target.samples.clear();
        }
        let n = targets.len();
        for i in 0..WARMUP + options.calls {
            for k in 0..n {
                let target = &mut targets[(i + k) % n];
                std::thread::sleep(spacing);
                let took = once(target, &params)?;
                if i >= WARMUP {
                    target.samples.push(took);
                }
            }
        }
        report.section(&format!(
            "`echo hi` at the client, one call in flight, {} calls each, interleaved: {label}",
            options.calls
        ));
        for target in &targets {
            report.row(Row::times(target.name, &Summary::of(&target.samples)));
        }
        for (with, without) in [
            ("warm, two caches", "warm, no caches"),
            ("cold, two caches", "cold, no caches"),
        ] {
            let median = |name: &str| {
                targets
                    .iter()
                    .find(|t| t.name == name)
                    .map(|t| Summary::of(&t.samples).median)
            };
            if let (Some(a), Some(b)) = (median(with), median(without)) {
                report.row(Row::value(
                    &format!("{with} - {without}"),
                    format!(
                        "{:+.3} ms ({:.2}x)",
                        stats::diff_ms(a, b),
                        stats::ms(a) / stats::ms(b).max(1e-9)
                    ),
                    String::new(),
                    None,
                ));
            }
        }
    }
    for target in targets {
        target.serve.shutdown()?;
    }
    starts(options, run, place, report)
}

/// One `echo hi`, timed from writing the request to reading the answer.
fn once(target: &mut Target, params: &Value) -> Result<Duration> {
    let (result, took) = target.serve.request("tools/call", params, LIMIT)?;
    if result.get("isError") == Some(&Value::Bool(true)) || !result.to_string().contains("hi") {
        bail!("{}: `echo hi` answered {result}", target.name);
    }
    Ok(took)
}

/// serve's time to its first answer (the check, cold and warm, included), with and without the
/// caches, interleaved.
fn starts(options: &Options, run: &Path, place: &Place, report: &mut Report) -> Result<()> {
    let mut with = Vec::new();
    let mut without = Vec::new();
    for i in 0..options.starts + 1 {
        for cached in [i % 2 == 0, i % 2 != 0] {
            let name = if cached {
                "start-cached"
            } else {
                "start-plain"
            };
            let begun = Instant::now();
            let serve = Serve::start(name, &place.args(run, name, cached)?)?;
            let took = begun.elapsed();
            serve.shutdown()?;
            // The first of each is a warm-up.
            if i > 0 {
                if cached { &mut with } else { &mut without }.push(took);
            }
        }
    }
    report.section("serve's start to its first answer (the sandbox check, cold and warm)");
    let (a, b) = (Summary::of(&with), Summary::of(&without));
    report.row(Row::times("two caches", &a));
    report.row(Row::times("no caches", &b));
    report.row(Row::value(
        "two caches - no caches",
        format!("{:+.3} ms", stats::diff_ms(a.median, b.median)),
        String::new(),
        None,
    ));
    Ok(())
}
