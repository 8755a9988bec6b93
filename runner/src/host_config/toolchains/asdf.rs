//! asdf. Its shims (`~/.asdf/shims/node`) are bash scripts that run `asdf exec node`, which
//! picks a version of `$ASDF_DATA_DIR/installs` by `.tool-versions` in the working folder or
//! above it, or the user's `~/.tool-versions`. The whole of `ASDF_DATA_DIR` (plugins, installs,
//! shims; no secret) is shown read-only, the `asdf` the shim runs is followed like a program
//! (asdf 0.16 and later find it on `PATH`; before, the shim names it), `ASDF_DATA_DIR` (and
//! `ASDF_DIR`, where the user sets it) are set, and `~/.tool-versions` and `~/.asdfrc` shown.

use std::path::{Path, PathBuf};

use super::{Context, Found, Toolchain};

/// An asdf shim: in `$ASDF_DATA_DIR/shims`, or a script that runs `asdf exec`.
pub fn recognise(ctx: &Context, found: &Found) -> Option<Toolchain> {
    let data = ctx
        .var_path("ASDF_DATA_DIR")
        .unwrap_or_else(|| ctx.home.join(".asdf"));
    let in_shims = data
        .canonicalize()
        .is_ok_and(|d| found.real.starts_with(d.join("shims")));
    let runs = asdf_it_runs(&found.real);
    if !in_shims && runs.is_none() {
        return None;
    }
    let mut toolchain = Toolchain::named("asdf's shim");
    toolchain.shown = vec![data.clone()];
    toolchain.vars = vec![("ASDF_DATA_DIR".to_owned(), data)];
    if let Some(dir) = ctx.var_path("ASDF_DIR") {
        toolchain.shown.push(dir.clone());
        toolchain.vars.push(("ASDF_DIR".to_owned(), dir));
    }
    match runs {
        Some(Some(path)) => toolchain.follow.push(path),
        _ => toolchain.follow_names.push("asdf".to_owned()),
    }
    let rc = ctx
        .var_path("ASDF_CONFIG_FILE")
        .unwrap_or_else(|| ctx.home.join(".asdfrc"));
    toolchain.settings = vec![ctx.home.join(".tool-versions"), rc];
    Some(toolchain)
}

/// When `file` is a script that runs `asdf exec`: `Some(the asdf it names)`, `Some(None)`
/// when it finds `asdf` on `PATH`.
fn asdf_it_runs(file: &Path) -> Option<Option<PathBuf>> {
    if std::fs::metadata(file).ok()?.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let line = text.lines().find(|l| l.contains("asdf exec"))?;
    let word = line
        .split_whitespace()
        .find(|w| *w != "exec")?
        .trim_matches('"');
    let path = Path::new(word);
    Some((path.is_absolute() && path.ends_with("asdf")).then(|| path.to_path_buf()))
}
