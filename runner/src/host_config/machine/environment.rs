//! The environment programs expect, set through `--var` (the sandbox starts with none): `PATH`
//! (the folders of `--programs-path`, then any a program's `#!/usr/bin/env` needed), `HOME`
//! (the user's home's path; inside it is an empty tmpfs but for what is shown), `USER` and
//! `LOGNAME`, `LANG` and `LC_ALL` as the user has them, `TMPDIR` (the sandbox's own `/tmp`),
//! `XDG_CONFIG_HOME` where the user sets it (git reads its settings there), and the
//! toolchains' own (`CARGO_HOME`, `RUSTUP_HOME`, `PYENV_ROOT`, …). A variable the user gives
//! with `--var` is theirs: none of these replaces it.

use std::path::{Path, PathBuf};

use crate::host_config::toolchains::{Context, Needs};

/// The variables the line needs, in order, less those named in `given`.
pub fn vars(ctx: &Context, needs: &Needs, given: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut folders: Vec<&PathBuf> = Vec::new();
    for folder in ctx.programs_path.iter().chain(&needs.path) {
        if !folders.contains(&folder) {
            folders.push(folder);
        }
    }
    let path = folders
        .iter()
        .map(|f| f.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(":");
    out.push(("PATH".to_owned(), path));
    out.push(("HOME".to_owned(), ctx.home.to_string_lossy().into_owned()));
    let text = |name: &str| ctx.var(name).map(|v| v.to_string_lossy().into_owned());
    let user = text("USER")
        .or_else(|| text("LOGNAME"))
        .or_else(user_of_this_process);
    if let Some(user) = user {
        out.push((
            "USER".to_owned(),
            text("USER").unwrap_or_else(|| user.clone()),
        ));
        out.push(("LOGNAME".to_owned(), text("LOGNAME").unwrap_or(user)));
    }
    for name in ["LANG", "LC_ALL"] {
        if let Some(value) = text(name) {
            out.push((name.to_owned(), value));
        }
    }
    out.push(("TMPDIR".to_owned(), "/tmp".to_owned()));
    if let Some(config) = ctx.var_path("XDG_CONFIG_HOME") {
        out.push((
            "XDG_CONFIG_HOME".to_owned(),
            config.to_string_lossy().into_owned(),
        ));
    }
    out.extend(needs.vars.iter().cloned());
    let mut seen: Vec<String> = given.iter().map(|(name, _)| name.clone()).collect();
    out.retain(|(name, _)| {
        let first = !seen.contains(name);
        seen.push(name.clone());
        first
    });
    out
}

/// This process's user's name, from `/etc/passwd` (`USER` and `LOGNAME` are not set).
fn user_of_this_process() -> Option<String> {
    let uid = rustix::process::getuid().as_raw();
    let passwd = std::fs::read_to_string(Path::new("/etc/passwd")).ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id: u32 = fields.nth(1)?.parse().ok()?;
        (id == uid).then(|| name.to_owned())
    })
}
