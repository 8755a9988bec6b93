//! mise. Its shims (`~/.local/share/mise/shims/node`) are links to the `mise` binary, which
//! picks a version of `$MISE_DATA_DIR/installs` by the project's `mise.toml` or
//! `.tool-versions`, or the user's `~/.config/mise/config.toml`. `MISE_DATA_DIR` and mise's
//! state folder (the configurations it was told to trust) are shown read-only, the user's
//! mise configuration and `~/.tool-versions` are shown unless they hold a secret (mise's
//! `[env]` can), and `MISE_DATA_DIR`, `MISE_CONFIG_DIR` and `MISE_STATE_DIR` are set to
//! what mise uses outside (it would look under the home's defaults inside otherwise, since
//! `XDG_*` are not passed).

use super::{Context, Found, Toolchain};

/// The `mise` binary, reached as itself or through one of its shims.
pub fn recognise(ctx: &Context, found: &Found) -> Option<Toolchain> {
    if found.real.file_name()? != "mise" {
        return None;
    }
    let xdg = |var: &str, default: &str| {
        ctx.var_path(var)
            .unwrap_or_else(|| ctx.home.join(default))
            .join("mise")
    };
    let data = ctx
        .var_path("MISE_DATA_DIR")
        .unwrap_or_else(|| xdg("XDG_DATA_HOME", ".local/share"));
    let config = ctx
        .var_path("MISE_CONFIG_DIR")
        .unwrap_or_else(|| xdg("XDG_CONFIG_HOME", ".config"));
    let state = ctx
        .var_path("MISE_STATE_DIR")
        .unwrap_or_else(|| xdg("XDG_STATE_HOME", ".local/state"));
    let mut toolchain = Toolchain::named("mise");
    toolchain.shown = vec![data.clone(), state.clone()];
    toolchain.settings = vec![
        config.join("config.toml"),
        config.join("config.local.toml"),
        ctx.home.join(".tool-versions"),
    ];
    toolchain.vars = vec![
        ("MISE_DATA_DIR".to_owned(), data),
        ("MISE_CONFIG_DIR".to_owned(), config),
        ("MISE_STATE_DIR".to_owned(), state),
    ];
    Some(toolchain)
}
