//! A run's proxy (`--net-allow`, [`lnk_proc::net`]): started by its supervisor before the
//! gate, for the run's allow-list as its record keeps it, held for the run's whole life (so a
//! run that outlives serve keeps it), and ended once everything of the run is dead, when its
//! figures go into the record.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use anyhow::{Context, Result};
use lnk_common::record::Record;
use lnk_proc::net::{AllowList, Proxy};
use lnk_proc::reaper::{LEFTOVER_GRACE, RUN_STOP_GRACE};

/// The run's proxy and the sandbox's end of its channel, for the gate; `None` for a run
/// without an allow-list.
pub fn start(record: &Record) -> Result<Option<(Proxy, OwnedFd)>> {
    if record.launch.net_allow.is_empty() {
        return Ok(None);
    }
    let allow = AllowList::parse(record.launch.net_allow.iter().map(String::as_str))
        .map_err(anyhow::Error::msg)
        .context("reading the run's allow-list")?;
    // Its connections end with the run at the latest: its time limit and the stop's grace.
    let lifetime = record
        .launch
        .limits
        .timeout()
        .saturating_add(RUN_STOP_GRACE)
        .saturating_add(LEFTOVER_GRACE);
    let started = Proxy::start(Arc::new(allow), lifetime).context("starting the run's proxy")?;
    Ok(Some(started))
}
