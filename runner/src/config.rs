//! What `serve` was started with, checked: the limits and grants every call runs under.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use lnk_common::AgentId;
use lnk_proc::net::AllowList;

use crate::sandbox_line::Expanded;

/// The checked configuration of one `serve`.
#[derive(Debug, Clone)]
pub struct Config {
    /// The files folder, canonical. With `--files-from roots`, until a project is chosen
    /// (`crate::project`), the folder serve was started in (empty when it cannot be resolved):
    /// no call runs on it before it is checked as a project's folder.
    pub files: PathBuf,
    /// Where the files folder comes from.
    pub files_from: FilesFrom,
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
    /// The cache folders (`--cache`), and whether their layers can be made here.
    pub caches: crate::caches::Caches,
}

/// Where the files folder comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilesFrom {
    /// `--files`: one folder, fixed at start.
    Flag,
    /// `--files-from roots`: the client's first root, else the folder serve was started in,
    /// chosen once per serve ([`crate::project`]).
    Roots,
}

impl Config {
    /// This configuration for the project whose files folder is `files` (canonical, checked):
    /// calls work there, and background runs are kept in the project's own state folder under
    /// the one given ([`lnk_common::projects`]).
    pub fn for_project(&self, files: PathBuf) -> Config {
        let mut config = self.clone();
        if let Some(background) = &mut config.background {
            let given = lnk_common::layout::StateDir::new(&background.given_state);
            background.state = given.project(&files).path().to_path_buf();
        }
        config.files = files;
        config
    }

    /// The sandbox prefix as one sandbox runs it, made now: [`crate::sandbox_line::expand`].
    /// `Err` says why this sandbox cannot be made.
    pub fn sandbox_line(&self) -> Result<Expanded, String> {
        crate::sandbox_line::expand(&self.sandbox, &self.files, &self.caches)
    }

    /// The cache folders each sandbox gets a layer of its own over (none when the layers
    /// cannot be made here): what a reaper is told with `--cache`.
    pub fn layers(&self) -> Vec<PathBuf> {
        self.caches.layers()
    }

    /// The command line that runs `program` (a resolved path) with `args` under the sandbox,
    /// with the [`Config::program_vars`] set ([`lnk_common::command_line::sandboxed`]), as the
    /// words of an [`Expanded`] line (with the descriptors they name).
    pub fn command_line(
        &self,
        program: &Path,
        args: &[impl AsRef<OsStr>],
    ) -> Result<Expanded, String> {
        self.command_line_and_words(program, args)
            .map(|(line, _)| line)
    }

    /// [`Config::command_line`], and how many of its first words are the sandbox's (the line
    /// is filled in anew for each sandbox made, so its length is the one of this line).
    pub fn command_line_and_words(
        &self,
        program: &Path,
        args: &[impl AsRef<OsStr>],
    ) -> Result<(Expanded, usize), String> {
        let mut line = self.sandbox_line()?;
        let words = line.words.len();
        let vars = self.program_vars();
        let vars = vars
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()));
        line.words =
            lnk_common::command_line::sandboxed(&line.words, vars, program.as_os_str(), args);
        Ok((line, words))
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
    /// The state folder of this serve's runs (absolute; it may not exist yet): the one given,
    /// or with `--files-from roots` the project's own under it ([`Config::for_project`]).
    pub state: PathBuf,
    /// The state folder as given (`--state`): what serve sweeps, the projects' folders with it.
    pub given_state: PathBuf,
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
