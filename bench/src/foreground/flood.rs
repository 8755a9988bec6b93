//! Item 2 of `lnk-bench foreground`: an output flood through serve against the same flood into
//! `cat`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::{Bins, FLOOD_OUTPUT, Options, mib};
use crate::procs;
use crate::report::{Report, Row};
use crate::serve::Serve;
use crate::stats::{self, Summary};

/// Item 2: floods through serve against floods into `cat >/dev/null`, interleaved; then the
/// serve's peak RSS, read while it is alive. Shuts `serve` down afterwards.
pub(super) fn flood(
    report: &mut Report,
    mut serve: Serve,
    bins: &Bins,
    options: &Options,
) -> Result<()> {
    let bytes = options.flood_bytes;
    let count = bytes.to_string();
    let limit = Duration::from_secs(120);
    let mut via_serve = Vec::new();
    let mut via_cat = Vec::new();
    let mut serve_cpu = Vec::new();
    let mut elapsed_ms = Vec::new();
    for _ in 0..options.flood_runs {
        let cpu_before = procs::cpu_time(serve.pid())?;
        let start = Instant::now();
        let answer = serve.call("lnk-bench-flood", &[&count], limit)?;
        via_serve.push(start.elapsed());
        serve_cpu.push(procs::cpu_time(serve.pid())?.saturating_sub(cpu_before));
        elapsed_ms.push(Duration::from_millis(answer.elapsed_ms));
        if answer.stdout_bytes != bytes || answer.exit_code != Some(0) {
            bail!("the flood through serve: expected {bytes} bytes and exit 0, got {answer:?}");
        }

        let start = Instant::now();
        let status = Command::new("sh")
            .args(["-c", "\"$0\" \"$1\" | cat >/dev/null"])
            .arg(&bins.flood)
            .arg(&count)
            .stdin(Stdio::null())
            .status()
            .context("running the flood into cat")?;
        via_cat.push(start.elapsed());
        if !status.success() {
            bail!("the flood into cat exited with {status}");
        }
    }
    let hwm = procs::status_bytes(serve.pid(), "VmHWM")?;
    serve.shutdown()?;

    let s = Summary::of(&via_serve);
    let c = Summary::of(&via_cat);
    let mbps = |d: Duration| bytes as f64 / d.as_secs_f64().max(1e-9) / 1e6;
    let ratio = mbps(s.median) / mbps(c.median);
    report.section(&format!(
        "2. flood: {bytes} bytes to stdout, --output {FLOOD_OUTPUT}, {} runs each \
         (p90 column: throughput of the p90 time, the slow end)",
        options.flood_runs
    ));
    for (name, times) in [
        ("serve: one `command` call", &s),
        ("writer | cat >/dev/null", &c),
    ] {
        report.row(Row::value_n(
            name,
            times.n,
            format!("{:.0} MB/s", mbps(times.median)),
            format!("{:.0} MB/s", mbps(times.p90)),
            None,
        ));
    }
    report.row(Row::value(
        "ratio serve / cat (medians)",
        format!("{ratio:.2}"),
        String::new(),
        Some((">= 0.5".into(), ratio >= 0.5)),
    ));
    report.row(Row::value(
        "peak RSS of serve (VmHWM)",
        mib(hwm),
        String::new(),
        Some(("< 16 MiB".into(), hwm < 16 << 20)),
    ));
    let e = Summary::of(&elapsed_ms);
    report.row(Row::value(
        "serve's own elapsed_ms (spawn to exit)",
        format!("{} ms", e.median.as_millis()),
        format!("{} ms", e.p90.as_millis()),
        None,
    ));
    let cpu = Summary::of(&serve_cpu);
    report.row(Row::value(
        "serve's CPU time per flood (user+sys)",
        format!("{:.0} ms", stats::ms(cpu.median)),
        format!("{:.0} ms", stats::ms(cpu.p90)),
        None,
    ));
    Ok(())
}
