//! The exit codes of `lnk-link-run`, each with its one meaning (a call's reaper, `reap`, has
//! its own: [`lnk_proc::reaper`]'s `*_EXIT`).
//!
//! | code | from | means |
//! |---|---|---|
//! | 0 | `serve` | stdin ended, or SIGTERM/SIGINT: it served and stopped |
//! | 0 | `check` | `serve` would start with these arguments |
//! | 0 | `config` | the host's entry was printed, or written with `--write` |
//! | [`WOULD_REFUSE`] (1) | `check` | `serve` would refuse to start: the sandbox leaks |
//! | [`REFUSED`] (2) | `serve`, `check`, `config` | the arguments were refused (for `config`: also a sandbox `serve` would refuse, bubblewrap missing, or a file it will not merge into), or `serve` could not set itself up; one line on stderr says why |
//! | [`UNREPORTED`] (2) | `check` | its report could not be written to stdout |
//! | [`PROBE_FAILED`] (3) | `sandbox-probe` | the probe could not read its request or write its answer |

/// `check`: `serve` would refuse to start with these arguments.
pub const WOULD_REFUSE: u8 = 1;
/// A refusal to start: one line on stderr, nothing else written.
pub const REFUSED: u8 = 2;
/// `check` could not write its report (stdout closed or full): nothing was reported.
pub const UNREPORTED: u8 = 2;
/// The sandbox probe could not do its work; its stderr says why, and `serve` quotes it.
pub const PROBE_FAILED: u8 = 3;
