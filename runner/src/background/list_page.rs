//! A `list` page read through the index: the newest `started` minutes and, in each, the
//! newest tenths of a second (or `running/` for `state: running`) down to the page's end, and
//! the records those names point at, so that a page costs what it returns, not what the folder
//! keeps nor how many runs started within a minute (lnk-common's `index` says how the names are
//! kept; [`index::each_started`] walks them).

use std::collections::HashSet;
use std::ops::ControlFlow;

use lnk_common::error::Error;
use lnk_common::id::RunId;
use lnk_common::index::{self, is_indexed, running};
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::status::State;

/// The most records one page reads to find the runs a filter admits: a filter that admits
/// few (say `stopped`, among thousands of runs that exited) must not make a page cost the
/// whole folder. A page that reached it ends there, with where the next one goes on.
pub const PAGE_SCAN: usize = 1000;

/// A page of runs, as [`page`] finds it.
#[derive(Debug)]
pub struct Page {
    /// The runs, newest first.
    pub records: Vec<Record>,
    /// Whether more runs may follow.
    pub more: bool,
    /// Where the next page goes on when this one ended at [`PAGE_SCAN`] before `limit`: the
    /// last run it read, admitted or not (start time, id); the next page starts just after.
    pub scanned_to: Option<(u64, RunId)>,
}

/// A page of runs, newest first by (start time, id), of those `admits` lets through, strictly
/// older than `before`; at most `limit`, reading at most [`PAGE_SCAN`] records, and whether
/// more follow. `running_only`: only runs that may be running are looked at (`running/`).
/// `None` when the folder is not indexed (the caller reads every record instead).
pub fn page(
    state: &StateDir,
    admits: &dyn Fn(State) -> bool,
    running_only: bool,
    limit: usize,
    before: Option<(u64, &RunId)>,
) -> Result<Option<Page>, Error> {
    if !is_indexed(state) {
        return Ok(None);
    }
    let older = |ms: u64, id: &RunId| {
        before.is_none_or(|(b_ms, b_id)| (ms, id.as_str()) < (b_ms, b_id.as_str()))
    };
    let mut page: Vec<Record> = Vec::new();
    let mut scanned_to = None;
    let wanted = limit.saturating_add(1);
    if running_only {
        let mut records: Vec<Record> = running(state)?
            .into_iter()
            .filter_map(|(id, _)| Record::load(state, &id).ok())
            .filter(|r| admits(r.status.state()) && older(r.started_at_ms.0, &r.id))
            .collect();
        records.sort_by(|a, b| {
            (b.started_at_ms.0, b.id.as_str()).cmp(&(a.started_at_ms.0, a.id.as_str()))
        });
        records.truncate(wanted);
        page = records;
    } else {
        let not_after = before.map(|(ms, _)| ms);
        let mut scanned = 0usize;
        let mut last_read: Option<(u64, RunId)> = None;
        // A run moved into its tenth while this page reads (an upgrade of the folder's index)
        // may be named twice: it is shown once.
        let mut seen: HashSet<RunId> = HashSet::new();
        index::each_started(state, not_after, &mut |ms, id| {
            if !older(ms, &id) || seen.contains(&id) {
                return ControlFlow::Continue(());
            }
            if scanned >= PAGE_SCAN {
                scanned_to = last_read.take();
                return ControlFlow::Break(());
            }
            scanned += 1;
            last_read = Some((ms, id.clone()));
            let Ok(record) = Record::load(state, &id) else {
                return ControlFlow::Continue(());
            };
            seen.insert(id);
            // A name left for another start time (a record rewritten by hand) is passed over:
            // the record's own time decides, so a run is never shown twice.
            if record.started_at_ms.0 != ms || !admits(record.status.state()) {
                return ControlFlow::Continue(());
            }
            page.push(record);
            if page.len() >= wanted {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })?;
    }
    let more = page.len() > limit || scanned_to.is_some();
    if page.len() > limit {
        page.truncate(limit);
        scanned_to = None;
    }
    Ok(Some(Page {
        records: page,
        more,
        scanned_to,
    }))
}
