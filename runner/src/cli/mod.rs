//! The command line of `lnk-link-run`, and its checks, into a [`Config`](crate::config::Config).
//!
//! Every refusal to start is one line on stderr and a non-zero exit, and nothing is written
//! before all checks have passed.
//!
//! | module | holds |
//! |---|---|
//! | `command` | the subcommands, and what a command line asks for ([`Invocation`]) |
//! | `args` | `serve`'s flags, as clap reads them |
//! | `config` | `config`'s flags, and serve's arguments as given, for `crate::host_config` |
//! | `values` | the parsers of one flag's value: durations, sizes, `NAME=VALUE` |
//! | `serve` | the checks of the flags every call runs under |
//! | `background` | the checks of `--state` and the flags that come with it |
//! | `sandbox` | the sandbox after `--`, its program resolved once |
//! | `caches` | the cache folders (`--cache`): absolute, existing, away from what is never bound |
//! | `paths` | absolute paths, folders, the state folder that may not exist yet |
//! | `defaults` | where things are when no flag says: `lnk-link-supervise`, Link's keyring |
//! | `refusal` | a refusal to start, one line |

mod args;
mod background;
mod caches;
mod command;
mod config;
mod defaults;
mod paths;
mod refusal;
mod sandbox;
mod serve;
mod values;

pub use command::{Cli, Invocation, check_serve_line};
pub use config::{ConfigRequest, Host, Scope};
