//! The figures of item 5 and their targets: each pattern's medians (of the per-round
//! medians) per target, the ratios to the peer, warm against cold in the large burst, Link
//! Run's own part of the spaced gap, and a busy core's effect on each ratio; and each prefix
//! alone against the peer, the least a call in a sandbox of its own can take.

use super::targets::{
    ALONE_BWRAP, ALONE_PASS, BASE_BWRAP, BASE_PASS, COLD_BWRAP, COLD_PASS, FLOOR, PEER, WARM_BWRAP,
    WARM_PASS,
};
use super::{Pattern, Phase};
use crate::foreground::Options;
use crate::report::{Report, Row};

/// The most a warm call may take, as a share of the peer's, per prefix.
const TARGETS: [(&str, f64); 2] = [(WARM_BWRAP, 1.2), (WARM_PASS, 0.9)];
/// Link Run's own part of the spaced gap, at most (ms).
const OWN_GAP: f64 = 0.3;
/// How much a busy core may move a ratio.
const BUSY: f64 = 1.2;

/// Whether `pattern` has a target against the peer (the large bursts are held against cold).
fn against_peer(pattern: Pattern, options: &Options) -> bool {
    match pattern {
        Pattern::Burst(n) => n == options.burst_sizes.first().copied().unwrap_or(8),
        _ => true,
    }
}

fn ratio(phase: &Phase, pattern: Pattern, a: &str, b: &str) -> Option<f64> {
    Some(phase.median(pattern, a)? / phase.median(pattern, b)?.max(1e-9))
}

/// One phase's rows: per pattern, every target, then the ratios.
pub fn phase(report: &mut Report, phase: &Phase, options: &Options) {
    let when = if phase.busy { "one core busy" } else { "quiet" };
    for pattern in &phase.patterns {
        let pattern = *pattern;
        report.section(&format!("5. {}, {when}", pattern.label()));
        for name in &phase.names {
            if let (Some(median), Some(all)) =
                (phase.median(pattern, name), phase.pooled(pattern, name))
            {
                report.row(Row::value_n(
                    name,
                    all.n,
                    format!("{median:.3} ms"),
                    format!("{:.3} ms", crate::stats::ms(all.p90)),
                    None,
                ));
            }
        }
        if against_peer(pattern, options) {
            for (name, most) in TARGETS {
                if let Some(r) = ratio(phase, pattern, name, PEER) {
                    report.row(Row::value(
                        &format!("ratio {name} / peer"),
                        format!("{r:.2}x"),
                        String::new(),
                        Some((format!("<= {most}x"), r <= most)),
                    ));
                }
            }
            // The prefixes alone say what the sandbox and the program cost before Link Run
            // adds anything: a target under one is out of any design's reach.
            for name in [COLD_BWRAP, COLD_PASS, ALONE_BWRAP, ALONE_PASS] {
                if let Some(r) = ratio(phase, pattern, name, PEER) {
                    report.row(Row::value(
                        &format!("ratio {name} / peer"),
                        format!("{r:.2}x"),
                        String::new(),
                        None,
                    ));
                }
            }
        } else {
            for (warm, cold) in [(WARM_BWRAP, COLD_BWRAP), (WARM_PASS, COLD_PASS)] {
                if let Some(r) = ratio(phase, pattern, warm, cold) {
                    report.row(Row::value(
                        &format!("ratio {warm} / cold"),
                        format!("{r:.2}x"),
                        String::new(),
                        Some(("<= 1.0x".into(), r <= 1.0)),
                    ));
                }
            }
        }
        for (base, this) in [(BASE_BWRAP, WARM_BWRAP), (BASE_PASS, WARM_PASS)] {
            if let (Some(a), Some(b)) = (phase.median(pattern, base), phase.median(pattern, this)) {
                report.row(Row::value(
                    &format!("{this} - {base}"),
                    format!("{:+.3} ms", b - a),
                    String::new(),
                    None,
                ));
            }
        }
    }
}

/// Across phases: Link Run's own part of the spaced gap, and a busy core against quiet.
pub fn summary(report: &mut Report, phases: &[Phase], options: &Options) {
    report.section("5. summary: the spaced gap, and one core busy against quiet");
    for phase in phases {
        let when = if phase.busy { ", one core busy" } else { "" };
        let gap = |name: &str| {
            Some(phase.median(Pattern::Spaced, name)? - phase.median(Pattern::Consecutive, name)?)
        };
        let Some(floor) = gap(FLOOR) else {
            continue;
        };
        report.row(Row::value(
            &format!("{FLOOR}: spaced - consecutive{when}"),
            format!("{floor:.3} ms"),
            String::new(),
            None,
        ));
        for name in [WARM_BWRAP, WARM_PASS, PEER] {
            let Some(slower) = gap(name) else { continue };
            let own = slower - floor;
            let target =
                (name != PEER && !phase.busy).then(|| (format!("<= {OWN_GAP} ms"), own <= OWN_GAP));
            report.row(Row::value(
                &format!("{name}: (spaced - consecutive) - the floor's{when}"),
                format!("{own:.3} ms"),
                format!("gap {slower:.3} ms"),
                target,
            ));
        }
    }
    let [quiet, busy] = phases else {
        return;
    };
    for pattern in &quiet.patterns {
        for (name, against) in [
            (WARM_BWRAP, PEER),
            (WARM_PASS, PEER),
            (WARM_BWRAP, COLD_BWRAP),
            (WARM_PASS, COLD_PASS),
        ] {
            if (against == PEER) != against_peer(*pattern, options) {
                continue;
            }
            if let (Some(q), Some(b)) = (
                ratio(quiet, *pattern, name, against),
                ratio(busy, *pattern, name, against),
            ) {
                let change = b / q.max(1e-9);
                let short = match pattern {
                    Pattern::Consecutive => "consecutive".to_owned(),
                    Pattern::Spaced => "spaced".to_owned(),
                    Pattern::Burst(n) => format!("burst of {n}"),
                };
                let against = if against == PEER { "peer" } else { "cold" };
                report.row(Row::value(
                    &format!("{name} / {against}, {short}: busy / quiet"),
                    format!("{change:.2}"),
                    format!("{q:.2}x -> {b:.2}x"),
                    Some((format!("<= {BUSY}"), change <= BUSY)),
                ));
            }
        }
    }
}
