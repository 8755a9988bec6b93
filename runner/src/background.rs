//! Background runs, on the runner's side: the `start`, `list`, `read` and `stop` tools.
//!
//! The runner never supervises: `start` writes the record and hands the run's locked lock
//! file to `lnk-link-supervise supervise`, and the other tools only read records and output
//! files (and ask for a stop by creating `<id>.stop`). Everything they share with the
//! supervisor is in `lnk-common`.

mod detached;
mod list;
mod orphans;
mod read;
mod schema;
mod start;
mod stop;

pub use schema::definitions;

use serde_json::{Map, Value};

use crate::protocol::Era;
use crate::server::Server;

/// The background tools' names.
pub const TOOLS: [&str; 4] = ["start", "list", "read", "stop"];

/// A tool's answer: its text, its structured value, and whether it is a refusal.
pub struct Answer {
    /// The text for the agent.
    pub text: String,
    /// The structured value (sent where the revision has it).
    pub structured: Option<Value>,
    /// A refusal (`isError`).
    pub is_error: bool,
}

impl Answer {
    /// A refusal that says what to do instead.
    pub fn refusal(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            structured: None,
            is_error: true,
        }
    }

    /// A successful answer.
    pub fn ok(text: impl Into<String>, structured: Value) -> Self {
        Self {
            text: text.into(),
            structured: Some(structured),
            is_error: false,
        }
    }
}

/// Runs background tool `name` (one of [`TOOLS`]) on the calling thread.
pub fn call(
    server: &Server,
    name: &str,
    arguments: &Map<String, Value>,
    meta: Option<&Map<String, Value>>,
    era: &Era,
) -> Answer {
    let Some(background) = &server.config.background else {
        return Answer::refusal(format!(
            "`{name}` needs background runs, which this server was started without (--state)"
        ));
    };
    match name {
        "start" => start::start(server, background, arguments, meta),
        "list" => list::list(background, arguments),
        "read" => read::read(&server.config, background, arguments, era),
        "stop" => stop::stop(background, arguments),
        other => Answer::refusal(format!("no background tool `{other}`")),
    }
}

/// Starts `lnk-link-supervise sweep <state>` beside the server, so that runs whose
/// supervisor died are found, told and cleaned up, without delaying the first answer. Like a
/// supervisor, a sweep may outlive serve (telling takes up to 10 s a run): it logs to
/// `sweep.log`.
pub fn start_sweep(background: &crate::config::Background) {
    let state = lnk_common::layout::StateDir::new(&background.state);
    let mut command = std::process::Command::new(&background.supervise);
    command
        .arg("sweep")
        .arg(&background.state)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(detached::log(&state, &state.sweep_log()));
    if let Err(err) = detached::spawn(&mut command, "sweep") {
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

/// Refuses arguments other than `allowed`.
fn only(arguments: &Map<String, Value>, tool: &str, allowed: &[&str]) -> Result<(), Answer> {
    match arguments.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(unknown) => Err(Answer::refusal(format!(
            "unknown argument `{unknown}`; `{tool}` takes {}",
            if allowed.is_empty() {
                "no arguments".to_owned()
            } else {
                allowed.join(", ")
            }
        ))),
        None => Ok(()),
    }
}

/// The `id` argument, checked before it touches the disk.
fn run_id(arguments: &Map<String, Value>) -> Result<lnk_common::id::RunId, Answer> {
    let Some(Value::String(text)) = arguments.get("id") else {
        return Err(Answer::refusal(
            "`id` is required: a run id as `start` or `list` gave it",
        ));
    };
    lnk_common::id::RunId::parse(text).map_err(|_| {
        Answer::refusal(format!(
            "`{}` is not a run id (12 to 32 characters of a-z and 0-9); `list` shows the runs",
            text.chars().take(64).collect::<String>()
        ))
    })
}

/// An optional non-negative integer argument.
fn count(arguments: &Map<String, Value>, key: &str) -> Result<Option<u64>, Answer> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(Some)
            .ok_or_else(|| Answer::refusal(format!("`{key}` must be a non-negative integer"))),
    }
}
