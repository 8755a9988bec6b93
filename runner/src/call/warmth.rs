//! Which way `serve`'s calls start: warm (the sandbox started ahead of the call, a stub of
//! Link Run's waiting inside, lnk-proc's `reaper::warm`) or cold (the sandbox started for
//! the call). Warm unless `LNK_COLD_START=1` asks for cold starts (the benchmark's comparison,
//! or a sandbox that misbehaves with a process waiting in it), or the sandbox check's probe,
//! run through a warm sandbox, did not see what the cold probe saw.

use crate::call::spares::Settings;
use crate::config::Config;

/// The variable that forces cold starts when it is `1`.
pub const COLD_START_VARIABLE: &str = "LNK_COLD_START";

/// Whether cold starts are asked for.
pub fn cold_asked() -> bool {
    std::env::var_os(COLD_START_VARIABLE).is_some_and(|value| value == "1")
}

/// The spares' settings for `config`: warm when `warmth` is `Ok`, else cold. Logs once which
/// way calls start, and why.
pub fn settings(config: &Config, warmth: Result<(), String>, checked: bool) -> Settings {
    let warm = match warmth {
        Ok(()) => {
            if checked {
                tracing::info!(
                    "calls start warm: each call's sandbox is started ahead of it (the sandbox \
                     check's probe saw the same through a warm sandbox as cold)"
                );
            } else {
                tracing::info!(
                    "calls start warm: each call's sandbox is started ahead of it (unchecked: \
                     a sandbox that cannot run the stub gets cold starts)"
                );
            }
            Some(config.sandbox.clone())
        }
        Err(why) if cold_asked() => {
            tracing::info!("calls start cold: {why} ({COLD_START_VARIABLE}=1)");
            None
        }
        Err(why) => {
            tracing::warn!("calls start cold, which is slower: {why}");
            None
        }
    };
    // Cold spares hold the descriptors of the protected paths of their own finding.
    let cold = (warm.is_none() && crate::sandbox_line::holds_protected(&config.sandbox))
        .then(|| config.sandbox.clone());
    Settings {
        files: config.files.clone(),
        warm,
        cold,
        caches: config.caches.clone(),
    }
}
