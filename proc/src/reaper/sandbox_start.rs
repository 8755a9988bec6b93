//! Starting the sandbox: its program found, then forked as the leader of a process group of
//! its own, with an empty signal mask, default dispositions and an empty environment.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::io::Errno;
use rustix::process::Pid;

use super::EXEC_FAILED_EXIT;
use super::hold::ChildHold;

/// Where a bare sandbox program name is looked for: the reaper's environment is empty, so it
/// has no `PATH` of its own. (`serve` resolves the sandbox to an absolute path at start; this
/// serves records written before it did.)
const DEFAULT_PATH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// The sandbox's path and argv as C strings: a bare name is looked for in [`DEFAULT_PATH`].
pub(super) fn resolve(argv: &[OsString]) -> Result<(CString, Vec<CString>), Errno> {
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
pub(super) struct Sandbox {
    pub(super) pid: Pid,
    /// Close-on-exec: reads the errno of a failed exec, or the end at a successful one.
    pub(super) exec_pipe: Option<OwnedFd>,
}

/// Why the sandbox did not start.
pub(super) enum Spawn {
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
pub(super) fn spawn_sandbox(program: &(CString, Vec<CString>)) -> Result<Sandbox, Spawn> {
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
pub(super) fn fork_sandbox(
    program: &(CString, Vec<CString>),
    hold: &ChildHold,
) -> Result<Sandbox, Spawn> {
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
pub(super) fn let_go_of_stdio() -> io::Result<()> {
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    rustix::stdio::dup2_stdout(&null)?;
    rustix::stdio::dup2_stderr(&null)?;
    Ok(())
}
