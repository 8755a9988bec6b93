//! Node's version managers. nvm and fnm install each Node version in a folder of its own
//! (`~/.nvm/versions/node/v20.11.0`, `~/.local/share/fnm/node-versions/v20.11.0/installation`),
//! which the install's root rule binds as it is, npm and its global packages included; fnm
//! puts a per-shell folder of links on `PATH` (`…/fnm_multishells/<id>/bin`), which goes away
//! with the shell, so a `--programs-path` naming one is warned about. volta's `~/.volta/bin/node`
//! is a link to its `volta-shim`, which picks a version in `$VOLTA_HOME/tools` by the project's
//! `package.json`: the whole of `VOLTA_HOME` is shown read-only and `VOLTA_HOME` is set.

use std::path::PathBuf;

use super::{Context, Found, Toolchain};

/// volta's shim.
pub fn recognise_volta(ctx: &Context, found: &Found) -> Option<Toolchain> {
    let name = found.real.file_name()?.to_str()?;
    if name != "volta-shim" && name != "volta" {
        return None;
    }
    let home = ctx
        .var_path("VOLTA_HOME")
        .unwrap_or_else(|| ctx.home.join(".volta"));
    let mut toolchain = Toolchain::named("volta's shim");
    toolchain.shown = vec![home.clone()];
    toolchain.vars = vec![("VOLTA_HOME".to_owned(), home)];
    Some(toolchain)
}

/// A Node of nvm's or fnm's (its install's root is bound by the general rule); fnm's
/// per-shell folder is warned about.
pub fn recognise_nvm_fnm(ctx: &Context, found: &Found) -> Option<Toolchain> {
    let nvm = ctx
        .var_path("NVM_DIR")
        .unwrap_or_else(|| ctx.home.join(".nvm"))
        .join("versions/node");
    let fnm_dirs: Vec<PathBuf> = ctx
        .var_path("FNM_DIR")
        .into_iter()
        .chain([ctx.home.join(".local/share/fnm"), ctx.home.join(".fnm")])
        .map(|dir| dir.join("node-versions"))
        .collect();
    let in_dir = |dir: &PathBuf| {
        dir.canonicalize()
            .is_ok_and(|dir| found.real.starts_with(dir))
    };
    let per_shell = found
        .folder
        .components()
        .any(|c| c.as_os_str() == "fnm_multishells");
    let mut toolchain = if in_dir(&nvm) {
        Toolchain::named("nvm's Node")
    } else if per_shell || fnm_dirs.iter().any(in_dir) {
        Toolchain::named("fnm's Node")
    } else {
        return None;
    };
    if per_shell {
        toolchain.notes.push(format!(
            "{} is fnm's folder for one shell, which goes away with that shell; put fnm's \
             lasting one in --programs-path instead (`$FNM_DIR/aliases/default/bin`)",
            found.folder.display()
        ));
    }
    Some(toolchain)
}
