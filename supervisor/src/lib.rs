//! Link Run's supervisor, `lnk-link-supervise`: it runs background runs to their end
//! (`supervise`, through `gate`), keeps their output under its cap (`output`), tells
//! the agent's conversation when they end (`tell`, signed with `keyring`), and cleans up
//! after crashes.

mod gate;
mod keyring;
mod output;
mod reclaim;
mod stop_all;
mod supervise;
mod sweep;
mod tell;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use lnk_common::commands;

/// `lnk-link-supervise`: supervises Link Run's background runs.
#[derive(Debug, Parser)]
#[command(name = commands::SUPERVISOR, version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Supervise the run whose id is given (started by `lnk-link-run`, with the run's locked lock file as stdin).
    #[command(name = commands::SUPERVISE)]
    Supervise {
        /// The run's id.
        id: String,
        /// The state folder.
        #[arg(long = commands::STATE, value_name = "DIR")]
        state: PathBuf,
        /// Fork away first (`lnk-link-run` starts it so).
        #[arg(long = commands::DETACHED, hide = true)]
        detached: bool,
        /// The run's input waits on fd 3, a pipe (`lnk-link-run` hands it over so).
        #[arg(long = commands::INPUT, hide = true)]
        input: bool,
    },
    /// Clean up a state folder, and each of its projects' (`projects/`), after crashes: lost
    /// runs, untold ends, old runs, temporaries, and records no index names (damaged ones moved
    /// aside).
    #[command(name = commands::SWEEP)]
    Sweep {
        /// The state folder.
        state: PathBuf,
        /// A routine sweep (`lnk-link-run serve` starts them so): look for records no index
        /// names only when the folder changed and the last look is ten minutes old. Without
        /// it, the whole folder is looked at.
        #[arg(long = commands::ROUTINE)]
        routine: bool,
        /// Fork away first (`lnk-link-run` starts it so).
        #[arg(long = commands::DETACHED, hide = true)]
        detached: bool,
    },
    /// Stop every run of a state folder, its projects' runs included, and wait until each has
    /// ended.
    Stop {
        /// The state folder.
        #[arg(long, value_name = "DIR")]
        state: PathBuf,
    },
    /// Stop every run of a state folder, its projects' runs included, then remove all its
    /// files and the folder.
    Remove {
        /// The state folder.
        #[arg(long, value_name = "DIR")]
        state: PathBuf,
    },
    /// Write a new key pair `<agent>.key` (0600) and `<agent>.pub` into a keyring.
    Keygen {
        /// The keyring folder.
        #[arg(long, value_name = "DIR")]
        keyring: PathBuf,
        /// The agent id.
        #[arg(long = "as", value_name = "AGENT")]
        agent: String,
    },
}

/// Runs `lnk-link-supervise` with the process's arguments.
pub fn main() -> ExitCode {
    // A run's gate, started by its supervisor: before clap and logging (a gate's own log line
    // would land in the run's output; it reports to its supervisor instead).
    let mut args = std::env::args_os();
    match args.nth(1) {
        Some(sub) if sub == gate::GATE => return gate::run(args),
        // A run's sandbox's stub, when the run has a proxy (the gate starts the sandbox with
        // it): before anything else too, and with nothing open but what the gate handed it.
        Some(sub) if sub == lnk_proc::stub::STUB => return lnk_proc::stub::main(),
        _ => {}
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => err.exit(),
    };
    init_logging();
    if let Command::Supervise { detached: true, .. } | Command::Sweep { detached: true, .. } =
        cli.command
    {
        lnk_proc::spawn::detached::fork_away();
    }
    let result = match cli.command {
        Command::Supervise {
            id, state, input, ..
        } => supervise::run(&id, state, input),
        Command::Sweep { state, routine, .. } => {
            let asked = if routine {
                sweep::Asked::Routine
            } else {
                sweep::Asked::Everything
            };
            sweep::run_every(&state, asked).map(|report| {
                tracing::info!(?report, "swept");
            })
        }
        Command::Stop { state } => stop_all::stop(&state).map(|n| {
            tracing::info!(runs = n, "every run has ended");
        }),
        Command::Remove { state } => stop_all::remove(&state),
        Command::Keygen { keyring, agent } => keygen(&keyring, &agent),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // Once, through the log (stderr): a supervisor's stderr is its `<id>.log`, and a
            // person running `stop --state` reads the same line.
            tracing::error!("{}", lnk_common::Causes(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}

fn keygen(keyring: &std::path::Path, agent: &str) -> anyhow::Result<()> {
    let agent = lnk_common::id::AgentId::parse(agent)?;
    let (key, public) = keyring::generate(keyring, agent.as_str())?;
    tracing::info!(key = %key.display(), public = %public.display(), "key pair written");
    Ok(())
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
}
