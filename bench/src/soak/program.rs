//! What a soak trial runs, and the marker that finds every process of it afterwards.

use std::time::{SystemTime, UNIX_EPOCH};

use super::Bins;

/// The escaping tree (see the module docs of [`super`]): `sh -c TREE sh <procs> <marker>`.
const TREE: &str = r#"
P=$1; M=$2
setsid -f "$P" linger-setsid "$M" 300 </dev/null >/dev/null 2>&1
( "$P" linger-forked "$M" 300 </dev/null >/dev/null 2>&1 & )
nohup "$P" linger-nohup "$M" 300 </dev/null >/dev/null 2>&1 &
( trap '' TERM; exec "$P" linger-deaf "$M" 300 ) </dev/null >/dev/null 2>&1 &
exec "$P" linger-main "$M" 300
"#;

/// Two sleeps and a wait, as a run: `sh -c SLEEPS <marker> 300.<n> 301.<n>`.
const SLEEPS: &str = r#"sleep "$1" & sleep "$2" & wait"#;
/// The same as a call, one sleep in a session of its own.
const SLEEPS_SETSID: &str = r#"setsid sleep "$1" & sleep "$2" & wait"#;

/// The program of each trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Program {
    /// The escaping tree: a process in a session of its own, a double fork, `nohup`, one that
    /// ignores SIGTERM and the program itself, each `lnk-test-procs linger`.
    Tree,
    /// `sh -c 'sleep 300 & sleep 301 & wait'` (for a call, the first sleep `setsid`): the
    /// system's own programs, up a few milliseconds after the sandbox starts.
    Sleeps,
}

/// A trial's marker: a text in the command line of each of its processes (the sleeps' own
/// durations carry it, as digits after the point).
#[derive(Debug, Clone)]
pub struct Marker(String);

impl Marker {
    /// A marker no other trial of any soak has: this process, the kind, the trial, the clock.
    pub fn new(kind: &str, trial: usize) -> Marker {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let kind: u32 = kind.bytes().map(u32::from).sum();
        // Digits only, so that it can stand after a sleep's decimal point.
        Marker(format!(
            "{}{kind:04}{trial:06}{nanos:09}",
            std::process::id()
        ))
    }

    /// The text looked for.
    pub fn text(&self) -> &str {
        &self.0
    }
}

impl Program {
    /// `sh`'s arguments for a trial with `marker`; `call`: for a `command` call rather than a
    /// run.
    pub(super) fn args(self, bins: &Bins, marker: &Marker, call: bool) -> Vec<String> {
        let marker = marker.text();
        match self {
            Program::Tree => vec![
                "-c".into(),
                TREE.into(),
                "sh".into(),
                bins.procs.to_string_lossy().into_owned(),
                format!("lnksoak-{marker}"),
            ],
            Program::Sleeps => vec![
                "-c".into(),
                if call { SLEEPS_SETSID } else { SLEEPS }.into(),
                format!("lnksoak-{marker}"),
                format!("300.{marker}"),
                format!("301.{marker}"),
            ],
        }
    }
}
