//! What the allowed programs need to run inside the recommended line: each `--program`, found
//! on `--programs-path`, is followed to what it really runs — symbolic links, a toolchain
//! manager's proxy or shim, a script's interpreter — and what that needs is gathered: the
//! folders to show read-only at their own paths, the links to make again inside, the
//! toolchain's own variables and settings files, and folders to add to `PATH`.
//!
//! [`symlinks`] follows a path link by link; [`scripts`] reads a script's `#!` line; [`roots`]
//! says what to bind for a real file (its install's root) and what never (the home, wide
//! folders, the never-list); one module per manager: [`rustup`], [`python`] (pyenv),
//! [`node`] (nvm, fnm, volta), [`asdf`], [`mise`].

mod asdf;
mod mise;
mod node;
mod python;
pub mod roots;
mod rustup;
mod scripts;
pub mod symlinks;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

pub use roots::Guard;
pub use rustup::cargo_home;
use scripts::Interpreter;
pub use symlinks::Link;

/// Programs followed through at most this many scripts' interpreters.
const MAX_DEPTH: usize = 8;

/// The person's machine as `config` sees it.
#[derive(Debug)]
pub struct Context {
    /// The home as `$HOME` names it.
    pub home: PathBuf,
    /// The person's environment.
    pub env: BTreeMap<String, OsString>,
    /// The absolute folders of `--programs-path`, in order: `PATH` inside.
    pub programs_path: Vec<PathBuf>,
    /// What may be bound.
    pub guard: Guard,
}

impl Context {
    /// A variable of the person's environment, when set and not empty.
    pub fn var(&self, name: &str) -> Option<&OsStr> {
        self.env
            .get(name)
            .map(OsString::as_os_str)
            .filter(|v| !v.is_empty())
    }

    /// A variable that names an absolute path.
    pub fn var_path(&self, name: &str) -> Option<PathBuf> {
        self.var(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    }

    /// The absolute folders of the person's own `PATH`.
    pub fn user_path(&self) -> Vec<PathBuf> {
        self.var("PATH")
            .map(|path| {
                std::env::split_paths(path)
                    .filter(|p| p.is_absolute())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A program found, as a manager sees it.
#[derive(Debug)]
pub struct Found {
    /// The name it was asked by.
    pub name: String,
    /// The folder it was found in.
    pub folder: PathBuf,
    /// What `at` leads to, links followed.
    pub real: PathBuf,
}

/// What a toolchain manager says a program of its needs.
#[derive(Debug, Default)]
pub struct Toolchain {
    /// What it is, for the person: "rustup's proxy".
    pub manager: String,
    /// Paths (as the user names them) to show read-only, whole.
    pub shown: Vec<PathBuf>,
    /// Variables to set inside, to these paths.
    pub vars: Vec<(String, PathBuf)>,
    /// Settings files, shown when they exist and hold no secret.
    pub settings: Vec<PathBuf>,
    /// Programs it runs in turn, followed like the program.
    pub follow: Vec<PathBuf>,
    /// Names it runs from `PATH`, followed like `#!/usr/bin/env` names.
    pub follow_names: Vec<String>,
    /// What the person should know.
    pub notes: Vec<String>,
}

impl Toolchain {
    fn named(manager: &str) -> Toolchain {
        Toolchain {
            manager: manager.to_owned(),
            ..Toolchain::default()
        }
    }
}

/// The managers, asked in turn; the first that knows a program says what it needs.
const MANAGERS: &[fn(&Context, &Found) -> Option<Toolchain>] = &[
    rustup::recognise,
    python::recognise_pyenv,
    node::recognise_volta,
    asdf::recognise,
    mise::recognise,
    node::recognise_nvm_fnm,
    python::recognise_python,
];

/// Everything the programs need.
#[derive(Debug, Default)]
pub struct Needs {
    /// Links to make again inside, where they are not shown already.
    pub links: BTreeSet<Link>,
    /// Paths (resolved) to bind read-only at their own place.
    pub binds: BTreeSet<PathBuf>,
    /// Variables to set, by name (the first wins).
    pub vars: Vec<(String, String)>,
    /// Settings files to show when they hold no secret.
    pub settings: Vec<PathBuf>,
    /// Folders to add to `PATH` after `--programs-path`'s.
    pub path: Vec<PathBuf>,
    /// One line per program: what it runs.
    pub report: Vec<String>,
    /// What the person should know.
    pub warnings: Vec<String>,
    /// Real files already followed.
    followed: BTreeSet<PathBuf>,
}

/// What `programs` need, each found on the context's programs path (a program that is not
/// found there is refused before this, by the checks of serve's own flags).
pub fn discover(ctx: &Context, programs: &[String]) -> Needs {
    let mut needs = Needs::default();
    for name in programs {
        let found = ctx
            .programs_path
            .iter()
            .map(|folder| folder.join(name))
            .find(|candidate| crate::program::is_executable_file(candidate));
        let Some(at) = found else { continue };
        let mut line = Vec::new();
        follow(ctx, &mut needs, name, &at, 0, &mut line);
        needs.report.push(format!("{name}: {}", line.join(" → ")));
    }
    needs
}

/// Follows the program at `at` (asked as `name`): its links, its manager's needs, its
/// install's root, its interpreter; `line` gathers what it runs, for the report.
fn follow(
    ctx: &Context,
    needs: &mut Needs,
    name: &str,
    at: &Path,
    depth: usize,
    line: &mut Vec<String>,
) {
    let resolved = symlinks::resolve(at);
    needs.links.extend(resolved.links.iter().cloned());
    let real = resolved.real;
    line.push(if real == at {
        at.display().to_string()
    } else {
        format!("{} ({})", at.display(), real.display())
    });
    if !needs.followed.insert(real.clone()) || depth > MAX_DEPTH {
        return;
    }
    let found = Found {
        name: name.to_owned(),
        folder: at.parent().map(Path::to_path_buf).unwrap_or_default(),
        real: real.clone(),
    };
    match ctx.guard.root_of(&real) {
        Ok(Some(root)) => {
            needs.binds.insert(root);
        }
        Ok(None) => {}
        Err(why) => needs.warnings.push(format!(
            "{name}: {} may not run inside: {why}",
            real.display()
        )),
    }
    if let Some(toolchain) = MANAGERS.iter().find_map(|recognise| recognise(ctx, &found)) {
        line.push(toolchain.manager.clone());
        apply(ctx, needs, toolchain, name, depth, line);
    }
    let next = match scripts::interpreter(&real) {
        Some(Interpreter::Path(path)) => Some(path),
        Some(Interpreter::Name(name)) => on_path(ctx, needs, &name),
        None => None,
    };
    if let Some(next) = next {
        let next_name = next
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        follow(ctx, needs, &next_name, &next, depth + 1, line);
    }
}

/// Takes in what a manager said.
fn apply(
    ctx: &Context,
    needs: &mut Needs,
    toolchain: Toolchain,
    name: &str,
    depth: usize,
    line: &mut Vec<String>,
) {
    for path in &toolchain.shown {
        show(ctx, needs, name, path);
    }
    for (var, path) in toolchain.vars {
        if needs.vars.iter().all(|(n, _)| *n != var) {
            needs.vars.push((var, path.to_string_lossy().into_owned()));
        }
    }
    for setting in toolchain.settings {
        if !needs.settings.contains(&setting) {
            needs.settings.push(setting);
        }
    }
    for note in toolchain.notes {
        needs.warnings.push(format!("{name}: {note}"));
    }
    for path in toolchain.follow {
        follow(ctx, needs, name, &path, depth + 1, line);
    }
    for next in toolchain.follow_names {
        if let Some(path) = on_path(ctx, needs, &next) {
            follow(ctx, needs, &next, &path, depth + 1, line);
        }
    }
}

/// Shows `path` (as named) read-only: the links on its way and where it leads.
fn show(ctx: &Context, needs: &mut Needs, name: &str, path: &Path) {
    let resolved = symlinks::resolve(path);
    if !resolved.exists {
        return;
    }
    needs.links.extend(resolved.links);
    if ctx.guard.shown(&resolved.real) {
        return;
    }
    match ctx.guard.refuses(&resolved.real) {
        None => {
            needs.binds.insert(resolved.real);
        }
        Some(why) => needs.warnings.push(format!(
            "{name}: {} is not bound: {why}",
            resolved.real.display()
        )),
    }
}

/// `name` as `env` finds it inside: on `--programs-path` (and what was added to `PATH`), else
/// on the person's own `PATH`, whose folder is then added to `PATH` inside.
fn on_path(ctx: &Context, needs: &mut Needs, name: &str) -> Option<PathBuf> {
    let inside = ctx.programs_path.iter().chain(needs.path.iter());
    if let Some(found) = inside
        .map(|folder| folder.join(name))
        .find(|candidate| crate::program::is_executable_file(candidate))
    {
        return Some(found);
    }
    let found = ctx
        .user_path()
        .into_iter()
        .map(|folder| folder.join(name))
        .find(|candidate| crate::program::is_executable_file(candidate));
    match &found {
        Some(path) => {
            if let Some(folder) = path.parent() {
                needs.path.push(folder.to_path_buf());
            }
        }
        None => needs.warnings.push(format!(
            "`{name}`, which an allowed program runs from PATH, is found neither on \
             --programs-path nor on your PATH"
        )),
    }
    found
}
