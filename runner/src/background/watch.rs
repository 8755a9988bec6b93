//! `watch`: wait, in the background, for a line in a run's output (`until`, a plain text or with
//! `regex` a regular expression) or for the run's end (`ended`), so that an agent learns that its
//! dev server listens, or that a test failed, without polling and without a call held open.
//!
//! For a request that declares the Tasks extension, the watch is a task of its own
//! ([`super::watch_task`]): answered at once, completed when the line appears, the run ends or
//! its time (at most `--background-timeout`) is up. For any other, the call itself waits, as a
//! waiting `read` with `until` does (at most `--timeout`), and answers the same result. Either
//! way the wait is [`super::watch_search`]'s and the answer [`super::watch_result`]'s.
//!
//! Lines are looked at from where the output stood when the watch began, unless `offset` says
//! where (0: from the start, for a line that may have been written already).

use std::time::{Duration, Instant};

use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use serde_json::{Map, Value, json};

use super::args::{count, flag, only, run_id};
use super::lines::Matcher;
use super::output::read_bytes;
use super::watch_result::{Watched, answer};
use super::watch_search::{Ending, Target, search};
use crate::config::Background;
use crate::tools::answer::{Reply, ToolAnswer as Answer};
use crate::tools::context::ToolContext;

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
    fn parse(arguments: &Map<String, Value>, background: &Background) -> Result<Asked, Answer> {
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

/// The `watch` tool. `None` when the call was cancelled while it waited: nothing is answered.
pub fn watch(
    ctx: &ToolContext<'_>,
    background: &Background,
    arguments: &Map<String, Value>,
) -> Option<Reply> {
    let asked = match Asked::parse(arguments, background) {
        Ok(asked) => asked,
        Err(refusal) => return Some(refusal.into()),
    };
    let state = StateDir::new(&background.state);
    let from = match asked.offset {
        Some(offset) => offset,
        // Where the output stands now: lines written from here on.
        None => match read_bytes(&state, &asked.run, None, 0) {
            Ok(now) => now.file_end,
            Err(refusal) => return Some(refusal.into()),
        },
    };
    if ctx.tasks {
        return Some(match super::watch_task::create(&state, &asked, from) {
            Ok(task) => Reply::Task(task),
            Err(refusal) => refusal.into(),
        });
    }
    // No task: the call waits, at most as long as a call may.
    let limit = asked.timeout.min(ctx.config.timeout);
    let target = Target {
        run: &asked.run,
        matcher: asked.matcher.as_ref(),
        from,
        deadline: Instant::now() + limit,
        watch: None,
    };
    let outcome = match search(&state, &target, ctx.control) {
        Ok(Some(outcome)) => outcome,
        Ok(None) => return None,
        Err(refusal) => return Some(refusal.into()),
    };
    let watched = Watched {
        run: &asked.run,
        watch: None,
        matcher: asked.matcher.as_ref(),
        from,
    };
    let mut answer = answer(&state, &watched, &outcome);
    if outcome.ending == Ending::TimedOut && limit < asked.timeout {
        let more = format!(
            "; a call waits at most {} (this server's call timeout): call `watch` again with \
             `offset` {} to go on",
            humantime::format_duration(limit),
            outcome.next
        );
        if let Some(first) = answer.text.find('\n') {
            answer.text.insert_str(first, &more);
        }
        if let Some(summary) = answer
            .structured
            .as_mut()
            .and_then(|s| s.get_mut("summary"))
        {
            *summary = json!(format!("{}{more}", summary.as_str().unwrap_or_default()));
        }
    }
    Some(answer.into())
}
