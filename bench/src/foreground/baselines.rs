//! What the comparison of `lnk-bench foreground` (item 5) measures Link Run against, besides a
//! direct spawn: the peer to beat, mcp-server-commands 0.5.0, installed from npm into a cache
//! folder; and the least a process started ahead of its call costs, `sh` waiting on its stdin
//! to `exec` the call's argv.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

use super::on_path;

/// The peer's package and version.
const PEER: &str = "mcp-server-commands@0.5.0";

/// Installs the peer into `cache` (once) and gives the command that runs it.
pub(super) fn peer_command(cache: &Path) -> Result<Command> {
    let package = cache.join("node_modules/mcp-server-commands");
    let installed = std::fs::read_to_string(package.join("package.json"))
        .is_ok_and(|text| text.contains("\"version\": \"0.5.0\""));
    if !installed {
        std::fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(cache)
            .arg(PEER)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .context("running npm")?;
        if !status.success() {
            bail!("npm install {PEER} failed: {status}");
        }
    }
    let node = on_path("node").context("node is not on PATH")?;
    let mut command = Command::new(node);
    command.arg(package.join("build/index.js"));
    Ok(command)
}

/// Where the peer is installed: `$XDG_CACHE_HOME/lnk-bench`, else `~/.cache/lnk-bench`.
pub(super) fn default_cache() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("lnk-bench")
}

/// `sh` waiting for a line on its stdin, to `exec` `argv` then.
pub(super) fn start_waiting(argv: &[OsString]) -> Result<Child> {
    Command::new("sh")
        .args(["-c", "read -r _ && exec \"$@\"", "sh"])
        .args(argv)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting a waiting sh")
}
