//! `stop`: asks a run to stop (`<id>.stop`) and waits up to five seconds for its end; or, with
//! `signal`, sends that signal alone to the run's programs ([`lnk_proc::run::signal`]) and answers
//! at once.

use std::time::{Duration, Instant};

use lnk_common::Causes;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_proc::run::signal::Signalled;
use rustix::process::Signal;
use serde_json::{Map, Value};

use super::args::{only, run_id};
use super::list::live_summary;
use crate::config::Background;
use crate::tool_call::answer::ToolAnswer as Answer;

/// How long `stop` waits for the end to be recorded.
const STOP_WAIT: Duration = Duration::from_secs(5);
/// How often the record is looked at while waiting.
const STOP_POLL: Duration = Duration::from_millis(20);

/// The `stop` tool.
pub fn stop(background: &Background, arguments: &Map<String, Value>) -> Answer {
    if let Err(answer) = only(arguments, "stop", &["id", "signal"]) {
        return answer;
    }
    let id = match run_id(arguments) {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let signal = match arguments.get("signal") {
        None | Some(Value::Null) => None,
        Some(Value::String(name)) => match ToSend::parse(name) {
            Some(signal) => Some(signal),
            None => return Answer::refusal(ToSend::refusal(name)),
        },
        Some(_) => return Answer::refusal(ToSend::refusal("")),
    };
    let state = StateDir::new(&background.state);
    let mut record = match Record::load(&state, &id) {
        Ok(record) => record,
        Err(e) if e.is_not_found() => {
            return Answer::refusal(format!("there is no run {id}; `list` shows the runs"));
        }
        Err(e) => return Answer::refusal(format!("run {id} cannot be read: {}", Causes(&e))),
    };
    super::orphans::sweep_orphans(background, std::slice::from_mut(&mut record));
    if let Some(signal) = signal {
        return send(&record, signal);
    }
    if record.status.is_running() {
        if let Err(e) = lnk_proc::run::wake::request_stop(&state, &id) {
            return Answer::refusal(format!("run {id} cannot be asked to stop: {}", Causes(&e)));
        }
        let start = Instant::now();
        while record.status.is_running() && start.elapsed() < STOP_WAIT {
            std::thread::sleep(STOP_POLL);
            match Record::load(&state, &id) {
                Ok(fresh) => record = fresh,
                Err(e) => tracing::warn!(%id, "{}", Causes(&e)),
            }
        }
    }
    let summary = serde_json::to_value(live_summary(&record)).unwrap_or(Value::Null);
    let text = if record.status.is_running() {
        format!(
            "run {id} was asked to stop but its end is not recorded after {} s; `list` shows it",
            STOP_WAIT.as_secs()
        )
    } else {
        format!("run {id} is {}", record.status.state().as_str())
    };
    Answer::ok(format!("{text}\n{summary}"), summary)
}

/// A signal `stop` may send alone, by the name the agent gives (`INT` or `SIGINT`, in any case).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToSend {
    /// Its name, without `SIG`.
    pub name: &'static str,
    signal: Signal,
}

impl ToSend {
    /// The signals `stop` sends: the contract's seven, and CONT, which lets a program that
    /// Ctrl-Z (typed with `write` on a `tty` run) stopped go on.
    pub const ALL: [ToSend; 8] = [
        ToSend::new("INT", Signal::INT),
        ToSend::new("HUP", Signal::HUP),
        ToSend::new("TERM", Signal::TERM),
        ToSend::new("QUIT", Signal::QUIT),
        ToSend::new("USR1", Signal::USR1),
        ToSend::new("USR2", Signal::USR2),
        ToSend::new("KILL", Signal::KILL),
        ToSend::new("CONT", Signal::CONT),
    ];

    const fn new(name: &'static str, signal: Signal) -> ToSend {
        ToSend { name, signal }
    }

    /// The signal named `text`.
    pub fn parse(text: &str) -> Option<ToSend> {
        let upper = text.to_ascii_uppercase();
        let name = upper.strip_prefix("SIG").unwrap_or(&upper);
        ToSend::ALL.into_iter().find(|s| s.name == name)
    }

    /// The names, for the schema and the refusal.
    pub fn names() -> Vec<&'static str> {
        ToSend::ALL.iter().map(|s| s.name).collect()
    }

    fn refusal(given: &str) -> String {
        format!(
            "`signal` must be one of {} (as a string; `SIG` may lead), not `{}`",
            ToSend::names().join(", "),
            crate::mcp::protocol::cut_short(given)
        )
    }
}

/// Sends `signal` to the run's programs and answers at once with the run as it is.
fn send(record: &Record, signal: ToSend) -> Answer {
    let id = &record.id;
    let summary = live_summary(record);
    let mut processes = 0;
    let said = if !record.status.is_running() {
        format!(
            "run {id} has ended ({}): no signal was sent",
            record.status.state().as_str()
        )
    } else {
        let sent = lnk_proc::run::signal::signal_run(record, signal.signal);
        if let Ok(Signalled::Sent(n)) = sent {
            processes = n;
        }
        match sent {
            Ok(Signalled::Sent(0)) => format!(
                "run {id} has no program running to send SIG{} to (it is starting, or its end is \
                 being recorded)",
                signal.name
            ),
            Ok(Signalled::Sent(n)) => format!(
                "sent SIG{} to run {id}'s program ({n} process{}); the run goes on unless the \
                 program ends",
                signal.name,
                if n == 1 { "" } else { "es" }
            ),
            Ok(Signalled::NotStarted) => {
                format!("run {id} is being started: no signal was sent; try again in a moment")
            }
            Ok(Signalled::Gone) => format!(
                "run {id}'s processes are gone (its end is being recorded): no signal was sent"
            ),
            Err(e) => {
                return Answer::refusal(format!(
                    "SIG{} could not be sent to run {id}: {}",
                    signal.name,
                    Causes(&e)
                ));
            }
        }
    };
    let mut value = serde_json::to_value(summary).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert("sent_signal".into(), Value::from(signal.name));
        object.insert("processes_signalled".into(), Value::from(processes));
    }
    Answer::ok(format!("{said}\n{value}"), value)
}
