//! The reaper's own life: start the sandbox, hold everything it starts, end it all.

use std::ffi::{CString, OsStr, OsString};
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};

use super::children::{self, reap_if_dead, signal_child};
use super::hold::ChildHold;
use super::options::Options;
use super::report::{Event, Reporter};
use super::run_stdin;
use super::signals::Signals;
use super::spare::{Call, Control, SPARE};
use super::warm::{Handed, WARM, Warm};
use super::{CLOSED_EXIT, EXEC_FAILED_EXIT, FAILED_EXIT, OPEN, USAGE_EXIT};
use crate::poll::poll_until;
use lnk_common::status::Exit;

/// Where a bare sandbox program name is looked for: the reaper's environment is empty, so it
/// has no `PATH` of its own. (`serve` resolves the sandbox to an absolute path at start; this
/// serves records written before it did.)
const DEFAULT_PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];
/// While killing, how long to wait for a child's end before looking again anyway (a safety
/// net: every end of a child wakes the reaper at once).
const KILL_RECHECK: Duration = Duration::from_millis(50);

/// Runs a reaper from the arguments after its subcommand: `--spare` alone makes it a spare
/// ([`super::spare`]), `--spare --warm <sandbox>…` one with a warm sandbox ([`super::warm`]).
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    match args.as_slice() {
        [only] if only == SPARE => return run_spare(None),
        [spare, warm, prefix @ ..] if spare == SPARE && warm == WARM && !prefix.is_empty() => {
            return run_spare(Some(Warm::new(prefix.to_vec())));
        }
        _ => {}
    }
    match Options::parse(args) {
        Ok(options) => run(&options),
        Err(problem) => {
            let _ = writeln!(io::stderr(), "reaper: {problem}");
            ExitCode::from(USAGE_EXIT)
        }
    }
}

/// Reports a failure to set up (nothing ran) and gives the exit code that says so.
fn failed(report: &Reporter, err: &io::Error) -> ExitCode {
    report.send(Event::Failed(err.raw_os_error().unwrap_or(0)));
    ExitCode::from(FAILED_EXIT)
}

/// What every reaper does first: its signals read from a signalfd, and child subreaper.
fn set_up(report: &Reporter) -> Result<Signals, ExitCode> {
    // Whatever this process inherited beyond stdio (a host that leaks descriptors into
    // `serve`, say) must not reach the sandbox.
    close_on_exec_beyond_stdio();
    let signals = Signals::new().map_err(|err| failed(report, &err))?;
    children::become_subreaper().map_err(|err| failed(report, &err))?;
    Ok(signals)
}

/// Runs the sandbox of `options` to its end; see the module docs of [`super`].
pub fn run(options: &Options) -> ExitCode {
    let report = Reporter::from_fd3();
    match set_up(&report) {
        Ok(signals) => run_set_up(options, &report, &signals, None),
        Err(code) => code,
    }
}

/// Runs a spare: sets up, reports `ready`, waits for its call on the control socket (fd 4),
/// enters the call's folder and runs it as [`run`] would (in its warm sandbox, when it has one
/// that can take the call). Nothing runs when the socket ends before the call is whole or a
/// stop comes first.
pub fn run_spare(mut warm: Option<Warm>) -> ExitCode {
    let report = Reporter::from_fd3();
    let Some(control) = Control::from_fd4() else {
        return failed(&report, &io::Error::from(Errno::BADF));
    };
    let signals = match set_up(&report) {
        Ok(signals) => signals,
        Err(code) => return code,
    };
    let waited = match &mut warm {
        Some(warm) => warm.wait_for_call(&control, &signals, &report),
        None => {
            report.send(Event::Ready);
            control.wait_for_call(&signals)
        }
    };
    let call = match waited {
        Ok(Some(call)) => call,
        Ok(None) => return ExitCode::from(CLOSED_EXIT),
        Err(err) => return failed(&report, &err),
    };
    drop(control);
    if let Err(err) = enter(&call) {
        return failed(&report, &err);
    }
    drop(call.cwd);
    run_set_up(&call.options, &report, &signals, warm)
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
/// takes it, else started now.
fn run_set_up(
    options: &Options,
    report: &Reporter,
    signals: &Signals,
    warm: Option<Warm>,
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
    let handed = match warm {
        Some(mut warm) => warm.hand(options, signals),
        None if options.warm_only => Handed::Failed(io::Error::other("no warm sandbox")),
        None => Handed::Cold,
    };
    let hold_exec = options.hold_exec.as_deref().and_then(ChildHold::new);
    let sandbox = match (handed, hold_exec.as_ref()) {
        (Handed::Warm(pid), _) => Ok(Sandbox {
            pid,
            exec_pipe: None,
        }),
        (Handed::Failed(err), _) => return failed(err),
        // A test's hold between fork and exec needs a fork of this process's own.
        (Handed::Cold, Some(hold)) => fork_sandbox(&program, hold),
        (Handed::Cold, None) => spawn_sandbox(&program),
    };
    let sandbox = match sandbox {
        Ok(sandbox) => sandbox,
        Err(Spawn::Exec(errno)) => {
            report.send(Event::ExecFailed(errno));
            return ExitCode::from(EXEC_FAILED_EXIT);
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
    let mut reaper = Reaper {
        options,
        report,
        signals,
        sandbox,
        phase: Phase::Running,
        exit: None,
        exec_failed: false,
        leftovers: false,
        termed: Vec::new(),
        sandbox_exe: std::cell::OnceCell::new(),
        sandbox_path: program.0.as_c_str(),
    };
    reaper.live();
    if reaper.exec_failed {
        ExitCode::from(EXEC_FAILED_EXIT)
    } else {
        ExitCode::SUCCESS
    }
}

/// Marks every descriptor above stderr close-on-exec (read from `/proc/self/fd`; the reaper's
/// own are already).
fn close_on_exec_beyond_stdio() {
    let Ok(mut entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = entries
        .by_ref()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
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
fn wait_open(signals: &Signals, run_stdin: bool) -> io::Result<bool> {
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

/// The sandbox's path and argv as C strings: a bare name is looked for in [`DEFAULT_PATH`].
fn resolve(argv: &[OsString]) -> Result<(CString, Vec<CString>), Errno> {
    let c = |arg: &OsStr| CString::new(arg.as_bytes()).map_err(|_| Errno::INVAL);
    let args: Vec<CString> = argv.iter().map(|arg| c(arg)).collect::<Result<_, _>>()?;
    let Some(first) = argv.first() else {
        return Err(Errno::INVAL);
    };
    if first.as_bytes().contains(&b'/') {
        return Ok((c(first)?, args));
    }
    for dir in DEFAULT_PATH {
        let candidate = Path::new(dir).join(first);
        let is_file = std::fs::metadata(&candidate).is_ok_and(|m| m.is_file());
        if is_file && rustix::fs::access(&candidate, rustix::fs::Access::EXEC_OK).is_ok() {
            return Ok((c(candidate.as_os_str())?, args));
        }
    }
    Err(Errno::NOENT)
}

/// The sandbox process, forked.
struct Sandbox {
    pid: Pid,
    /// Close-on-exec: reads the errno of a failed exec, or the end at a successful one.
    exec_pipe: Option<OwnedFd>,
}

/// Why the sandbox did not start.
enum Spawn {
    /// Its exec failed, with this errno: nothing ran.
    Exec(i32),
    /// This process could not set it up.
    Setup(io::Error),
}

/// Starts the sandbox: the leader of a new process group, with an empty signal mask, every
/// signal at its default disposition and an empty environment, in this process's folder and
/// stdio. Through `posix_spawn` (a `vfork`: no copy of this process's memory, which a VM makes
/// dear), which returns once the exec happened or failed.
///
/// Not through the standard library's spawn: it hands the child the caller's signal mask, and
/// this process blocks SIGHUP, SIGINT, SIGTERM and SIGCHLD to hear them on its signal fd. A
/// program that inherited those blocked would never see a graceful stop, and an event loop
/// waiting for SIGCHLD (Node's, for one) would never see its children end.
fn spawn_sandbox(program: &(CString, Vec<CString>)) -> Result<Sandbox, Spawn> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
    use nix::sys::signal::SigSet;
    let (path, argv) = program;
    let env: [CString; 0] = [];
    let setup = |err: nix::errno::Errno| Spawn::Setup(io::Error::from(err));
    let mut attr = PosixSpawnAttr::init().map_err(setup)?;
    attr.set_sigmask(&SigSet::empty()).map_err(setup)?;
    attr.set_sigdefault(&SigSet::all()).map_err(setup)?;
    attr.set_pgroup(nix::unistd::Pid::from_raw(0))
        .map_err(setup)?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF
            | PosixSpawnFlags::POSIX_SPAWN_SETPGROUP,
    )
    .map_err(setup)?;
    let actions = PosixSpawnFileActions::init().map_err(setup)?;
    let child = posix_spawn(path.as_c_str(), &actions, &attr, argv, &env)
        .map_err(|errno| Spawn::Exec(errno as i32))?;
    let pid = Pid::from_raw(child.as_raw())
        .ok_or_else(|| Spawn::Setup(io::Error::other("posix_spawn gave no pid")))?;
    // The reaper reaps the sandbox itself, last.
    Ok(Sandbox {
        pid,
        exec_pipe: None,
    })
}

/// Forks the sandbox as [`spawn_sandbox`] starts it, holding its process between fork and
/// exec (a test's hold).
#[allow(unsafe_code)]
fn fork_sandbox(program: &(CString, Vec<CString>), hold: &ChildHold) -> Result<Sandbox, Spawn> {
    let (path, argv) = program;
    let env: [CString; 0] = [];
    let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| Spawn::Setup(e.into()))?;
    // SAFETY: the reaper is single-threaded (it starts no thread, and the standard library
    // starts none), so the child is a copy of a process with no other thread that could hold a
    // lock; it runs only the code below and ends in `execve` or `exit`.
    match unsafe { nix::unistd::fork() }.map_err(|e| Spawn::Setup(e.into()))? {
        nix::unistd::ForkResult::Child => {
            drop(read);
            let errno = child_exec(path, argv, &env, Some(hold));
            let _ = rustix::io::write(&write, &errno.to_ne_bytes());
            std::process::exit(i32::from(EXEC_FAILED_EXIT));
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(write);
            let pid = Pid::from_raw(child.as_raw())
                .ok_or_else(|| Spawn::Setup(io::Error::other("fork gave no pid")))?;
            // The child does the same; doing it here too closes the race with a group kill.
            let _ = rustix::process::setpgid(Some(pid), Some(pid));
            rustix::io::ioctl_fionbio(&read, true).map_err(|e| Spawn::Setup(e.into()))?;
            Ok(Sandbox {
                pid,
                exec_pipe: Some(read),
            })
        }
    }
}

/// In the forked child: becomes the sandbox, or returns why it could not.
#[allow(unsafe_code)]
fn child_exec(path: &CString, argv: &[CString], env: &[CString], hold: Option<&ChildHold>) -> i32 {
    use nix::sys::signal::{SigHandler, SigSet, Signal as NixSignal};
    let errno = |err: nix::errno::Errno| err as i32;
    if let Err(err) =
        nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))
    {
        return errno(err);
    }
    // Every signal at its default, as posix_spawn gives them: the standard library ignores
    // SIGPIPE, and an ignored signal stays ignored across exec. (SIGKILL and SIGSTOP refuse,
    // and are at their default anyway.)
    for signal in NixSignal::iterator() {
        if matches!(signal, NixSignal::SIGKILL | NixSignal::SIGSTOP) {
            continue;
        }
        // SAFETY: setting a default disposition installs no handler.
        if let Err(err) = unsafe { nix::sys::signal::signal(signal, SigHandler::SigDfl) } {
            return errno(err);
        }
    }
    if let Err(err) = SigSet::empty().thread_set_mask() {
        return errno(err);
    }
    if let Some(hold) = hold {
        hold.hold_forever();
    }
    let Err(err) = nix::unistd::execve(path, argv, env);
    errno(err)
}

/// Puts `/dev/null` in place of this process's stdin, stdout and stderr.
fn let_go_of_stdio() -> io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    rustix::stdio::dup2_stdout(&null)?;
    rustix::stdio::dup2_stderr(&null)?;
    Ok(())
}

/// Where the reaper is in ending the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The sandbox runs; nothing to do but wait.
    Running,
    /// The sandbox process ended and left processes behind: they may end by themselves until
    /// then.
    Leftovers { until: Instant },
    /// Asked to stop: SIGTERM was sent; SIGKILL follows then.
    Stopping { kill_at: Instant },
    /// SIGKILL to everything until nothing is left.
    Killing,
}

struct Reaper<'a> {
    options: &'a Options,
    report: &'a Reporter,
    signals: &'a Signals,
    sandbox: Sandbox,
    phase: Phase,
    /// The sandbox process's end, once seen (it stays unreaped until the very end, so that its
    /// group id cannot be reused while this process signals the group).
    exit: Option<Exit>,
    exec_failed: bool,
    leftovers: bool,
    /// Descendants sent SIGTERM while stopping.
    termed: Vec<Pid>,
    /// The sandbox program's file, canonical: processes still running it are the sandbox's
    /// own, not the programs inside. Looked up at the first stop that needs it.
    sandbox_exe: std::cell::OnceCell<Option<std::path::PathBuf>>,
    /// The sandbox program's path, as executed.
    sandbox_path: &'a std::ffi::CStr,
}

impl Reaper<'_> {
    /// Runs until the sandbox process has ended and nothing it started is left.
    fn live(&mut self) {
        loop {
            let arrived = self.signals.take();
            self.read_exec_pipe();
            if arrived.stop {
                self.stop();
            } else if arrived.interrupt && self.phase == Phase::Running {
                self.interrupt();
            }
            // The leader's end first: its children are reparented here before it becomes a
            // zombie, so a list read after it is seen dead holds them.
            self.see_leader_end();
            let others = self.other_children();
            let now = Instant::now();
            let ended = self.exit.is_some();
            match self.phase {
                Phase::Running if ended && others.is_empty() => break,
                Phase::Running if ended => {
                    self.phase = Phase::Leftovers {
                        until: now + self.options.leftover_grace,
                    };
                    continue;
                }
                Phase::Running => {}
                Phase::Leftovers { .. } | Phase::Stopping { .. } | Phase::Killing
                    if ended && others.is_empty() =>
                {
                    break;
                }
                Phase::Leftovers { until } if now >= until => {
                    self.leftovers = true;
                    self.phase = Phase::Killing;
                    continue;
                }
                Phase::Leftovers { .. } => {}
                Phase::Stopping { kill_at } if now >= kill_at => {
                    self.phase = Phase::Killing;
                    continue;
                }
                Phase::Stopping { .. } => self.term_new(),
                Phase::Killing => self.kill(&others),
            }
            let wake_at = match self.phase {
                Phase::Running => None,
                Phase::Leftovers { until } => Some(until),
                Phase::Stopping { kill_at } => Some(kill_at),
                Phase::Killing => Some(now + KILL_RECHECK),
            };
            self.wait(wake_at);
        }
        if self.leftovers {
            self.report.send(Event::Leftovers);
        }
        // Everything else is gone: the leader may go too.
        let _ = waitid(WaitId::Pid(self.sandbox.pid), WaitIdOptions::EXITED);
    }

    /// A stop was asked for.
    fn stop(&mut self) {
        match self.phase {
            Phase::Running if !self.options.stop_grace.is_zero() => {
                self.term_new();
                self.phase = Phase::Stopping {
                    kill_at: Instant::now() + self.options.stop_grace,
                };
            }
            Phase::Running | Phase::Stopping { .. } => self.phase = Phase::Killing,
            Phase::Leftovers { .. } => {
                // What the program left is still there: it is killed as leftovers.
                self.leftovers = true;
                self.phase = Phase::Killing;
            }
            Phase::Killing => {}
        }
    }

    fn sandbox_exe(&self) -> &Option<std::path::PathBuf> {
        self.sandbox_exe.get_or_init(|| {
            std::fs::canonicalize(OsStr::from_bytes(self.sandbox_path.to_bytes())).ok()
        })
    }

    /// SIGTERM to every descendant not sent one yet, but the sandbox's own processes (those
    /// still running the sandbox program): a sandbox that dies of SIGTERM ends what runs
    /// inside it at once (bubblewrap does, and its `--die-with-parent` and PID namespace then
    /// SIGKILL the rest), so the programs would get no chance to clean up. They get SIGTERM;
    /// the sandbox ends when they do, or gets SIGKILL with the rest after the grace.
    fn term_new(&mut self) {
        for descendant in children::descendants() {
            if self.termed.contains(&descendant.pid) {
                continue;
            }
            let exe = descendant.exe();
            if exe.is_some() && exe == *self.sandbox_exe() {
                continue;
            }
            descendant.signal(Signal::TERM);
            self.termed.push(descendant.pid);
        }
    }

    /// Ctrl-C on the run's terminal, sent on by its supervisor ([`super::signals::INTERRUPT`]):
    /// SIGINT to every descendant but the sandbox's own processes, as [`Self::term_new`]
    /// chooses them. The terminal itself would send it to the foreground group only, which
    /// under a sandbox that starts its program in a session of its own (bubblewrap's
    /// `--new-session`) is the sandbox, not the program: the sandbox would die of it and
    /// take the program with it.
    fn interrupt(&self) {
        for descendant in children::descendants() {
            let exe = descendant.exe();
            if exe.is_some() && exe == *self.sandbox_exe() {
                continue;
            }
            descendant.signal(Signal::INT);
        }
    }

    fn kill(&self, others: &[Pid]) {
        self.signal_all(Signal::KILL, others);
    }

    /// `signal` to the sandbox's group (its id stays the sandbox's: the leader is not reaped)
    /// and to each of `others`, this process's other children.
    fn signal_all(&self, signal: Signal, others: &[Pid]) {
        // No member left is the only way this fails.
        let _ = kill_process_group(self.sandbox.pid, signal);
        if self.exit.is_none() {
            signal_child(self.sandbox.pid, signal);
        }
        for child in others {
            signal_child(*child, signal);
        }
    }

    /// This process's children other than the sandbox's leader, the dead ones reaped. The list
    /// is read again after each reaping: a child that died after it was read has had its own
    /// children reparented here, and only a read that reaps nothing shows them all.
    fn other_children(&self) -> Vec<Pid> {
        loop {
            // Without /proc there is nothing to do but go on with the group alone.
            let mut others = children::children().unwrap_or_default();
            others.retain(|pid| *pid != self.sandbox.pid);
            let before = others.len();
            others.retain(|pid| !reap_if_dead(*pid));
            if others.len() == before {
                return others;
            }
        }
    }

    /// Notes the leader's end (without reaping it) and reports it.
    fn see_leader_end(&mut self) {
        if self.exit.is_some() {
            return;
        }
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        let Ok(Some(status)) = waitid(WaitId::Pid(self.sandbox.pid), options) else {
            return;
        };
        let exit = match (status.exit_status(), status.terminating_signal()) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            // WEXITED reports only exits and deaths by signal.
            (None, None) => return,
        };
        // The exec pipe is read before the end is looked at, so a failed exec is known here.
        self.read_exec_pipe();
        self.exit = Some(exit);
        if !self.exec_failed {
            self.report.send(Event::Exited(exit));
        }
    }

    /// Reads the exec pipe: an errno means the exec failed; its end, that it happened.
    fn read_exec_pipe(&mut self) {
        let Some(pipe) = &self.sandbox.exec_pipe else {
            return;
        };
        let mut errno = [0u8; 4];
        match rustix::io::read(pipe, &mut errno) {
            Ok(4) => {
                self.exec_failed = true;
                self.report
                    .send(Event::ExecFailed(i32::from_ne_bytes(errno)));
                self.sandbox.exec_pipe = None;
            }
            Err(Errno::AGAIN | Errno::INTR) => {}
            // The end (the exec happened, or the child died before it), or a short read that
            // cannot happen for four bytes on a pipe.
            _ => self.sandbox.exec_pipe = None,
        }
    }

    /// Waits for a signal (a child's end, a stop) or the exec pipe, until `wake_at` at the
    /// latest.
    fn wait(&self, wake_at: Option<Instant>) {
        let signals = self.signals.fd();
        let mut fds = Vec::with_capacity(2);
        fds.push(PollFd::new(&signals, PollFlags::IN));
        if let Some(pipe) = &self.sandbox.exec_pipe {
            fds.push(PollFd::new(pipe, PollFlags::IN));
        }
        // EINTR or a failure: the loop looks again.
        let _ = poll_until(&mut fds, wake_at);
    }
}
