//! Link Run's runner, `lnk-link-run`: an MCP server over stdio that runs an agent's programs,
//! each call in a sandbox of its own, under a time limit and with bounded output.
//!
//! Its rooms, each depending only on those after it: `cli` checks the flags into a
//! `config::Config`; `serve` is the session (it reads requests, answers the protocol's own
//! methods and runs each tool call on a thread of its own, registered in flight); `mcp` is the
//! wire (the protocol's messages, the lines read, the one stdout writer, progress); `tools`
//! names the tools and runs them, each with what `tool_call` gives every call (a narrow
//! context, its arguments read, one answer type); `call` is one foreground call (its
//! reaper, its spares, its pipes, its answer), which the `command` tool checks with `program`
//! and starts; `background` holds the tools of background runs; `text` makes what is shown
//! harmless; `sandbox_line` is the line a sandbox runs (and `caches`, `net`, the layers and
//! proxy it names); `project` is the project calls run in (the
//! `--files` folder, or with `--files-from roots` the client's first root, checked, its state
//! folder made, its sandbox checked and its spares started before any call runs there). Beside serve, `check` is the sandbox check
//! and `host_config` is `lnk-link-run config <host>`, a host's entry for serve written for a
//! person. `ARCHITECTURE.md` maps the processes.

mod background;
mod caches;
mod call;
mod check;
mod cli;
mod config;
mod exit_code;
mod host_config;
mod mcp;
mod net;
mod program;
mod project;
mod sandbox_line;
mod serve;
mod sync;
#[cfg(test)]
mod testing;
mod text;
mod tool_call;
mod tools;

pub use serve::in_flight::MAX_CALLS;

use std::process::ExitCode;

/// Runs `lnk-link-run` with the process's arguments.
pub fn main() -> ExitCode {
    // A call's reaper, started by `serve` once per call: before clap and logging, whose set-up
    // would be every call's cost.
    let mut args = std::env::args_os();
    match args.nth(1) {
        Some(sub) if sub == call::reaper_launch::REAP => return lnk_proc::reaper::main(args),
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
            call::sandboxes_done();
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
            call::sandboxes_done();
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
    let served = serve::serve(config, sandbox_check);
    call::sandboxes_done();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        // Only the setup before serving fails this way: a refusal to start like the others.
        Err(err) => refuse_to_start(&format!("{err:#}")),
    }
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
