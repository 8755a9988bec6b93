//! `lnk-bench soak`: random-moment SIGKILLs of `serve` and of supervisors, under each sandbox,
//! and how many trials left a process of the call or the run behind (the target is none).
//!
//! Each trial's program is the escaping tree of the containment tests: a process in a session
//! of its own (`setsid -f`), a double-forked one, one under `nohup … &`, one that ignores
//! SIGTERM, and the program itself lingering, all carrying the trial's marker.
//!
//! - `serve` trials: a fresh `serve` gets four `command` calls of the tree, is SIGKILLed a
//!   random 0–30 ms after the last is written, and every process with the marker must be gone
//!   within ten seconds.
//! - supervisor trials: one `serve --state` starts a run of the tree; its supervisor is
//!   SIGKILLed a random 0–30 ms after `start` answered; once it is dead a sweep runs, and every
//!   process with the marker must be gone within ten seconds.
//!
//! - gate trials ([`gate`]): as the supervisor trials, but the gate is held shut until a random
//!   0–15 ms after `start` answered, so that the kill falls while the sandbox starts.
//! - reapers trials (`--kind reapers`, asked for alone): as the supervisor trials, with the
//!   run's gate SIGKILLed together with its supervisor, so that what the sandbox was making
//!   when they died is left to the sweep.
//!
//! `--program sleeps` runs `sh -c 'sleep 300 & sleep 301 & wait'` instead of the tree (a call's
//! first sleep in a session of its own): the system's own programs, up within milliseconds.
//!
//! A survivor is reported by its command line, then killed (by pid: it carries this trial's
//! marker), so one bad trial does not spoil the next.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

use crate::bins::sibling;
use crate::foreground::system_program;
use crate::procs::running_with;
use crate::serve::{Serve, ServeArgs};

mod gate;
mod program;
mod supervisor;

use program::Marker;
pub use program::Program;

/// How long the processes of a trial may take to be gone.
const GONE_WITHIN: Duration = Duration::from_secs(10);
/// The latest moment of a kill after its trigger.
const KILL_WINDOW_US: u64 = 30_000;
/// `command` calls per `serve` trial.
const CALLS: usize = 4;
/// The limit on any tool call.
const CALL_LIMIT: Duration = Duration::from_secs(30);

/// How many trials, under which sandboxes.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The program each trial runs: `tree` (the escaping tree) or `sleeps` (`sh` with two
    /// `sleep`s, one of them `setsid` in a call: a program that is up within milliseconds).
    #[arg(long, value_enum, default_value_t = Program::Tree)]
    pub program: Program,
    /// Trials of each kind (serve, supervisor) under each sandbox.
    #[arg(long, default_value_t = 200)]
    pub trials: usize,
    /// Only this sandbox: `passthrough`, `bwrap` (the README's line) or `bwrap-shared-pid`
    /// (that line without a PID namespace, with `--new-session`).
    #[arg(long)]
    pub sandbox: Option<String>,
    /// Only this kind of trial: `serve`, `supervisor` or `gate`; or `reapers` (not run unless
    /// asked): a supervisor and its gate SIGKILLed together, as a crash of both.
    #[arg(long)]
    pub kind: Option<String>,
}

/// Runs the soak and prints, per sandbox and kind, the trials and the trials that left
/// something behind.
pub fn run(options: &Options) -> Result<()> {
    let place = tempfile::Builder::new()
        .prefix("lnk-soak-")
        .tempdir_in(soak_base()?)
        .context("making the soak's folder")?;
    let files = place.path().join("files");
    std::fs::create_dir(&files).context("making the files folder")?;
    let files = files.canonicalize().context("the files folder")?;
    let bins = Bins {
        run: sibling("lnk-link-run")?,
        supervise: sibling("lnk-link-supervise")?,
        passthrough: sibling("lnk-test-passthrough")?,
        procs: sibling("lnk-test-procs")?,
    };
    let programs = bins.procs.parent().context("no folder")?.to_path_buf();
    let mut rng = Rng::seeded();
    println!(
        "Link Run soak: {} SIGKILLs of serve, {} of supervisors and {} of supervisors as their \
         sandbox starts, per sandbox, 0-30 ms after the start",
        options.trials, options.trials, options.trials
    );
    let mut total = 0;
    for (name, sandbox) in sandboxes(&bins, &files, &programs)? {
        if options.sandbox.as_deref().is_some_and(|only| only != name) {
            continue;
        }
        let runs = |kind: &str| options.kind.as_deref().is_none_or(|only| only == kind);
        let serve_left = if !runs("serve") {
            0
        } else {
            serve_trials(
                &bins,
                &files,
                &programs,
                &sandbox,
                options,
                &mut rng,
                place.path(),
            )?
        };
        if runs("serve") {
            println!(
                "  {name:<18} serve SIGKILLed:      {:>4} trials, {serve_left} left something",
                options.trials
            );
        }
        let mut runs_left = 0;
        for (kind, killed, label) in [
            (
                "supervisor",
                supervisor::Killed::Supervisor,
                "supervisor SIGKILLed:",
            ),
            ("reapers", supervisor::Killed::Both, "it and its gate:    "),
        ] {
            if !runs(kind) || (kind == "reapers" && options.kind.is_none()) {
                continue;
            }
            let left = supervisor::trials(
                &bins,
                &files,
                &programs,
                &sandbox,
                options,
                &mut rng,
                place.path(),
                killed,
            )?;
            println!(
                "  {name:<18} {label} {:>4} trials, {left} left something",
                options.trials
            );
            runs_left += left;
        }
        let gate_left = if !runs("gate") {
            0
        } else {
            gate::trials(
                &bins,
                &files,
                &programs,
                &sandbox,
                options,
                &mut rng,
                place.path(),
            )?
        };
        if runs("gate") {
            println!(
                "  {name:<18} killed as it starts:  {:>4} trials, {gate_left} left something",
                options.trials
            );
        }
        total += serve_left + runs_left + gate_left;
    }
    println!("survivors in all: {total} (target 0)");
    if total > 0 {
        bail!("{total} trials left processes behind");
    }
    Ok(())
}

struct Bins {
    run: PathBuf,
    supervise: PathBuf,
    passthrough: PathBuf,
    procs: PathBuf,
}

/// The sandboxes: the pass-through prefix, and when bubblewrap is here the README's line and
/// that line without its PID namespace.
fn sandboxes(
    bins: &Bins,
    files: &Path,
    programs: &Path,
) -> Result<Vec<(&'static str, Vec<OsString>)>> {
    let mut all = vec![(
        "passthrough",
        vec![bins.passthrough.clone().into_os_string()],
    )];
    match system_program("bwrap") {
        Err(_) => println!("  (bwrap is not here: the bubblewrap sandboxes are skipped)"),
        Ok(bwrap) => {
            let visible = [programs.to_path_buf()];
            let line = crate::line::recommended(files, &visible, &bwrap)?;
            let mut shared = Vec::new();
            for arg in &line {
                if arg == "--unshare-all" {
                    shared.extend(
                        [
                            "--unshare-user-try",
                            "--unshare-ipc",
                            "--unshare-net",
                            "--unshare-uts",
                            "--unshare-cgroup-try",
                        ]
                        .map(OsString::from),
                    );
                } else {
                    shared.push(arg.clone());
                }
            }
            all.push(("bwrap", line));
            all.push(("bwrap-shared-pid", shared));
        }
    }
    Ok(all)
}

/// serve's flags for background runs kept in `state`, as the soaks' serves take them.
fn state_flags(state: &Path) -> Vec<OsString> {
    let mut flags: Vec<OsString> = vec!["--state".into(), state.into()];
    for word in [
        "--background",
        "4",
        "--background-timeout",
        "10m",
        "--background-output",
        "1MiB",
        "--background-keep",
        "1h",
        "--hops",
        "3",
    ] {
        flags.push(word.into());
    }
    flags
}

fn serve_args<'a>(
    bins: &'a Bins,
    files: &'a Path,
    programs: &'a Path,
    sandbox: &[OsString],
    extra: Vec<OsString>,
    log: PathBuf,
) -> ServeArgs<'a> {
    let passthrough = sandbox
        .first()
        .is_some_and(|p| Path::new(p) == bins.passthrough);
    ServeArgs {
        binary: &bins.run,
        files,
        programs,
        output: "4KiB",
        allowed: &["sh"],
        extra,
        sandbox: sandbox.to_vec(),
        sandbox_check: !passthrough,
        log,
    }
}

fn serve_trials(
    bins: &Bins,
    files: &Path,
    programs: &Path,
    sandbox: &[OsString],
    options: &Options,
    rng: &mut Rng,
    place: &Path,
) -> Result<usize> {
    let programs_path = programs_with_system(programs);
    let mut left = 0;
    for trial in 0..options.trials {
        let marker = Marker::new("serve", trial);
        let args = serve_args(
            bins,
            files,
            &programs_path,
            sandbox,
            Vec::new(),
            place.join("serve.log"),
        );
        let mut serve = Serve::start("soak", &args)?;
        let call_args = options.program.args(bins, &marker, true);
        let call_args: Vec<&str> = call_args.iter().map(String::as_str).collect();
        for _ in 0..CALLS {
            let id = serve.take_id();
            serve.send_command(id, "sh", &call_args)?;
        }
        std::thread::sleep(Duration::from_micros(rng.below(KILL_WINDOW_US)));
        serve.kill();
        if !gone(&marker) {
            left += 1;
        }
    }
    Ok(left)
}

/// `lnk-link-supervise sweep <state>`.
fn sweep(bins: &Bins, state: &Path) -> Result<()> {
    let swept = Command::new(&bins.supervise)
        .arg("sweep")
        .arg(state)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .context("running a sweep")?;
    if !swept.success() {
        bail!("a sweep failed: {swept}");
    }
    Ok(())
}

/// The programs' folder and the system's, for `--programs-path` (`sh` is the system's).
fn programs_with_system(programs: &Path) -> PathBuf {
    PathBuf::from(format!("{}:/usr/bin:/bin", programs.display()))
}

/// Waits until no process carries `marker`; kills and reports what is still there after
/// [`GONE_WITHIN`]. Whether all were gone in time.
fn gone(marker: &Marker) -> bool {
    let deadline = Instant::now() + GONE_WITHIN;
    loop {
        let left = running_with(marker.text());
        if left.is_empty() {
            return true;
        }
        if Instant::now() >= deadline {
            for (pid, cmdline) in left {
                println!("    survivor {pid}: {cmdline}");
                kill(pid);
            }
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The supervisor of run `id`, looked for until it shows: the process with `supervise` and the
/// id in its command line whose parent is not `serve`. (`serve` starts a first process that
/// forks the supervisor away and exits; a kill of that first one would miss the run.)
fn find_supervisor(id: &str) -> Result<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let supervisor = running_with(id)
            .into_iter()
            .filter(|(_, cmdline)| cmdline.contains(" supervise "))
            .map(|(pid, _)| pid)
            .find(|pid| parent_of(*pid).is_some_and(|parent| !is_serve(parent)));
        if let Some(pid) = supervisor {
            return Ok(pid);
        }
        if Instant::now() >= deadline {
            bail!("no supervisor of run {id}");
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// The parent of `pid`, from `/proc/<pid>/stat`.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Whether `pid` is a `lnk-link-run serve`.
fn is_serve(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains("lnk-link-run\0serve"))
}

fn kill(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        // Gone already is fine.
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Waits (10 s at most) until `pid` is a zombie or gone: only then has it let go of its
/// descriptors (its command line goes first).
fn wait_dead(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(stat)
                if !stat
                    .rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z')) =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            _ => return,
        }
    }
}

/// Where the soak's folder goes: beside the binaries, outside `/tmp` (which the README's line
/// hides), so the sandbox can bind it.
fn soak_base() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding this executable")?;
    let base = exe
        .parent()
        .and_then(Path::parent)
        .context("no target folder")?
        .join("tmp");
    std::fs::create_dir_all(&base).with_context(|| format!("making {}", base.display()))?;
    Ok(base)
}

/// xorshift64*, seeded from the clock: the moments only need to spread, not be secret.
struct Rng(u64);

impl Rng {
    fn seeded() -> Rng {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        Rng(nanos | 1)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % bound.max(1)
    }
}
