//! A sweep's look for records that no index names (when it is due: [`due`]): for a routine sweep
//! (`serve`'s), paid only when the state folder changed since the last look and that look is
//! ten minutes old; a sweep a person or a bridge asks for looks every time. A record that loads is given its names, so that
//! `list` shows it and this very sweep deals with it through the index (a run whose supervisor
//! is gone is recorded lost, an ended one told and removed in time); one that does not load is
//! reported and moved aside, under its lock, as any damaged record is.

mod due;

use lnk_common::index;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;

use super::one_run::{RecordSeen, Report, Tidy, sweep_one};

/// Which sweep looks: a routine one (`serve`'s) or one that was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// `serve`'s, at its start and every minute: the look is rate-limited.
    Routine,
    /// A person's or a bridge's: the look is made every time.
    Everything,
}

/// Looks at the folder's top level: every time for a sweep that was asked for, else when it
/// changed since the last look and that look is ten minutes old.
pub fn look(state: &StateDir, asked: Asked, report: &mut Report, tidy: &mut Tidy) {
    let due = match asked {
        Asked::Routine => due::look_due(state),
        Asked::Everything => due::look_now(state).map(Some),
    };
    let look = match due {
        Ok(Some(look)) => look,
        Ok(None) => return,
        Err(err) => {
            tracing::warn!(
                "looking for records that no index names: {}",
                lnk_common::Causes(&err)
            );
            return;
        }
    };
    tracing::debug!(
        ?asked,
        "reading the state folder's top level for records no index names"
    );
    let ids = match look.unindexed(state) {
        Ok(ids) => ids,
        Err(err) => {
            tracing::warn!(
                "looking for records that no index names: {}",
                lnk_common::Causes(&err)
            );
            return;
        }
    };
    for id in &ids {
        match Record::load(state, id) {
            Ok(record) => match lnk_common::index::file_found(state, &record) {
                Ok(()) => {
                    tracing::warn!(%id, state = %record.status.state(), "a record that no index named is indexed");
                    report.indexed += 1;
                }
                Err(err) => {
                    tracing::warn!(%id, "indexing a record that no index named: {}", lnk_common::Causes(&err))
                }
            },
            // Removed since the folder was read.
            Err(err) if err.is_not_found() => {}
            // Damaged: reported and moved aside under its lock, as the index's records are.
            Err(_) => {
                let _seen = sweep_one(
                    state,
                    id,
                    RecordSeen::Present,
                    index::Found::default(),
                    report,
                    tidy,
                );
            }
        }
    }
    if let Err(err) = look.done(state) {
        tracing::warn!(
            "noting the look for records that no index names: {}",
            lnk_common::Causes(&err)
        );
    }
}
