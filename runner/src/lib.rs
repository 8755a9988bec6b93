//! Link Run's runner, `lnk-link-run`: an MCP server over stdio that runs an agent's programs,
//! each call in a sandbox of its own, under a time limit and with bounded output.
//!
//! Its parts: [`cli`] checks the flags into a [`config::Config`]; [`server`] reads requests
//! and owns the calls in flight, answering through the one stdout [`writer`]; a `command`
//! call is checked by [`tools`], [`program`] and [`workdir`], started by [`spawn`] and run
//! to its end by [`call`], and its answer made by [`render`].

pub mod background;
pub mod call;
pub mod capture;
pub mod cli;
pub mod config;
mod foreground;
pub mod group;
pub mod lines;
pub mod program;
pub mod protocol;
pub mod render;
pub mod server;
pub mod spawn;
pub mod tools;
pub mod watchdog;
pub mod workdir;
pub mod writer;

use std::process::ExitCode;
use std::sync::Arc;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Runs `lnk-link-run` with the process's arguments.
pub fn main() -> ExitCode {
    let config = match cli::Cli::parse_args() {
        Ok(cli::Invocation::Serve(config)) => *config,
        Ok(cli::Invocation::Watchdog) => return watchdog::run(),
        Err(refusal) => return refuse_to_start(&refusal.to_string()),
    };
    init_logging();
    match serve(config) {
        Ok(()) => ExitCode::SUCCESS,
        // Only the setup before serving fails this way: a refusal to start like the others.
        Err(err) => refuse_to_start(&format!("{err:#}")),
    }
}

/// A refusal to start: exactly one line on stderr (control characters in what the user gave
/// are escaped, so a newline in a path cannot make two), and exit code 2.
fn refuse_to_start(message: &str) -> ExitCode {
    let mut line = String::with_capacity(message.len());
    for c in message.chars() {
        if c.is_control() {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("lnk-link-run: {line}");
    }
    ExitCode::from(2)
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

/// Serves until stdin ends or SIGTERM/SIGINT arrives, then kills the calls in flight.
fn serve(config: config::Config) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut signals =
        Signals::new([SIGTERM, SIGINT]).context("setting up SIGTERM and SIGINT handling")?;
    let (writer, _writer_thread) = writer::Writer::start().context("starting the stdout writer")?;
    if let Some(background) = &config.background {
        lnk_common::layout::StateDir::new(&background.state)
            .create()
            .context("creating the state folder")?;
    }
    if let Some(background) = &config.background {
        background::start_sweeps(background);
    }
    let watchdog = watchdog::Watchdog::start().context("starting the watchdog")?;
    let server = server::Server::new(config, writer, watchdog);
    let on_signal = Arc::clone(&server);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                tracing::info!(signal, "shutting down on a signal");
                on_signal.shutdown();
                std::process::exit(0);
            }
        })
        .context("starting the signal thread")?;
    server.serve_stdin();
    Ok(())
}
