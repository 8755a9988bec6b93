//! What a tool call may use: the server's settings, its background state, the call's own
//! cancellation and progress — and nothing of the server that reads and answers
//! requests, so that a tool can be run (and tested) without one.

use std::sync::Arc;
use std::time::Duration;

use crate::call::CallControl;
use crate::call::input::{self, InputBudget};
use crate::config::Config;
use crate::mcp::protocol::Era;
use crate::project::Projects;

/// What every call of one `serve` shares.
pub struct Toolbox {
    /// The project calls run in, and serve's checked flags.
    pub projects: Arc<Projects>,
    /// The input the calls in flight hold.
    pub input: Arc<InputBudget>,
}

impl Toolbox {
    /// The toolbox of a server whose calls run in `projects`' project.
    pub fn new(projects: Arc<Projects>) -> Self {
        Self {
            projects,
            input: InputBudget::new(input::HELD_AT_ONCE),
        }
    }

    /// serve's checked flags, the same for every project but for its folders (what the tool
    /// list and the discovery result say).
    pub fn config(&self) -> &Config {
        self.projects.template()
    }
}

/// One call's view of the server.
pub struct ToolContext<'a> {
    /// The checked flags, for the call's project (its files folder and state folder).
    pub config: &'a Config,
    /// The input the calls in flight hold.
    pub input: &'a Arc<InputBudget>,
    /// The revision the call is served at.
    pub era: &'a Era,
    /// The call's cancellation.
    pub control: &'a CallControl,
    /// Whether the request declared the Tasks extension (2026-07-28 only): a `start` may then
    /// be answered with a task.
    pub tasks: bool,
    /// Hears the elapsed time and the bytes seen, about once a second, when the call asked
    /// for progress.
    pub progress: Option<&'a mut dyn FnMut(Duration, u64)>,
}

impl<'a> ToolContext<'a> {
    /// A call's context from the server's toolbox, in the project whose configuration is
    /// `config`.
    pub fn new(
        toolbox: &'a Toolbox,
        config: &'a Config,
        era: &'a Era,
        control: &'a CallControl,
        tasks: bool,
        progress: Option<&'a mut dyn FnMut(Duration, u64)>,
    ) -> Self {
        Self {
            config,
            input: &toolbox.input,
            era,
            control,
            tasks,
            progress,
        }
    }
}
