//! Item 5 of `lnk-bench foreground`: calls as agents and scripts make them. `echo hi` at the
//! client (raw JSON-RPC over pipes), on Link Run warm and cold (`LNK_COLD_START=1`) under the
//! README's recommended bubblewrap line and the pass-through prefix, the started-ahead floor
//! (`sh` waiting to `exec echo hi`, no server, no sandbox), each prefix alone (`<prefix> echo
//! hi` spawned for the call: no server, no reaper, no stub) and the peer to beat,
//! mcp-server-commands 0.5.0 (installed from npm into a cache folder, run as its README says),
//! in patterns:
//!
//! - **consecutive**: one server at a time, the next call sent as soon as the answer is read
//!   (what a script, a bridge or an agent's loop makes; no other target's call in between);
//! - **spaced**: each call 100 ms after the previous answer, the targets round-robin;
//! - **bursts** of 8 and of 32 calls sent at once (what a host sends when the model asks for
//!   several tools at once), the time to the last answer, each burst `--burst-pause-ms` after
//!   the previous target's (the time a model takes to think, in which spares are refilled).
//!
//! Every pattern runs `--pattern-rounds` rounds, each figure is the median of the per-round
//! medians; all of it quiet and again with one core kept busy by a CPU hog the bench starts
//! and kills. [`figures`] prints the ratios against the targets.

mod figures;
mod targets;

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result};

use super::{Bins, Options, Place};
use crate::report::Report;
use targets::Target;

/// Calls of each target before the timed consecutive ones.
const WARMUP: usize = 20;
/// Spaced calls of each target before the timed ones.
const SPACED_WARMUP: usize = 3;
/// The spacing of spaced calls.
const SPACING: Duration = Duration::from_millis(100);

/// A way calls come.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pattern {
    /// One server, the next call sent as soon as the answer is read.
    Consecutive,
    /// 100 ms before each call, the targets round-robin.
    Spaced,
    /// This many calls at once, timed to the last answer.
    Burst(usize),
}

impl Pattern {
    fn label(self) -> String {
        match self {
            Pattern::Consecutive => "consecutive (one server at a time, back to back)".into(),
            Pattern::Spaced => "spaced 100 ms (round-robin)".into(),
            Pattern::Burst(n) => format!("burst of {n} at once (time to the last answer)"),
        }
    }
}

/// One phase's samples: per pattern and target, one list per round.
#[derive(Default)]
pub struct Phase {
    pub busy: bool,
    samples: HashMap<(Pattern, &'static str), Vec<Vec<Duration>>>,
    /// The patterns in the order measured.
    pub patterns: Vec<Pattern>,
    /// The targets in the order measured.
    pub names: Vec<&'static str>,
}

impl Phase {
    fn push(&mut self, pattern: Pattern, name: &'static str, round: usize, took: Duration) {
        let rounds = self.samples.entry((pattern, name)).or_default();
        while rounds.len() <= round {
            rounds.push(Vec::new());
        }
        rounds[round].push(took);
    }

    /// The median of the per-round medians, in ms.
    pub fn median(&self, pattern: Pattern, name: &str) -> Option<f64> {
        let rounds = self.samples.get(&(pattern, name))?;
        let medians: Vec<f64> = rounds
            .iter()
            .filter(|r| !r.is_empty())
            .map(|r| crate::stats::ms(crate::stats::Summary::of(r).median))
            .collect();
        (!medians.is_empty()).then(|| crate::stats::median_p90(&medians).0)
    }

    /// Every sample of every round, for the p90 and the count.
    pub fn pooled(&self, pattern: Pattern, name: &str) -> Option<crate::stats::Summary> {
        let rounds = self.samples.get(&(pattern, name))?;
        let all: Vec<Duration> = rounds.iter().flatten().copied().collect();
        (!all.is_empty()).then(|| crate::stats::Summary::of(&all))
    }
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

/// Runs item 5 and prints its figures.
pub(super) fn patterns(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    options: &Options,
) -> Result<()> {
    if options.compare_calls == 0 && options.spaced_calls == 0 && options.burst_rounds == 0 {
        return Ok(());
    }
    let mut targets = targets::start_all(report, bins, place, options)?;
    let measured = (|| {
        let mut phases = Vec::new();
        for busy in [false, true] {
            let hog = if busy { Some(Hog::start()?) } else { None };
            let phase = measure(&mut targets, options, busy);
            drop(hog);
            let phase = phase?;
            figures::phase(report, &phase, options);
            phases.push(phase);
        }
        figures::summary(report, &phases, options);
        Ok(())
    })();
    for target in targets {
        target.shutdown()?;
    }
    measured
}

/// One phase: every pattern, `--pattern-rounds` times.
fn measure(targets: &mut [Target], options: &Options, busy: bool) -> Result<Phase> {
    let mut phase = Phase {
        busy,
        names: targets.iter().map(|t| t.name).collect(),
        ..Phase::default()
    };
    if options.compare_calls > 0 {
        phase.patterns.push(Pattern::Consecutive);
    }
    if options.spaced_calls > 0 {
        phase.patterns.push(Pattern::Spaced);
    }
    if options.burst_rounds > 0 {
        phase
            .patterns
            .extend(options.burst_sizes.iter().map(|n| Pattern::Burst(*n)));
    }
    for round in 0..options.pattern_rounds.max(1) {
        for pattern in phase.patterns.clone() {
            match pattern {
                Pattern::Consecutive => {
                    consecutive(targets, options.compare_calls, round, &mut phase)?;
                }
                Pattern::Spaced => spaced(targets, options.spaced_calls, round, &mut phase)?,
                Pattern::Burst(size) => bursts(targets, size, options, round, &mut phase)?,
            }
        }
    }
    Ok(phase)
}

/// Each target in turn, `calls` calls back to back (after [`WARMUP`]), nothing in between.
fn consecutive(
    targets: &mut [Target],
    calls: usize,
    round: usize,
    phase: &mut Phase,
) -> Result<()> {
    for target in targets.iter_mut() {
        for i in 0..WARMUP + calls {
            target.ready(1)?;
            let took = target.once()?;
            if i >= WARMUP {
                phase.push(Pattern::Consecutive, target.name, round, took);
            }
        }
    }
    Ok(())
}

/// `calls` calls of each target, round-robin, each [`SPACING`] after the previous answer.
fn spaced(targets: &mut [Target], calls: usize, round: usize, phase: &mut Phase) -> Result<()> {
    let n = targets.len();
    for i in 0..SPACED_WARMUP + calls {
        for k in 0..n {
            let target = &mut targets[(i + k) % n];
            target.ready(1)?;
            std::thread::sleep(SPACING);
            let took = target.once()?;
            if i >= SPACED_WARMUP {
                phase.push(Pattern::Spaced, target.name, round, took);
            }
        }
    }
    Ok(())
}

/// `--burst-rounds` bursts of `size` on each target (one unmeasured first), round-robin, each
/// `--burst-pause-ms` after the previous one.
fn bursts(
    targets: &mut [Target],
    size: usize,
    options: &Options,
    round: usize,
    phase: &mut Phase,
) -> Result<()> {
    let pause = Duration::from_millis(options.burst_pause_ms);
    for i in 0..=options.burst_rounds {
        for target in targets.iter_mut() {
            target.ready(size)?;
            std::thread::sleep(pause);
            let took = target.burst(size)?;
            if i > 0 {
                phase.push(Pattern::Burst(size), target.name, round, took);
            }
        }
    }
    Ok(())
}
