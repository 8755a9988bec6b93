//! What every tool call shares, whichever tool it calls: what it may use of the server
//! ([`context`]), how its arguments are read ([`args`]), and the one type every tool answers
//! with, made an MCP result in one place ([`answer`]).

pub mod answer;
pub mod args;
pub mod context;
