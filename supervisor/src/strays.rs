//! A sweep's look for records that no index names ([`lnk_common::strays`]): paid only when the
//! state folder changed since the last look. A record that loads is given its names, so that
//! `list` shows it and this very sweep deals with it through the index (a run whose supervisor
//! is gone is recorded lost, an ended one told and removed in time); one that does not load is
//! reported and moved aside, under its lock, as any damaged record is.

use lnk_common::index;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::strays;

use crate::sweep_one::{Report, Tidy, sweep_one};

/// Looks at the folder's top level if it changed since the last look.
pub fn look(state: &StateDir, report: &mut Report, tidy: &mut Tidy) {
    let look = match strays::look_due(state) {
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
    tracing::debug!("the state folder changed since the last look: reading its top level");
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
                let _seen = sweep_one(state, id, Some(true), index::Found::default(), report, tidy);
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
