//! `lnk-bench machine`: what the line `lnk-link-run config` builds for this machine costs
//! beside the README's line as it is. `config` is run for this process's own home and `PATH`
//! (its toolchains: cargo through rustup, python3, git, node, where they are), timed itself
//! (target: under a second), and its line served next to the README's: `echo hi` at the
//! client, warm (spaced 100 ms apart, as an agent calls; target: within 1.2x of the README's
//! line) and cold (`LNK_COLD_START=1`: bubblewrap made for the call, binds and all), the
//! targets interleaved call by call, with a third that tells the `--var`s' part (the README's
//! line with config's `--var`s: `/usr/bin/env` runs before the program) from the binds';
//! beside them, each line running `/bin/true` straight from bubblewrap, which is what the
//! binds cost any program.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::bins::sibling;
use crate::report::{Report, Row};
use crate::serve::{Serve, ServeArgs};
use crate::stats::{self, Summary};

/// The warm call's target: the machine's line within this ratio of the README's.
const TARGET_RATIO: f64 = 1.2;
/// `config`'s target.
const CONFIG_TARGET: Duration = Duration::from_secs(1);
/// Calls of each target before the timed ones.
const WARMUP: usize = 10;
/// How long one call may take.
const LIMIT: Duration = Duration::from_secs(30);
/// The programs `config` is asked for, those of them this machine has.
const PROGRAMS: [&str; 6] = ["echo", "cargo", "python3", "git", "node", "make"];

/// How much to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Timed calls of each target.
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// Timed runs of `config`.
    #[arg(long, default_value_t = 20)]
    pub configs: usize,
    /// Milliseconds between warm calls.
    #[arg(long, default_value_t = 100)]
    pub spacing_ms: u64,
}

/// One serve measured.
struct Target {
    name: &'static str,
    serve: Serve,
    samples: Vec<Duration>,
}

/// Runs the benchmark and prints its table.
pub fn run(options: &Options) -> Result<()> {
    let run = sibling("lnk-link-run")?;
    let bwrap = PathBuf::from("/usr/bin/bwrap");
    if !bwrap.is_file() {
        bail!("/usr/bin/bwrap is missing: the lines are bubblewrap's");
    }
    let root = tempfile::Builder::new()
        .prefix("lnk-bench-machine-")
        .tempdir()
        .context("creating a temporary folder")?;
    let files = root.path().join("files");
    std::fs::create_dir(&files).context("creating the files folder")?;
    let path = std::env::var_os("PATH").context("PATH is not set")?;
    let programs: Vec<&str> = PROGRAMS
        .into_iter()
        .filter(|p| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
        .collect();
    let mut config_times = Vec::new();
    let mut args = Vec::new();
    for _ in 0..options.configs.max(1) {
        let started = Instant::now();
        args = config(&run, &files, &path, &programs)?;
        config_times.push(started.elapsed());
    }
    let separator = args.iter().position(|a| a == "--").context("no `--`")?;
    let machine_line: Vec<OsString> = args[separator + 1..].iter().map(OsString::from).collect();
    let vars: Vec<OsString> = args[..separator]
        .windows(2)
        .filter(|pair| pair[0] == "--var")
        .flat_map(|pair| [OsString::from("--var"), OsString::from(&pair[1])])
        .collect();
    let readme_line = crate::line::recommended(&files, &[], &bwrap)?;
    let added = machine_line.len().saturating_sub(readme_line.len());
    let programs_path = PathBuf::from(&path);
    let serve = |name: &'static str, line: &[OsString], extra: &[OsString], cold: bool| {
        let args = ServeArgs {
            binary: &run,
            files: &files,
            programs: &programs_path,
            output: "64KiB",
            allowed: &programs,
            extra: extra.to_vec(),
            sandbox: line.to_vec(),
            sandbox_check: true,
            log: root.path().join(format!("{name}.log")),
        };
        let cold_value = OsString::from("1");
        let env: Vec<(&str, &std::ffi::OsStr)> = if cold {
            vec![("LNK_COLD_START", cold_value.as_os_str())]
        } else {
            Vec::new()
        };
        Serve::start_with_env(name, &args, &env).map(|serve| Target {
            name,
            serve,
            samples: Vec::new(),
        })
    };
    let mut warm = vec![
        serve("README's line, warm", &readme_line, &[], false)?,
        serve("config's line, warm", &machine_line, &vars, false)?,
        serve(
            "README's line with config's --vars, warm",
            &readme_line,
            &vars,
            false,
        )?,
    ];
    let mut cold = vec![
        serve("README's line, cold", &readme_line, &[], true)?,
        serve("config's line, cold", &machine_line, &vars, true)?,
        serve(
            "README's line with config's --vars, cold",
            &readme_line,
            &vars,
            true,
        )?,
    ];
    let spacing = Duration::from_millis(options.spacing_ms);
    interleave(&mut warm, options.calls, spacing)?;
    interleave(&mut cold, options.calls, Duration::ZERO)?;
    let mut bare = [Vec::new(), Vec::new()];
    for _ in 0..options.calls.min(100) {
        bare[0].push(bwrap_true(&readme_line, &vars)?);
        bare[1].push(bwrap_true(&machine_line, &vars)?);
    }

    let mut report = Report::new(format!(
        "Link Run: the line `config` builds for this machine ({} more words than the README's: \
         its home's tmpfs, binds and links; {} --vars) against the README's line, `echo hi`",
        added,
        vars.len() / 2
    ));
    report.section("`lnk-link-run config claude-code` for this home and PATH (the check included)");
    let summary = Summary::of(&config_times);
    report.row(Row::times_target(
        "config",
        &summary,
        "< 1 s",
        summary.median < CONFIG_TARGET,
    ));
    for (title, targets) in [
        (
            format!("warm calls, spaced {} ms apart", options.spacing_ms),
            &warm,
        ),
        ("cold calls, back to back".to_owned(), &cold),
    ] {
        report.section(&title);
        for target in targets.iter() {
            report.row(Row::times(target.name, &Summary::of(&target.samples)));
        }
        let (readme, machine, with_vars) = (
            &targets[0].samples,
            &targets[1].samples,
            &targets[2].samples,
        );
        let ratio = stats::ms(Summary::of(machine).median) / stats::ms(Summary::of(readme).median);
        for (label, a, b) in [
            ("config's minus the README's (paired)", machine, readme),
            (
                "of it, the --vars (`/usr/bin/env` before the program)",
                with_vars,
                readme,
            ),
            (
                "of it, the binds (config's minus the README's with --vars)",
                machine,
                with_vars,
            ),
        ] {
            let diffs: Vec<f64> = a
                .iter()
                .zip(b)
                .map(|(x, y)| stats::diff_ms(*x, *y))
                .collect();
            let (median, p90) = stats::median_p90(&diffs);
            report.row(Row::value_n(
                label,
                diffs.len(),
                format!("{median:.3} ms"),
                format!("{p90:.3} ms"),
                None,
            ));
        }
        let target = title
            .starts_with("warm")
            .then(|| (format!("<= {TARGET_RATIO}x"), ratio <= TARGET_RATIO));
        report.row(Row::value(
            "config's / the README's (medians)",
            format!("{ratio:.3}x"),
            String::new(),
            target,
        ));
    }
    report.section("bubblewrap alone running /bin/true (what the binds cost any program)");
    report.row(Row::times("README's line", &Summary::of(&bare[0])));
    let diffs: Vec<f64> = bare[1]
        .iter()
        .zip(&bare[0])
        .map(|(x, y)| stats::diff_ms(*x, *y))
        .collect();
    let (median, p90) = stats::median_p90(&diffs);
    report.row(Row::times("config's line", &Summary::of(&bare[1])));
    report.row(Row::value_n(
        "config's minus the README's (paired)",
        diffs.len(),
        format!("{median:.3} ms"),
        format!("{p90:.3} ms"),
        None,
    ));
    report.note(&format!(
        "config's line: {}",
        machine_line
            .iter()
            .map(|w| w.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    ));
    report.print();
    for target in warm.into_iter().chain(cold) {
        target.serve.shutdown()?;
    }
    Ok(())
}

/// `lnk-link-run config claude-code` for `files`, with this process's environment: the entry's
/// arguments.
fn config(
    run: &Path,
    files: &Path,
    path: &std::ffi::OsStr,
    programs: &[&str],
) -> Result<Vec<String>> {
    let mut command = Command::new(run);
    command
        .args(["config", "claude-code", "--files"])
        .arg(files)
        .arg("--programs-path")
        .arg(path)
        .args(["--timeout", "60s", "--output", "64KiB"]);
    for program in programs {
        command.args(["--program", program]);
    }
    let out = command
        .stdin(Stdio::null())
        .output()
        .context("running lnk-link-run config")?;
    if !out.status.success() {
        bail!("config failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let doc: Value = serde_json::from_slice(&out.stdout).context("config printed no JSON")?;
    doc["mcpServers"]["link-run"]["args"]
        .as_array()
        .context("no args in config's entry")?
        .iter()
        .map(|a| {
            a.as_str()
                .map(str::to_owned)
                .context("an argument is not a string")
        })
        .collect()
}

/// Calls `echo hi` on each target in turn, `calls` rounds (after a warm-up), each call after
/// `spacing`; the targets' order turns each round.
fn interleave(targets: &mut [Target], calls: usize, spacing: Duration) -> Result<()> {
    let params = json!({"name": "command", "arguments": {"program": "echo", "args": ["hi"]}});
    for round in 0..WARMUP + calls {
        let n = targets.len();
        for k in 0..n {
            let target = &mut targets[(round + k) % n];
            std::thread::sleep(spacing);
            let (result, took) = target.serve.request("tools/call", &params, LIMIT)?;
            if result.get("isError") == Some(&Value::Bool(true))
                || !result.to_string().contains("hi")
            {
                bail!("{}: `echo hi` answered {result}", target.name);
            }
            if round >= WARMUP {
                target.samples.push(took);
            }
        }
    }
    Ok(())
}

/// One `bwrap <line> -- /usr/bin/env <vars> /bin/true`, timed.
fn bwrap_true(line: &[OsString], vars: &[OsString]) -> Result<Duration> {
    let (program, args) = line.split_first().context("an empty line")?;
    let assignments: Vec<&OsString> = vars.iter().skip(1).step_by(2).collect();
    let started = Instant::now();
    let status = Command::new(program)
        .args(args)
        .arg("--")
        .arg("/usr/bin/env")
        .args(assignments)
        .arg("/bin/true")
        .env_clear()
        .stdin(Stdio::null())
        .status()
        .context("running bubblewrap")?;
    let took = started.elapsed();
    if !status.success() {
        bail!("bubblewrap with the line ran /bin/true with {status}");
    }
    Ok(took)
}
