//! `lnk-bench network`: what `--net-allow` costs, under the README's recommended line.
//!
//! - A call that makes no connection, with `--net-allow` and without (two serves, their calls
//!   interleaved and spaced as an agent's are): the median of the paired differences (target:
//!   within +0.3 ms).
//! - A download from a site on this machine's loopback (100 MB by default), by curl in a call:
//!   through the proxy (a plain request, and through a `CONNECT` tunnel) and without it (the
//!   same call under the line less `--unshare-net`, and curl run by the benchmark itself, no
//!   sandbox): curl's own time for the transfer, medians, and the proxied throughput as a share
//!   of the unproxied (target: at least 80 %).
//! - 32 downloads at once (1 MB each) in one call, through the proxy and without: the call's
//!   time, and that every one got its bytes.

mod site;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::bins::sibling;
use crate::report::{Report, Row};
use crate::serve::{Serve, ServeArgs};
use crate::stats::{self, Summary};
use site::Site;

/// The target for a call that makes no connection: what `--net-allow` may add.
const CALL_TARGET_MS: f64 = 0.3;
/// The target for a download through the proxy: its share of the throughput without it.
const DOWNLOAD_TARGET: f64 = 0.8;
/// How long a call may take.
const LIMIT: Duration = Duration::from_secs(120);
/// Connections at once.
const AT_ONCE: usize = 32;

/// How much to measure.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Calls of each kind (with `--net-allow` and without) for the per-call cost.
    #[arg(long, default_value_t = 200)]
    pub calls: usize,
    /// Downloads of each kind.
    #[arg(long, default_value_t = 7)]
    pub downloads: usize,
    /// The download's size, in MB (10^6 bytes).
    #[arg(long, default_value_t = 100)]
    pub megabytes: usize,
    /// The pause between two calls, in milliseconds (an agent's calls are spaced).
    #[arg(long, default_value_t = 20)]
    pub spacing_ms: u64,
}

/// Runs the benchmark and prints its table.
pub fn run(options: &Options) -> Result<()> {
    let binary = sibling("lnk-link-run")?;
    let bwrap = PathBuf::from("/usr/bin/bwrap");
    let curl = PathBuf::from("/usr/bin/curl");
    if !bwrap.is_file() || !curl.is_file() {
        bail!("the network benchmark needs /usr/bin/bwrap and /usr/bin/curl");
    }
    let root = tempfile::Builder::new()
        .prefix("lnk-bench-network-")
        .tempdir()
        .context("creating a temporary folder")?;
    let files = root.path().join("files");
    std::fs::create_dir(&files).context("creating the files folder")?;
    let big = options.megabytes * 1_000_000;
    let site = Site::start(big)?;
    let allow = format!("127.0.0.1:{}", site.port());
    let recommended = crate::line::recommended(&files, &[], &bwrap)?;
    let shared: Vec<OsString> = recommended
        .iter()
        .flat_map(|word| match word.to_str() {
            // The same line, less the network namespace: a call without a proxy that reaches
            // the site directly.
            Some("--unshare-all") => [
                "--unshare-user-try",
                "--unshare-ipc",
                "--unshare-pid",
                "--unshare-uts",
                "--unshare-cgroup-try",
            ]
            .map(OsString::from)
            .to_vec(),
            _ => vec![word.clone()],
        })
        .collect();
    let serve = |name: &str, net: bool, sandbox: &[OsString], checked: bool| {
        let extra = if net {
            vec!["--net-allow".into(), allow.clone().into()]
        } else {
            Vec::new()
        };
        Serve::start(
            name,
            &ServeArgs {
                binary: &binary,
                files: &files,
                programs: Path::new("/usr/bin:/bin"),
                output: "64KiB",
                allowed: &["true", "curl", "sh"],
                extra,
                sandbox: sandbox.to_vec(),
                sandbox_check: checked,
                log: root.path().join(format!("serve-{name}.log")),
            },
        )
    };
    let mut without = serve("without", false, &recommended, true)?;
    let mut with = serve("with", true, &recommended, true)?;
    let mut direct = serve("shared-network", false, &shared, false)?;

    let mut report = Report::new(format!(
        "Link Run network benchmark: --net-allow under the README's recommended line ({}), \
         a site on this machine's loopback",
        bwrap.display()
    ));
    per_call(&mut report, options, &mut with, &mut without)?;
    let url = format!("http://127.0.0.1:{}/big", site.port());
    downloads(
        &mut report,
        options,
        &curl,
        &url,
        big,
        &mut with,
        &mut direct,
    )?;
    let small = format!("http://127.0.0.1:{}/small", site.port());
    at_once(&mut report, options, &small, &mut with, &mut direct)?;
    report.note(
        "Figures from one run on a shared machine (2 cores, other work running): compare the \
         rows of one run with each other, not with another run's.",
    );
    report.print();
    for serve in [without, with, direct] {
        serve.shutdown()?;
    }
    Ok(())
}

/// `true` in calls of both serves, interleaved: the paired differences.
fn per_call(
    report: &mut Report,
    options: &Options,
    with: &mut Serve,
    without: &mut Serve,
) -> Result<()> {
    let call = |serve: &mut Serve| -> Result<Duration> {
        std::thread::sleep(Duration::from_millis(options.spacing_ms));
        let (value, took) = serve.call_tool("command", &json!({"program": "true"}), None, LIMIT)?;
        if value["exit_code"] != 0 {
            bail!("`true` did not exit 0: {value}");
        }
        Ok(took)
    };
    for _ in 0..10 {
        call(with)?;
        call(without)?;
    }
    let (mut w, mut wo) = (Vec::new(), Vec::new());
    for i in 0..options.calls {
        if i % 2 == 0 {
            w.push(call(with)?);
            wo.push(call(without)?);
        } else {
            wo.push(call(without)?);
            w.push(call(with)?);
        }
    }
    let added: Vec<f64> = w
        .iter()
        .zip(&wo)
        .map(|(a, b)| stats::diff_ms(*a, *b))
        .collect();
    let (median, p90) = stats::median_p90(&added);
    report.section("a call that makes no connection (`true`), spaced, warm");
    report.row(Row::times("with --net-allow", &Summary::of(&w)));
    report.row(Row::times("without", &Summary::of(&wo)));
    report.row(Row::value_n(
        "added by --net-allow (paired differences)",
        added.len(),
        format!("{median:.3} ms"),
        format!("{p90:.3} ms"),
        Some((format!("<= +{CALL_TARGET_MS} ms"), median <= CALL_TARGET_MS)),
    ));
    Ok(())
}

/// The seconds curl took for one transfer, as it printed them (`-w %{time_total}`).
fn curl_seconds(value: &Value) -> Result<f64> {
    if value["exit_code"] != 0 {
        bail!("curl failed: {value}");
    }
    value["stdout"]
        .as_str()
        .and_then(|s| s.trim().parse::<f64>().ok())
        .context("curl printed no time")
}

/// The download through the proxy (plain and tunnelled) and without (a call with the network
/// shared, and curl outside any sandbox), interleaved.
fn downloads(
    report: &mut Report,
    options: &Options,
    curl: &Path,
    url: &str,
    size: usize,
    with: &mut Serve,
    direct: &mut Serve,
) -> Result<()> {
    let fetch = |serve: &mut Serve, tunnel: bool| -> Result<f64> {
        let mut args = vec!["-s", "-S", "-o", "/dev/null", "-w", "%{time_total}"];
        if tunnel {
            args.push("--proxytunnel");
        }
        args.push(url);
        let (value, _) = serve.call_tool(
            "command",
            &json!({"program": "curl", "args": args}),
            None,
            LIMIT,
        )?;
        curl_seconds(&value)
    };
    let outside = || -> Result<f64> {
        let out = Command::new(curl)
            .args([
                "-s",
                "-S",
                "-o",
                "/dev/null",
                "-w",
                "%{time_total}",
                "--noproxy",
                "*",
                url,
            ])
            .output()
            .context("running curl")?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<f64>()
            .context("curl printed no time")
    };
    fetch(with, false)?;
    fetch(direct, false)?;
    let (mut plain, mut tunnel, mut shared, mut bare) = (vec![], vec![], vec![], vec![]);
    for _ in 0..options.downloads {
        plain.push(fetch(with, false)?);
        shared.push(fetch(direct, false)?);
        tunnel.push(fetch(with, true)?);
        bare.push(outside()?);
    }
    let rate = |seconds: &[f64]| {
        let (median, _) = stats::median_p90(seconds);
        size as f64 / 1e6 / median
    };
    let baseline = rate(&shared);
    report.section(&format!(
        "a download of {} MB by curl in a call (curl's own time; MB/s from the median)",
        options.megabytes
    ));
    for (label, seconds, target) in [
        ("through the proxy, plain HTTP", &plain, true),
        ("through the proxy, CONNECT tunnel", &tunnel, true),
        ("without: the line less --unshare-net", &shared, false),
        ("without: curl outside any sandbox", &bare, false),
    ] {
        let (median, p90) = stats::median_p90(seconds);
        let mbs = rate(seconds);
        let share = mbs / baseline;
        report.row(Row::value_n(
            label,
            seconds.len(),
            format!(
                "{:.1} ms, {mbs:.0} MB/s ({:.0} %)",
                median * 1e3,
                share * 100.0
            ),
            format!("{:.1} ms", p90 * 1e3),
            target.then(|| {
                (
                    format!(">= {:.0} % of without", DOWNLOAD_TARGET * 100.0),
                    share >= DOWNLOAD_TARGET,
                )
            }),
        ));
    }
    Ok(())
}

/// 32 downloads at once in one call, through the proxy and without: the call's time.
fn at_once(
    report: &mut Report,
    options: &Options,
    url: &str,
    with: &mut Serve,
    direct: &mut Serve,
) -> Result<()> {
    let script = format!(
        "for i in $(seq {AT_ONCE}); do curl -s -o /dev/null -w '%{{http_code}} %{{size_download}}\\n' {url} & done; wait"
    );
    let all = |serve: &mut Serve| -> Result<(Duration, Value)> {
        let (value, took) = serve.call_tool(
            "command",
            &json!({"program": "sh", "args": ["-c", script]}),
            None,
            LIMIT,
        )?;
        let lines = value["stdout"].as_str().unwrap_or_default();
        let whole = lines
            .lines()
            .filter(|line| *line == format!("200 {}", site::SMALL))
            .count();
        if whole != AT_ONCE {
            bail!("{whole} of {AT_ONCE} downloads got their bytes: {value}");
        }
        Ok((took, value))
    };
    let (mut w, mut wo) = (Vec::new(), Vec::new());
    let mut connections = 0;
    for _ in 0..options.downloads {
        let (took, value) = all(with)?;
        connections = value["network"]["connections"].as_u64().unwrap_or(0);
        w.push(took);
        wo.push(all(direct)?.0);
    }
    report.section(&format!(
        "{AT_ONCE} downloads of 1 MB at once in one call (the call's time)"
    ));
    report.row(Row::times_target(
        &format!("through the proxy ({connections} connections counted)"),
        &Summary::of(&w),
        &format!("all {AT_ONCE} whole"),
        connections == AT_ONCE as u64,
    ));
    report.row(Row::times(
        "without: the line less --unshare-net",
        &Summary::of(&wo),
    ));
    Ok(())
}
