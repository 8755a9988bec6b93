//! A call's reaper, as serve starts one: `lnk-link-run reap …`, which forks the sandbox and
//! holds all it starts (see [`lnk_proc::reaper`]). Both ways of starting one
//! ([`crate::call::spawn`], [`crate::call::spares`]) go through [`launch`] and give a
//! [`lnk_proc::reaper::Reaper`].

use lnk_proc::reaper::Launch;

/// The hidden subcommand that makes `lnk-link-run` a call's reaper (see
/// [`lnk_proc::reaper`]); `main` takes it before anything else.
pub const REAP: &str = "reap";

/// A reaper of serve's to start: this executable as `lnk-link-run reap`.
pub fn launch<'a>() -> Launch<'a> {
    Launch::new("lnk-link-run", REAP)
}
