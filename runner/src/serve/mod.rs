//! The session: `serve` reads requests from stdin and answers the protocol's own methods
//! ([`session`]), runs each tool call on a thread of its own ([`dispatch`], on one of
//! [`threads`]), registered in flight ([`in_flight`]: ids, cancellation, the limit), and shuts
//! down in order on stdin's end or a signal.

pub mod dispatch;
pub mod in_flight;
mod session;
mod threads;

use std::sync::Arc;

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Serves until stdin ends or SIGTERM/SIGINT arrives, then kills the calls in flight.
pub fn serve(config: crate::config::Config, sandbox_check: bool) -> anyhow::Result<()> {
    use anyhow::Context;
    let making = crate::project::Making {
        sandbox_check,
        warm_asked: !crate::call::warmth::cold_asked(),
    };
    // Before anything else starts: a sandbox that does not confine is a refusal to start.
    // With --files-from roots, each project's folder is checked once it is known.
    let fixed = config.files_from == crate::config::FilesFrom::Flag;
    let (sandbox_warnings, warmth) = if fixed {
        crate::project::sandbox_checked(&config, making).map_err(anyhow::Error::msg)?
    } else {
        (Vec::new(), Ok(()))
    };
    let mut signals =
        Signals::new([SIGTERM, SIGINT]).context("setting up SIGTERM and SIGINT handling")?;
    let (writer, _writer_thread) =
        crate::mcp::stdout::Writer::start().context("starting the stdout writer")?;
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
        crate::background::start_sweeps(background);
    }
    let projects = if fixed {
        // A call's reaper started ahead of it (with its sandbox, when calls start warm), once
        // the sandbox is checked.
        crate::call::spares::start(crate::call::warmth::settings(
            &config,
            warmth,
            sandbox_check,
        ));
        crate::project::Projects::fixed(config)
    } else {
        crate::project::Projects::from_roots(config, making)
    }
    .context("setting up the project")?;
    let server = session::Server::new(crate::tool_call::context::Toolbox::new(projects), writer);
    let on_signal = Arc::clone(&server);
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                tracing::info!(signal, "shutting down on a signal");
                on_signal.shutdown();
                crate::call::sandboxes_done();
                std::process::exit(0);
            }
        })
        .context("starting the signal thread")?;
    server.serve_stdin();
    Ok(())
}
