//! The wire: JSON-RPC as MCP sends it over stdio ([`protocol`]), read a line at a time within a
//! bound ([`lines`]), written whole by stdout's one owner ([`stdout`]), and the progress
//! notifications a call asked for ([`progress`]). Nothing here knows a tool.

pub mod lines;
pub mod progress;
pub mod protocol;
pub mod stdout;
