//! Gate trials: a supervisor SIGKILLed while its sandbox starts. As the fault was found: a run
//! is started with its gate held shut (`LNK_SUPERVISE_HOLD_GATE`, the supervisor's test hook:
//! it records the group, then waits for the hold file before it opens the gate); the hold file
//! is made a random 0–15 ms after `start` answered (the gate opens, the sandbox starts), and the
//! supervisor is SIGKILLed a random 0–30 ms after `start` answered, in whichever order those
//! moments fall; once it is dead a sweep runs, and every process with the trial's marker must
//! be gone within ten seconds.

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

/// The latest moment the gate is opened after `start` answered.
const OPEN_WINDOW_US: u64 = 15_000;

/// Runs the gate trials under `sandbox`; how many left something behind.
pub(super) fn trials(
    bins: &Bins,
    files: &Path,
    programs: &Path,
    sandbox: &[OsString],
    options: &Options,
    rng: &mut Rng,
    place: &Path,
) -> Result<usize> {
    let state = place.join("state-gate");
    let hold = place.join("hold-gate");
    let programs_path = programs_with_system(programs);
    let extra = super::state_flags(&state);
    let args = serve_args(
        bins,
        files,
        &programs_path,
        sandbox,
        extra,
        place.join("serve-gate.log"),
    );
    let env = [("LNK_SUPERVISE_HOLD_GATE", hold.as_os_str())];
    let mut serve = Serve::start_with_env("soak-gate", &args, &env)?;
    let mut left = 0;
    for trial in 0..options.trials {
        match std::fs::remove_file(&hold) {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => {
                return Err(err).with_context(|| format!("removing {}", hold.display()));
            }
            _ => {}
        }
        let marker = Marker::new("gate", trial);
        let (value, _) = serve.call_tool(
            "start",
            &json!({"program": "sh", "args": options.program.args(bins, &marker, false)}),
            None,
            CALL_LIMIT,
        )?;
        let answered = Instant::now();
        let open_at = answered + Duration::from_micros(rng.below(OPEN_WINDOW_US));
        let kill_at = answered + Duration::from_micros(rng.below(KILL_WINDOW_US));
        let id = value["id"].as_str().context("start gave no id")?.to_owned();
        let supervisor = find_supervisor(&id)?;
        let mut opened = false;
        for (at, open) in order(open_at, kill_at) {
            std::thread::sleep(at.saturating_duration_since(Instant::now()));
            if open {
                std::fs::write(&hold, b"").with_context(|| format!("making {}", hold.display()))?;
                opened = true;
            } else {
                kill(supervisor);
            }
        }
        wait_dead(supervisor);
        sweep(bins, &state)?;
        if !gone(&marker) {
            left += 1;
            println!(
                "    trial {trial}: gate {} at {} µs, supervisor killed at {} µs",
                if opened { "opened" } else { "shut" },
                (open_at - answered).as_micros(),
                (kill_at - answered).as_micros()
            );
        }
    }
    serve.shutdown()?;
    Ok(left)
}

/// The two moments in time order, `true` for the opening.
fn order(open_at: Instant, kill_at: Instant) -> [(Instant, bool); 2] {
    if open_at <= kill_at {
        [(open_at, true), (kill_at, false)]
    } else {
        [(kill_at, false), (open_at, true)]
    }
}
