//! Descriptors a sandbox line's words name (`--bind-fd 100 <path>`): the process that runs
//! the sandbox program must hold each at its number. They are put there in the child of
//! whatever starts that process (serve's probe, a call's or a spare's reaper, a run's
//! supervisor), after everything else the child places, and passed on from there as any
//! descriptor without close-on-exec is (a reaper's `posix_spawn`, a supervisor's gate).
//! bubblewrap closes each once it has bound it, so the program never holds one.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The number the first passed descriptor gets; the next ones follow it. Above the few a
/// reaper or a supervisor places (0 to 4) and opens for itself; a reaper keeps those its
/// sandbox's words bind open for the sandbox ([`lnk_proc::reaper::passed_fds`]).
pub const FIRST_FD: RawFd = lnk_proc::reaper::PASSED_FDS_FROM;
/// The most descriptors a line may pass (their numbers stay under the usual limit of 1024).
pub const MAX_PASSED: usize = 400;

/// Descriptors to pass, the `i`th at [`FIRST_FD`]` + i`.
#[derive(Debug, Default)]
pub struct Passed {
    fds: Vec<OwnedFd>,
}

/// Copies of the descriptors, placed above every number they go to, kept open until the child
/// is started.
#[derive(Debug)]
pub struct Staged {
    sources: Vec<OwnedFd>,
}

impl Passed {
    /// `fds`, the first at [`FIRST_FD`].
    pub fn new(fds: Vec<OwnedFd>) -> Self {
        Passed { fds }
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// The descriptors, in order (the first to go to [`FIRST_FD`]).
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.fds.iter().map(AsFd::as_fd)
    }

    /// Adds `more` after these.
    pub fn extend(&mut self, more: Passed) {
        self.fds.extend(more.fds);
    }

    /// Copies of the descriptors, each at a number above all those they go to, so that putting
    /// one in place never closes another before it is placed.
    pub fn stage(&self) -> io::Result<Staged> {
        let above = FIRST_FD + RawFd::try_from(self.fds.len()).unwrap_or(RawFd::MAX / 2);
        let sources = self
            .fds
            .iter()
            .map(|fd| rustix::io::fcntl_dupfd_cloexec(fd, above).map_err(io::Error::from))
            .collect::<io::Result<Vec<OwnedFd>>>()?;
        Ok(Staged { sources })
    }

    /// Arranges `command` to start holding these at their numbers: after the closures given
    /// before this one (a reaper's fd 3 and 4 placed first). Keep the [`Staged`] it returns
    /// until `spawn` returns.
    #[allow(unsafe_code)]
    pub fn pass_to(&self, command: &mut Command) -> io::Result<Staged> {
        let staged = self.stage()?;
        if staged.sources.is_empty() {
            return Ok(staged);
        }
        let raw: Vec<RawFd> = staged.sources.iter().map(AsRawFd::as_raw_fd).collect();
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe work is allowed: it makes `dup2` calls only, on numbers copied in
        // before the fork (the vector is allocated before it, and only read), and builds
        // `io::Error`s from raw errnos, which does not allocate. The sources are descriptors
        // `staged` keeps open until the spawn returns, so they are open in the child; each is
        // above every target, so no `dup2` closes a source still to be placed.
        unsafe {
            command.pre_exec(move || {
                for (i, source) in raw.iter().enumerate() {
                    let target = FIRST_FD + RawFd::try_from(i).unwrap_or(0);
                    if libc::dup2(*source, target) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        Ok(staged)
    }
}

impl Staged {
    /// Adds, to a `posix_spawn`'s file actions, putting each at its number (after the actions
    /// added before). Keep `self` until the spawn returns.
    pub fn add_to(&self, actions: &mut nix::spawn::PosixSpawnFileActions) -> io::Result<()> {
        for (i, source) in self.sources.iter().enumerate() {
            let target = FIRST_FD + RawFd::try_from(i).map_err(io::Error::other)?;
            actions
                .add_dup2(source.as_raw_fd(), target)
                .map_err(io::Error::from)?;
        }
        Ok(())
    }

    /// The copies' numbers, for a test.
    #[cfg(test)]
    pub fn sources(&self) -> Vec<RawFd> {
        self.sources.iter().map(AsRawFd::as_raw_fd).collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::process::Stdio;

    #[test]
    fn a_child_holds_each_descriptor_at_its_number_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let mut fds = Vec::new();
        for name in ["a", "b", "c"] {
            let path = dir.path().join(name);
            std::fs::write(&path, name).unwrap();
            fds.push(OwnedFd::from(std::fs::File::open(&path).unwrap()));
        }
        let passed = Passed::new(fds);
        let mut command = Command::new("/bin/sh");
        command
            .args([
                "-c",
                "cat /proc/self/fd/100 /proc/self/fd/101 /proc/self/fd/102; \
                 test -e /proc/self/fd/103 && echo more",
            ])
            .stdout(Stdio::piped());
        let staged = passed.pass_to(&mut command).unwrap();
        assert!(staged.sources().iter().all(|fd| *fd >= FIRST_FD + 3));
        let out = command.output().unwrap();
        drop(staged);
        assert_eq!(String::from_utf8_lossy(&out.stdout), "abc");
    }
}
