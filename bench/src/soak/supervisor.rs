//! Supervisor trials: one `serve --state` starts a run; its supervisor (and with
//! [`Killed::Both`] its gate) is SIGKILLed at a uniformly random moment 0–30 ms after `start`
//! answered (found first, so that looking for it takes none of that time); once it is dead a
//! sweep runs, and every process with the trial's marker must be gone within ten seconds.

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

use super::{
    Bins, CALL_LIMIT, KILL_WINDOW_US, Marker, Options, Rng, find_supervisor, gone, kill,
    programs_with_system, serve_args, sweep, wait_dead,
};
use crate::serve::Serve;

/// What a trial kills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Killed {
    /// The run's supervisor.
    Supervisor,
    /// The supervisor and the run's gate, together (once the record names the gate).
    Both,
}

/// Runs the supervisor trials under `sandbox`; how many left something behind.
#[allow(clippy::too_many_arguments)]
pub(super) fn trials(
    bins: &Bins,
    files: &Path,
    programs: &Path,
    sandbox: &[OsString],
    options: &Options,
    rng: &mut Rng,
    place: &Path,
    killed: Killed,
) -> Result<usize> {
    let state = place.join("state");
    let programs_path = programs_with_system(programs);
    let extra = super::state_flags(&state);
    let args = serve_args(
        bins,
        files,
        &programs_path,
        sandbox,
        extra,
        place.join("serve-state.log"),
    );
    let mut serve = Serve::start("soak-state", &args)?;
    let mut left = 0;
    for trial in 0..options.trials {
        let marker = Marker::new("run", trial);
        let call_args = options.program.args(bins, &marker, false);
        let (value, _) = serve.call_tool(
            "start",
            &json!({"program": "sh", "args": call_args}),
            None,
            CALL_LIMIT,
        )?;
        let answered = Instant::now();
        let kill_at = answered + Duration::from_micros(rng.below(KILL_WINDOW_US));
        let id = value["id"].as_str().context("start gave no id")?.to_owned();
        let supervisor = find_supervisor(&id)?;
        std::thread::sleep(kill_at.saturating_duration_since(Instant::now()));
        let killed_at = answered.elapsed();
        // The gate, as the record names it (it does before the gate opens).
        let gate = (killed == Killed::Both)
            .then(|| gate_of(&state, &id))
            .flatten();
        kill(supervisor);
        if let Some(gate) = gate {
            kill(gate);
            wait_dead(gate);
        }
        wait_dead(supervisor);
        sweep(bins, &state)?;
        if !gone(&marker) {
            left += 1;
            println!(
                "    trial {trial}: run {id}, supervisor killed at {} µs (the run's log: {})",
                killed_at.as_micros(),
                state.join(format!("{id}.log")).display()
            );
        }
    }
    serve.shutdown()?;
    Ok(left)
}

/// The gate of run `id`, as its record names it; `None` while it names none.
fn gate_of(state: &Path, id: &str) -> Option<u32> {
    let record = std::fs::read(state.join(format!("{id}.json"))).ok()?;
    let record: serde_json::Value = serde_json::from_slice(&record).ok()?;
    u32::try_from(record["group"]["leader_pid"].as_u64()?).ok()
}
