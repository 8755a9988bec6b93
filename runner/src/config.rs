//! What `serve` was started with, checked: the limits and grants every call runs under.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lnk_common::AgentId;

use crate::sandbox_line::Expanded;

/// The checked configuration of one `serve`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The files folder, canonical.
    pub files: PathBuf,
    /// Where allowed programs are looked up, `:`-separated, in order.
    pub programs_path: OsString,
    /// A call's time limit.
    pub timeout: Duration,
    /// Output kept per stream: half as the head, half as the tail.
    pub output: u64,
    /// The allowed program names, in the order given, without repeats.
    pub programs: Vec<String>,
    /// Variables passed through `/usr/bin/env`.
    pub vars: Vec<(String, String)>,
    /// Background runs, when `--state` is given.
    pub background: Option<Background>,
    /// The sandbox prefix, as given (with the words [`crate::sandbox_line`] replaces).
    pub sandbox: Vec<OsString>,
}

impl Config {
    /// The sandbox prefix as one sandbox runs it, made now: [`crate::sandbox_line::expand`].
    /// `Err` says why this sandbox cannot be made.
    pub fn sandbox_line(&self) -> Result<Expanded, String> {
        crate::sandbox_line::expand(&self.sandbox, &self.files)
    }

    /// The command line that runs `program` (a resolved path) with `args` under the sandbox,
    /// with `--var`s set ([`lnk_common::command_line::sandboxed`]), as the words of an
    /// [`Expanded`] line (with the descriptors they name).
    pub fn command_line(
        &self,
        program: &Path,
        args: &[impl AsRef<OsStr>],
    ) -> Result<Expanded, String> {
        let vars = self
            .vars
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()));
        let mut line = self.sandbox_line()?;
        line.words =
            lnk_common::command_line::sandboxed(&line.words, vars, program.as_os_str(), args);
        Ok(line)
    }
}

/// The background half's settings (`--state` and the flags that come with it).
#[derive(Debug, Clone)]
pub struct Background {
    /// The state folder (absolute; it may not exist yet).
    pub state: PathBuf,
    /// How many runs may run at once.
    pub max_running: u32,
    /// A run's time limit.
    pub timeout: Duration,
    /// The output file's cap.
    pub output: u64,
    /// How long an ended run is kept.
    pub keep: Duration,
    /// Calls at or above this many hops may not start runs.
    pub hops: u32,
    /// Where and as whom runs tell their end.
    pub way_in: Option<WayIn>,
    /// The `lnk-link-supervise` executable.
    pub supervise: PathBuf,
}

/// The way in: the bridge's socket, the agent and its keyring.
#[derive(Debug, Clone)]
pub struct WayIn {
    /// The bridge's Unix stream socket.
    pub socket: PathBuf,
    /// The agent id whose key signs.
    pub agent: AgentId,
    /// The keyring folder.
    pub keyring: PathBuf,
}
