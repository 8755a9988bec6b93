//! The benchmark from start to end: every item in turn, then a check that nothing it started
//! is left running.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use super::flood::flood;
use super::options::Options;
use super::place::{Bins, Place};
use super::runs::{END_LIMIT, start_run, wait_ended};
use super::starts::{starts, to_running};
use super::sweep::sweep_and_list;
use super::telling::telling;
use crate::procs;
use crate::report::Report;

/// How long the processes of the benchmark may take to be gone after the last serve exits.
const LEFTOVER_WAIT: Duration = Duration::from_secs(15);

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
    super::waits::waits(report, bins, place, options)?;

    sweep_and_list(report, bins, place, &template, options)?;
    super::tasks::tasks(report, bins, place, options)?;
    super::watches::watches(report, bins, place, options)?;
    telling(report, bins, place, options.tells)?;
    crate::scale::run(report, bins, place, &template, &options.scale)
}
