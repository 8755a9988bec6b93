//! A `watch` call's arguments, checked: the run, what a line must match, how long it may wait
//! and where it looks from. The waiting call ([`super::watch`](mod@super::watch)) and the watch as a task
//! ([`super::watch_task`]) both take it.

use std::time::Duration;

use lnk_common::id::RunId;
use serde_json::{Map, Value};

use super::args::{count, flag, only, run_id};
use super::lines::Matcher;
use crate::config::Background;
use crate::tool_call::answer::ToolAnswer as Answer;

/// The arguments `watch` takes.
const ARGUMENTS: [&str; 6] = ["id", "until", "regex", "ended", "timeout", "offset"];

/// A `watch` call, checked.
pub struct Asked {
    /// The run.
    pub run: RunId,
    /// What a line must match; none: the run's end alone.
    pub matcher: Option<Matcher>,
    /// How long it may wait.
    pub timeout: Duration,
    /// Where it looks from, when the call says.
    pub offset: Option<u64>,
}

impl Asked {
    /// Reads a call's arguments; the refusal says what to pass instead.
    pub fn parse(arguments: &Map<String, Value>, background: &Background) -> Result<Asked, Answer> {
        only(arguments, "watch", &ARGUMENTS)?;
        let run = run_id(arguments)?;
        let regex = flag(arguments, "regex")?;
        let ended = flag(arguments, "ended")?;
        let matcher = match arguments.get("until") {
            None | Some(Value::Null) => None,
            Some(Value::String(until)) => {
                Some(Matcher::new(until, regex, "until").map_err(Answer::refusal)?)
            }
            Some(_) => {
                return Err(Answer::refusal(
                    "`until` must be a string: the text (or with `regex: true` the regular \
                     expression) a line of the output must hold",
                ));
            }
        };
        if matcher.is_none() && regex {
            return Err(Answer::refusal(
                "`regex` says how `until` is read, and there is no `until`",
            ));
        }
        if matcher.is_none() && !ended {
            return Err(Answer::refusal(
                "`watch` needs `until` (what a line of the output must hold, such as \
                 \"listening on\") or `ended: true` (to wait for the run's end)",
            ));
        }
        let most = u64::try_from(background.timeout.as_millis()).unwrap_or(u64::MAX);
        let timeout = match count(arguments, "timeout")? {
            Some(ms) if ms > most => {
                return Err(Answer::refusal(format!(
                    "`timeout` may be at most {most} (milliseconds: this server's background \
                     timeout, which no run outlives)"
                )));
            }
            Some(ms) => ms,
            None => most,
        };
        Ok(Asked {
            run,
            matcher,
            timeout: Duration::from_millis(timeout),
            offset: count(arguments, "offset")?,
        })
    }
}
