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

use std::time::Instant;

use lnk_common::layout::StateDir;
use serde_json::{Map, Value, json};

use super::output::read_bytes;
use super::watch_asked::Asked;
use super::watch_result::{Watched, answer};
use super::watch_search::{Ending, Target, search};
use crate::config::Background;
use crate::tool_call::answer::Reply;
use crate::tool_call::context::ToolContext;

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
