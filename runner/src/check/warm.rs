//! serve's side of running the probe through a warm sandbox, exactly as a warm call runs: a
//! spare reaper with the call's sandbox started ahead ([`crate::spares::Spare`]), handed the
//! probe as a call, whose stub `exec`s the probe in the files folder.
//!
//! Inside, the stub is this very executable (the reaper hands it over as it hands the probe
//! over on a cold start), so the probe is `/proc/self/exe sandbox-probe`: the stub's own
//! executable, which the `exec` then replaces. Without `--var`s: `/usr/bin/env` in front would
//! make `/proc/self/exe` its own. The spare is asked for its warm sandbox alone
//! ([`lnk_proc::reaper::Options::warm_only`]): a stub that cannot run the probe is a failure
//! here, not a cold start.

use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use lnk_proc::reaper::warm::Place;
use lnk_proc::reaper::{LEFTOVER_GRACE, Options, spare};

use super::launch::{PROBE_DEADLINE, Ran};
use super::wire::{ANSWER_PREFIX, Request, SUBCOMMAND};
use crate::config::Config;
use crate::spares::{Settings, Spare, folder_id};

/// The most of the probe's stdout and stderr kept.
const MAX_OUTPUT: u64 = 1 << 20;

/// Runs the probe with `request` through a warm sandbox of `config`'s.
pub fn run(config: &Config, request: &Request) -> std::io::Result<Ran> {
    let settings = Settings {
        files: config.files.clone(),
        warm: Some(config.sandbox.clone()),
    };
    let id = folder_id(&config.files)
        .ok_or_else(|| std::io::Error::other("the files folder cannot be looked at"))?;
    let workdir = crate::workdir::open(&config.files, ".")
        .map_err(|err| std::io::Error::other(err.to_string()))?;
    let no_vars: [(&str, &str); 0] = [];
    let argv = lnk_common::command_line::sandboxed(
        &config.sandbox,
        no_vars,
        "/proc/self/exe".as_ref(),
        &[SUBCOMMAND],
    );
    let mut options = Options::new(argv, Duration::ZERO, LEFTOVER_GRACE);
    options.warm = Some(Place {
        files: config.files.clone(),
        dir: "".into(),
        id,
    });
    options.warm_only = true;
    let spec = spare::encode(&options)
        .ok_or_else(|| std::io::Error::other("the probe's spec is too large"))?;
    let started = Instant::now();
    let spare = Spare::start(&settings)?;
    let mut reaper = spare.hand(&spec, workdir.handle.as_fd(), true)?;
    let request = serde_json::to_vec(request).map_err(std::io::Error::other)?;
    let stdin = reaper.child.stdin.take();
    let stdout = reaper.child.stdout.take();
    let stderr = reaper.child.stderr.take();
    let (done_tx, done_rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("warm probe".into())
        .spawn(move || {
            if let Some(mut stdin) = stdin {
                let _ = stdin.write_all(&request);
            }
            let err_reader = stderr.map(|pipe| std::thread::spawn(move || read_all(pipe)));
            let out = stdout.map(read_all).unwrap_or_default();
            let err = err_reader
                .and_then(|reader| reader.join().ok())
                .unwrap_or_default();
            let _ = done_tx.send((out, err));
        })?;
    let outputs = done_rx.recv_timeout(PROBE_DEADLINE).ok();
    // The probe leaves nothing running; the reaper kills what its sandbox may have left.
    reaper.stop();
    reaper.finish()?;
    let elapsed = started.elapsed();
    let (out, err) = outputs.unwrap_or_default();
    let answer = String::from_utf8_lossy(&out)
        .lines()
        .find_map(|line| line.strip_prefix(ANSWER_PREFIX).map(str::to_owned))
        .and_then(|json| serde_json::from_str(&json).ok());
    let stderr = String::from_utf8_lossy(&err)
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .unwrap_or_default()
        .trim()
        .to_owned();
    Ok(Ran {
        answer,
        status: None,
        stderr,
        elapsed,
    })
}

fn read_all(pipe: impl Read) -> Vec<u8> {
    let mut bytes = Vec::new();
    let mut pipe = pipe.take(MAX_OUTPUT);
    let _ = pipe.read_to_end(&mut bytes);
    bytes
}
