//! Finding the binaries the benchmarks drive: all are built into the same folder as
//! `lnk-bench` itself (`bench/run.sh` builds them).

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// The executable `name` beside this one, or an error that says how to build it.
pub fn sibling(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let path = exe
        .parent()
        .context("this executable has no folder")?
        .join(name);
    if !path.is_file() {
        bail!(
            "{} is missing; build it first: cargo build --profile profiling -p lnk-link-run \
             -p lnk-link-supervise -p lnk-tests -p lnk-bench (bench/run.sh does)",
            path.display()
        );
    }
    Ok(path)
}
