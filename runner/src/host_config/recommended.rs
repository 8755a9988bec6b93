//! The recommended line for this machine: serve's command line as `config` (and `check`)
//! make it when no sandbox is given after `--` — the README's line, checked as serve checks
//! it, then the machine's part ([`super::machine`]) added and the whole checked again.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::machine::{self, Asked, MachinePart};
use super::serve_args::{self, ServeLine};
use crate::config::Config;

/// serve's line made from the person's `serve_args`, checked: the configuration, whether
/// `--no-sandbox-check` is among the flags, and the machine's part when the line is the
/// recommended one.
pub struct Made {
    /// The line, as the entry holds it.
    pub line: ServeLine,
    /// serve's configuration from it.
    pub config: Config,
    /// Whether `--no-sandbox-check` is given.
    pub skipped: bool,
    /// What the machine's part added, with the recommended line.
    pub machine: Option<MachinePart>,
}

/// Makes and checks serve's line; `reads` (`--read`) and `force` go to the machine's part.
pub fn make(
    serve_args: &[OsString],
    home: &Path,
    reads: &[PathBuf],
    force: bool,
) -> Result<Made, String> {
    let mut line = serve_args::serve_line(serve_args, home)?;
    let check = |argv: &[OsString]| {
        crate::cli::check_serve_line(argv)
            .map_err(|refusal| format!("serve would refuse these arguments: {refusal}"))
    };
    let (config, skipped) = check(&line.argv)?;
    if !line.recommended {
        if let Some(read) = reads.first() {
            return Err(format!(
                "--read {} adds to the recommended line, and a sandbox line is given after \
                 `--`: add a read-only bind of it to that line instead (bubblewrap: \
                 `--ro-bind <path> <path>`)",
                read.display()
            ));
        }
        return Ok(Made {
            line,
            config,
            skipped,
            machine: None,
        });
    }
    let reads = reads
        .iter()
        .map(|read| serve_args::expanded(read, home))
        .collect::<Result<Vec<_>, _>>()?;
    let env: BTreeMap<String, OsString> = std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value)))
        .collect();
    let asked = Asked {
        home,
        env,
        reads: &reads,
        force,
    };
    let part = machine::build(&config, &asked)?;
    line.add_machine(&part, &config.files)?;
    let (config, skipped) = check(&line.argv)?;
    Ok(Made {
        line,
        config,
        skipped,
        machine: Some(part),
    })
}

/// `lnk-link-run check` with no sandbox after `--`: the recommended line for this machine, as
/// `config` makes it (without `--read`), then the check's report of it; what each program runs
/// and what is shown come first, one `note` line each, and what was left out as `warn` lines.
pub fn report(serve_args: &[OsString]) -> Result<std::process::ExitCode, String> {
    use std::io::Write as _;
    let home = serve_args::home()?;
    let made = make(serve_args, &home, &[], false)?;
    let mut out = String::new();
    if let Some(part) = &made.machine {
        for note in &part.notes {
            out.push_str(&format!("note  {note}\n"));
        }
        for warning in &part.warnings {
            out.push_str(&format!("warn  {warning}\n"));
        }
    }
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write to stdout: {}", lnk_common::Causes(&e)))?;
    // With --files-from roots, a folder stands for the projects.
    let stand_in = crate::project::stand_in(&made.config)?;
    if let Some(note) = &stand_in.note {
        stdout
            .write_all(format!("note: {note}\n").as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("cannot write to stdout: {}", lnk_common::Causes(&e)))?;
    }
    drop(stdout);
    Ok(crate::check::report(&stand_in.config, made.skipped))
}
