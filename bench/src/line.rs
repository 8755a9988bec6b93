//! The recommended sandbox line, read from docs/sandbox.md as the tests read it (the block
//! under "### The recommended sandbox line", `/home/me/work` standing for the files folder), so
//! that the benchmarks measure the line people copy.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

const SANDBOX_DOC: &str = include_str!("../../docs/sandbox.md");
const HEADING: &str = "### The recommended sandbox line";
const FILES_PLACEHOLDER: &str = "/home/me/work";

/// The line's elements as the README writes them, without the leading `--`.
fn elements() -> Result<Vec<String>> {
    let at = SANDBOX_DOC
        .find(HEADING)
        .context("README.md has no recommended sandbox line")?;
    let rest = &SANDBOX_DOC[at..];
    let open = rest.find("\n```").context("no block after the heading")?;
    let body = &rest[open + 4..];
    let body = &body[body.find('\n').map_or(0, |i| i + 1)..];
    let close = body.find("\n```").context("the block is not closed")?;
    let mut elements: Vec<String> = serde_json::from_str(&format!("[{}]", &body[..close]))
        .context("the recommended line is not a JSON array's elements")?;
    if elements.first().map(String::as_str) != Some("--") {
        bail!("the recommended line does not start with `--`");
    }
    elements.remove(0);
    Ok(elements)
}

/// The word serve fills in with the protected paths' binds.
pub const PROTECTED: &str = "{protected}";

/// `prefix` as bubblewrap itself takes it, run by hand rather than by serve: the word serve
/// fills in for the protected paths left out (it only adds binds).
pub fn by_hand(prefix: &[OsString]) -> Vec<OsString> {
    prefix
        .iter()
        .filter(|word| *word != PROTECTED)
        .cloned()
        .collect()
}

/// The recommended sandbox prefix for `files`, with `visible` bound read-only before the files
/// folder's bind, and `bwrap` (found on this machine) as its program.
pub fn recommended(files: &Path, visible: &[PathBuf], bwrap: &Path) -> Result<Vec<OsString>> {
    let mut elements = elements()?;
    let bind = elements
        .windows(2)
        .position(|pair| pair[0] == "--bind" && pair[1] == FILES_PLACEHOLDER)
        .context("the recommended line does not bind the files folder")?;
    let files = files.to_str().context("the files folder is not UTF-8")?;
    let mut extra = Vec::new();
    for path in visible {
        let path = path
            .to_str()
            .context("a folder that is not UTF-8")?
            .to_owned();
        extra.extend(["--ro-bind".to_owned(), path.clone(), path]);
    }
    elements.splice(bind..bind, extra);
    let mut prefix: Vec<OsString> = elements
        .into_iter()
        .map(|e| OsString::from(e.replace(FILES_PLACEHOLDER, files)))
        .collect();
    if let Some(program) = prefix.first_mut() {
        *program = bwrap.as_os_str().to_owned();
    }
    Ok(prefix)
}
