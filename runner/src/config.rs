//! What `serve` was started with, checked: the limits and grants every call runs under.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lnk_common::AgentId;
use lnk_proc::net::AllowList;

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
    /// Variables passed through `/usr/bin/env` (`--var`, as given).
    pub vars: Vec<(String, String)>,
    /// Background runs, when `--state` is given.
    pub background: Option<Background>,
    /// The hosts programs may reach through Link Run's proxy (`--net-allow`); `None`: no
    /// proxy, and the sandbox's network is what its line makes it.
    pub net: Option<Arc<AllowList>>,
    /// The sandbox prefix, as given (with the words [`crate::sandbox_line`] replaces).
    pub sandbox: Vec<OsString>,
}

impl Config {
    /// The sandbox prefix as calls run it: [`crate::sandbox_line::expand`].
    pub fn sandbox_line(&self) -> Vec<OsString> {
        crate::sandbox_line::expand(&self.sandbox, &self.files)
    }

    /// The command line that runs `program` (a resolved path) with `args` under the sandbox,
    /// with the [`Config::program_vars`] set: [`lnk_common::command_line::sandboxed`].
    pub fn command_line(&self, program: &Path, args: &[impl AsRef<OsStr>]) -> Vec<OsString> {
        self.command_line_and_words(program, args).0
    }

    /// [`Config::command_line`], and how many of its first words are the sandbox's (the line
    /// is filled in anew for each sandbox made, so its length is the one of this line).
    pub fn command_line_and_words(
        &self,
        program: &Path,
        args: &[impl AsRef<OsStr>],
    ) -> (Vec<OsString>, usize) {
        let line = self.sandbox_line();
        let vars = self.program_vars();
        let vars = vars
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()));
        let argv = lnk_common::command_line::sandboxed(&line, vars, program.as_os_str(), args);
        (argv, line.len())
    }

    /// The variables every program gets: the `--var`s, then, with `--net-allow`, those that
    /// name the proxy ([`lnk_proc::net::env`]) that no `--var` names.
    pub fn program_vars(&self) -> Vec<(String, String)> {
        let mut vars = self.vars.clone();
        if let Some(allow) = &self.net {
            for (name, value) in lnk_proc::net::env::variables(allow) {
                if !vars.iter().any(|(given, _)| *given == name) {
                    vars.push((name, value));
                }
            }
        }
        vars
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
