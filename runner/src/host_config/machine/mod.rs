//! The machine's part of the recommended line: what `config` (and `check`) add to the
//! README's line so that the allowed programs do on the agent's project what they do outside
//! it, while the user's secrets stay out of reach.
//!
//! - the home as an empty `--tmpfs`, and of it only what a program needs: its toolchain's
//!   folders (found by [`crate::host_config::toolchains`]) read-only at their own paths, the
//!   settings that hold no secret ([`settings`], checked by [`secrets`]), and what `--read`
//!   names;
//! - the variables programs expect, as `--var`s ([`environment`]);
//! - never anything of the never-list ([`crate::host_config::never`]), unless `--read … --force`.
//!
//! [`mounts`] puts the mounts in the order bubblewrap makes them.

mod environment;
mod mounts;
mod secrets;
mod settings;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::config::{Config, FilesFrom};
use crate::host_config::never::{NeverList, keyrings};
use crate::host_config::toolchains::{self, Context, Guard, symlinks::resolve};
use settings::Shown;

/// What the machine's part adds.
#[derive(Debug, Default)]
pub struct MachinePart {
    /// `--var`s, put after the user's flags.
    pub vars: Vec<(String, String)>,
    /// The sandbox's words, put right before the files folder's bind.
    pub words: Vec<String>,
    /// What each program runs and what is shown, for the person.
    pub notes: Vec<String>,
    /// What was left out, and why.
    pub warnings: Vec<String>,
}

/// What the person asked of the machine's part, beside serve's flags.
#[derive(Debug)]
pub struct Asked<'a> {
    /// The home as `$HOME` names it.
    pub home: &'a Path,
    /// The person's environment.
    pub env: BTreeMap<String, OsString>,
    /// `--read` paths, made absolute.
    pub reads: &'a [PathBuf],
    /// `--force`: a `--read` of the never-list is shown, with a warning.
    pub force: bool,
}

/// The machine's part for `config` (serve's flags, checked).
pub fn build(config: &Config, asked: &Asked<'_>) -> Result<MachinePart, String> {
    let home = asked.home;
    let real_home = resolve(home).real;
    // With --files-from roots each session's folder is the client's: serve refuses one that is
    // the home or holds it, as it chooses it.
    let files = (config.files_from == FilesFrom::Flag).then_some(&config.files);
    if let Some(files) = files
        && (real_home == *files || real_home.starts_with(files))
    {
        return Err(format!(
            "--files {} holds your home folder ({}): the recommended line keeps the home from \
             the agent's programs but for what they need, and a files folder there would give \
             them all of it, ~/.ssh included, to read and change; give the project's own \
             folder, like {}",
            files.display(),
            home.display(),
            home.join("work").display()
        ));
    }
    let env_var = |name: &str| asked.env.get(name).cloned();
    let mut extra: Vec<PathBuf> = keyrings(home, &env_var);
    if let Some(background) = &config.background {
        extra.push(background.state.clone());
        if let Some(way_in) = &background.way_in {
            extra.push(way_in.keyring.clone());
            extra.push(way_in.socket.clone());
        }
    }
    let programs_path: Vec<PathBuf> = std::env::split_paths(&config.programs_path)
        .filter(|p| p.is_absolute())
        .collect();
    let mut ctx = Context {
        home: home.to_path_buf(),
        env: asked.env.clone(),
        programs_path,
        guard: Guard {
            home: real_home.clone(),
            files: files.cloned(),
            never: NeverList::new(&[], &[], &[]),
        },
    };
    let cargo_home = toolchains::cargo_home(&ctx);
    ctx.guard.never = NeverList::new(&[home, &real_home], &extra, &[cargo_home]);
    let needs = toolchains::discover(&ctx, &config.programs);
    let mut part = MachinePart {
        warnings: needs.warnings.clone(),
        ..MachinePart::default()
    };
    let mut wanted = settings::git_files(home, ctx.var_path("XDG_CONFIG_HOME").as_deref());
    wanted.extend(needs.settings.iter().cloned());
    let gathered = settings::gather(&wanted, home, &ctx.guard.never);
    part.warnings.extend(gathered.warnings);
    let mut links: Vec<toolchains::Link> = needs.links.iter().cloned().collect();
    links.extend(gathered.links);
    let mut shown = gathered.shown;
    for path in asked.reads {
        shown.push(read(
            path,
            &ctx.guard.never,
            asked.force,
            &mut part,
            &mut links,
        )?);
    }
    // The home named through links (`/home` a link to `/var/home`): made again inside.
    let home_links = resolve(home).links;
    let tmpfs = (real_home != Path::new("/")).then_some(real_home.as_path());
    if tmpfs.is_none() {
        part.warnings
            .push("HOME is /, which cannot be an empty tmpfs: nothing of it is hidden".to_owned());
    }
    links.extend(home_links);
    part.vars = environment::vars(&ctx, &needs, &config.vars);
    let (words, bound) = mounts::words(mounts::Parts {
        home: tmpfs,
        files: files.map(PathBuf::as_path),
        binds: needs.binds.iter().cloned().collect(),
        links,
        shown: shown.clone(),
    });
    part.words = words;
    part.notes = notes(&needs.report, &bound, &shown, &part.vars);
    Ok(part)
}

/// A `--read` path: it must exist; one on the never-list is refused unless `force`, then
/// shown with a warning.
fn read(
    path: &Path,
    never: &NeverList,
    force: bool,
    part: &mut MachinePart,
    links: &mut Vec<toolchains::Link>,
) -> Result<Shown, String> {
    if path.symlink_metadata().is_err() {
        return Err(format!(
            "--read {}: no such file or folder; nothing was written",
            path.display()
        ));
    }
    if let Some(secret) = never.blocks(path) {
        if !force {
            return Err(format!(
                "--read {} would show {} to the agent's programs, and it is on the never-list \
                 (keys, tokens, credentials, histories, the agent's keyring, the state \
                 folder); give --force to show it anyway; nothing was written",
                path.display(),
                secret.display()
            ));
        }
        part.warnings.push(format!(
            "--read {} shows {} to the agent's programs (--force): they can read it and send \
             it wherever they reach",
            path.display(),
            secret.display()
        ));
    }
    Ok(Shown::at_own_place(path, links))
}

/// The lines a person reads: what each program runs, what is shown, the environment.
fn notes(
    report: &[String],
    bound: &[PathBuf],
    shown: &[Shown],
    vars: &[(String, String)],
) -> Vec<String> {
    let mut notes = report.to_vec();
    let list = |paths: Vec<String>| {
        if paths.is_empty() {
            "nothing".to_owned()
        } else {
            paths.join(", ")
        }
    };
    notes.push(format!(
        "shown read-only: {}",
        list(bound.iter().map(|p| p.display().to_string()).collect())
    ));
    notes.push(format!(
        "settings shown read-only: {}",
        list(
            shown
                .iter()
                .map(|s| s.source.display().to_string())
                .collect()
        )
    ));
    notes.push(format!(
        "environment: {}",
        vars.iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    ));
    notes
}
