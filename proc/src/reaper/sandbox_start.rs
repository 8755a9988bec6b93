//! Starting the sandbox: its program found, then forked as the leader of a process group of
//! its own, with an empty signal mask, default dispositions and an empty environment.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::process::Pid;

use super::EXEC_FAILED_EXIT;
use super::hold::ChildHold;
use super::layers::{FAILURE_BYTES, Failure, Layers};

/// Descriptors a forked sandbox's process puts in place are first moved at this number or
/// above, and so is its exec pipe, so that no `dup2` clobbers another.
pub(super) const ABOVE: i32 = 10;

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
    /// The mount namespace of its cache layers, held open so that its end (the layers'
    /// unmounting) comes when this process drops it, after it reported `done`, rather than in
    /// the sandbox process's exit, which the call's answer waits for.
    pub(super) layer_ns: Option<OwnedFd>,
}

/// Why the sandbox did not start.
pub(super) enum Spawn {
    /// Its exec failed, with this errno: nothing ran.
    Exec(i32),
    /// Its cache layers could not be made: nothing ran.
    Layer(Failure),
    /// This process could not set it up.
    Setup(io::Error),
}

/// Starts the sandbox: the leader of a new process group, with an empty signal mask, every
/// signal at its default disposition and an empty environment, in this process's folder and
/// stdio ([`crate::spawn`], whose module says why not through the standard library's spawn).
/// Returns once the exec happened or failed.
pub(super) fn spawn_sandbox(program: &(CString, Vec<CString>)) -> Result<Sandbox, Spawn> {
    let (path, argv) = program;
    let pid = crate::spawn::spawn(&crate::spawn::Program {
        path,
        argv,
        env: &[],
        leader: crate::spawn::Leader::Group,
        place: &[],
    })
    .map_err(|failed| match failed {
        crate::spawn::Failed::Spawn(errno) => Spawn::Exec(errno.raw_os_error()),
        crate::spawn::Failed::Setup(err) => Spawn::Setup(err),
    })?;
    // The reaper reaps the sandbox itself, last.
    Ok(Sandbox {
        pid,
        exec_pipe: None,
        layer_ns: None,
    })
}

/// What a forked sandbox process does before its `exec`, beyond what [`spawn_sandbox`] does.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct BeforeExec<'a> {
    /// A test's hold between fork and exec.
    pub(super) hold: Option<&'a ChildHold>,
    /// The cache layers to enter ([`super::layers`]).
    pub(super) layers: Option<&'a Layers>,
    /// Descriptors to put in place (`dup2(from, to)`), for a warm sandbox's stub.
    pub(super) dups: &'a [(i32, i32)],
}

/// What the sandbox's process writes on its exec pipe when it does not `exec`: a kind, then
/// [`FAILURE_BYTES`] bytes (a layer's [`super::layers::Failure`], or an errno in the last four).
const EXEC_FAILED: u8 = b'e';
const LAYER_FAILED: u8 = b'l';
/// The size of what the exec pipe carries.
pub(super) const EXEC_PIPE_BYTES: usize = 1 + FAILURE_BYTES;

/// How the sandbox's process said it did not `exec`, read from its exec pipe.
pub(super) fn exec_pipe_message(bytes: [u8; EXEC_PIPE_BYTES]) -> Spawn {
    let mut rest = [0u8; FAILURE_BYTES];
    rest.copy_from_slice(&bytes[1..]);
    match bytes[0] {
        LAYER_FAILED => match Failure::decode(rest) {
            Some(failure) => Spawn::Layer(failure),
            None => Spawn::Setup(io::Error::other(
                "the sandbox's process said something else",
            )),
        },
        _ => Spawn::Exec(i32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]])),
    }
}

/// Forks the sandbox as [`spawn_sandbox`] starts it, doing `before` between fork and exec:
/// the cache layers entered, descriptors put in place, a test's hold.
///
/// Without a hold, it returns once the exec happened or failed, as `posix_spawn` does (a
/// failure is reaped here). With a hold, the exec is still to come: the returned exec pipe
/// says later whether it failed.
#[allow(unsafe_code)]
pub(super) fn fork_sandbox(
    program: &(CString, Vec<CString>),
    before: BeforeExec<'_>,
) -> Result<Sandbox, Spawn> {
    let (path, argv) = program;
    let env: [CString; 0] = [];
    let setup = |e: Errno| Spawn::Setup(e.into());
    let (read, low) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(setup)?;
    // Above the descriptors a stub's are put at, so that no `dup2` clobbers the pipe; the copy
    // below is closed at once (the exec pipe's end must be the child's alone).
    let write = rustix::io::fcntl_dupfd_cloexec(&low, ABOVE).map_err(setup)?;
    drop(low);
    // SAFETY: the reaper is single-threaded (it starts no thread, and the standard library
    // starts none), so the child is a copy of a process with no other thread that could hold a
    // lock; it runs only the code below (system calls on memory made before the fork) and ends
    // in `execve` or `_exit`.
    match unsafe { nix::unistd::fork() }.map_err(|e| Spawn::Setup(e.into()))? {
        nix::unistd::ForkResult::Child => {
            drop(read);
            let said = match child_exec(path, argv, &env, before) {
                Err(ChildFailed::Layer(failure)) => (LAYER_FAILED, failure.encode()),
                Err(ChildFailed::Errno(errno)) => {
                    let mut bytes = [0u8; FAILURE_BYTES];
                    bytes[4..].copy_from_slice(&errno.to_le_bytes());
                    (EXEC_FAILED, bytes)
                }
            };
            let mut bytes = [said.0; EXEC_PIPE_BYTES];
            bytes[1..].copy_from_slice(&said.1);
            let _ = rustix::io::write(&write, &bytes);
            // SAFETY: `_exit` ends the child at once: none of the parent's exit hooks or
            // buffered output (copies in this child) runs, as the child of a fork must leave.
            unsafe { libc::_exit(i32::from(EXEC_FAILED_EXIT)) }
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(write);
            let pid = Pid::from_raw(child.as_raw())
                .ok_or_else(|| Spawn::Setup(io::Error::other("fork gave no pid")))?;
            // The child does the same; doing it here too closes the race with a group kill.
            let _ = rustix::process::setpgid(Some(pid), Some(pid));
            if before.hold.is_some() {
                rustix::io::ioctl_fionbio(&read, true).map_err(setup)?;
                return Ok(Sandbox {
                    pid,
                    exec_pipe: Some(read),
                    layer_ns: None,
                });
            }
            let mut said = [0u8; EXEC_PIPE_BYTES];
            match crate::fill::fill(&read, &mut said) {
                // The pipe's end: the exec happened, in the layers' namespaces if any.
                Ok(false) => Ok(Sandbox {
                    pid,
                    exec_pipe: None,
                    layer_ns: before.layers.and_then(|_| layer_namespace(pid)),
                }),
                Ok(true) => {
                    let _ = nix::sys::wait::waitpid(child, None);
                    Err(exec_pipe_message(said))
                }
                Err(err) => {
                    let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                    let _ = nix::sys::wait::waitpid(child, None);
                    Err(Spawn::Setup(err))
                }
            }
        }
    }
}

/// The mount namespace of the process `pid`, open (`None` when it has ended already: its
/// namespace went with it).
pub(super) fn layer_namespace(pid: Pid) -> Option<OwnedFd> {
    let path = format!("/proc/{}/ns/mnt", pid.as_raw_nonzero());
    rustix::fs::open(
        path.as_str(),
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()
}

/// Why the forked child did not `exec`.
enum ChildFailed {
    Layer(Failure),
    Errno(i32),
}

/// In the forked child: becomes the sandbox, or returns why it could not.
#[allow(unsafe_code)]
fn child_exec(
    path: &CString,
    argv: &[CString],
    env: &[CString],
    before: BeforeExec<'_>,
) -> Result<std::convert::Infallible, ChildFailed> {
    let errno = |err: nix::errno::Errno| ChildFailed::Errno(err as i32);
    nix::unistd::setpgid(nix::unistd::Pid::from_raw(0), nix::unistd::Pid::from_raw(0))
        .map_err(errno)?;
    // Every signal at its default and none blocked, as posix_spawn gives them (this child is
    // the copy of a one-threaded reaper).
    crate::spawn::reset_signals()
        .map_err(|err| ChildFailed::Errno(err.raw_os_error().unwrap_or(libc::EINVAL)))?;
    for &(from, to) in before.dups {
        // SAFETY: `from` is a descriptor the caller keeps open until the fork returned, so it is
        // open in the child, and it is only borrowed here, never closed.
        let from = unsafe { std::os::fd::BorrowedFd::borrow_raw(from) };
        // SAFETY: `to` is the number `dup2` replaces (open or not); the `OwnedFd` standing for
        // it is never dropped, so it closes nothing and owns nothing another owner holds.
        let mut target = std::mem::ManuallyDrop::new(unsafe {
            <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(to)
        });
        rustix::io::dup2(from, &mut target).map_err(|e| ChildFailed::Errno(e.raw_os_error()))?;
    }
    if let Some(layers) = before.layers {
        layers.enter().map_err(ChildFailed::Layer)?;
    }
    if let Some(hold) = before.hold {
        hold.hold_forever();
    }
    let Err(err) = nix::unistd::execve(path, argv, env);
    Err(errno(err))
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
