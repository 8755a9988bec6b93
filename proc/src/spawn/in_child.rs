//! What the child of a `std::process::Command` does between its fork and its exec: the
//! standard library's `pre_exec`, wrapped so that the binaries call safe code. Each step is a
//! system call on values made before the fork, which the closure owns (descriptors included, so
//! that each is open in the child however long the caller keeps its own).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::Signal;

use crate::reaper::layers::Layers;

/// What a `Command`'s child does before its exec, in the order of the fields.
#[derive(Debug, Default)]
pub struct InChild {
    /// The folder it starts in, a handle on it (`fchdir`: no path resolved again). First, so
    /// that the cache layers' mount namespace, entered after, carries it over (a folder entered
    /// after would be one of the namespace left behind).
    pub folder: Option<OwnedFd>,
    /// The cache layers it enters ([`crate::reaper::layers`]).
    pub layers: Option<Layers>,
    /// Whether it leads a new session (and so a new process group), without a controlling
    /// terminal.
    pub new_session: bool,
    /// Descriptors it keeps open across the exec at their own numbers (close-on-exec cleared
    /// in the child only): a program named `/proc/self/fd/<n>`, for one.
    pub keep_open: Vec<OwnedFd>,
    /// The signal it gets when the **thread** that spawns it ends; it fails to start (`ESRCH`)
    /// when its parent died before the signal was set, since then none would come.
    pub parent_death: Option<Signal>,
}

impl InChild {
    /// Arranges `command`'s child to do these steps, after whatever was arranged before. The
    /// descriptors stay open in this process as long as `command` lives.
    #[allow(unsafe_code)]
    pub fn arrange(self, command: &mut Command) {
        let parent = rustix::process::getpid();
        let InChild {
            folder,
            layers,
            new_session,
            keep_open,
            parent_death,
        } = self;
        // SAFETY: the closure runs in the child between fork and exec, where only
        // async-signal-safe work is allowed. It makes system calls only (fchdir, the layers'
        // unshare, writes and mounts on strings made before the fork, setsid, fcntl, prctl,
        // getppid) on values it owns, made before the fork and only read, and builds
        // `io::Error`s from raw errnos, which does not allocate; it takes no lock. The
        // descriptors are the closure's own, so they are open in the child.
        unsafe {
            command.pre_exec(move || {
                if let Some(folder) = &folder {
                    rustix::process::fchdir(folder)?;
                }
                if let Some(layers) = &layers {
                    layers
                        .enter()
                        .map_err(|failure| io::Error::from(failure.errno))?;
                }
                if new_session {
                    rustix::process::setsid()?;
                }
                for fd in &keep_open {
                    rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
                }
                if let Some(signal) = parent_death {
                    rustix::process::set_parent_process_death_signal(Some(signal))?;
                    if rustix::process::getppid() != Some(parent) {
                        return Err(io::Error::from(rustix::io::Errno::SRCH));
                    }
                }
                Ok(())
            });
        }
    }
}

/// Arranges `command`'s child to hold each descriptor of `place` at its number (`(descriptor,
/// number)`), after whatever was arranged before (a reaper's fd 3 and 4 placed first). Copies
/// are made here, above every number they go to, so that putting one in place never closes
/// another before it is placed; they stay open in this process as long as `command` lives.
#[allow(unsafe_code)]
pub fn place_in_child(command: &mut Command, place: &[(BorrowedFd<'_>, RawFd)]) -> io::Result<()> {
    let Some(above) = place.iter().map(|(_, target)| *target).max() else {
        return Ok(());
    };
    let staged = place
        .iter()
        .map(|(fd, target)| {
            let copy = rustix::io::fcntl_dupfd_cloexec(fd, above.saturating_add(1))?;
            Ok((copy, *target))
        })
        .collect::<io::Result<Vec<(OwnedFd, RawFd)>>>()?;
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed: it makes `dup2` calls only, on descriptors it owns
    // (the vector was allocated before the fork, and is only read), and builds `io::Error`s
    // from raw errnos, which does not allocate. Each source is above every target, so no
    // `dup2` closes a source still to be placed; a target may be open or not, `dup2` replaces
    // it either way, and nothing here owns it.
    unsafe {
        command.pre_exec(move || {
            for (source, target) in &staged {
                if libc::dup2(source.as_fd().as_raw_fd(), *target) < 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    Ok(())
}
