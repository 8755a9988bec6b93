//! Item 6, a burst: `list` pages over a state folder whose kept runs all started within one
//! minute, beside those over the folder whose runs are spread over an hour. Once with the
//! index as older versions made it (version 1: a minute's names in one folder, which a page
//! read whole), then after the sweep that upgrades it, and over a folder made by this version.

use std::time::Duration;

use anyhow::{Result, bail};
use serde_json::{Value, json};

use super::fabricate::{IndexVersion, Kept, Spread, fabricate, make_state};
use super::{LIMIT, Options, TIMED, supervise, write_back};
use crate::background::{Bins, Place};
use crate::report::{Report, Row};
use crate::serve::Serve;
use crate::stats::Summary;

/// The pages timed over one folder: the newest 20 runs, and 20 from the middle of the minute.
struct Pages {
    first: Summary,
    middle: Summary,
}

fn time_pages(serve: &mut Serve, middle: &str) -> Result<Pages> {
    let mut page = |arguments: Value| -> Result<Vec<Duration>> {
        let mut times = Vec::with_capacity(TIMED);
        for _ in 0..TIMED {
            let (value, took) = serve.call_tool("list", &arguments, None, LIMIT)?;
            if value["runs"].as_array().map_or(0, Vec::len) != 20 {
                bail!("`list` did not answer a page of 20: {value}");
            }
            times.push(took);
        }
        Ok(times)
    };
    let first = page(json!({"limit": 20}))?;
    let middle = page(json!({"limit": 20, "before": middle}))?;
    Ok(Pages {
        first: Summary::of(&first),
        middle: Summary::of(&middle),
    })
}

/// The burst's rows; `spread` is the median page over the runs spread over an hour, timed in
/// the same run.
pub(super) fn run(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    template: &Value,
    options: &Options,
    spread: Duration,
) -> Result<()> {
    let n = options.kept;
    let mut rows = Vec::new();
    for version in [IndexVersion::V1, IndexVersion::V2] {
        let name = match version {
            IndexVersion::V1 => "burst-v1",
            IndexVersion::V2 => "burst-v2",
        };
        let state = place.root.path().join(name);
        make_state(&state, version)?;
        let middle = fabricate(&Kept {
            state: &state,
            files: None,
            template,
            n,
            prefix: "burst",
            ended_ago_ms: 1000,
            spread: Spread::Minute,
            version,
        })?;
        write_back(&state)?;
        let mut serve = place.serve_capped(bins, name, &state, false, 10)?;
        let pages = time_pages(&mut serve, &middle)?;
        match version {
            IndexVersion::V1 => {
                rows.push((
                    format!("  {n} started within one minute, index version 1 (older folders)"),
                    pages,
                ));
                let upgraded = supervise(
                    &bins.supervise,
                    &["sweep".as_ref(), state.as_os_str(), "--routine".as_ref()],
                )?;
                let version = std::fs::read_to_string(state.join("index/version"))?;
                if version != "2\n" {
                    bail!("the sweep did not upgrade the index: version {version:?}");
                }
                rows.push((
                    format!(
                        "  the same, upgraded to version 2 by one sweep ({:.2} s)",
                        upgraded.as_secs_f64()
                    ),
                    time_pages(&mut serve, &middle)?,
                ));
            }
            IndexVersion::V2 => rows.push((
                format!("  {n} started within one minute, made by this version"),
                pages,
            )),
        }
        serve.shutdown()?;
    }
    report.row(Row::value(
        "`list` of a 20-run page when the runs started in a burst (median: newest page, a page mid-minute)",
        String::new(),
        format!(
            "the page over runs spread over an hour: {:.2} ms",
            spread.as_secs_f64() * 1000.0
        ),
        None,
    ));
    for (label, pages) in rows {
        let worst = pages.first.median.max(pages.middle.median);
        let ratio = worst.as_secs_f64() / spread.as_secs_f64();
        report.row(Row::value(
            &label,
            format!(
                "{:.2} ms, {:.2} ms",
                pages.first.median.as_secs_f64() * 1000.0,
                pages.middle.median.as_secs_f64() * 1000.0
            ),
            format!("{ratio:.1}x the spread page"),
            Some(("< 2x the spread page".into(), ratio < 2.0)),
        ));
    }
    Ok(())
}
