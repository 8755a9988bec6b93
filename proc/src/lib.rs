//! Link Run's process machinery, which both binaries use and neither reads of the other. Its
//! face is six modules:
//!
//! - [`reaper`]: the reaper that contains a call or a run, started one way ([`reaper::Launch`])
//!   and held by one handle ([`reaper::Reaper`]), with its signal masks and signalfd;
//! - [`stub`]: a warm sandbox's stub, which waits inside the sandbox for its call, and its wire;
//! - [`spawn`]: starting a program with an empty signal mask and default dispositions, or
//!   arranging what a `Command`'s child does before its exec; both halves of `--detached`;
//!   what a process may do only while it has one thread; descriptors a parent hands down,
//!   taken over after a check;
//! - [`run`]: a background run from outside its supervisor (waking it to a stop request,
//!   signalling the run's programs);
//! - [`net`]: the proxy that is a sandbox's one way to the network (`--net-allow`);
//! - [`proc_info`]: what `/proc` says of the machine and its processes.
//!
//! It is not a contract: the contract between `lnk-link-run` and `lnk-link-supervise` is
//! `lnk-common` alone, which this crate uses and which never uses it. All of Link Run's library
//! `unsafe` lives here, each block with the argument for its soundness beside it.

#![deny(missing_docs)]

mod fill;
pub mod net;
mod poll;
pub mod proc_info;
pub mod reaper;
pub mod run;
pub mod spawn;
pub mod stub;

pub use poll::poll_until;
