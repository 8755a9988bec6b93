//! Handing a call to a warm sandbox's stub ([`super::warm`]): how long it may take, and why a
//! stub did not take it ([`super::warm_sandbox`] hands, [`super::warm`] decides what follows).

use std::io;
use std::time::Duration;

use super::report::Event;

/// How long a stub may take from the call's spec to its `exec` (a matter of a millisecond)
/// before it is killed and the call is answered as not run. Under the wait `serve` gives a
/// reaper to report its sandbox's start (a second past the call's deadline), so that a call of
/// any timeout hears it.
pub const HAND_OFF_LIMIT: Duration = Duration::from_millis(500);

/// Why a stub did not take the call it was handed.
#[derive(Debug)]
pub(super) enum NotTaken {
    /// It said so: it could not run the call (a cold start may).
    Failed(io::Error),
    /// It refused the working folder ([`Event::FolderRefused`]), or said nothing within
    /// [`HAND_OFF_LIMIT`] ([`Event::StubStuck`]).
    NotRun(Event),
}

impl NotTaken {
    /// What a call that asked for the warm sandbox alone is told.
    pub(super) fn into_error(self) -> io::Error {
        match self {
            NotTaken::Failed(err) => err,
            NotTaken::NotRun(Event::FolderRefused(errno)) => io::Error::from_raw_os_error(errno),
            NotTaken::NotRun(_) => io::Error::other(format!(
                "the stub did not take the call within {HAND_OFF_LIMIT:?}"
            )),
        }
    }
}
