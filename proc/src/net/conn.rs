//! One connection a program opened to the proxy, on a thread of its own: its request read,
//! checked against the allow-list, its host resolved and connected to, and then either a
//! tunnel (`CONNECT`) or one plain HTTP request and its answer; or a refusal, answered with
//! an HTTP error that says why (and an `X-Link-Run-Refused` header) and counted.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

use super::allow::Host;
use super::http::{Chunked, response_head};
use super::pump::{self, Bounds, End, Flow};
use super::request::{self, Asked, Framing, HttpRequest, MAX_HEAD, head_end};
use super::resolve;
use super::sandbox::{Open, SandboxNet};
use super::why::Why;
use crate::poll::poll_until;

/// How long a program has to send its whole request head.
pub const HEAD_TIME: Duration = Duration::from_secs(10);
/// How long a connection to a host may take to be made.
pub const CONNECT_TIME: Duration = Duration::from_secs(10);
/// How long a connection may carry nothing either way before it is closed.
pub const IDLE_TIME: Duration = Duration::from_secs(120);
/// The largest answer head read from a host.
const MAX_ANSWER_HEAD: usize = 64 * 1024;

/// Serves one accepted connection (non-blocking) to its end; it counts as open until then.
pub(super) fn serve(client: OwnedFd, open: Open) {
    let net = open.net();
    let bounds = Bounds {
        stop: net.stop_fd(),
        deadline: net.deadline,
        idle: IDLE_TIME,
    };
    let mut buf = Vec::new();
    let head_by = (Instant::now() + HEAD_TIME).min(net.deadline);
    let end = match read_head(client.as_fd(), &mut buf, MAX_HEAD, bounds, head_by) {
        Ok(end) => end,
        Err(HeadEnd::TooSlow) => {
            return refuse(client.as_fd(), net, "", 0, &Why::TooSlow(HEAD_TIME));
        }
        Err(HeadEnd::TooLarge) => {
            let why = Why::NotAProxyRequest(format!("its head is over {MAX_HEAD} bytes"));
            return refuse(client.as_fd(), net, "", 0, &why);
        }
        // Closed before it asked anything, or the sandbox's proxy stopped: nothing to say.
        Err(HeadEnd::Closed | HeadEnd::Ended) => return,
    };
    let extra = buf.split_off(end);
    let asked = match request::read(&buf) {
        Ok(asked) => asked,
        Err(unreadable) => {
            let (host, port) = (unreadable.host.as_str(), unreadable.port);
            return refuse(client.as_fd(), net, host, port, &unreadable.why);
        }
    };
    let (host, port) = match &asked {
        Asked::Connect { host, port } => (host.clone(), *port),
        Asked::Http(request) => (request.host.clone(), request.port),
    };
    let shown = host.text();
    let destinations = match resolve::destinations(&net.allow, &host, port) {
        Ok(destinations) => destinations,
        Err(why) => return refuse(client.as_fd(), net, &shown, port, &why),
    };
    // The call may have ended while the name was resolved: nothing goes out after its end.
    if net.stopped() {
        return;
    }
    let upstream = match connect(&destinations, bounds) {
        Ok(upstream) => upstream,
        Err(None) => return,
        Err(Some(why)) => return refuse(client.as_fd(), net, &shown, port, &Why::Connect(why)),
    };
    net.figures.connected();
    tracing::debug!(host = %shown, port, "a proxied connection is made");
    let ended = match asked {
        Asked::Connect { .. } => tunnel(client.as_fd(), upstream.as_fd(), extra, net, bounds),
        Asked::Http(request) => forward(
            client.as_fd(),
            upstream.as_fd(),
            request,
            extra,
            net,
            bounds,
        ),
    };
    tracing::debug!(host = %shown, port, ?ended, "a proxied connection ended");
}

/// Says `why` to the program in an HTTP answer, and counts it.
fn refuse(client: BorrowedFd<'_>, net: &SandboxNet, host: &str, port: u16, why: &Why) {
    net.figures.refused(host, port, why);
    let (code, reason) = why.status();
    let said = printable(&why.to_string());
    let what = match Host::parse(host) {
        _ if host.is_empty() => "the request".to_owned(),
        Ok(Host::Address(std::net::IpAddr::V6(v6))) => format!("[{v6}]:{port}"),
        _ => format!("{}:{port}", printable(host)),
    };
    let body = format!("Link Run's proxy refused {what}: {said}\n");
    let answer = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\nX-Link-Run-Refused: {said}\r\n\r\n{body}",
        body.len()
    );
    let bounds = Bounds {
        stop: net.stop_fd(),
        deadline: (Instant::now() + Duration::from_secs(1)).min(net.deadline),
        idle: Duration::from_secs(1),
    };
    let _ = send_all(client, answer.as_bytes(), bounds, None);
}

/// `text` with anything but printable ASCII as `?` (it goes into a header).
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// A `CONNECT` tunnel: the proxy's `200`, then bytes both ways, the program's early ones first.
fn tunnel(
    client: BorrowedFd<'_>,
    upstream: BorrowedFd<'_>,
    early: Vec<u8>,
    net: &SandboxNet,
    bounds: Bounds<'_>,
) -> End {
    if let Err(end) = send_all(
        client,
        b"HTTP/1.1 200 Connection established\r\n\r\n",
        bounds,
        None,
    ) {
        return end;
    }
    let flows =
        Flow::new(client, upstream, early, None, true, &net.figures.bytes_out).and_then(|out| {
            Ok([
                out,
                Flow::new(
                    upstream,
                    client,
                    Vec::new(),
                    None,
                    true,
                    &net.figures.bytes_in,
                )?,
            ])
        });
    match flows {
        Ok(mut flows) => pump::run(&mut flows, bounds),
        Err(err) => End::Failed(errno_of(&err)),
    }
}

/// One plain HTTP request: its head and body (nothing past its end) to the host, then the
/// host's answer, with `Connection: close`, to the program until the host ends it.
fn forward(
    client: BorrowedFd<'_>,
    upstream: BorrowedFd<'_>,
    request: HttpRequest,
    early: Vec<u8>,
    net: &SandboxNet,
    bounds: Bounds<'_>,
) -> End {
    let out = &net.figures.bytes_out;
    if request.expects_continue
        && let Err(end) = send_all(client, b"HTTP/1.1 100 Continue\r\n\r\n", bounds, None)
    {
        return end;
    }
    let sent = match request.body {
        Framing::None => pump_one(client, upstream, request.head, Some(0), out, bounds),
        Framing::Length(length) => {
            let first = early
                .len()
                .min(usize::try_from(length).unwrap_or(usize::MAX));
            let mut pending = request.head;
            pending.extend_from_slice(&early[..first]);
            pump_one(
                client,
                upstream,
                pending,
                Some(length - first as u64),
                out,
                bounds,
            )
        }
        Framing::Chunked => chunked(client, upstream, request.head, &early, out, bounds),
    };
    if sent != End::Done {
        return sent;
    }
    // The answer: interim heads as they are, the final one with `Connection: close`.
    let mut buf = Vec::new();
    loop {
        let head_by = bounds.deadline;
        let end = match read_head(upstream, &mut buf, MAX_ANSWER_HEAD, bounds, head_by) {
            Ok(end) => end,
            Err(HeadEnd::Ended) => return End::Stopped,
            Err(_) => return End::Failed(Errno::PROTO),
        };
        let rest = buf.split_off(end);
        let Ok((head, last)) = response_head(&buf) else {
            return End::Failed(Errno::PROTO);
        };
        buf = rest;
        if last {
            let mut pending = head;
            pending.append(&mut buf);
            return pump_one(
                upstream,
                client,
                pending,
                None,
                &net.figures.bytes_in,
                bounds,
            );
        }
        if let Err(end) = send_all(client, &head, bounds, Some(&net.figures.bytes_in)) {
            return end;
        }
    }
}

/// Drives one direction to its end.
fn pump_one(
    from: BorrowedFd<'_>,
    to: BorrowedFd<'_>,
    pending: Vec<u8>,
    limit: Option<u64>,
    count: &AtomicU64,
    bounds: Bounds<'_>,
) -> End {
    match Flow::new(from, to, pending, limit, limit.is_none(), count) {
        Ok(flow) => pump::run(&mut [flow], bounds),
        Err(err) => End::Failed(errno_of(&err)),
    }
}

/// A chunked request body, read as it goes by, so that nothing past its end is sent on.
fn chunked(
    client: BorrowedFd<'_>,
    upstream: BorrowedFd<'_>,
    head: Vec<u8>,
    early: &[u8],
    count: &AtomicU64,
    bounds: Bounds<'_>,
) -> End {
    let mut body = Chunked::default();
    let mut piece = early.to_vec();
    let mut first = Some(head);
    loop {
        let Ok(taken) = body.feed(&piece) else {
            return End::Failed(Errno::PROTO);
        };
        if let Some(head) = first.take()
            && let Err(end) = send_all(upstream, &head, bounds, Some(count))
        {
            return end;
        }
        if let Err(end) = send_all(upstream, &piece[..taken], bounds, Some(count)) {
            return end;
        }
        if body.done() {
            return End::Done;
        }
        if let Err(end) = wait_for(client, PollFlags::IN, bounds, bounds.deadline) {
            return end;
        }
        piece.resize(64 * 1024, 0);
        match rustix::net::recv(client, &mut piece, RecvFlags::DONTWAIT) {
            Ok((0, _)) => return End::Failed(Errno::CONNRESET),
            Ok((n, _)) => piece.truncate(n),
            Err(Errno::AGAIN | Errno::INTR) => piece.clear(),
            Err(err) => return End::Failed(err),
        }
    }
}

/// Why a head was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HeadEnd {
    /// The other side closed (or failed) first.
    Closed,
    /// It did not come by its limit.
    TooSlow,
    /// It is larger than allowed.
    TooLarge,
    /// The sandbox's proxy stopped.
    Ended,
}

/// Reads from `fd` into `buf` until a head is whole in it (where it ends), for at most `max`
/// bytes and until `by`.
fn read_head(
    fd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    max: usize,
    bounds: Bounds<'_>,
    by: Instant,
) -> Result<usize, HeadEnd> {
    loop {
        if let Some(end) = head_end(buf) {
            return Ok(end);
        }
        if buf.len() >= max {
            return Err(HeadEnd::TooLarge);
        }
        match wait_for(fd, PollFlags::IN, bounds, by) {
            Ok(()) => {}
            Err(End::Stopped) => return Err(HeadEnd::Ended),
            Err(End::Failed(_)) => return Err(HeadEnd::Closed),
            Err(_) => return Err(HeadEnd::TooSlow),
        }
        let at = buf.len();
        buf.resize((at + 8192).min(max), 0);
        match rustix::net::recv(fd, &mut buf[at..], RecvFlags::DONTWAIT) {
            Ok((0, _)) => return Err(HeadEnd::Closed),
            Ok((n, _)) => buf.truncate(at + n),
            Err(Errno::AGAIN | Errno::INTR) => buf.truncate(at),
            Err(_) => return Err(HeadEnd::Closed),
        }
    }
}

/// Sends `bytes` whole, waiting for room within the bounds; counted into `count` if given.
fn send_all(
    fd: BorrowedFd<'_>,
    mut bytes: &[u8],
    bounds: Bounds<'_>,
    count: Option<&AtomicU64>,
) -> Result<(), End> {
    while !bytes.is_empty() {
        match rustix::net::send(fd, bytes, SendFlags::NOSIGNAL | SendFlags::DONTWAIT) {
            Ok(n) => {
                bytes = &bytes[n..];
                if let Some(count) = count {
                    count.fetch_add(n as u64, Ordering::Relaxed);
                }
            }
            Err(Errno::AGAIN) => wait_for(fd, PollFlags::OUT, bounds, bounds.deadline)?,
            Err(Errno::INTR) => {}
            Err(err) => return Err(End::Failed(err)),
        }
    }
    Ok(())
}

/// Waits until `fd` is ready for `events`, within the bounds (the idle limit counted from
/// now) and `by`.
fn wait_for(
    fd: BorrowedFd<'_>,
    events: PollFlags,
    bounds: Bounds<'_>,
    by: Instant,
) -> Result<(), End> {
    let until = by.min(bounds.deadline).min(Instant::now() + bounds.idle);
    loop {
        let mut fds = [
            PollFd::new(&fd, events),
            PollFd::new(&bounds.stop, PollFlags::IN),
        ];
        match poll_until(&mut fds, Some(until)) {
            Ok(_) | Err(Errno::INTR) => {}
            Err(err) => return Err(End::Failed(err)),
        }
        if !fds[1].revents().is_empty() {
            return Err(End::Stopped);
        }
        let revents = fds[0].revents();
        if revents.intersects(events) {
            return Ok(());
        }
        if revents.intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
            return Err(End::Failed(Errno::CONNRESET));
        }
        if Instant::now() >= until {
            return Err(if until >= bounds.deadline {
                End::TimeUp
            } else {
                End::Idle
            });
        }
    }
}

/// Connects to the first of `destinations` that answers, each within [`CONNECT_TIME`]. `Err`:
/// why none did, or `None` when the sandbox's proxy stopped meanwhile.
fn connect(destinations: &[SocketAddr], bounds: Bounds<'_>) -> Result<OwnedFd, Option<String>> {
    let mut why = String::from("no address");
    for destination in destinations {
        let family = match destination {
            SocketAddr::V4(_) => AddressFamily::INET,
            SocketAddr::V6(_) => AddressFamily::INET6,
        };
        let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
        let socket = match rustix::net::socket_with(family, SocketType::STREAM, flags, None) {
            Ok(socket) => socket,
            Err(err) => {
                why = describe(err);
                continue;
            }
        };
        let made = match rustix::net::connect(&socket, destination) {
            Ok(()) => Ok(()),
            Err(Errno::INPROGRESS | Errno::INTR) => {
                let by = Instant::now() + CONNECT_TIME;
                match wait_for(
                    socket.as_fd(),
                    PollFlags::OUT,
                    Bounds {
                        idle: CONNECT_TIME,
                        ..bounds
                    },
                    by,
                ) {
                    Ok(()) => rustix::net::sockopt::socket_error(&socket)
                        .map_err(describe)
                        .and_then(|made| made.map_err(describe)),
                    Err(End::Stopped) => return Err(None),
                    Err(End::Failed(err)) => rustix::net::sockopt::socket_error(&socket)
                        .ok()
                        .and_then(Result::err)
                        .map_or_else(|| Err(describe(err)), |err| Err(describe(err))),
                    Err(_) => Err(format!("no answer within {} s", CONNECT_TIME.as_secs())),
                }
            }
            Err(err) => Err(describe(err)),
        };
        match made {
            Ok(()) => {
                let _ = rustix::net::sockopt::set_tcp_nodelay(&socket, true);
                return Ok(socket);
            }
            Err(err) => why = format!("{destination}: {err}"),
        }
    }
    Err(Some(why))
}

/// An errno as a person reads it, without "(os error N)".
fn describe(err: Errno) -> String {
    let text = io::Error::from(err).to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

fn errno_of(err: &io::Error) -> Errno {
    Errno::from_io_error(err).unwrap_or(Errno::IO)
}

#[cfg(test)]
mod tests;
