//! The tools this server offers: which there are ([`Tool`]), how `tools/list` shows them, how
//! a call's arguments are read, and the `command` tool itself. The background tools are in
//! [`crate::background`].

mod args;
mod command;
mod definitions;
mod tool;

pub use args::{command_args, take_input};
pub use definitions::definitions;
pub use tool::Tool;
