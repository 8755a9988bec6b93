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

use serde::{Deserialize, Serialize};

use crate::id::RunId;
use crate::record::Record;
use crate::status::State;

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
        }
    }
}
