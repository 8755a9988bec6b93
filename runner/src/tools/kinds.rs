//! The tools by name, parsed once per call, and what each runs.

use serde_json::{Map, Value};

use crate::background;
use crate::call::spares::RefillHold;
use crate::call::unreaped;
use crate::config::Config;
use crate::tool_call::answer::{Reply, ToolAnswer};
use crate::tool_call::context::ToolContext;

/// A tool of this server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// `command`: run a program in the foreground.
    Command,
    /// `start`: start a background run.
    Start,
    /// `list`: list the background runs.
    List,
    /// `read`: read a background run's output.
    Read,
    /// `stop`: stop a background run.
    Stop,
    /// `write`: type into an interactive run's stdin.
    Write,
    /// `watch`: wait, in the background, for a line in a run's output or its end.
    Watch,
}

/// What a call of a tool holds from its start until its answer is out ([`Tool::begin`]).
#[must_use = "the hold ends when this is dropped; give it back with `answered`"]
pub struct Holding {
    refill_hold: Option<RefillHold>,
}

impl Holding {
    /// Once the call's answer is out: a `command` call's reaper that said `done` before the
    /// answer is reaped now, off the answer's path ([`unreaped`]), then the spares' refill may
    /// go on.
    pub fn answered(self) {
        if self.refill_hold.is_some() {
            unreaped::reap_answered();
        }
    }
}

impl Tool {
    /// What a call of this tool holds while it runs: a `command` call holds back the start of
    /// the next spares until its answer is out, since a spare's start (a fork of serve, an
    /// exec, a sandbox's start) would otherwise compete for a CPU with the call itself
    /// ([`RefillHold`]).
    pub fn begin(self) -> Holding {
        Holding {
            refill_hold: matches!(self, Tool::Command).then(RefillHold::begin),
        }
    }

    /// The tools that need background runs (`--state`).
    pub const BACKGROUND: [Tool; 6] = [
        Tool::Start,
        Tool::List,
        Tool::Read,
        Tool::Write,
        Tool::Stop,
        Tool::Watch,
    ];

    /// Its name in `tools/list` and `tools/call`.
    pub fn name(self) -> &'static str {
        match self {
            Tool::Command => "command",
            Tool::Start => "start",
            Tool::List => "list",
            Tool::Read => "read",
            Tool::Stop => "stop",
            Tool::Write => "write",
            Tool::Watch => "watch",
        }
    }

    /// The tools a server started with `config` offers.
    pub fn offered(config: &Config) -> Vec<Tool> {
        let mut tools = vec![Tool::Command];
        if config.background.is_some() {
            tools.extend(Tool::BACKGROUND);
        }
        tools
    }

    /// The tool called `name`, if this server offers it; else a message that names the
    /// tools it has.
    pub fn parse(name: &str, config: &Config) -> Result<Tool, String> {
        let offered = Tool::offered(config);
        offered
            .iter()
            .copied()
            .find(|tool| tool.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = offered.iter().map(|tool| tool.name()).collect();
                format!(
                    "unknown tool `{}`; this server's tools: {}",
                    crate::mcp::protocol::cut_short(name),
                    names.join(", ")
                )
            })
    }

    /// Runs the tool on the calling thread. `None` when the call was cancelled: nothing is
    /// answered then.
    pub fn run(
        self,
        ctx: &mut ToolContext<'_>,
        arguments: &mut Map<String, Value>,
        meta: Option<&Map<String, Value>>,
    ) -> Option<Reply> {
        let config = ctx.config;
        let answer = match (self, config.background.as_ref()) {
            (Tool::Command, _) => super::command::run(ctx, arguments)?,
            (_, None) => ToolAnswer::refusal(format!(
                "`{}` needs background runs, which this server was started without (--state)",
                self.name()
            )),
            (Tool::Start, Some(settings)) => {
                return Some(background::start(ctx, settings, arguments, meta));
            }
            (Tool::List, Some(settings)) => background::list(settings, arguments),
            (Tool::Read, Some(settings)) => {
                background::read(config, settings, arguments, ctx.era, ctx.control)?
            }
            (Tool::Stop, Some(settings)) => background::stop(settings, arguments),
            (Tool::Write, Some(settings)) => background::write(settings, arguments),
            (Tool::Watch, Some(settings)) => return background::watch(ctx, settings, arguments),
        };
        Some(answer.into())
    }
}
