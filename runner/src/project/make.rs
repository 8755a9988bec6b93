//! Making a project ready before any call runs there: its folder checked, its state folder
//! made, the sandbox checked against it, and the warm spares started for it.

use std::path::Path;

use lnk_common::layout::StateDir;

use super::client_root::{Forbidden, check_folder};
use crate::check::Warmth;
use crate::config::Config;

/// How projects are made: whether their sandbox is checked (no `--no-sandbox-check`), and
/// whether calls are to start warm (no `LNK_COLD_START=1`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Making {
    /// Whether the sandbox check runs.
    pub sandbox_check: bool,
    /// Whether warm starts are asked for.
    pub warm_asked: bool,
}

/// The sandbox check for `config` as serve runs it: `Ok` with the warnings to log and whether
/// calls may start warm, or `Err` with the line serve refuses with. Without the check
/// (`--no-sandbox-check`), one warning says so and calls start warm unless cold starts were
/// asked for.
pub fn sandbox_checked(config: &Config, making: Making) -> Result<(Vec<String>, Warmth), String> {
    if making.sandbox_check {
        return crate::check::before_serving(config, making.warm_asked);
    }
    let warmth = if making.warm_asked {
        Ok(())
    } else {
        Err("cold starts were asked for".to_owned())
    };
    let warning = "--no-sandbox-check: the sandbox was not checked; nothing proves that it keeps \
                   the agent's programs from the agent's key, the state folder or serve's \
                   environment";
    let mut warnings = vec![warning.to_owned()];
    // The check says it otherwise (one of its findings).
    warnings.extend(config.caches.warning());
    Ok((warnings, warmth))
}

/// The project whose folder is `folder` (`what` names where it came from, for a person):
/// checked, its state folder made, the sandbox checked against it, its warm spares started.
/// `Err`: the line every call is refused with.
pub fn make(
    template: &Config,
    making: Making,
    folder: &Path,
    what: &str,
) -> Result<Config, String> {
    let files = check_folder(
        folder,
        &format!("the project folder ({what})"),
        &Forbidden::of(template),
    )?;
    let config = template.for_project(files);
    let refused = |why: String| {
        format!(
            "the project folder {} cannot be served: {why}",
            config.files.display()
        )
    };
    if let Some(background) = &config.background {
        StateDir::new(&background.given_state)
            .create_project(&config.files)
            .map_err(|err| refused(format!("its state folder: {err}")))?;
    }
    let (warnings, warmth) = sandbox_checked(&config, making).map_err(refused)?;
    for warning in warnings {
        tracing::warn!("{warning}");
    }
    crate::call::spares::start(crate::call::warmth::settings(
        &config,
        warmth,
        making.sandbox_check,
    ));
    Ok(config)
}
