//! serve's side of the network (`--net-allow`): a proxy of Link Run's for each call
//! ([`lnk_proc::net`]), started before the call's sandbox and ended once everything of the
//! call is dead, and what the answer says of it ([`render`]).
//!
//! Without `--net-allow` none of this runs: no proxy, no thread, no channel, and a call's
//! command line is today's.

pub mod render;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use lnk_common::network::Network;
use lnk_proc::net::{AllowList, Proxy};

/// A call's proxy, from before its sandbox starts until after it ended.
#[derive(Debug)]
pub struct CallProxy {
    proxy: Proxy,
    /// The sandbox's end of the proxy's channel, until the call's reaper has it.
    sandbox_end: Option<OwnedFd>,
    /// How many words of the call's command line are its sandbox's.
    words: usize,
}

/// What a call's reaper is handed for the call's proxy: the sandbox's end of its channel, and
/// how many words of the command line are the sandbox's (the stub is started after them).
#[derive(Debug, Clone, Copy)]
pub struct HandOff<'a> {
    /// The sandbox's end of the channel.
    pub fd: BorrowedFd<'a>,
    /// The sandbox's words.
    pub words: usize,
}

impl CallProxy {
    /// Starts the proxy of a call whose programs may reach `allow`, for at most `lifetime`;
    /// its sandbox is the first `words` words of its command line.
    pub fn start(allow: &Arc<AllowList>, lifetime: Duration, words: usize) -> io::Result<Self> {
        let (proxy, sandbox_end) = Proxy::start(Arc::clone(allow), lifetime)?;
        Ok(CallProxy {
            proxy,
            sandbox_end: Some(sandbox_end),
            words,
        })
    }

    /// What the call's reaper is handed.
    pub fn hand_off(&self) -> Option<HandOff<'_>> {
        self.sandbox_end.as_ref().map(|fd| HandOff {
            fd: fd.as_fd(),
            words: self.words,
        })
    }

    /// The reaper has the sandbox's end: this process keeps none of it, so that the channel
    /// ends with the sandbox's stub.
    pub fn handed(&mut self) {
        self.sandbox_end = None;
    }

    /// Ends the proxy once the call is over: its figures.
    pub fn finish(self) -> Network {
        self.proxy.finish()
    }
}
