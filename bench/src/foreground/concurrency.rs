//! Calls sent at once to one `serve`: that none waits for another.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::{Options, mib};
use crate::procs;
use crate::report::{Report, Row};
use crate::serve::Serve;
use crate::stats::Summary;

/// Item 3: `concurrent` calls of `sleep 1` written back to back; the time until every answer
/// is in. Shuts `serve` down afterwards.
pub fn concurrency(report: &mut Report, mut serve: Serve, options: &Options) -> Result<()> {
    let n = options.concurrent;
    let mut rounds = Vec::with_capacity(options.rounds);
    let mut slowest_elapsed = 0;
    for _ in 0..options.rounds {
        let ids: Vec<u64> = (0..n).map(|_| serve.take_id()).collect();
        let start = Instant::now();
        for id in &ids {
            serve.send_command(*id, "sleep", &["1"])?;
        }
        let mut waiting: HashSet<u64> = ids.iter().copied().collect();
        while !waiting.is_empty() {
            let (id, answer) = serve.read_answer(Duration::from_secs(30))?;
            if !waiting.remove(&id) {
                bail!("an answer to id {id}, which was not asked or was answered twice");
            }
            if answer.exit_code != Some(0) {
                bail!("`sleep 1` did not exit 0: {answer:?}");
            }
            slowest_elapsed = slowest_elapsed.max(answer.elapsed_ms);
        }
        rounds.push(start.elapsed());
    }
    let hwm = procs::status_bytes(serve.pid(), "VmHWM")?;
    serve.shutdown()?;
    let s = Summary::of(&rounds);
    report.section(&format!(
        "3. concurrency: {n} calls of `sleep 1` at once, {} rounds",
        options.rounds
    ));
    report.row(Row::value(
        "until all answers arrived",
        format!("{:.3} s", s.median.as_secs_f64()),
        format!("{:.3} s", s.p90.as_secs_f64()),
        Some(("< 1.5 s".into(), s.median < Duration::from_millis(1500))),
    ));
    report.row(Row::value(
        "slowest call's own elapsed_ms",
        format!("{slowest_elapsed} ms"),
        String::new(),
        None,
    ));
    report.row(Row::value(
        "peak RSS of this serve (VmHWM)",
        mib(hwm),
        String::new(),
        None,
    ));
    Ok(())
}
