//! Link Run's process machinery, which both binaries use and neither reads of the other: the
//! reaper that contains a call or a run ([`reaper`]), what `/proc` says of the machine and its
//! processes ([`proc_info`]), signal masks and signalfd ([`reaper::BlockedSignals`]), waking a
//! run's supervisor to a stop request ([`wake`]), signalling a run's programs
//! ([`run_signal`]), the proxy that is a sandbox's one way to the network (`--net-allow`,
//! [`net`]), descriptors a parent hands down, taken over after a check ([`inherited`]),
//! starting a program with an empty signal mask and default dispositions, or arranging what a
//! `Command`'s child does before its exec ([`spawn`]), both halves of `--detached`
//! ([`detached`]), and what a process may do only while it has one thread ([`single_thread`]).
//!
//! It is not a contract: the contract between `lnk-link-run` and `lnk-link-supervise` is
//! `lnk-common` alone, which this crate uses and which never uses it. All of Link Run's library
//! `unsafe` lives here, each block with the argument for its soundness beside it.

#![deny(missing_docs)]

pub mod detached;
mod fill;
pub mod inherited;
pub mod net;
mod poll;
pub mod proc_info;
pub mod reaper;
pub mod run_signal;
pub mod single_thread;
pub mod spawn;
pub mod stub;
pub mod wake;

pub use poll::poll_until;
