//! Where a run is in its life, and how it ended.
//!
//! The status carries its own end time and exit, so a running record cannot have an end time
//! and an ended one cannot lack it (pueue's trick). In JSON it is an object tagged by `state`:
//!
//! ```json
//! {"state": "running"}
//! {"state": "exited",    "ended_at_ms": 1714564805000, "exit": {"code": 0}}
//! {"state": "exited",    "ended_at_ms": 1714564805000, "exit": {"signal": 11}}
//! {"state": "timed_out", "ended_at_ms": 1714564805000, "exit": {"signal": 9}}
//! {"state": "stopped",   "ended_at_ms": 1714564805000, "exit": null}
//! {"state": "lost",      "ended_at_ms": 1714564805000, "exit": null}
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::time::UnixMs;

/// A run's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Status {
    /// Its supervisor runs it (or, if its lock is free, died: a sweep will say `lost`).
    Running,
    /// The program ended by itself: with an exit code, or killed by a signal it did not get from
    /// us.
    Exited {
        /// When the end was seen.
        ended_at_ms: UnixMs,
        /// The sandbox process's exit.
        exit: Exit,
    },
    /// The supervisor killed the group at the run's timeout.
    TimedOut {
        /// When the end was seen.
        ended_at_ms: UnixMs,
        /// The sandbox process's exit, if it was reaped.
        exit: Option<Exit>,
    },
    /// The supervisor killed the group because `<id>.stop` appeared.
    Stopped {
        /// When the end was seen.
        ended_at_ms: UnixMs,
        /// The sandbox process's exit, if it was reaped.
        exit: Option<Exit>,
    },
    /// The supervisor was told to quit (SIGTERM, SIGINT, SIGHUP) or died; a sweep found it so.
    Lost {
        /// When the loss was recorded.
        ended_at_ms: UnixMs,
        /// The sandbox process's exit, if the supervisor reaped it before quitting.
        exit: Option<Exit>,
    },
}

/// How a process ended: `{"code": n}` or `{"signal": n}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal with this number killed it.
    Signal(i32),
}

/// The status's name alone, as `list` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// See [`Status::Running`].
    Running,
    /// See [`Status::Exited`].
    Exited,
    /// See [`Status::TimedOut`].
    TimedOut,
    /// See [`Status::Stopped`].
    Stopped,
    /// See [`Status::Lost`].
    Lost,
}

impl Status {
    /// The state's name.
    pub fn state(&self) -> State {
        match self {
            Status::Running => State::Running,
            Status::Exited { .. } => State::Exited,
            Status::TimedOut { .. } => State::TimedOut,
            Status::Stopped { .. } => State::Stopped,
            Status::Lost { .. } => State::Lost,
        }
    }

    /// Whether the run has not ended.
    pub fn is_running(&self) -> bool {
        matches!(self, Status::Running)
    }

    /// When it ended; `None` while running.
    pub fn ended_at(&self) -> Option<UnixMs> {
        match *self {
            Status::Running => None,
            Status::Exited { ended_at_ms, .. }
            | Status::TimedOut { ended_at_ms, .. }
            | Status::Stopped { ended_at_ms, .. }
            | Status::Lost { ended_at_ms, .. } => Some(ended_at_ms),
        }
    }

    /// The sandbox process's exit, when known.
    pub fn exit(&self) -> Option<Exit> {
        match *self {
            Status::Running => None,
            Status::Exited { exit, .. } => Some(exit),
            Status::TimedOut { exit, .. }
            | Status::Stopped { exit, .. }
            | Status::Lost { exit, .. } => exit,
        }
    }

    /// The exit code, when it exited with one.
    pub fn exit_code(&self) -> Option<i32> {
        match self.exit()? {
            Exit::Code(code) => Some(code),
            Exit::Signal(_) => None,
        }
    }

    /// The signal that killed it, when one did.
    pub fn signal(&self) -> Option<i32> {
        match self.exit()? {
            Exit::Signal(signal) => Some(signal),
            Exit::Code(_) => None,
        }
    }
}

impl State {
    /// The name used on disk and in answers: `running`, `exited`, `timed_out`, `stopped`, `lost`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Running => "running",
            State::Exited => "exited",
            State::TimedOut => "timed_out",
            State::Stopped => "stopped",
            State::Lost => "lost",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn json_shapes() {
        let at = UnixMs(1_714_564_805_000);
        let cases = [
            (Status::Running, json!({"state": "running"})),
            (
                Status::Exited {
                    ended_at_ms: at,
                    exit: Exit::Code(3),
                },
                json!({"state": "exited", "ended_at_ms": 1_714_564_805_000u64, "exit": {"code": 3}}),
            ),
            (
                Status::TimedOut {
                    ended_at_ms: at,
                    exit: Some(Exit::Signal(9)),
                },
                json!({"state": "timed_out", "ended_at_ms": 1_714_564_805_000u64, "exit": {"signal": 9}}),
            ),
            (
                Status::Lost {
                    ended_at_ms: at,
                    exit: None,
                },
                json!({"state": "lost", "ended_at_ms": 1_714_564_805_000u64, "exit": null}),
            ),
        ];
        for (status, value) in cases {
            assert_eq!(serde_json::to_value(status).unwrap(), value);
            assert_eq!(serde_json::from_value::<Status>(value).unwrap(), status);
        }
    }

    #[test]
    fn accessors() {
        let s = Status::Stopped {
            ended_at_ms: UnixMs(7),
            exit: Some(Exit::Signal(15)),
        };
        assert_eq!(s.state(), State::Stopped);
        assert_eq!(s.state().as_str(), "stopped");
        assert_eq!(s.ended_at(), Some(UnixMs(7)));
        assert_eq!(s.signal(), Some(15));
        assert_eq!(s.exit_code(), None);
        assert!(!s.is_running());
        assert_eq!(Status::Running.ended_at(), None);
        assert_eq!(Status::Running.exit(), None);
        assert_eq!(
            serde_json::to_string(&State::TimedOut).unwrap(),
            "\"timed_out\""
        );
    }

    #[test]
    fn ended_states_need_their_end_time() {
        let err = serde_json::from_value::<Status>(json!({"state": "exited", "exit": {"code": 0}}))
            .unwrap_err();
        assert!(err.to_string().contains("ended_at_ms"), "{err}");
        let err = serde_json::from_value::<Status>(json!({"state": "exploded"})).unwrap_err();
        assert!(err.to_string().contains("exploded"), "{err}");
        let err = serde_json::from_value::<Status>(
            json!({"state": "exited", "ended_at_ms": 1, "exit": {"code": 0, "signal": 9}}),
        )
        .unwrap_err();
        // An exit is a code or a signal, never both.
        assert!(
            err.to_string().contains("expected map with a single key"),
            "{err}"
        );
    }
}
