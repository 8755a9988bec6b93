//! What serve and the probe say to each other. serve writes one [`Request`] (JSON) on the
//! probe's stdin and closes it; the probe answers with one line, [`ANSWER_PREFIX`] and an
//! [`Answer`] as JSON, on its stdout. The request names only paths and the marker: what each
//! path is (the state folder, the key, …) stays on serve's side, which reads the answer's lists
//! in the order of the request's.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The start of the probe's answer line (a sandbox may print lines of its own around it).
pub const ANSWER_PREFIX: &str = "lnk-sandbox-probe ";

/// The hidden subcommand that runs the probe.
pub const SUBCOMMAND: &str = "sandbox-probe";

/// What serve asks the probe to try from inside.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Request {
    /// The random value serve holds in its own environment.
    pub marker: String,
    /// serve's pid and start time (`/proc/<pid>/stat` field 22), to try reading its environment.
    pub serve_pid: i32,
    /// serve's start time; `None` when serve could not read its own.
    pub serve_start: Option<u64>,
    /// Paths whose identity (device and inode) the probe reports, when it can see them.
    pub stat: Vec<PathBuf>,
    /// Files the probe tries to open and read a byte of.
    pub read: Vec<PathBuf>,
    /// Unix sockets the probe tries to connect to.
    pub connect: Vec<PathBuf>,
    /// Folders the probe tries to create a file named `write_name` in.
    pub write: Vec<PathBuf>,
    /// The unique name of the files it tries to create.
    pub write_name: String,
    /// Folders searched for Unix sockets a few levels down.
    pub scan_deep: Vec<PathBuf>,
    /// Folders whose own entries are searched for Unix sockets.
    pub scan_shallow: Vec<PathBuf>,
    /// Paths not to report sockets under (the files folder, the way in).
    pub scan_skip: Vec<PathBuf>,
    /// With `--net-allow`: what the probe tries of the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetRequest>,
    /// Protected paths of the files folder to try to change ([`ProtectedTry`]).
    #[serde(default)]
    pub protected: Vec<ProtectedTry>,
}

/// What the probe tries of the network, with `--net-allow` (`super::net`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NetRequest {
    /// Listeners of serve's on this machine's loopback, outside the sandbox: each must be
    /// out of reach (`address:port`).
    pub direct: Vec<String>,
    /// Addresses a UDP socket is connected to (no packet is sent): a route to any is a way
    /// out of the sandbox that is not the proxy.
    pub route: Vec<String>,
    /// The proxy's address inside the sandbox.
    pub proxy: String,
    /// A name not on the allow-list, which the proxy must refuse.
    pub unlisted: String,
}

/// What the probe found of the network, in the order of the [`NetRequest`]'s lists.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct NetAnswer {
    /// For each of [`NetRequest::direct`]: whether a connection was made.
    pub direct: Vec<bool>,
    /// For each of [`NetRequest::route`]: whether the sandbox has a route to it.
    pub route: Vec<bool>,
    /// The proxy's answer to a `CONNECT` to [`NetRequest::unlisted`]: its status line, or why
    /// none came.
    pub proxy_answer: String,
    /// Whether that answer was a refusal of the proxy's (`403` with `X-Link-Run-Refused`).
    pub proxy_refused: bool,
}

/// One try at a protected path from inside.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ProtectedTry {
    /// Open the file for writing (nothing is written), making it if it is missing.
    Write(PathBuf),
    /// Make the file named [`Request::write_name`] in the folder, making the folder first if it
    /// is missing.
    CreateIn(PathBuf),
}

/// A file's identity, as the record names an output file's ([`FileId`]): it is the same file
/// exactly when both are equal.
pub use lnk_common::record::FileId;

/// What a connect to a Unix socket found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Reach {
    /// It connected: someone listens there and the sandbox reaches them.
    Connected,
    /// A socket is there, but nothing listens on it now.
    Refused,
    /// Nothing reachable there (absent, or access denied).
    Unreachable,
}

/// What the probe found, in the order of the request's lists.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Answer {
    /// The effective capabilities (`capget`, one bit per `CAP_*`); `None` when unknown.
    pub capabilities: Option<u64>,
    /// `readlink /proc/self/ns/pid`, when it can be read.
    pub pid_namespace: Option<String>,
    /// Where the marker was found: "its own environment", or `/proc/<pid>/environ`.
    pub marker_found_in: Vec<String>,
    /// How many processes' environments the probe could look in.
    pub environments_read: usize,
    /// Whether it read serve's own `/proc/<pid>/environ` (same pid, same start time).
    pub serve_environ_read: bool,
    /// For each of [`Request::stat`]: its identity as seen inside.
    pub stat: Vec<Option<FileId>>,
    /// For each of [`Request::read`]: whether a byte of it was read.
    pub read: Vec<bool>,
    /// For each of [`Request::connect`]: what a connect found.
    pub connect: Vec<Reach>,
    /// For each of [`Request::write`]: whether the file was created (inside; serve looks
    /// outside whether it appeared).
    pub write: Vec<bool>,
    /// Up to five reachable Unix sockets outside the files folder.
    pub sockets: Vec<PathBuf>,
    /// How many reachable sockets it found in all.
    pub sockets_reachable: usize,
    /// How many folder entries the socket search looked at.
    pub entries_searched: usize,
    /// With a [`Request::net`]: what it found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub net: Option<NetAnswer>,
    /// For each of [`Request::protected`]: what the try did (`None` when it could not).
    #[serde(default)]
    pub protected: Vec<Option<String>>,
}
