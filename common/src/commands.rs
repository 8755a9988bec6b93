//! How `lnk-link-run` starts `lnk-link-supervise`: the binary's name and the subcommands
//! `serve` calls. They are part of the contract between the two binaries, which never link
//! each other's code, so both take them from here.
//!
//! | command line | started by |
//! |---|---|
//! | `lnk-link-supervise supervise <id> --state <state> [--input]` | `start`, once per run, with the run's locked lock file as stdin, its slot as stdout, and with `--input` the run's input on fd 3 |
//! | `lnk-link-supervise sweep <state> --routine` | `serve`, at its start and then every minute |

/// The supervisor's executable name; `serve` looks for it beside its own executable.
pub const SUPERVISOR: &str = "lnk-link-supervise";
/// The subcommand that supervises one run.
pub const SUPERVISE: &str = "supervise";
/// The subcommand that sweeps a state folder.
pub const SWEEP: &str = "sweep";
/// The long flag (without its dashes) of the sweeps `serve` starts: a routine sweep, which
/// looks for records no index names only when the folder changed and the last such look is ten
/// minutes old. A sweep without it (a person's, a bridge's) looks every time.
pub const ROUTINE: &str = "routine";
/// The flag `lnk-link-run` adds to a `supervise` or `sweep` it starts for itself: fork away
/// first, so that the process that goes on is not its child.
pub const DETACHED: &str = "detached";
/// The long flag (without its dashes) that says a run's `input` waits on the supervisor's fd 3,
/// a pipe that `start` filled and closed ([`crate::stdin`]).
pub const INPUT: &str = "input";
/// The long flag (without its dashes) that names the state folder of a run to supervise.
pub const STATE: &str = "state";
