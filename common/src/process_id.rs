//! A process id as a record carries it: the supervisor's pid, a run's group.

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// A process (or process group) id that may be signalled: greater than 1.
///
/// 0, -1 and negatives mean "my group", "everyone" and "a group" to `kill(2)`, and 1 is init; a
/// record can never carry one of them, so `kill(-pgid)` on a loaded record cannot go wide.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "i64", into = "i64")]
pub struct ProcessId(i32);

impl ProcessId {
    /// Checks `pid` is greater than 1 (and fits a `pid_t`).
    pub fn new(pid: i64) -> Result<Self, Error> {
        match i32::try_from(pid) {
            Ok(p) if p > 1 => Ok(ProcessId(p)),
            _ => Err(Error::InvalidProcessId { pid }),
        }
    }

    /// The calling process.
    pub fn this() -> Result<Self, Error> {
        Self::new(i64::from(rustix::process::getpid().as_raw_nonzero().get()))
    }

    /// The raw value.
    pub fn get(self) -> i32 {
        self.0
    }
}

impl TryFrom<i64> for ProcessId {
    type Error = Error;
    fn try_from(pid: i64) -> Result<Self, Error> {
        ProcessId::new(pid)
    }
}

impl From<ProcessId> for i64 {
    fn from(pid: ProcessId) -> i64 {
        i64::from(pid.0)
    }
}

impl std::fmt::Display for ProcessId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn special_pids_are_refused() {
        for pid in [-1, 0, 1, i64::from(i32::MAX) + 1] {
            assert!(
                matches!(ProcessId::new(pid), Err(Error::InvalidProcessId { .. })),
                "{pid}"
            );
        }
        assert_eq!(ProcessId::new(2).unwrap().get(), 2);
        assert!(serde_json::from_str::<ProcessId>("1").is_err());
        assert!(serde_json::from_str::<ProcessId>("-5").is_err());
        assert_eq!(
            serde_json::from_str::<ProcessId>("4321").unwrap().get(),
            4321
        );
    }
}
