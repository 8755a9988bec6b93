//! Descriptors a process's parent hands down at fixed numbers, taken over after a check: a
//! reaper's report pipe (fd 3) and a spare's control socket (fd 4), a gate's run stdin (fd 4),
//! a call's proxy channel, the warm stub's channel (fd 4), a supervisor's run input (fd 3).
//! [`take`] is the one place a handed-down number becomes an [`OwnedFd`].
//!
//! The argument for its soundness: a number is taken over only when it is open, of the kind
//! its handing-over promises, and not taken before in this process (each number once, however
//! often it is asked for); and every caller asks for it at its start, before the process opens
//! anything that could be given that number, as the launch contracts (`reaper::launch`, the
//! runner's `start`) say.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::fs::FileType;
use rustix::io::FdFlags;

/// What a handed-down descriptor must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pipe.
    Pipe,
    /// A socket.
    Socket,
    /// Anything open (a run's stdin: a pipe, a terminal or `/dev/null`).
    Open,
}

/// What becomes of the descriptor at the taker's `exec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExec {
    /// Closed: made close-on-exec, so that nothing this process starts inherits it.
    Close,
    /// Left as it is (its owner puts it in place, or closes it, itself).
    Keep,
}

/// The numbers taken over so far, one bit each (0 to 63: handed-down numbers are small).
static TAKEN: AtomicU64 = AtomicU64::new(0);

/// Takes over descriptor `fd`, which this process's parent handed down, once it is open, of
/// `kind`, and not taken over before in this process; then `on_exec`. An error says which of
/// those failed; a descriptor that is open but not `kind` is left as it is, never closed (it
/// may be something else's), and so is one that could not be made close-on-exec.
#[allow(unsafe_code)]
pub fn take(fd: RawFd, kind: Kind, on_exec: OnExec) -> io::Result<OwnedFd> {
    let bit = u32::try_from(fd)
        .ok()
        .and_then(|fd| 1u64.checked_shl(fd))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("fd {fd} is no handed-down number"),
            )
        })?;
    // SAFETY: `F_GETFD` only reads the descriptor table's flags for a number, touching no memory
    // of this process's; a number that is not open gives `EBADF`.
    if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is open (just asked), and is borrowed only for the `fstat` below, while
    // nothing else runs in between that could close it (the callers take their numbers at their
    // start, on their one thread).
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let found = FileType::from_raw_mode(rustix::fs::fstat(borrowed)?.st_mode);
    let fits = match kind {
        Kind::Pipe => found == FileType::Fifo,
        Kind::Socket => found == FileType::Socket,
        Kind::Open => true,
    };
    if !fits {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("fd {fd} is not a {kind:?} but a {found:?}: it was not handed down"),
        ));
    }
    if TAKEN.fetch_or(bit, Ordering::SeqCst) & bit != 0 {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("fd {fd} was taken over already"),
        ));
    }
    // SAFETY: `fd` is open and of the kind its handing-over promised (just checked); it was not
    // taken over before in this process (its bit was clear, and is set now, so no second
    // `OwnedFd` is ever made of it here), and by the launch contracts nothing else in the
    // process opened it: it is this process's to own and to close.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    if on_exec == OnExec::Close
        && let Err(err) = rustix::io::fcntl_setfd(&owned, FdFlags::CLOEXEC)
    {
        std::mem::forget(owned);
        return Err(err.into());
    }
    Ok(owned)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::os::fd::{AsRawFd, IntoRawFd};

    use super::*;

    #[test]
    fn takes_a_number_once_and_only_of_its_kind() {
        let (read, write) = rustix::pipe::pipe().unwrap();
        let read = read.into_raw_fd();
        let write_fd = write.as_raw_fd();
        let err = take(read, Kind::Socket, OnExec::Close).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{err}");
        let owned = take(read, Kind::Pipe, OnExec::Close).unwrap();
        let flags = rustix::io::fcntl_getfd(&owned).unwrap();
        assert!(flags.contains(FdFlags::CLOEXEC));
        let err = take(read, Kind::Pipe, OnExec::Close).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists, "{err}");
        drop(owned);
        // Closed now: not open, so refused whatever its bit says.
        assert!(take(read, Kind::Open, OnExec::Keep).is_err());
        assert!(take(write_fd + 1000, Kind::Open, OnExec::Keep).is_err());
        drop(write);
    }
}
