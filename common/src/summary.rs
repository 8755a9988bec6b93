//! A run as the `list` tool shows it, and as the message at its end carries it (`"run"`).
//!
//! Both binaries show a run — the runner in `list` and `stop`, the supervisor in the signed
//! message — so the shape lives here, once:
//!
//! ```json
//! {"id": "…", "program": "cargo", "args": ["test"], "dir": ".", "state": "exited",
//!  "exit_code": 0, "signal": null, "started_at": "2024-05-01T12:00:00.000Z",
//!  "ended_at": "2024-05-01T12:00:05.000Z", "output_bytes": 1234, "dropped_bytes": 0,
//!  "told": false}
//! ```
//!
//! A run some of whose output could not be written for want of room adds `"unwritten_bytes"`
//! and `"unwritten_why"` (`"the files folder was full (No space left on device)"`).
//! A run with a proxy (`--net-allow`) that has ended adds `"network"`, its figures
//! ([`crate::network`]).

use serde::{Deserialize, Serialize};

use crate::id::RunId;
use crate::network::Network;
use crate::record::Record;
use crate::status::State;

/// The characters of a run's arguments that a summary shows, in all, and of its `dir`; the
/// rest is cut (`…`), so that a page of runs and the message at a run's end stay small
/// whatever the agent passed.
pub const ARGS_SHOWN: usize = 256;

/// A run as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The run's id.
    pub id: RunId,
    /// The program's name as the agent gave it.
    pub program: String,
    /// The arguments as the agent gave them.
    pub args: Vec<String>,
    /// The working folder as the agent gave it.
    pub dir: String,
    /// `running`, `exited`, `timed_out`, `stopped` or `lost`.
    pub state: State,
    /// The exit code, when it exited with one.
    pub exit_code: Option<i32>,
    /// The signal that killed it, when one did.
    pub signal: Option<i32>,
    /// RFC 3339 UTC.
    pub started_at: String,
    /// RFC 3339 UTC; `null` while running.
    pub ended_at: Option<String>,
    /// Everything the run wrote, dropped bytes included.
    pub output_bytes: u64,
    /// Bytes cut from the output file by rotations.
    pub dropped_bytes: u64,
    /// Whether its end was told.
    pub told: bool,
    /// Bytes of its output that could not be written to its output file for want of room, in
    /// all (counted in `output_bytes`); absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unwritten_bytes: u64,
    /// Why, in words; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unwritten_why: Option<String>,
    /// What its programs did through its proxy, once it ended; absent for a run without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Network>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Why output could not be written, in words, for a record that does not say (an older
/// supervisor's).
const NO_ROOM: &str = "there was no room for them (a full disk or quota)";

impl RunSummary {
    /// The sentence that says how much output could not be written and why, when some could
    /// not: `1000000 bytes of output could not be written: the files folder was full (No space
    /// left on device)`.
    pub fn unwritten_note(&self) -> Option<String> {
        (self.unwritten_bytes > 0).then(|| {
            format!(
                "{} bytes of output could not be written: {}",
                self.unwritten_bytes,
                self.unwritten_why.as_deref().unwrap_or(NO_ROOM)
            )
        })
    }

    /// The summary as it is shown: its arguments cut to [`ARGS_SHOWN`] characters in all and
    /// its `dir` to as many.
    pub fn shortened(mut self) -> RunSummary {
        self.args = shortened_args(self.args);
        self.dir = cut(&self.dir, ARGS_SHOWN);
        self
    }
}

/// `text` cut to `chars` characters, ending with `…` when it was cut.
pub fn cut(text: &str, chars: usize) -> String {
    let mut shown: String = text.chars().take(chars).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    shown
}

/// The arguments, cut to [`ARGS_SHOWN`] characters in all: what an agent passed may be long,
/// and a page must stay small. A cut argument ends with `…`, and the arguments left out are
/// counted in one last `… (N more)`.
fn shortened_args(args: Vec<String>) -> Vec<String> {
    let mut room = ARGS_SHOWN;
    let total = args.len();
    let mut shown = Vec::new();
    for arg in args {
        if room == 0 {
            break;
        }
        let length = arg.chars().count();
        if length <= room {
            room -= length;
            shown.push(arg);
        } else {
            shown.push(arg.chars().take(room).chain(['…']).collect());
            room = 0;
        }
    }
    if shown.len() < total {
        shown.push(format!("… ({} more)", total - shown.len()));
    }
    shown
}

impl Record {
    /// The run as `list` shows it, with the record's counters.
    ///
    /// While a run writes, the record's `written_bytes` lags; a reader that has the output file
    /// open may set `output_bytes` to `dropped_bytes` + the file's length.
    pub fn summary(&self) -> RunSummary {
        RunSummary {
            id: self.id.clone(),
            program: self.launch.program.name.clone(),
            args: self.launch.program.args.clone(),
            dir: self.launch.program.dir.clone(),
            state: self.status.state(),
            exit_code: self.status.exit_code(),
            signal: self.status.signal(),
            started_at: self.started_at_ms.rfc3339(),
            ended_at: self.status.ended_at().map(|t| t.rfc3339()),
            output_bytes: self.output.written_bytes,
            dropped_bytes: self.output.dropped_bytes,
            told: self.telling.told,
            unwritten_bytes: self.output.unwritten_bytes,
            unwritten_why: (self.output.unwritten_bytes > 0)
                .then(|| self.output.no_room.map(|why| why.describe()))
                .flatten(),
            network: self.network.clone(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn long_arguments_are_shortened() {
        let short = vec!["-l".to_owned(), "src".to_owned()];
        assert_eq!(shortened_args(short.clone()), short);
        let long = vec!["x".repeat(300), "y".to_owned()];
        let shown = shortened_args(long);
        assert_eq!(shown.len(), 2);
        assert_eq!(shown[0].chars().count(), ARGS_SHOWN + 1);
        assert_eq!(shown[1], "… (1 more)");
        assert_eq!(cut("src", 256), "src");
        assert_eq!(cut(&"./".repeat(2000), 256).chars().count(), 257);
        let many: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let shown = shortened_args(many);
        assert!(shown.iter().map(|a| a.chars().count()).sum::<usize>() < ARGS_SHOWN + 20);
        assert!(shown.last().is_some_and(|a| a.ends_with("more)")));
    }
}
