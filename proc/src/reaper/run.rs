//! The reaper's own life: start the sandbox, hold everything it starts, end it all.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::process::ExitCode;

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use rustix::process::{Signal, set_parent_process_death_signal};

use super::blocked_signals::BlockedSignals;
use super::children;
use super::fds::{NET_FD, PASSED_FDS_FROM};
use super::hold::ChildHold;
use super::layers::Layers;
use super::options::Options;
use super::reaping::Reaping;
use super::report::{Event, Reporter};
use super::run_stdin;
use super::sandbox_start::BeforeExec;
use super::sandbox_start::{Sandbox, Spawn, fork_sandbox, let_go_of_stdio, resolve, spawn_sandbox};
use super::spare::{self, Call, Control, SPARE, SparePrefix};
use super::warm::{Handed, Warm, cold_stub};
use super::{CLOSED_EXIT, EXEC_FAILED_EXIT, FAILED_EXIT, OPEN, USAGE_EXIT};

/// Runs a reaper from the arguments after its subcommand: `--spare` makes it a spare
/// ([`super::spare`]), `--spare --warm <sandbox>…` one with a warm sandbox ([`super::warm`]),
/// each with the cache folders its warm sandbox gets a layer over (`--cache <folder>`, before
/// `--warm`).
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    if let Some((first, rest)) = args.split_first()
        && first == SPARE
    {
        return match spare::parse_args(rest) {
            Ok((_, None)) => run_spare(None),
            Ok((caches, Some(SparePrefix::Warm(prefix)))) => match warm_layers(&caches) {
                Ok(layers) => {
                    let passed = passed_fds(&prefix);
                    run_spare_passing(Some(Warm::new(prefix, layers)), &passed)
                }
                Err(problem) => usage(&problem),
            },
            // A cold spare told its calls' sandbox prefix: it keeps the descriptors the prefix
            // binds for the sandbox of its call.
            Ok((_, Some(SparePrefix::Cold(prefix)))) => {
                run_spare_passing(None, &passed_fds(&prefix))
            }
            Err(problem) => usage(&problem),
        };
    }
    match Options::parse(args) {
        Ok(options) => run(&options),
        Err(problem) => usage(&problem),
    }
}

/// A command line the reaper does not understand: one line on stderr, nothing ran.
fn usage(problem: &str) -> ExitCode {
    let _ = writeln!(io::stderr(), "reaper: {problem}");
    ExitCode::from(USAGE_EXIT)
}

/// The layers of a warm spare's sandbox, if it has caches.
fn warm_layers(caches: &[std::path::PathBuf]) -> Result<Option<Layers>, String> {
    if caches.is_empty() {
        return Ok(None);
    }
    Layers::new(caches).map(Some).map_err(|err| err.to_string())
}

/// Reports a failure to set up (nothing ran) and gives the exit code that says so.
fn failed(report: &Reporter, err: &io::Error) -> ExitCode {
    report.send(Event::Failed(err.raw_os_error().unwrap_or(0)));
    ExitCode::from(FAILED_EXIT)
}

/// The options of bubblewrap's that bind a descriptor the sandbox program inherits.
const FD_BINDS: [&str; 2] = ["--bind-fd", "--ro-bind-fd"];

/// The descriptors the sandbox's words bind (`--bind-fd <n> <path>`, `--ro-bind-fd …`), from
/// [`PASSED_FDS_FROM`] up: whatever started this reaper put them there for the sandbox.
pub fn passed_fds(words: &[OsString]) -> Vec<i32> {
    words
        .windows(2)
        .filter(|pair| FD_BINDS.iter().any(|flag| pair[0] == *flag))
        .filter_map(|pair| pair[1].to_str()?.parse().ok())
        .filter(|fd| *fd >= PASSED_FDS_FROM)
        .collect()
}

/// What every reaper does first: its signals read from a signalfd, and child subreaper.
/// `passed` are the descriptors the sandbox's words name, kept open for it.
fn set_up(report: &Reporter, passed: &[i32]) -> Result<BlockedSignals, ExitCode> {
    // Whatever this process inherited beyond stdio (a host that leaks descriptors into
    // `serve`, say) must not reach the sandbox; what its words bind must.
    close_on_exec_beyond_stdio(passed);
    let signals = BlockedSignals::new().map_err(|err| failed(report, &err))?;
    children::become_subreaper().map_err(|err| failed(report, &err))?;
    // Not dumpable: under a sandbox without a PID namespace a program (the same user) could
    // otherwise open this process's descriptors through /proc: write a forged report into its
    // report pipe, or, in a spare, read or write the pipes of the call it will run. (Its
    // children are dumpable again once they `exec`.)
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .map_err(|err| failed(report, &err.into()))?;
    Ok(signals)
}

/// Runs the sandbox of `options` to its end; see the module docs of [`super`]. A call with a
/// proxy (`--net`) has the sandbox's end of its channel at fd [`NET_FD`].
pub fn run(options: &Options) -> ExitCode {
    let report = Reporter::from_fd3();
    let signals = match set_up(&report, &passed_fds(&options.argv)) {
        Ok(signals) => signals,
        Err(code) => return code,
    };
    let net = match options.net {
        true => match crate::net::channel::adopt(NET_FD) {
            Some(net) => Some(net),
            None => return failed(&report, &io::Error::from(Errno::BADF)),
        },
        false => None,
    };
    run_set_up(options, &report, &signals, None, net)
}

/// Runs a spare: sets up, reports `ready`, waits for its call on the control socket (fd 4),
/// enters the call's folder and runs it as [`run`] would (in its warm sandbox, when it has one
/// that can take the call). Nothing runs when the socket ends before the call is whole or a
/// stop comes first.
pub fn run_spare(warm: Option<Warm>) -> ExitCode {
    run_spare_passing(warm, &[])
}

/// [`run_spare`], keeping open the descriptors `passed` that its warm sandbox's words bind.
fn run_spare_passing(mut warm: Option<Warm>, passed: &[i32]) -> ExitCode {
    let report = Reporter::from_fd3();
    let Some(control) = Control::from_fd4() else {
        return failed(&report, &io::Error::from(Errno::BADF));
    };
    let signals = match set_up(&report, passed) {
        Ok(signals) => signals,
        Err(code) => return code,
    };
    // While it holds no call, a spare has nothing to kill at its parent's death but its warm
    // sandbox, whose stub ends with it: SIGKILL then, which ends it even when stopped (without a
    // PID namespace a program of an earlier call can stop it, and a stopped process would keep
    // a SIGTERM pending for ever). Its call gets SIGTERM back, to kill what the call started.
    if let Err(err) = set_parent_process_death_signal(Some(Signal::KILL)) {
        return failed(&report, &err.into());
    }
    let waited = match &mut warm {
        Some(warm) => warm.wait_for_call(&control, &signals, &report),
        None => {
            report.send(Event::Ready);
            control.wait_for_call(&signals)
        }
    };
    let mut call = match waited {
        Ok(Some(call)) => call,
        Ok(None) => return ExitCode::from(CLOSED_EXIT),
        Err(err) => return failed(&report, &err),
    };
    drop(control);
    let net = call.net.take();
    if call.options.net && net.is_none() {
        return failed(&report, &io::Error::from(Errno::BADF));
    }
    // A parent that dies from here on leaves the SIGTERM pending on the signal fd: a stop.
    if let Err(err) = set_parent_process_death_signal(Some(Signal::TERM)) {
        return failed(&report, &err.into());
    }
    if let Err(err) = enter(&call) {
        return failed(&report, &err);
    }
    drop(call.cwd);
    run_set_up(&call.options, &report, &signals, warm, net)
}

/// Puts a spare where its call runs: in its folder, with `/dev/null` as stdin if it has no
/// input.
fn enter(call: &Call) -> io::Result<()> {
    if let Some(cwd) = &call.cwd {
        rustix::process::fchdir(cwd)?;
    }
    if call.options.null_stdin {
        let null = std::fs::File::open("/dev/null")?;
        rustix::stdio::dup2_stdin(&null)?;
    }
    Ok(())
}

/// Runs the sandbox of `options` once the reaper is set up: handed to `warm`'s sandbox when it
/// takes it, else started now (with the stub in it, for a call that runs under the stub).
/// `net` is the sandbox's end of the call's proxy channel, which goes to the stub.
fn run_set_up(
    options: &Options,
    report: &Reporter,
    signals: &BlockedSignals,
    warm: Option<Warm>,
    net: Option<OwnedFd>,
) -> ExitCode {
    let failed = |err: io::Error| failed(report, &err);
    if options.wait_open {
        match wait_open(signals, options.run_stdin) {
            Ok(true) => {}
            Ok(false) => return ExitCode::from(CLOSED_EXIT),
            Err(err) => return failed(err),
        }
    }
    if let Some(path) = &options.hold_start {
        super::hold::hold(path, signals.fd());
    }
    if signals.take().stop {
        return ExitCode::from(CLOSED_EXIT);
    }
    let program = match resolve(&options.argv) {
        Ok(program) => program,
        Err(errno) => {
            report.send(Event::ExecFailed(errno.raw_os_error()));
            return ExitCode::from(EXEC_FAILED_EXIT);
        }
    };
    let net_fd = net.as_ref().map(AsFd::as_fd);
    let handed = match warm {
        Some(mut warm) => warm.hand(options, signals, net_fd),
        None if options.warm_only => Handed::Failed(io::Error::other("no warm sandbox")),
        None => Handed::Cold,
    };
    let layers = match warm_layers(&options.caches) {
        Ok(layers) => layers,
        Err(problem) => return failed(io::Error::other(problem)),
    };
    let (handed, layers) = match (handed, options.stub) {
        // A test's hold needs a fork of this process's own: such a call runs without the stub.
        // The sandbox started for the call with the stub in it gets the cache layers.
        (Handed::Cold, Some(words)) if options.hold_exec.is_none() => {
            (cold_stub(options, words, signals, net_fd, layers), None)
        }
        (handed, _) => (handed, layers),
    };
    // The stub has the channel now; this process keeps no end of it.
    drop(net);
    let hold_exec = options.hold_exec.as_deref().and_then(ChildHold::new);
    let sandbox = match (handed, hold_exec.as_ref(), layers.as_ref()) {
        (Handed::Warm(pid, layer_ns), _, _) => Ok(Sandbox {
            pid,
            exec_pipe: None,
            layer_ns,
        }),
        (Handed::Failed(err), _, _) => return failed(err),
        (Handed::Stopped, _, _) => return ExitCode::from(CLOSED_EXIT),
        (Handed::NotRun(event), _, _) => {
            report.send(event);
            return ExitCode::from(FAILED_EXIT);
        }
        (Handed::Cold, None, None) => spawn_sandbox(&program),
        // A test's hold between fork and exec, and the cache layers, need a fork of this
        // process's own.
        (Handed::Cold, hold, layers) => fork_sandbox(
            &program,
            BeforeExec {
                hold,
                layers,
                dups: &[],
            },
        ),
    };
    let sandbox = match sandbox {
        Ok(sandbox) => sandbox,
        Err(Spawn::Exec(errno)) => {
            report.send(Event::ExecFailed(errno));
            return ExitCode::from(EXEC_FAILED_EXIT);
        }
        Err(Spawn::Layer(failure)) => {
            // stderr is still the call's (or the run's output): a person reads why there.
            if let Some(layers) = &layers {
                let _ = writeln!(io::stderr(), "lnk-link-run: {}", layers.describe(&failure));
            }
            return failed(failure.errno.into());
        }
        Err(Spawn::Setup(err)) => return failed(err),
    };
    report.send(Event::Started(sandbox.pid.as_raw_nonzero().get()));
    if options.run_stdin {
        run_stdin::foreground(sandbox.pid);
    }
    // The sandbox has the call's pipes; this process must not keep them open. (Should this
    // fail, they close at the reaper's end, which comes once everything is dead anyway.)
    let _ = let_go_of_stdio();
    let mut reaper = Reaping::new(options, report, signals, sandbox, program.0.as_c_str());
    reaper.live();
    if reaper.exec_failed() {
        ExitCode::from(EXEC_FAILED_EXIT)
    } else {
        ExitCode::SUCCESS
    }
}

/// Marks every descriptor above stderr close-on-exec (read from `/proc/self/fd`; the reaper's
/// own are already), but those in `passed`, which are the sandbox's.
fn close_on_exec_beyond_stdio(passed: &[i32]) {
    let Ok(mut entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .by_ref()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2 && !passed.contains(fd))
        .collect();
    // The listing stays open meanwhile, so every listed descriptor is open (the reaper has one
    // thread: nothing closes one in between).
    for fd in fds {
        set_cloexec(fd);
    }
    drop(entries);
}

#[allow(unsafe_code)]
fn set_cloexec(fd: i32) {
    // SAFETY: the descriptor is open (listed in /proc/self/fd while the listing is still
    // open, in a single-threaded process) and is only borrowed for two fcntls, never closed.
    let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    if let Ok(flags) = rustix::io::fcntl_getfd(fd) {
        let _ = rustix::io::fcntl_setfd(fd, flags | rustix::io::FdFlags::CLOEXEC);
    }
}

/// Waits for the open byte on stdin, or a stop. Whether the gate opened; stdin is then
/// `/dev/null`, or with `run_stdin` the run's stdin, fd 4.
fn wait_open(signals: &BlockedSignals, run_stdin: bool) -> io::Result<bool> {
    let stdin = io::stdin();
    let signal_fd = signals.fd();
    loop {
        let mut fds = [
            PollFd::new(&stdin, PollFlags::IN),
            PollFd::new(&signal_fd, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
        let stdin_ready = !fds[0].revents().is_empty();
        if signals.take().stop {
            return Ok(false);
        }
        if stdin_ready {
            let mut byte = [0u8; 1];
            let opened = match rustix::io::read(&stdin, &mut byte) {
                Ok(1) => byte[0] == OPEN,
                Err(Errno::INTR | Errno::AGAIN) => continue,
                _ => false,
            };
            if opened && run_stdin {
                let stdin = run_stdin::take()?;
                rustix::stdio::dup2_stdin(&stdin)?;
                // A run's own terminal (`tty`) becomes the controlling terminal of the run's
                // session, which the gate leads, with the sandbox's group in front once it
                // runs ([`run_stdin::foreground`]).
                if rustix::termios::isatty(&stdin) {
                    rustix::process::ioctl_tiocsctty(&stdin)?;
                }
            } else if opened {
                let null = std::fs::File::open("/dev/null")?;
                rustix::stdio::dup2_stdin(&null)?;
            }
            return Ok(opened);
        }
    }
}
