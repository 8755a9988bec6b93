//! Descriptors a sandbox line's words name (`--bind-fd 100 <path>`): the process that runs
//! the sandbox program must hold each at its number. They are put there in the child of
//! whatever starts that process (serve's probe, a call's or a spare's reaper, a run's
//! supervisor), after everything else the child places, and passed on from there as any
//! descriptor without close-on-exec is (a reaper's `posix_spawn`, a supervisor's gate).
//! bubblewrap closes each once it has bound it, so the program never holds one.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd, RawFd};
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

    /// Each descriptor with the number it goes to.
    pub fn place(&self) -> Vec<(BorrowedFd<'_>, RawFd)> {
        (FIRST_FD..)
            .zip(&self.fds)
            .map(|(target, fd)| (fd.as_fd(), target))
            .collect()
    }

    /// Arranges `command` to start holding these at their numbers: after the steps arranged
    /// before this one (a reaper's fd 3 and 4 placed first). The copies this makes stay open as
    /// long as `command` lives.
    pub fn pass_to(&self, command: &mut Command) -> io::Result<()> {
        lnk_proc::spawn::place_in_child(command, &self.place())
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
        passed.pass_to(&mut command).unwrap();
        let out = command.output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "abc");
    }
}
