//! Link Run's proxy (`--net-allow`): the one way a sandboxed program reaches the network, to
//! the hosts of an allow-list and nowhere else, with every refusal counted and named.
//!
//! The sandbox's own network stays cut (`--unshare-all`). Each sandbox gets a [`Proxy`] of its
//! own: a socket pair ([`channel`]), whose one end the sandbox's stub inherits and uses once,
//! to hand out a listener it made on the sandbox's own `127.0.0.1:3128`; the proxy accepts the
//! programs' connections on it from outside, through the process's one [`hub`] thread, each on
//! a thread of its own ([`conn`]). A connection asks, as an HTTP proxy is asked, for a
//! `CONNECT` tunnel or one plain HTTP request ([`request`]); the [`allow`]-list is asked, the
//! name resolved here, once, and the addresses it gives judged ([`resolve`], [`special`]); the
//! connection goes to an address that passed, and bytes move both ways without a copy
//! ([`pump`]), counted ([`figures`]), within the sandbox's time, an idle limit and the bounds
//! on connections ([`sandbox`]). A refusal is an HTTP error that says why ([`why`]).
//!
//! The programs learn the proxy's address from the variables of [`env`](mod@env). `serve` keeps a
//! proxy per call, the supervisor one for its run, for as long as the run.

pub mod allow;
pub mod channel;
mod conn;
pub mod env;
mod figures;
mod http;
mod hub;
mod pump;
pub mod request;
pub mod resolve;
mod sandbox;
pub mod special;
pub mod why;

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Duration;

use lnk_common::network::Network;

pub use allow::AllowList;
pub use channel::{PROXY_ADDRESS, PROXY_PORT};
pub use sandbox::{MAX_IN_ALL, MAX_OPEN, MAX_OPEN_IN_PROCESS};

/// How long the connections of a sandbox that ended may take to close before its figures are
/// read anyway (a thread still resolving a name; it connects nowhere once the proxy stopped).
const DRAIN_WITHIN: Duration = Duration::from_secs(1);

/// One sandbox's proxy, from before its sandbox starts until after it ended.
#[derive(Debug)]
pub struct Proxy {
    key: u64,
    net: Arc<sandbox::SandboxNet>,
    done: bool,
}

impl Proxy {
    /// Starts the proxy of a sandbox whose programs may reach `allow`, for at most `lifetime`
    /// (its call's or run's time limit). Returns it with the sandbox's end of its channel,
    /// which the caller hands to the sandbox's stub (through its reaper) and then closes.
    pub fn start(allow: Arc<AllowList>, lifetime: Duration) -> io::Result<(Proxy, OwnedFd)> {
        let (ours, theirs) = channel::pair()?;
        let net = Arc::new(sandbox::SandboxNet::new(allow, lifetime)?);
        let key = hub::hub()?.register(ours, Arc::clone(&net))?;
        Ok((
            Proxy {
                key,
                net,
                done: false,
            },
            theirs,
        ))
    }

    /// The figures so far.
    pub fn figures(&self) -> Network {
        self.net.figures.snapshot()
    }

    /// Ends the proxy: nothing more is accepted, every connection is closed, and the figures
    /// are read once they are (or after a second at most).
    pub fn finish(mut self) -> Network {
        self.end();
        self.net.wait_drained(DRAIN_WITHIN);
        self.net.figures.snapshot()
    }

    fn end(&mut self) {
        if !self.done {
            self.done = true;
            if let Ok(hub) = hub::hub() {
                hub.unregister(self.key);
            }
            self.net.stop();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.end();
    }
}
