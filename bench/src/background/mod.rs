//! `lnk-bench background`: background runs through `lnk-link-run serve --state`, supervised by
//! `lnk-link-supervise`. Measures, in one run, the targets of issues 3 and 4: `start` answered,
//! from `start` to the program running, a 1 GiB flood into a 1 MiB output cap (the file's peak
//! size, throughput, the supervisor's peak RSS), a sweep and a `list` over 10,000 records, and
//! the time from a run's end to a stand-in way in holding the message, runs as MCP tasks, waiting
//! `read`s and watches.

mod figures;
mod flood;
mod options;
mod place;
mod run;
mod runs;
mod starts;
mod sweep;
mod tasks;
mod telling;
mod waits;
mod watches;

pub use options::Options;
pub use run::run;
// For item 6, `crate::scale`.
pub(crate) use place::{Bins, Place};
pub(crate) use run::wait_gone;
pub(crate) use runs::{start_run, wait_ended};
