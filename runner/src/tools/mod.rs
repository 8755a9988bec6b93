//! The tools this server offers: which there are ([`Tool`]), how `tools/list` shows them, how
//! a call's arguments are read, and the `command` tool itself. The background tools are in
//! [`crate::background`]. Beside them, what every tool shares: what a call may use of the
//! server ([`context`]) and the one type every tool answers with ([`answer`]).

pub mod answer;
mod args;
mod command;
pub mod context;
mod definitions;
mod tool;

pub use args::{command_args, take_input};
pub use definitions::definitions;
pub use tool::Tool;
