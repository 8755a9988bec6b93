//! `serve`'s flags, as clap reads them; [`ServeArgs::check`] makes a
//! [`Config`](crate::config::Config) of them.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use super::values::{parse_bytes, parse_duration, parse_var};

/// Where `--files-from` takes the files folder from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum FilesFromArg {
    /// The client's first MCP root, else the folder serve was started in.
    Roots,
}

/// The flags of `serve`. Every one is optional here so that a missing one gets a message of its
/// own in [`ServeArgs::check`]; none has a built-in value.
#[derive(Debug, clap::Args)]
pub(super) struct ServeArgs {
    /// The files folder: calls work inside it and cannot leave it.
    #[arg(long, value_name = "FOLDER")]
    pub(super) files: Option<PathBuf>,
    /// In place of --files: `roots`, the files folder is the client's first MCP root (the
    /// folder the host was started in), else the folder serve was started in.
    #[arg(long, value_name = "SOURCE", value_enum)]
    pub(super) files_from: Option<FilesFromArg>,
    /// Folders (`:`-separated) where the allowed programs are looked up, in order.
    #[arg(long, value_name = "PATH")]
    pub(super) programs_path: Option<OsString>,
    /// A call's time limit (e.g. `30s`); at it the call's whole process group is killed.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) timeout: Option<Duration>,
    /// Output kept per call: each of stdout and stderr keeps its first and last half of this.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(super) output: Option<u64>,
    /// A program the agent may run (a bare name, repeatable).
    #[arg(long = "program", value_name = "NAME")]
    pub(super) programs: Vec<String>,
    /// An environment variable passed to every program through `/usr/bin/env` (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    pub(super) vars: Vec<(String, String)>,
    /// The state folder for background runs (outside `--files`).
    #[arg(long, value_name = "DIR")]
    pub(super) state: Option<PathBuf>,
    /// How many background runs may run at once.
    #[arg(long, value_name = "N")]
    pub(super) background: Option<u32>,
    /// A background run's time limit.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) background_timeout: Option<Duration>,
    /// The cap of a background run's output file.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub(super) background_output: Option<u64>,
    /// How long an ended background run's record and output are kept.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(super) background_keep: Option<Duration>,
    /// Calls whose `link.local/hops` is at or above this may not start background runs.
    #[arg(long, value_name = "N")]
    pub(super) hops: Option<u32>,
    /// The bridge's Unix socket that background runs tell when they end.
    #[arg(long, value_name = "SOCKET")]
    pub(super) way_in: Option<PathBuf>,
    /// The agent id whose key signs what background runs tell.
    #[arg(long = "as", value_name = "AGENT")]
    pub(super) agent: Option<String>,
    /// The keyring folder holding `<agent>.key` (default: Link's keyring).
    #[arg(long, value_name = "DIR")]
    pub(super) keyring: Option<PathBuf>,
    /// A tool's cache folder (cargo's registry, npm's cache, …; absolute, repeatable) that the
    /// sandbox line's `{caches}` binds: programs read it, and what they write there goes to a
    /// layer of each sandbox's own, never into the folder.
    #[arg(long = "cache", value_name = "FOLDER")]
    pub(super) caches: Vec<PathBuf>,
    /// A host the agent's programs may reach through Link Run's proxy: `<name>[:<port>]`,
    /// `*.<suffix>`, or an address written as one (repeatable; ports 443 and 80 when none).
    /// The sandbox's own network stays cut.
    #[arg(long = "net-allow", value_name = "HOST[:PORT]")]
    pub(super) net_allow: Vec<String>,
    /// Skip the sandbox check at start (for a sandbox that cannot run the probe, or a
    /// pass-through prefix on purpose); serve then logs a warning.
    #[arg(long)]
    pub(super) no_sandbox_check: bool,
    /// The sandbox prefix: each call runs `<sandbox> -- <program> <args>`.
    #[arg(last = true, value_name = "SANDBOX")]
    pub(super) sandbox: Vec<OsString>,
}
