//! What a process may do only while it has one thread, checked rather than promised: set its
//! environment (the runner's check marker), and fork and go on running Rust in the child
//! (`--detached`'s second half, [`crate::spawn::detached::fork_away`]).
//!
//! The count is `/proc/self/stat`'s; a process gets a thread only by one of its own threads
//! making it, so when the count is one, nothing but the caller can change it before the caller
//! acts on it.

use std::ffi::OsStr;
use std::fmt;

/// Why this process is not known to have one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotAlone {
    /// It has this many.
    Threads(u64),
    /// `/proc/self/stat` could not be read (no `/proc`, or another PID namespace's).
    Unknown,
}

impl fmt::Display for NotAlone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotAlone::Threads(n) => write!(f, "this process has {n} threads"),
            NotAlone::Unknown => write!(f, "this process's threads cannot be counted"),
        }
    }
}

impl std::error::Error for NotAlone {}

/// Whether this process has one thread, the caller's.
pub fn alone() -> Result<(), NotAlone> {
    match crate::proc_info::threads_of_this_process() {
        Some(1) => Ok(()),
        Some(n) => Err(NotAlone::Threads(n)),
        None => Err(NotAlone::Unknown),
    }
}

/// Sets the environment variable `name` to `value` in this process, which must have one
/// thread; refused otherwise (with nothing set).
#[allow(unsafe_code)]
pub fn set_env(name: &OsStr, value: &OsStr) -> Result<(), NotAlone> {
    alone()?;
    // SAFETY: `set_var` is unsound only when another thread reads or writes the environment at
    // the same time. This process has one thread, the caller's (just counted, and only the
    // caller could have made another since).
    unsafe { std::env::set_var(name, value) };
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_test_is_never_alone() {
        // The test harness runs each test on a thread of its own, beside its main thread.
        let other =
            std::thread::spawn(|| std::thread::park_timeout(std::time::Duration::from_secs(5)));
        assert!(matches!(alone(), Err(NotAlone::Threads(n)) if n >= 2));
        let name = OsStr::new("LNK_SINGLE_THREAD_TEST_NEVER_SET");
        assert!(set_env(name, OsStr::new("x")).is_err());
        assert!(std::env::var_os(name).is_none());
        other.thread().unpark();
        other.join().unwrap();
    }
}
