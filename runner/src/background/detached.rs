//! Starting `lnk-link-supervise` (a supervisor, a sweep) so that it outlives `serve`, and so
//! that `serve` holds nothing for it: no thread, no child to reap.
//!
//! The child is started with `posix_spawn` (a `vfork`: no copy of `serve`'s memory), in a
//! session of its own (it must outlive `serve` and the signals sent to `serve`'s process
//! group: an MCP client stops its server by signalling its group), with an empty signal mask
//! and every standard signal at its default (glibc's `posix_spawn` leaves its own two
//! real-time signals ignored). `posix_spawn` returns once the exec happened or failed, so
//! a supervisor that cannot be started is said at once.
//!
//! The child is told `--detached`: its first act is to fork, the parent exiting at once, so
//! that the process that goes on is nobody's child here (init, or the nearest child subreaper
//! above `serve`, reaps it when it ends). `serve` reaps that first process from a thread that
//! lives only until then (a millisecond or so), so the answer to `start` does not wait for it.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use lnk_common::Causes;
use lnk_common::commands;
use lnk_common::layout::StateDir;

/// What the child's stdin, stdout and stderr are: a descriptor each, or `/dev/null`.
#[derive(Debug, Default)]
pub struct Stdio {
    /// Its stdin.
    pub stdin: Option<OwnedFd>,
    /// Its stdout.
    pub stdout: Option<OwnedFd>,
    /// Its stderr.
    pub stderr: Option<OwnedFd>,
    /// Its fd 3, if any (a run's input).
    pub input: Option<OwnedFd>,
    /// Descriptors the run's sandbox line names, at their numbers
    /// ([`crate::sandbox_line::pass`]): the supervisor holds them, and its gate hands them on.
    pub passed: crate::sandbox_line::pass::Passed,
}

/// Starts `program args… --detached`, detached as the module says, with `stdio`, in this
/// process's environment and folder.
pub fn spawn(program: &Path, args: &[&OsStr], stdio: Stdio, what: &str) -> std::io::Result<()> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
    use nix::sys::signal::SigSet;
    let c = |bytes: &[u8], about: &str| {
        CString::new(bytes)
            .map_err(|_| std::io::Error::other(format!("the {what}'s {about} holds a NUL byte")))
    };
    let path = c(program.as_os_str().as_bytes(), "path")?;
    let detached = format!("--{}", commands::DETACHED);
    let mut argv = vec![path.clone()];
    for arg in args.iter().copied().chain([OsStr::new(&detached)]) {
        argv.push(c(arg.as_bytes(), "arguments")?);
    }
    let env = std::env::vars_os()
        .map(|(key, value)| {
            let mut pair = key.into_encoded_bytes();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            c(&pair, "environment")
        })
        .collect::<std::io::Result<Vec<CString>>>()?;

    let mut attr = PosixSpawnAttr::init()?;
    attr.set_sigmask(&SigSet::empty())?;
    attr.set_sigdefault(&SigSet::all())?;
    attr.set_flags(
        PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
            | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF
            | PosixSpawnFlags::from_bits_retain(libc::c_int::from(libc::POSIX_SPAWN_SETSID)),
    )?;
    let mut actions = PosixSpawnFileActions::init()?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    for (target, fd) in [(0, &stdio.stdin), (1, &stdio.stdout), (2, &stdio.stderr)] {
        // Our descriptors are never 0, 1 or 2 (those are the protocol's), so each `dup2`
        // makes a new descriptor, without close-on-exec.
        let fd = fd.as_ref().map_or(null.as_raw_fd(), AsRawFd::as_raw_fd);
        actions.add_dup2(fd, target)?;
    }
    // fd 3 is never ours either in practice; one that is would stay close-on-exec through a
    // `dup2` onto itself, so it is moved first.
    let input = match stdio.input.as_ref() {
        Some(fd) if fd.as_raw_fd() == 3 => Some(rustix::io::fcntl_dupfd_cloexec(fd, 10)?),
        Some(fd) => Some(fd.try_clone()?),
        None => None,
    };
    if let Some(fd) = &input {
        actions.add_dup2(fd.as_raw_fd(), 3)?;
    }
    let staged = stdio.passed.stage()?;
    staged.add_to(&mut actions)?;
    let child = posix_spawn(path.as_c_str(), &actions, &attr, &argv, &env)?;
    drop((input, staged));
    drop((stdio, null));
    reap_soon(child.as_raw(), what.to_owned());
    Ok(())
}

/// Reaps the first process of a detached child (it exits once it has forked) from a thread of
/// its own, or here if no thread can be made.
fn reap_soon(pid: i32, what: String) {
    let reap = move || {
        let Some(pid) = rustix::process::Pid::from_raw(pid) else {
            return;
        };
        let waited = loop {
            match rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::empty()) {
                Err(rustix::io::Errno::INTR) => {}
                other => break other,
            }
        };
        match waited {
            Ok(Some((_, status))) if status.exit_status() == Some(0) => {}
            Ok(Some((_, status))) => {
                tracing::warn!("the {what} ended before it detached: {status:?}");
            }
            Ok(None) => {}
            Err(err) => tracing::warn!(
                "waiting for the {what} to detach: {}",
                lnk_common::Causes(&err)
            ),
        }
    };
    let reaper = std::thread::Builder::new().name("detaching".into());
    // `spawn` takes the closure; if no thread can be made it is gone with the error, so the
    // wait is made again here from a copy.
    let fallback = reap.clone();
    if reaper.spawn(reap).is_err() {
        fallback();
    }
}

/// A log of the state folder as a child's stderr: a process that outlives `serve` must not
/// hold `serve`'s stderr, which is often a pipe of the MCP host.
pub fn log(state: &StateDir, path: &Path) -> Option<OwnedFd> {
    match state.open_log(path) {
        Ok(log) => Some(OwnedFd::from(log)),
        Err(err) => {
            tracing::warn!("{}; that log is lost", Causes(&err));
            None
        }
    }
}
