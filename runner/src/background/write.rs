//! `write`: adds text to an interactive run's stdin, through its supervisor's channel
//! `<state>/<id>.in` ([`lnk_common::stdin`]), and answers how many bytes the program's stdin
//! took. Nothing is queued: what does not fit at once is refused, and the call never waits
//! longer than a few seconds for a supervisor that does not answer.

use std::time::{Duration, Instant};

use lnk_common::Causes;
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::record::Record;
use lnk_common::stdin::{self, ChannelReply, SendError, WRITE_MAX};
use serde_json::{Map, Value, json};

use super::args::{only, run_id};
use crate::config::Background;
use crate::tool_call::answer::ToolAnswer as Answer;

/// How long `write` waits for the channel of a run that has just started (its supervisor makes
/// it within milliseconds of the start).
const CHANNEL_WAIT: Duration = Duration::from_secs(3);
/// How often it looks meanwhile.
const CHANNEL_POLL: Duration = Duration::from_millis(10);

/// The `write` tool.
pub fn write(background: &Background, arguments: &Map<String, Value>) -> Answer {
    match write_checked(background, arguments) {
        Ok(answer) | Err(answer) => answer,
    }
}

fn write_checked(
    background: &Background,
    arguments: &Map<String, Value>,
) -> Result<Answer, Answer> {
    only(arguments, "write", &["id", "text", "eof"])?;
    let id = run_id(arguments)?;
    let text = match arguments.get("text") {
        Some(Value::String(text)) => text.as_bytes(),
        Some(_) => return Err(Answer::refusal("`text` must be a string")),
        None => {
            return Err(Answer::refusal(
                "`text` is required: what to type into the run's stdin (\"\" with `eof: true` \
                 only closes it)",
            ));
        }
    };
    let eof = match arguments.get("eof") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(eof)) => *eof,
        Some(_) => return Err(Answer::refusal("`eof` must be true or false")),
    };
    if text.len() > WRITE_MAX {
        return Err(Answer::refusal(format!(
            "`text` is {} bytes, more than a run's stdin takes at once ({WRITE_MAX}); nothing \
             was sent. Send it in parts of at most {WRITE_MAX} bytes, reading the run's output \
             in between",
            text.len()
        )));
    }
    let state = StateDir::new(&background.state);
    let mut record = load(&state, &id)?;
    // A running record whose supervisor is gone is swept first, as `stop` does: the answer is
    // then that the run was lost, rather than a wait for a channel no one answers.
    super::orphans::sweep_orphans(background, std::slice::from_mut(&mut record));
    writable(&record)?;
    let started = Instant::now();
    let reply = loop {
        match stdin::send(&state, &id, text, eof) {
            Ok(reply) => break reply,
            Err(SendError::NoChannel(err)) => {
                // Not made yet (the run has just started), or gone (it has just ended).
                let record = load(&state, &id)?;
                writable(&record)?;
                if started.elapsed() >= CHANNEL_WAIT {
                    return Err(Answer::refusal(format!(
                        "run {id} is running but its supervisor does not take input ({}); \
                         `list` shows the run",
                        Causes(&err)
                    )));
                }
                std::thread::sleep(CHANNEL_POLL);
            }
            Err(SendError::Io(err)) => {
                let record = load(&state, &id)?;
                writable(&record)?;
                return Err(Answer::refusal(format!(
                    "run {id}'s stdin could not be reached; nothing is known to have been sent: {}",
                    Causes(&err)
                )));
            }
        }
    };
    answer(&id, text.len(), reply)
}

fn load(state: &StateDir, id: &RunId) -> Result<Record, Answer> {
    Record::load(state, id).map_err(|e| {
        if e.is_not_found() {
            Answer::refusal(format!("there is no run {id}; `list` shows the runs"))
        } else {
            Answer::refusal(format!("run {id} cannot be read: {}", Causes(&e)))
        }
    })
}

/// Refuses a run whose stdin no `write` can reach: one that ended, or one that is not
/// interactive.
fn writable(record: &Record) -> Result<(), Answer> {
    let id = &record.id;
    if !record.status.is_running() {
        return Err(Answer::refusal(format!(
            "run {id} has ended ({}); nothing reads its stdin any more. `read` shows its output; \
             start it again to give it more input",
            record.status.state().as_str()
        )));
    }
    if !record.launch.stdin.stays_open() {
        return Err(Answer::refusal(format!(
            "run {id} is not interactive: its stdin ended when it started. Only a run started \
             with `interactive: true` or `tty: true` takes `write`"
        )));
    }
    Ok(())
}

fn answer(id: &RunId, asked: usize, reply: ChannelReply) -> Result<Answer, Answer> {
    match reply {
        ChannelReply::Taken { taken, closed } => {
            let text = match (taken, closed) {
                (0, true) => format!("run {id}'s stdin is closed (eof)"),
                (_, true) => {
                    format!("wrote {taken} bytes to run {id}'s stdin, then closed it (eof)")
                }
                _ => format!("wrote {taken} bytes to run {id}'s stdin"),
            };
            Ok(Answer::ok(
                text,
                json!({"id": id.as_str(), "taken": taken, "closed": closed}),
            ))
        }
        ChannelReply::Full { taken } => Err(Answer::refusal(format!(
            "run {id}'s stdin took {taken} of {asked} bytes: its program is not reading, and what \
             does not fit at once is not kept. The rest was not sent{}. Read its output (`read`) \
             and write the rest once it reads again",
            if taken == 0 { " (nothing was)" } else { "" }
        ))),
        ChannelReply::Closed => Err(Answer::refusal(format!(
            "run {id}'s stdin was closed by an earlier `eof`; nothing was sent, and nothing more \
             can be"
        ))),
        ChannelReply::ProgramClosed => Err(Answer::refusal(format!(
            "run {id}'s program has closed its stdin (or is ending); nothing was sent. `read` \
             shows its output"
        ))),
        ChannelReply::Invalid { why } => Err(Answer::refusal(format!(
            "run {id}'s supervisor refused the text: {why}"
        ))),
    }
}
