//! The proxy's way into one sandbox: a socket pair made for that sandbox alone, one end kept
//! by the proxy, the other inherited by the sandbox's stub (no path anyone else can reach).
//! The stub, inside the sandbox's own network namespace, makes a listening socket on the
//! sandbox's own `127.0.0.1:`[`PROXY_PORT`] and hands that very socket out over its end
//! (`SCM_RIGHTS`), then closes both and `exec`s the program: what the program's connections
//! to the proxy's address reach is accepted by the proxy outside, and nothing of Link Run is
//! left inside the sandbox to trace, stop or outlive it.
//!
//! The proxy takes a listener only if it is what the stub makes (a listening TCP socket on
//! `127.0.0.1:`[`PROXY_PORT`]) in a network namespace that is not the proxy's own: a sandbox
//! that shares this machine's network would otherwise put the proxy on this machine's
//! loopback, for any local process to use.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The port the proxy listens on in every sandbox's own loopback.
pub const PROXY_PORT: u16 = 3128;
/// The proxy's address in every sandbox.
pub const PROXY_ADDRESS: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::LOCALHOST, PROXY_PORT);
/// How many connections may wait to be accepted.
const BACKLOG: i32 = 256;
/// The byte sent with the listener.
const LISTENER: u8 = b'l';

/// A new channel: the proxy's end and the sandbox's (at descriptor 6 or above, so that placing
/// it at a reaper's fd 5 never clobbers the descriptors placed below it).
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let theirs = rustix::io::fcntl_dupfd_cloexec(&theirs, 6)?;
    Ok((ours, theirs))
}

/// The stub's side: makes the listener on the sandbox's own loopback and hands it out over
/// `channel`. Fails (nothing handed) where the sandbox has no loopback up.
pub fn hand_listener(channel: BorrowedFd<'_>) -> io::Result<()> {
    let listener = rustix::net::socket_with(
        AddressFamily::INET,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::sockopt::set_socket_reuseaddr(&listener, true)?;
    rustix::net::bind(&listener, &PROXY_ADDRESS)?;
    rustix::net::listen(&listener, BACKLOG)?;
    let fds = [listener.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the listener's descriptor"));
    }
    loop {
        // Never waits: the channel is new and empty.
        let flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
        match rustix::net::sendmsg(channel, &[IoSlice::new(&[LISTENER])], &mut ancillary, flags) {
            Ok(1) => return Ok(()),
            Ok(_) => return Err(Errno::PIPE.into()),
            Err(Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
}

/// What the proxy's end of a channel gave.
#[derive(Debug)]
pub(super) enum Taken {
    /// The sandbox's listener, checked.
    Listener(OwnedFd),
    /// Nothing yet.
    NotYet,
    /// The channel ended without a listener (the sandbox failed to make one, or ended).
    Ended,
    /// Something came that is not the listener it should be: never used.
    Refused(&'static str),
}

/// Reads what came on the proxy's end, without waiting.
pub(super) fn take_listener(channel: BorrowedFd<'_>) -> Taken {
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let flags = RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC;
    let received = loop {
        match rustix::net::recvmsg(
            channel,
            &mut [IoSliceMut::new(&mut byte)],
            &mut ancillary,
            flags,
        ) {
            Err(Errno::INTR) => {}
            other => break other,
        }
    };
    let bytes = match received {
        Ok(received) => received.bytes,
        Err(Errno::AGAIN) => return Taken::NotYet,
        Err(_) => return Taken::Ended,
    };
    let mut listener = None;
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            // One is sent; any more are closed as they are dropped.
            for fd in fds {
                listener.get_or_insert(fd);
            }
        }
    }
    match (bytes, listener) {
        (0, None) => Taken::Ended,
        (1, Some(listener)) if byte[0] == LISTENER => match check(&listener) {
            Ok(()) => Taken::Listener(listener),
            Err(why) => Taken::Refused(why),
        },
        _ => Taken::Refused("the sandbox's end sent something else than its listener"),
    }
}

/// Whether `listener` is the sandbox's: a listening TCP socket on the proxy's address, in a
/// network namespace other than this process's.
fn check(listener: &OwnedFd) -> Result<(), &'static str> {
    let wrong = "the sandbox handed out something else than a listener on its 127.0.0.1:3128";
    let listening = rustix::net::sockopt::socket_type(listener) == Ok(SocketType::STREAM)
        && rustix::net::sockopt::socket_domain(listener) == Ok(AddressFamily::INET)
        && rustix::net::sockopt::socket_acceptconn(listener) == Ok(true);
    let bound = rustix::net::getsockname(listener)
        .ok()
        .and_then(|address| SocketAddrV4::try_from(address).ok());
    if !listening || bound != Some(PROXY_ADDRESS) {
        return Err(wrong);
    }
    match (netns_cookie(listener.as_fd()), own_netns_cookie()) {
        (Some(theirs), Some(ours)) if theirs == ours => Err(
            "the sandbox shares this machine's network (no network namespace of its own): the \
             proxy would listen on this machine's loopback",
        ),
        (Some(_), Some(_)) => Ok(()),
        // A kernel without network namespace cookies (before 5.14): the sandbox check proved
        // the line's network cut at start.
        _ => Ok(()),
    }
}

/// The cookie of the network namespace a socket belongs to (`SO_NETNS_COOKIE`).
#[allow(unsafe_code)]
fn netns_cookie(socket: BorrowedFd<'_>) -> Option<u64> {
    const SO_NETNS_COOKIE: libc::c_int = 71;
    let mut cookie: u64 = 0;
    let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cookie`, a u64 that lives across the
    // call, and stores the length it wrote in `len`; the descriptor is borrowed, open.
    let done = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&raw mut cookie).cast(),
            &raw mut len,
        )
    };
    (done == 0 && len as usize == std::mem::size_of::<u64>()).then_some(cookie)
}

/// The cookie of this process's network namespace (looked up once: a process does not change
/// its network namespace).
fn own_netns_cookie() -> Option<u64> {
    static OWN: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *OWN.get_or_init(|| {
        let socket = rustix::net::socket_with(
            AddressFamily::INET,
            SocketType::STREAM,
            SocketFlags::CLOEXEC,
            None,
        )
        .ok()?;
        netns_cookie(socket.as_fd())
    })
}

/// Takes descriptor `fd` over (the reaper's or the stub's end, inherited at a known place);
/// `None` when it is not an open socket.
pub fn adopt(fd: i32) -> Option<OwnedFd> {
    use crate::spawn::inherited::{self, Kind, OnExec};
    inherited::take(fd, Kind::Socket, OnExec::Close).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Both ends in this process, which has one network namespace: the listener is made and
    /// handed, and then refused for sharing this process's network.
    #[test]
    fn a_listener_in_this_processs_own_network_is_refused() {
        let (ours, theirs) = pair().unwrap();
        assert!(theirs.as_raw_fd() >= 6);
        assert!(matches!(take_listener(ours.as_fd()), Taken::NotYet));
        match hand_listener(theirs.as_fd()) {
            Ok(()) => {}
            // Another test (or program) of this machine holds the port: nothing to see here.
            Err(err) if err.raw_os_error() == Some(Errno::ADDRINUSE.raw_os_error()) => return,
            Err(err) => panic!("{err}"),
        }
        match take_listener(ours.as_fd()) {
            Taken::Refused(why) => assert!(why.contains("shares"), "{why}"),
            other => panic!("{other:?}"),
        }
        drop(theirs);
        assert!(matches!(take_listener(ours.as_fd()), Taken::Ended));
    }

    #[test]
    fn what_is_not_the_listener_is_refused() {
        let (ours, theirs) = pair().unwrap();
        let file = std::fs::File::open("/").unwrap();
        let fds = [file.as_fd()];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut ancillary = SendAncillaryBuffer::new(&mut space);
        assert!(ancillary.push(SendAncillaryMessage::ScmRights(&fds)));
        rustix::net::sendmsg(
            &theirs,
            &[IoSlice::new(&[LISTENER])],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        )
        .unwrap();
        assert!(matches!(take_listener(ours.as_fd()), Taken::Refused(_)));
        rustix::net::send(&theirs, b"x", SendFlags::NOSIGNAL).unwrap();
        assert!(matches!(take_listener(ours.as_fd()), Taken::Refused(_)));
    }
}
