//! pyenv, and Python's per-user packages. A pyenv shim (`~/.pyenv/shims/python3`) is a bash
//! script that runs `pyenv exec`, which picks a Python of `$PYENV_ROOT/versions` by
//! `PYENV_VERSION`, a `.python-version` in the working folder or above it, or
//! `$PYENV_ROOT/version`: the whole of `PYENV_ROOT` is shown read-only (its pyenv, shims,
//! plugins and versions; it holds no secret), `PYENV_ROOT` is set, and `~/.python-version`
//! (pyenv's global choice, when kept in the home) is shown. A Python reached by any way also
//! gets the user's own packages, `~/.local/lib/python3.*`, that `pip install --user` made.

use std::path::{Path, PathBuf};

use super::{Context, Found, Toolchain};

/// A pyenv shim: in `$PYENV_ROOT/shims`, or a script that runs `pyenv exec` and names its
/// `PYENV_ROOT`.
pub fn recognise_pyenv(ctx: &Context, found: &Found) -> Option<Toolchain> {
    let root = root_named_in_shim(&found.real).or_else(|| {
        let root = ctx
            .var_path("PYENV_ROOT")
            .unwrap_or_else(|| ctx.home.join(".pyenv"));
        let shims = root.canonicalize().ok()?.join("shims");
        found.real.starts_with(shims).then_some(root)
    })?;
    let mut toolchain = Toolchain::named("pyenv's shim");
    toolchain.shown = vec![root.clone()];
    toolchain.shown.extend(user_site(ctx));
    toolchain.vars = vec![("PYENV_ROOT".to_owned(), root)];
    toolchain.settings = vec![ctx.home.join(".python-version")];
    Some(toolchain)
}

/// A Python interpreter reached otherwise (the system's, a venv's, a version's own `bin`):
/// the user's own packages beside it.
pub fn recognise_python(ctx: &Context, found: &Found) -> Option<Toolchain> {
    let name = found.real.file_name()?.to_str()?;
    if !name.starts_with("python") || found.real.extension().is_some_and(|e| e == "py") {
        return None;
    }
    let site = user_site(ctx);
    if site.is_empty() {
        return None;
    }
    let mut toolchain = Toolchain::named("Python");
    toolchain.shown = site;
    Some(toolchain)
}

/// The `PYENV_ROOT` a pyenv shim names (`export PYENV_ROOT="/home/me/.pyenv"`), when `file`
/// is one.
fn root_named_in_shim(file: &Path) -> Option<PathBuf> {
    let meta = std::fs::metadata(file).ok()?;
    if meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    if !text.contains("pyenv\" exec") && !text.contains("pyenv exec") {
        return None;
    }
    text.lines().find_map(|line| {
        let value = line.trim().strip_prefix("export PYENV_ROOT=")?;
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        let path = PathBuf::from(value);
        path.is_absolute().then_some(path)
    })
}

/// The user's own packages: `~/.local/lib/python3.*` that exist.
fn user_site(ctx: &Context) -> Vec<PathBuf> {
    let lib = ctx.home.join(".local/lib");
    let Ok(entries) = std::fs::read_dir(&lib) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("python"))
                && p.is_dir()
        })
        .collect();
    found.sort();
    found
}
