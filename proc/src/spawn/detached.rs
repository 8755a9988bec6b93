//! `--detached`, both halves: how `lnk-link-run` starts a supervisor or a sweep that outlives
//! `serve` ([`start`]), and how that process stops being its child ([`fork_away`]), so that
//! `serve` holds nothing for it: no thread, no child to reap.
//!
//! [`start`] spawns the program ([`crate::spawn`]: `posix_spawn`, with an empty signal mask and
//! every signal at its default) in a session of its own: it must outlive `serve` and the
//! signals sent to `serve`'s process group (an MCP client stops its server by signalling its
//! group). It returns once the exec happened or failed, so a supervisor that cannot be started
//! is said at once.
//!
//! The program is told `--detached`, and its first act is [`fork_away`]: it forks, and the
//! parent exits at once, so that the process that goes on is nobody's child in `serve` (init,
//! or the nearest child subreaper above `serve`, reaps it when it ends). `serve` reaps that
//! first process from a thread that lives only until then (a millisecond or so), so its answer
//! to `start` waits for no more than the exec.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsFd, BorrowedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use lnk_common::commands;

use crate::spawn::{Leader, Program};

/// What the started program holds: its stdin, stdout, stderr and fd 3 (`/dev/null` for each
/// of the first three not given, nothing at fd 3), then more descriptors at numbers of the
/// caller's choosing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stdio<'a> {
    /// Its stdin.
    pub stdin: Option<BorrowedFd<'a>>,
    /// Its stdout.
    pub stdout: Option<BorrowedFd<'a>>,
    /// Its stderr.
    pub stderr: Option<BorrowedFd<'a>>,
    /// Its fd 3, if any (a run's input).
    pub input: Option<BorrowedFd<'a>>,
    /// Further descriptors, each at its number (`(descriptor, number)`, above 3): those a
    /// run's sandbox line names, which a supervisor holds and its gate hands on.
    pub more: &'a [(BorrowedFd<'a>, RawFd)],
}

/// Starts `program args… --detached`, detached as the module says, holding `stdio`, in this
/// process's environment and folder. `what` names it in messages (`supervisor`, `sweep`).
pub fn start(program: &Path, args: &[&OsStr], stdio: Stdio<'_>, what: &str) -> io::Result<()> {
    let c = |bytes: &[u8], about: &str| {
        CString::new(bytes)
            .map_err(|_| io::Error::other(format!("the {what}'s {about} holds a NUL byte")))
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
        .collect::<io::Result<Vec<CString>>>()?;
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")?;
    let mut place = vec![
        (stdio.stdin.unwrap_or(null.as_fd()), 0),
        (stdio.stdout.unwrap_or(null.as_fd()), 1),
        (stdio.stderr.unwrap_or(null.as_fd()), 2),
    ];
    place.extend(stdio.input.map(|fd| (fd, 3)));
    place.extend_from_slice(stdio.more);
    let pid = crate::spawn::spawn(&Program {
        path: &path,
        argv: &argv,
        env: &env,
        leader: Leader::Session,
        place: &place,
    })?;
    reap_soon(pid, what.to_owned());
    Ok(())
}

/// Reaps the first process of a detached program (it exits once it has forked) from a thread
/// of its own, or here if no thread can be made.
fn reap_soon(pid: rustix::process::Pid, what: String) {
    let reap = move || {
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

/// The program's half, called first thing when it is told `--detached`: forks, and returns in
/// the child only. If the fork cannot be made, or this process has a thread besides the
/// caller's (a fork would leave the child with locks no thread of its own will release),
/// returns in this process, which then stays the child of whoever started it (said in the log).
#[allow(unsafe_code)]
pub fn fork_away() {
    if let Err(not_alone) = crate::spawn::single_thread::alone() {
        tracing::warn!("not forking away from lnk-link-run: {not_alone}; staying its child");
        return;
    }
    // SAFETY: this process has one thread, the caller's (just counted, and only the caller could
    // have made another since), so the child is a whole copy of a one-threaded process: no lock
    // another thread held is left taken. The parent only calls `_exit`, which runs nothing of
    // this process's.
    match unsafe { libc::fork() } {
        0 => {}
        -1 => tracing::warn!(
            "could not fork away from lnk-link-run: {}; staying its child",
            io::Error::last_os_error()
        ),
        // SAFETY: `_exit` ends the process at once, as the parent of a fork should.
        _ => unsafe { libc::_exit(0) },
    }
}
