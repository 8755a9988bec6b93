//! Why the proxy refused a request: the words an answer's `refused` list and the refusal's own
//! HTTP answer carry, and the status that answer has.

use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use super::allow::NotAllowed;

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// The allow-list does not open it.
    NotAllowed(NotAllowed),
    /// Its host is neither a name nor an address written as one.
    NotAHost(String),
    /// Its name does not resolve.
    Unresolved(String),
    /// Its name resolves only to addresses it may not lead to.
    Special {
        /// The first such address.
        address: IpAddr,
        /// What kind of address it is ("a loopback address", "this machine's own address").
        kind: &'static str,
    },
    /// No connection could be made to its addresses.
    Connect(String),
    /// Too many of the sandbox's connections were open already.
    TooManyOpen(usize),
    /// The sandbox made too many connections in all.
    TooManyInAll(usize),
    /// Too many connections of every sandbox were open already.
    Busy(usize),
    /// The request is not one a proxy serves.
    NotAProxyRequest(String),
    /// No whole request came in time.
    TooSlow(Duration),
    /// The proxy could not start in the sandbox: what its stub handed out is no listener of
    /// the sandbox's own (never answered: no program can reach it).
    NotStarted(&'static str),
}

impl Why {
    /// The HTTP status of the proxy's answer.
    pub fn status(&self) -> (u16, &'static str) {
        match self {
            Why::NotAllowed(_) | Why::NotAHost(_) | Why::Special { .. } => (403, "Forbidden"),
            Why::Unresolved(_) | Why::Connect(_) => (502, "Bad Gateway"),
            Why::TooManyOpen(_) | Why::TooManyInAll(_) | Why::Busy(_) => {
                (503, "Service Unavailable")
            }
            Why::NotAProxyRequest(_) => (400, "Bad Request"),
            Why::TooSlow(_) => (408, "Request Timeout"),
            Why::NotStarted(_) => (503, "Service Unavailable"),
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::NotAllowed(not) => write!(f, "{not}"),
            Why::NotAHost(why) => write!(f, "{why}"),
            Why::Unresolved(why) => write!(f, "the name does not resolve ({why})"),
            Why::Special { address, kind } => write!(
                f,
                "resolves to {address}, {kind}, which only an address listed as one opens"
            ),
            Why::Connect(why) => write!(f, "could not connect ({why})"),
            Why::TooManyOpen(limit) => {
                write!(f, "too many connections open at once (at most {limit})")
            }
            Why::TooManyInAll(limit) => {
                write!(
                    f,
                    "too many connections in all (at most {limit} per sandbox)"
                )
            }
            Why::Busy(limit) => write!(
                f,
                "the proxy has too many connections open for all calls and runs (at most {limit})"
            ),
            Why::NotAProxyRequest(why) => write!(f, "not a proxy request: {why}"),
            Why::TooSlow(limit) => write!(f, "no whole request within {} s", limit.as_secs()),
            Why::NotStarted(why) => {
                write!(f, "Link Run's proxy did not start in this sandbox: {why}")
            }
        }
    }
}
