//! Link Run's runner, `lnk-link-run`: an MCP server over stdio that runs an agent's programs,
//! each call in a sandbox of its own, under a time limit and with bounded output.
//!
//! Its parts, each depending only on those after it: `cli` checks the flags into a
//! `config::Config`; `server` reads requests and answers the protocol's own methods through
//! the one stdout `writer`; `dispatch` runs each tool call on a thread of its own (one of
//! `call_threads`, which wait for the next call once theirs is answered), registered in
//! `calls` (ids in flight, cancellation, the limit); `tools` names the tools and runs
//! them with a narrow `context`; `command` (in `tools`) checks a call with `program` and
//! `workdir`, starts it with `spawn` and runs it with `call`, whose answer `render` makes;
//! `background` holds the tools of background runs; `project` is the project calls run in (the
//! `--files` folder, or with `--files-from roots` the client's first root, checked, its state
//! folder made, its sandbox checked and its spares started before any call runs there). Beside serve, `check` is the sandbox check
//! and `host_config` is `lnk-link-run config <host>`, a host's entry for serve written for a
//! person. `ARCHITECTURE.md` maps the processes.

mod answer;
mod answered;
mod background;
mod caches;
mod call;
mod call_pipes;
mod call_threads;
mod calls;
mod capture;
mod check;
mod cli;
mod config;
mod context;
mod dispatch;
mod escaping;
mod exit_code;
mod host_config;
mod input;
mod lines;
mod net;
mod never_list;
mod program;
mod progress;
mod project;
mod protocol;
mod reaper;
mod render;
mod sandbox_line;
mod server;
mod spares;
mod spawn;
mod sync;
mod tools;
mod utf8;
mod warm;
mod workdir;
mod writer;

pub use calls::MAX_CALLS;

use std::process::ExitCode;
use std::sync::Arc;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Runs `lnk-link-run` with the process's arguments.
pub fn main() -> ExitCode {
    // A call's reaper, started by `serve` once per call: before clap and logging, whose set-up
    // would be every call's cost.
    let mut args = std::env::args_os();
    match args.nth(1) {
        Some(sub) if sub == reaper::REAP => return lnk_proc::reaper::main(args),
        // A warm sandbox's stub: before anything else too, and with nothing open but what the
        // reaper handed it.
        Some(sub) if sub == lnk_proc::stub::STUB => return lnk_proc::stub::main(),
        _ => {}
    }
    let (config, sandbox_check) = match cli::Cli::parse_args() {
        Ok(cli::Invocation::Serve {
            config,
            sandbox_check,
        }) => (*config, sandbox_check),
        Ok(cli::Invocation::Check { config, skipped }) => {
            check::hold_marker();
            init_logging();
            // With --files-from roots, a folder stands for the projects.
            let stand_in = match project::stand_in(&config) {
                Ok(stand_in) => stand_in,
                Err(refusal) => return refuse_to_start(&refusal),
            };
            if let Some(note) = &stand_in.note {
                use std::io::Write;
                let _ = writeln!(std::io::stdout().lock(), "note: {note}");
            }
            let code = check::report(&stand_in.config, skipped);
            sandboxes_done();
            return code;
        }
        Ok(cli::Invocation::CheckRecommended(serve_args)) => {
            check::hold_marker();
            init_logging();
            return match host_config::check_recommended(&serve_args) {
                Ok(code) => code,
                Err(refusal) => refuse_to_start(&refusal),
            };
        }
        Ok(cli::Invocation::Config(request)) => {
            check::hold_marker();
            init_logging();
            let done = host_config::run(&request);
            sandboxes_done();
            return match done {
                Ok(code) => code,
                Err(refusal) => refuse_to_start(&refusal),
            };
        }
        Ok(cli::Invocation::SandboxProbe) => return check::probe::run(),
        Err(refusal) => return refuse_to_start(&refusal.to_string()),
    };
    check::hold_marker();
    init_logging();
    let served = serve(config, sandbox_check);
    sandboxes_done();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        // Only the setup before serving fails this way: a refusal to start like the others.
        Err(err) => refuse_to_start(&format!("{err:#}")),
    }
}

/// At the end, once no call runs: the spares' sandboxes stopped, and the protected paths'
/// placeholders removed when no other process still needs them
/// ([`sandbox_line::protected::leave`]).
fn sandboxes_done() {
    spares::stop_all();
    sandbox_line::protected::leave();
}

/// A refusal to start: exactly one line on stderr (control characters in what the user gave
/// are escaped, so a newline in a path cannot make two), and [`exit_code::REFUSED`].
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
    ExitCode::from(exit_code::REFUSED)
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
fn serve(config: config::Config, sandbox_check: bool) -> anyhow::Result<()> {
    use anyhow::Context;
    let making = project::Making {
        sandbox_check,
        warm_asked: !warm::cold_asked(),
    };
    // Before anything else starts: a sandbox that does not confine is a refusal to start.
    // With --files-from roots, each project's folder is checked once it is known.
    let fixed = config.files_from == config::FilesFrom::Flag;
    let (sandbox_warnings, warmth) = if fixed {
        project::sandbox_checked(&config, making).map_err(anyhow::Error::msg)?
    } else {
        (Vec::new(), Ok(()))
    };
    let mut signals =
        Signals::new([SIGTERM, SIGINT]).context("setting up SIGTERM and SIGINT handling")?;
    let (writer, _writer_thread) = writer::Writer::start().context("starting the stdout writer")?;
    if let Some(background) = &config.background {
        let state = lnk_common::layout::StateDir::new(&background.given_state);
        let empty = state.create().context("creating the state folder")?;
        // A new (empty) folder is indexed from the start; an older one by the next sweep.
        if empty {
            lnk_common::index::init(&state).context("indexing the new state folder")?;
        }
    }
    for warning in sandbox_warnings {
        tracing::warn!("{warning}");
    }
    if let Some(background) = &config.background {
        background::start_sweeps(background);
    }
    let projects = if fixed {
        // A call's reaper started ahead of it (with its sandbox, when calls start warm), once
        // the sandbox is checked.
        spares::start(warm::settings(&config, warmth, sandbox_check));
        project::Projects::fixed(config)
    } else {
        project::Projects::from_roots(config, making)
    }
    .context("setting up the project")?;
    let server = server::Server::new(context::Toolbox::new(projects), writer);
    let on_signal = Arc::clone(&server);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                tracing::info!(signal, "shutting down on a signal");
                on_signal.shutdown();
                sandboxes_done();
                std::process::exit(0);
            }
        })
        .context("starting the signal thread")?;
    server.serve_stdin();
    Ok(())
}
