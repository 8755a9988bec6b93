//! The sandbox check (SPEC: "The sandbox, and what serve checks of it"). The sandbox is the
//! user's, but an agent's program is hostile until proven otherwise, so before it answers
//! anything serve runs one probe through the sandbox, exactly as a call would run, and refuses
//! to start when the probe can do from inside what no program of the agent's may: use a
//! capability, read the agent's key or the state folder, reach the way in, read serve's
//! environment, or create a file outside `--files`. It warns when the sandbox shares serve's
//! PID namespace or reaches Unix sockets outside the files folder.
//!
//! Its parts: [`plan`] builds what the probe is asked from the configuration; [`launch`] runs
//! the probe (this very executable, `lnk-link-run sandbox-probe`, reached through an inherited
//! descriptor) through the sandbox; [`probe`] is what runs inside; [`wire`] is what the two say
//! to each other; [`verdict`] reads the answer, with what serve sees from outside, into the
//! report that `serve` refuses or warns by and `lnk-link-run check` prints.

mod caches;
mod launch;
mod net;
mod net_probe;
mod plan;
pub mod probe;
mod verdict;
mod warm;
mod wire;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

pub use wire::SUBCOMMAND;

use crate::config::Config;
use crate::exit_code;
use verdict::{CheckOutcome, Finding};

/// Puts a fresh random marker into this process's environment, for the probe to look for.
/// Must be called before any thread starts (it is, first thing in `main`): with another thread
/// there, nothing is set, and the check's probe finds no marker to report.
pub fn hold_marker() {
    let Some(marker) = random_hex() else {
        return;
    };
    let value = format!("lnk-marker-{marker}");
    if let Err(err) =
        lnk_proc::spawn::single_thread::set_env(plan::MARKER_VARIABLE.as_ref(), value.as_ref())
    {
        tracing::warn!("the check's marker is not set: {err}");
    }
}

/// 16 random bytes as hex.
fn random_hex() -> Option<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).ok()?;
    Some(hex::encode(bytes))
}

/// What the check found, or why it could not look.
struct Checked {
    findings: Vec<Finding>,
    elapsed: Duration,
}

/// How the probe is run: as a cold call, or through a warm sandbox as a warm call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    Cold,
    Warm,
}

/// Runs the probe for `config` and reads its answer.
fn check(config: &Config) -> Result<Checked, String> {
    check_via(config, Via::Cold)
}

/// Runs the probe for `config`, cold or warm, and reads its answer.
fn check_via(config: &Config, via: Via) -> Result<Checked, String> {
    let marker = std::env::var(plan::MARKER_VARIABLE).unwrap_or_default();
    let random = random_hex().ok_or("the sandbox check found no random source for its names")?;
    let name = format!(".lnk-sandbox-check-{random}");
    let mut plan = plan::Plan::new(config, &marker, &name);
    // Last: the caches' places in `stat` and `write` come after every other folder's.
    caches::plan(&mut plan, config);
    let net_plan = match &config.net {
        Some(allow) => Some(net::NetPlan::new(allow, &random[..8]).map_err(|err| {
            format!(
                "the sandbox check could not open its listeners on this machine's loopback: {err}"
            )
        })?),
        None => None,
    };
    plan.request.net = net_plan.as_ref().map(|net| net.request.clone());
    let ran = match (via, &config.net) {
        (Via::Cold, None) => launch::run(config, &plan.request),
        (Via::Cold, Some(allow)) => net::run_cold(config, allow, &plan.request),
        (Via::Warm, net) => warm::run(config, &plan.request, net.as_ref()),
    };
    let ran = ran.map_err(|err| {
        format!(
            "the sandbox check could not start the sandbox: {err}; give a sandbox that runs, or \
             start serve with --no-sandbox-check"
        )
    })?;
    // Look from outside whether a file the probe made landed, and take it away again.
    let appeared: Vec<bool> = plan
        .outside
        .iter()
        .map(|outside| {
            let path = outside.folder.join(&name);
            let landed = path.symlink_metadata().is_ok();
            if landed && let Err(err) = std::fs::remove_file(&path) {
                tracing::warn!(path = %path.display(), %err, "cannot remove the sandbox check's file");
            }
            landed
        })
        .collect();
    let landed = caches::landed(&plan, &name);
    let Some(answer) = ran.answer else {
        let how = match (ran.status, ran.stderr.is_empty()) {
            (None, _) => format!(
                "it gave no answer within {} s",
                launch::PROBE_DEADLINE.as_secs()
            ),
            (Some(status), true) => format!("the sandbox ended ({status}) with no answer"),
            (Some(status), false) => format!("the sandbox ended ({status}): {}", ran.stderr),
        };
        return Err(format!(
            "the sandbox check could not run its probe in the sandbox ({how}). serve runs it \
             as a call, `<sandbox> -- /proc/self/fd/<n> {SUBCOMMAND}`, so the sandbox needs a \
             /proc and the libraries of lnk-link-run; a sandbox that cannot run it needs \
             --no-sandbox-check"
        ));
    };
    if answer.stat.len() != plan.request.stat.len()
        || answer.read.len() != plan.request.read.len()
        || answer.connect.len() != plan.request.connect.len()
        || answer.write.len() != plan.request.write.len()
        || answer.protected.len() != plan.request.protected.len()
    {
        return Err("the sandbox check's probe answered something else than it was asked".into());
    }
    let changed: Vec<Option<String>> = plan
        .protected
        .iter()
        .zip(&answer.protected)
        .map(|(target, did)| undo_protected(target, did.as_deref(), &name))
        .collect();
    let mut findings = verdict::judge(&plan, &answer, &appeared, &changed);
    findings.extend(caches::judge(&plan, config, &answer, &landed));
    if let Some(net_plan) = &net_plan {
        findings.extend(net::judge(
            net_plan,
            answer.net.as_ref(),
            ran.network.as_ref(),
        ));
    }
    Ok(Checked {
        findings,
        elapsed: ran.elapsed,
    })
}

/// Looks from outside whether the probe's try at a protected path got through (`did` is what
/// it says it did), and takes away what it made: the file it made in a folder, the folder
/// itself when it made it, or a file it opened for writing that was not there before. What
/// got through, in words.
fn undo_protected(target: &plan::Protected, did: Option<&str>, name: &str) -> Option<String> {
    if target.create_in {
        let file = target.path.join(name);
        let landed = file.symlink_metadata().is_ok();
        if landed && let Err(err) = std::fs::remove_file(&file) {
            tracing::warn!(path = %file.display(), %err, "cannot remove the sandbox check's file");
        }
        // Folders it made, deepest first; a placeholder (made by the sandbox, not the probe)
        // is left alone: the probe says when it made the folder.
        if did.is_some_and(|d| d.starts_with("made the folder")) {
            for folder in &target.missing {
                let _ = std::fs::remove_dir(folder);
            }
        }
        return match (landed, did) {
            (true, _) => Some(format!("{name} appeared in it, outside the sandbox")),
            (false, Some(did)) => Some(format!("it {did}")),
            (false, None) => None,
        };
    }
    let did = did?;
    if target.missing.contains(&target.path)
        && target
            .path
            .symlink_metadata()
            .is_ok_and(|m| m.is_file() && m.len() == 0)
    {
        let _ = std::fs::remove_file(&target.path);
    }
    Some(format!("it {did}"))
}

/// The check at serve's start: `Ok` with the warnings to log once serve goes on and whether
/// calls may start warm, or `Err` with the one line serve refuses to start with.
///
/// With `warm`, the probe runs a second time, through a warm sandbox exactly as a warm call
/// would run: calls start warm only when it sees what the cold probe saw, check for check
/// (`Err` in [`Warmth`] says why not; calls then start cold).
pub fn before_serving(config: &Config, warm: bool) -> Result<(Vec<String>, Warmth), String> {
    let checked = check(config)?;
    let warmth = if warm {
        prove_warm(config, &checked)
    } else {
        Err("cold starts were asked for".to_owned())
    };
    tracing::debug!(elapsed = ?checked.elapsed, "sandbox check done");
    let leaks: Vec<String> = checked
        .findings
        .iter()
        .filter(|f| f.outcome == CheckOutcome::Leak)
        .map(Finding::short)
        .collect();
    if !leaks.is_empty() {
        return Err(format!(
            "the sandbox does not confine the agent's programs: {}. `lnk-link-run check` with \
             the same arguments reports every check",
            leaks.join("; ")
        ));
    }
    let warnings = checked
        .findings
        .iter()
        .filter(|f| f.outcome == CheckOutcome::Warning)
        .map(|f| format!("sandbox check: {}", f.short()))
        .collect();
    Ok((warnings, warmth))
}

/// Whether calls may start warm: `Ok`, or why not.
pub type Warmth = Result<(), String>;

/// Runs the probe through a warm sandbox and compares what it saw with the cold probe's
/// `cold` findings.
fn prove_warm(config: &Config, cold: &Checked) -> Warmth {
    let warm = check_via(config, Via::Warm)
        .map_err(|err| format!("the probe could not run through a warm sandbox: {err}"))?;
    tracing::debug!(elapsed = ?warm.elapsed, "warm sandbox check done");
    // Check for check, in the same order; what was tried names a file of each run's own.
    let differs: Vec<String> = cold
        .findings
        .iter()
        .zip(&warm.findings)
        .filter(|(cold, warm)| cold.outcome != warm.outcome)
        .map(|(cold, warm)| {
            format!(
                "{}: {:?} cold, {:?} warm",
                cold.tried, cold.outcome, warm.outcome
            )
        })
        .collect();
    if differs.is_empty() && cold.findings.len() == warm.findings.len() {
        return Ok(());
    }
    Err(format!(
        "the probe saw something else through a warm sandbox than cold ({})",
        if differs.is_empty() {
            "other checks".to_owned()
        } else {
            differs.join("; ")
        }
    ))
}

/// `lnk-link-run check`: the same probe, reported to a person on stdout, one line per check.
/// Its last line and its exit code say what `serve` would do with the same arguments: exit 0
/// when serve would start, [`exit_code::WOULD_REFUSE`] when it would refuse. With
/// `--no-sandbox-check` (`skipped_at_start`) serve starts whatever the probe finds, so `check`
/// still runs the probe for the person to read, but answers that serve would start.
pub fn report(config: &Config, skipped_at_start: bool) -> ExitCode {
    let mut out = String::new();
    let sandbox: Vec<String> = crate::sandbox_line::shown(&config.sandbox, &config.files)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    out.push_str(&format!("sandbox: {}\n", sandbox.join(" ")));
    if skipped_at_start {
        out.push_str(
            "note: --no-sandbox-check is given, so serve would skip this check and start \
             anyway; the check runs here for you to read\n",
        );
    }
    let refuses = match check(config) {
        Err(line) => {
            out.push_str(&format!("FAIL  running the probe: {line}\n"));
            true
        }
        Ok(checked) => {
            for finding in &checked.findings {
                out.push_str(&finding.line());
                out.push('\n');
            }
            out.push_str(&format!(
                "the probe took {} ms; ",
                checked.elapsed.as_millis()
            ));
            checked
                .findings
                .iter()
                .any(|f| f.outcome == CheckOutcome::Leak)
        }
    };
    out.push_str(verdict_line(refuses, skipped_at_start));
    out.push('\n');
    let code = if refuses && !skipped_at_start {
        exit_code::WOULD_REFUSE
    } else {
        0
    };
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .is_err()
    {
        return ExitCode::from(exit_code::UNREPORTED);
    }
    ExitCode::from(code)
}

/// The report's last line: what serve would do with the same arguments, given whether the
/// check found a leak (or could not run) and whether `--no-sandbox-check` is given.
fn verdict_line(refuses: bool, skipped_at_start: bool) -> &'static str {
    match (refuses, skipped_at_start) {
        (false, false) => "serve would start",
        (true, false) => "serve would refuse to start",
        (false, true) => "serve would start (with --no-sandbox-check it does not run this check)",
        (true, true) => {
            "serve would start, because --no-sandbox-check skips this check (without that flag \
             it would refuse to start)"
        }
    }
}
