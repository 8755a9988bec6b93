//! serve's side of running the probe through a warm sandbox, exactly as a warm call runs: a
//! spare reaper with the call's sandbox started ahead ([`crate::call::spares::Spare`]), handed the
//! probe as a call, whose stub `exec`s the probe in the files folder.
//!
//! Inside, the stub is this very executable (the reaper hands it over as it hands the probe
//! over on a cold start), so the probe is `/proc/self/exe sandbox-probe`: the stub's own
//! executable, which the `exec` then replaces. Without `--var`s: `/usr/bin/env` in front would
//! make `/proc/self/exe` its own. The spare is asked for its warm sandbox alone
//! ([`lnk_proc::reaper::Options::warm_only`]): a stub that cannot run the probe is a failure
//! here, not a cold start.

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lnk_proc::net::{AllowList, Proxy};
use lnk_proc::reaper::{LEFTOVER_GRACE, Options, Place, spare};

use super::launch::{PROBE_DEADLINE, Ran, through_reaper};
use super::wire::{Request, SUBCOMMAND};
use crate::call::spares::{Settings, Spare, folder_id};
use crate::config::Config;

/// Runs the probe with `request` through a warm sandbox of `config`'s (with a proxy for `net`,
/// as a call with one: its channel handed to the stub with the call).
pub fn run(
    config: &Config,
    request: &Request,
    net: Option<&Arc<AllowList>>,
) -> std::io::Result<Ran> {
    let settings = Settings {
        files: config.files.clone(),
        warm: Some(config.sandbox.clone()),
        cold: None,
        caches: config.caches.clone(),
    };
    let id = folder_id(&config.files)
        .ok_or_else(|| std::io::Error::other("the files folder cannot be looked at"))?;
    let workdir = crate::call::workdir::open(&config.files, ".")
        .map_err(|err| std::io::Error::other(err.to_string()))?;
    let started = Instant::now();
    let spare = Spare::start(&settings)?;
    // The spare's own prefix, as expanded for its sandbox: a call that names another is run
    // cold, and this one must run warm.
    let no_vars: [(&str, &str); 0] = [];
    let line_words = spare.prefix().len();
    let argv = lnk_common::command_line::sandboxed(
        spare.prefix(),
        no_vars,
        "/proc/self/exe".as_ref(),
        &[SUBCOMMAND],
    );
    let mut options = Options::new(argv, Duration::ZERO, LEFTOVER_GRACE);
    let proxy = match net {
        Some(allow) => {
            options.net = true;
            options.stub = Some(line_words);
            Some(Proxy::start(Arc::clone(allow), PROBE_DEADLINE)?)
        }
        None => None,
    };
    let (proxy, sandbox_end) = match proxy {
        Some((proxy, end)) => (Some(proxy), Some(end)),
        None => (None, None),
    };
    options.warm = Some(Place {
        files: config.files.clone(),
        dir: "".into(),
        id,
    });
    options.warm_only = true;
    options.caches = config.layers();
    let spec = spare::encode(&options)
        .ok_or_else(|| std::io::Error::other("the probe's spec is too large"))?;
    let net_end = sandbox_end.as_ref().map(AsFd::as_fd);
    let reaper = spare.hand(&spec, workdir.handle.as_fd(), true, net_end)?;
    drop(sandbox_end);
    let (answer, stderr, elapsed) = through_reaper("warm probe", request, reaper, started)?;
    Ok(Ran {
        answer,
        status: None,
        stderr,
        elapsed,
        network: proxy.map(Proxy::finish),
    })
}
