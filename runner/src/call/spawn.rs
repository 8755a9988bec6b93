//! Starting a call: under a spare reaper when one is ready, else under one started now.

use std::ffi::OsString;
use std::io;
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use lnk_proc::reaper::hold::{self, Step};
use lnk_proc::reaper::{LEFTOVER_GRACE, Options, Reaper};

use crate::net::HandOff;
use crate::sandbox_line::Protected;
use crate::sandbox_line::pass::Passed;

/// Starts `argv` under a reaper of its own, with a layer of its own over each of `caches`, in
/// `cwd` (the folder `workdir`), with piped stdout and stderr, stdin piped when `with_input`
/// (else empty): a spare started ahead of the call when there is one ([`crate::call::spares`]) whose
/// sandbox protects what the call's line does (`line`'s [`Protected`]), else one started now,
/// holding the descriptors the line names (`line`'s [`Passed`]). A spare gets SIGTERM on the
/// death of the `spares` thread, which lives as long as serve; a reaper started now on the
/// death of the calling thread: the caller keeps this thread alive until the reaper is reaped
/// ([`Reaper::finish`]). Either kills the call then. A call with a proxy hands its reaper the
/// proxy's `net` ([`HandOff`]): its sandbox then runs under the stub, warm or cold.
pub fn spawn(
    argv: &[OsString],
    line: (&Passed, &Protected),
    caches: &[PathBuf],
    cwd: BorrowedFd<'_>,
    workdir: &Path,
    with_input: bool,
    net: Option<HandOff<'_>>,
) -> io::Result<Reaper> {
    if argv.is_empty() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
    }
    let mut options = Options::new(argv.to_vec(), Duration::ZERO, LEFTOVER_GRACE);
    options.hold_start = hold::path_for(Step::CallReaper);
    options.hold_exec = hold::path_for(Step::CallExec);
    options.caches = caches.to_vec();
    if let Some(net) = net {
        options.net = true;
        options.stub = Some(net.words);
    }
    let net = net.map(|net| net.fd);
    if let Some(reaper) = crate::call::spares::hand(&options, line, cwd, workdir, with_input, net) {
        tracing::trace!("the call runs in a spare");
        return Ok(reaper);
    }
    tracing::trace!("no spare ready: the call starts its own reaper");
    start(&options, line.0, cwd, with_input, net)
}

/// Starts a reaper for the call now, on the calling thread, with `options` on its command line,
/// the descriptors `passed` at their numbers (and `net`, the sandbox's end of the call's proxy
/// channel, at its fd 5).
pub fn start(
    options: &Options,
    passed: &Passed,
    cwd: BorrowedFd<'_>,
    with_input: bool,
    net: Option<BorrowedFd<'_>>,
) -> io::Result<Reaper> {
    let stdin = if with_input {
        Stdio::piped()
    } else {
        Stdio::null()
    };
    // Nothing of serve's environment (API tokens, HOME, LNK_*) reaches the reaper or the
    // sandbox: both are visible from inside a sandbox without a PID namespace, and bwrap's
    // `--clearenv` clears only the program's. The launch clears the reaper's, and the reaper
    // execs the sandbox with an empty one. Variables reach programs through `--var` alone.
    let reaper = crate::call::reaper_launch::launch()
        .args(options.to_args())
        .stdio(stdin, Stdio::piped(), Stdio::piped())
        .cwd(cwd)
        .net(net)
        .passed(passed.fds())
        .spawn()?;
    Ok(reaper)
}
