//! What the patterns are measured on: Link Run's serves (warm and cold, each prefix; another
//! build's with `--baseline`), the peer, the started-ahead floor, and each prefix alone; and
//! how each answers one call and a burst of calls at once.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::File;
use std::io::Write;
use std::process::Child;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::super::{Bins, Options, Place, baselines, on_path};
use crate::report::Report;
use crate::serve::Serve;

/// How long one call (or one burst) may take.
const LIMIT: Duration = Duration::from_secs(60);

/// The rows' names, as the ratios find them.
pub const WARM_BWRAP: &str = "Link Run warm, bwrap";
pub const COLD_BWRAP: &str = "Link Run cold, bwrap";
pub const WARM_PASS: &str = "Link Run warm, pass-through";
pub const COLD_PASS: &str = "Link Run cold, pass-through";
pub const BASE_BWRAP: &str = "baseline build: warm, bwrap";
pub const BASE_PASS: &str = "baseline build: warm, pass-through";
pub const FLOOR: &str = "started ahead: sh woken, exec echo hi";
pub const PEER: &str = "peer: mcp-server-commands 0.5.0";
pub const ALONE_BWRAP: &str = "the bwrap line alone: bwrap … echo hi";
pub const ALONE_PASS: &str = "the pass-through prefix alone: … echo hi";

/// One thing measured.
pub struct Target {
    pub name: &'static str,
    how: How,
}

enum How {
    /// An MCP server, and the `tools/call` params of its `echo hi`.
    Server(Serve, Value),
    /// The least a call to a process started ahead of it can cost: `sh`, started before the
    /// timed call (and before any spacing), waiting on its stdin; the call is a line written to
    /// it, on which it `exec`s `echo hi`, output piped and waited for. No server, no sandbox.
    Floor(Vec<OsString>, Vec<Child>),
    /// A sandbox prefix alone, started for the call as a cold call's is: `<prefix> echo hi`
    /// spawned, its output read and its exit waited for. No server, no reaper, no stub: what
    /// any design that runs each call in a sandbox of its own pays for the sandbox and the
    /// program, on the call's path (started for it) or beside it (started ahead).
    Alone(Vec<OsString>),
}

impl Target {
    fn server(name: &'static str, serve: Serve, params: Value) -> Target {
        Target {
            name,
            how: How::Server(serve, params),
        }
    }

    /// Readies what the next `count` calls need before the timer starts: the floor's waiting
    /// `sh`s (a server keeps its own spares).
    pub fn ready(&mut self, count: usize) -> Result<()> {
        if let How::Floor(argv, waiting) = &mut self.how {
            while waiting.len() < count {
                waiting.push(baselines::start_waiting(argv)?);
            }
        }
        Ok(())
    }

    /// One `echo hi`, timed from writing the request (or the waking line) to the answer (or
    /// the exit).
    pub fn once(&mut self) -> Result<Duration> {
        self.burst(1)
    }

    /// `size` calls of `echo hi` sent at once: the time from the first request written to the
    /// last answer read (every answer checked).
    pub fn burst(&mut self, size: usize) -> Result<Duration> {
        let name = self.name;
        match &mut self.how {
            How::Server(serve, params) => {
                let start = Instant::now();
                let mut ids = HashSet::new();
                for _ in 0..size {
                    ids.insert(serve.send_request("tools/call", params)?);
                }
                while !ids.is_empty() {
                    let (id, result) = serve.read_result(LIMIT)?;
                    if !ids.remove(&id) {
                        bail!("{name}: an answer to no call of this burst: {id}");
                    }
                    said_hi_json(name, &result)?;
                }
                Ok(start.elapsed())
            }
            How::Floor(argv, waiting) => {
                while waiting.len() < size {
                    waiting.push(baselines::start_waiting(argv)?);
                }
                let mut woken: Vec<Child> = waiting.drain(..size).collect();
                let start = Instant::now();
                for child in &mut woken {
                    let mut stdin = child.stdin.take().context("the waiting sh's stdin")?;
                    stdin
                        .write_all(b"go\n")
                        .with_context(|| format!("{name}: waking it"))?;
                }
                said_hi_all(name, woken)?;
                Ok(start.elapsed())
            }
            How::Alone(argv) => {
                let start = Instant::now();
                let mut started = Vec::with_capacity(size);
                for _ in 0..size {
                    started.push(spawn_echo(argv).with_context(|| format!("{name}: starting"))?);
                }
                said_hi_all(name, started)?;
                Ok(start.elapsed())
            }
        }
    }

    /// Shuts a server down (the floor's waiting `sh`s are killed).
    pub fn shutdown(self) -> Result<()> {
        match self.how {
            How::Server(serve, _) => serve.shutdown(),
            How::Alone(_) => Ok(()),
            How::Floor(_, waiting) => {
                for mut child in waiting {
                    let _ = child.kill();
                    let _ = child.wait();
                }
                Ok(())
            }
        }
    }
}

/// Whether a `tools/call` result says `hi` and is no error.
fn said_hi_json(name: &str, result: &Value) -> Result<()> {
    if result.get("isError") == Some(&Value::Bool(true)) || !result.to_string().contains("hi") {
        bail!("{name}: `echo hi` answered {result}");
    }
    Ok(())
}

/// Waits for each of `children` (an `echo hi` each), and checks that it said `hi`.
fn said_hi_all(name: &str, children: Vec<Child>) -> Result<()> {
    for child in children {
        let out = child
            .wait_with_output()
            .with_context(|| format!("{name}: waiting"))?;
        if !out.status.success() || out.stdout != b"hi\n" {
            bail!("{name}: {} {:?}", out.status, out.stderr);
        }
    }
    Ok(())
}

/// `argv` (a prefix and `echo hi`) started with its output piped and no input.
fn spawn_echo(argv: &[OsString]) -> std::io::Result<Child> {
    let (program, args) = argv.split_first().ok_or(std::io::ErrorKind::InvalidInput)?;
    std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
}

fn lnk_params() -> Value {
    json!({"name": "command", "arguments": {"program": "echo", "args": ["hi"]}})
}

/// Starts a Link Run serve, warm or cold (`LNK_COLD_START=1`), of this build or `binary`.
fn lnk(
    (bins, place): (&Bins, &Place),
    name: &str,
    prefix: Vec<OsString>,
    cold: bool,
    binary: Option<&std::path::Path>,
) -> Result<Serve> {
    let cold_env = [("LNK_COLD_START", std::ffi::OsStr::new("1"))];
    let env: &[(&str, &std::ffi::OsStr)] = if cold { &cold_env } else { &[] };
    let mut args = place.serve_args(bins, name, prefix);
    if let Some(binary) = binary {
        args.binary = binary;
    }
    Serve::start_with_env(name, &args, env)
}

/// Starts every target: Link Run warm and cold under the recommended bubblewrap line (when
/// `bwrap` is on PATH) and the pass-through prefix, another build's warm serves with
/// `--baseline`, the started-ahead floor, each prefix alone, and the peer (when it can be
/// installed).
pub fn start_all(
    report: &mut Report,
    bins: &Bins,
    place: &Place,
    options: &Options,
) -> Result<Vec<Target>> {
    let at = (bins, place);
    let base = options.baseline.as_deref();
    let pass = vec![bins.passthrough.clone().into_os_string()];
    let echo = super::super::system_program("echo")?.into_os_string();
    let echo_hi = [echo, "hi".into()];
    let mut targets = Vec::new();
    match on_path("bwrap") {
        Some(bwrap) => {
            let prefix = crate::line::recommended(
                &place.files,
                std::slice::from_ref(&place.programs),
                &bwrap,
            )?;
            let warm = lnk(at, "warm-bwrap", prefix.clone(), false, None)?;
            targets.push(Target::server(WARM_BWRAP, warm, lnk_params()));
            let cold = lnk(at, "cold-bwrap", prefix.clone(), true, None)?;
            targets.push(Target::server(COLD_BWRAP, cold, lnk_params()));
            if let Some(binary) = base {
                let other = lnk(at, "baseline-bwrap", prefix.clone(), false, Some(binary))?;
                targets.push(Target::server(BASE_BWRAP, other, lnk_params()));
            }
            let mut alone = crate::line::by_hand(&prefix);
            alone.extend(echo_hi.iter().cloned());
            targets.push(Target {
                name: ALONE_BWRAP,
                how: How::Alone(alone),
            });
        }
        None => report.note("bubblewrap: `bwrap` is not on PATH; its rows are missing"),
    }
    let warm = lnk(at, "warm-pass", pass.clone(), false, None)?;
    targets.push(Target::server(WARM_PASS, warm, lnk_params()));
    let cold = lnk(at, "cold-pass", pass.clone(), true, None)?;
    targets.push(Target::server(COLD_PASS, cold, lnk_params()));
    if let Some(binary) = base {
        let other = lnk(at, "baseline-pass", pass.clone(), false, Some(binary))?;
        targets.push(Target::server(BASE_PASS, other, lnk_params()));
    }
    let mut alone = pass;
    alone.extend(echo_hi.iter().cloned());
    targets.push(Target {
        name: ALONE_PASS,
        how: How::Alone(alone),
    });
    targets.push(Target {
        name: FLOOR,
        how: How::Floor(echo_hi.to_vec(), Vec::new()),
    });
    match baselines::peer_command(&options.peer_cache) {
        Ok(command) => {
            let log = place.root.path().join("peer.log");
            let file = File::create(&log).context("creating the peer's log")?;
            let peer = Serve::start_command("peer", command, file, &log)?;
            let params = json!({"name": "run_command", "arguments": {"command": "echo hi"}});
            targets.push(Target::server(PEER, peer, params));
        }
        Err(err) => report.note(&format!("the peer is not measured: {err:#}")),
    }
    Ok(targets)
}
