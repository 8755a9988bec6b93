//! The sweeps a serving `serve` starts: one at its start, then one a minute.

/// Starts `lnk-link-supervise sweep <state> --routine` beside the server (the state folder as
/// given: the sweep covers its projects' folders too), so that runs whose supervisor died are
/// found, told and cleaned up, without delaying the first answer. Like a
/// supervisor, a sweep may outlive serve (telling takes up to 10 s a run): it logs to
/// `sweep.log`.
pub fn start_sweep(background: &crate::config::Background) {
    let state = lnk_common::layout::StateDir::new(&background.given_state);
    let stdio = super::detached::Stdio {
        stderr: super::detached::log(&state, &state.sweep_log()),
        ..Default::default()
    };
    // Routine: the look for records no index names is rate-limited, since serve sweeps every
    // minute and a busy folder changes all the time.
    let routine = format!("--{}", lnk_common::commands::ROUTINE);
    let args = [
        lnk_common::commands::SWEEP.as_ref(),
        background.given_state.as_os_str(),
        routine.as_ref(),
    ];
    if let Err(err) = super::detached::spawn(&background.supervise, &args, stdio, "sweep") {
        tracing::warn!(%err, "the sweep could not be started");
    }
}

/// How often a serving `serve` starts a sweep. A sweep tells ended runs whose telling failed
/// (the way in was down or slow) while their end is under ten minutes old, and removes runs
/// past their keep; without it, that would wait for the next `serve` or bridge to start.
pub const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// Starts a sweep now and then every [`SWEEP_EVERY`], beside the server, for as long as it
/// serves.
pub fn start_sweeps(background: &crate::config::Background) {
    start_sweep(background);
    let background = background.clone();
    let spawned = std::thread::Builder::new()
        .name("sweeps".into())
        .spawn(move || {
            loop {
                std::thread::sleep(SWEEP_EVERY);
                start_sweep(&background);
            }
        });
    if let Err(err) = spawned {
        tracing::warn!(%err, "no thread for the periodic sweeps; only the first one runs");
    }
}
