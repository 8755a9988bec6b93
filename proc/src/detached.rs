//! `--detached`: how a supervisor or a sweep that `lnk-link-run` started stops being its
//! child. It forks, and the parent exits at once (`lnk-link-run` reaps it); the child goes on,
//! an orphan, reaped by init (or the nearest child subreaper) when it ends. So `serve` holds
//! no child per run, and its answer to `start` waits for no more than the exec.

/// Forks; returns in the child only. If the fork fails, returns in this process, which then
/// stays the child of whoever started it (said in the log).
#[allow(unsafe_code)]
pub fn fork_away() {
    // SAFETY: called from `main` before this process makes any thread, so the child is a
    // whole copy of a one-threaded process: no lock another thread held is left taken. The
    // parent only calls `_exit`, which runs nothing of this process's.
    match unsafe { libc::fork() } {
        0 => {}
        -1 => tracing::warn!(
            "could not fork away from lnk-link-run: {}; staying its child",
            std::io::Error::last_os_error()
        ),
        // SAFETY: `_exit` ends the process at once, as the parent of a fork should.
        _ => unsafe { libc::_exit(0) },
    }
}
