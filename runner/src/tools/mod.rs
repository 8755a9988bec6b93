//! The tools this server offers: which there are ([`Tool`]), how `tools/list` shows them, and
//! the `command` tool itself. The background tools are in [`crate::background`]; what every
//! tool shares (its context, its arguments, its answer) in [`crate::tool_call`].

mod command;
mod definitions;
mod kinds;

pub use definitions::definitions;
pub use kinds::Tool;
