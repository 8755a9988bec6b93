//! A spare reaper: a call's reaper started ahead of the call, waiting for it.
//!
//! Starting a reaper is most of a call's overhead (an exec of a dynamically linked binary and
//! its set-up: about a millisecond of CPU, and under load each process hop waits for a CPU), so
//! `serve` keeps one started ahead: `lnk-link-run reap --spare`, launched as every reaper is
//! ([`super::launch`]: a session of its own, an empty environment, its signals blocked, SIGTERM
//! at its parent's death, its report pipe at fd 3), with a control socket at fd 4 and its stdio
//! already the pipes a call reads. It sets itself up (its signalfd, child subreaper), reports
//! `ready`, and waits for the call's **spec** on the control socket, or a stop:
//!
//! - the spec is one message: its length (4 bytes, little-endian), then the reaper's options
//!   as a command line ([`Options::to_args`]), each argument ending in a NUL byte; the call's
//!   working folder travels with it as a descriptor (`SCM_RIGHTS`), received close-on-exec,
//!   entered (`fchdir`) and closed before anything runs, so no path is resolved again; a call
//!   with a proxy (`--net`) sends the sandbox's end of its proxy channel as a second one;
//! - with the spec whole, the spare closes the control socket and goes on exactly as a reaper
//!   started for the call (its hold hooks, the fork of the sandbox, its whole life);
//! - the control socket's end (EOF, `serve` dropped it or died) before the spec is whole, a
//!   malformed spec, or a stop (SIGTERM, SIGINT, SIGHUP: its parent's death among them) ends
//!   the spare with [`super::CLOSED_EXIT`]: **nothing runs**.
//!
//! A spare holds no descriptor a call's program should not see: fd 3 and 4 are close-on-exec
//! once the spare runs, everything else it inherited beyond stdio is made close-on-exec (as in
//! every reaper), the working folder is closed once entered, and a call without input gets
//! `/dev/null` in place of the spare's stdin pipe (`--null-stdin`).

use std::ffi::OsString;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

use super::blocked_signals::BlockedSignals;
use super::fds::REPORT_FD;
use super::options::Options;

/// The reaper's argument that makes it a spare.
pub const SPARE: &str = "--spare";
pub use super::fds::CONTROL_FD;
/// The spare's argument that gives it a warm sandbox: `reap --spare --warm <sandbox>…`
/// ([`super::warm`]).
pub const WARM: &str = "--warm";
/// The spare's argument that tells it, without a warm sandbox, the prefix its call's sandbox
/// will run: `reap --spare --cold <sandbox>…` ([`super::run::passed_fds`]).
pub const COLD: &str = "--cold";
pub use super::MAX_SPEC;

/// The sandbox a spare is told of ([`parse_args`]).
#[derive(Debug, PartialEq, Eq)]
pub enum SparePrefix {
    /// `--warm <sandbox>…`: it runs that sandbox ahead of its call ([`super::warm`]).
    Warm(Vec<OsString>),
    /// `--cold <sandbox>…`: its call's sandbox will run that prefix, and the spare keeps the
    /// descriptors it binds ([`super::run::passed_fds`]).
    Cold(Vec<OsString>),
}

/// Reads a spare's arguments after [`SPARE`]: `[--cache <folder>]... [--warm|--cold
/// <sandbox>…]`, the cache folders its warm sandbox gets a layer over, and the sandbox it is
/// told of.
pub fn parse_args(args: &[OsString]) -> Result<(Vec<PathBuf>, Option<SparePrefix>), String> {
    let mut caches = Vec::new();
    let mut words = args.iter();
    while let Some(word) = words.next() {
        if word == super::options::CACHE {
            let folder = words
                .next()
                .ok_or_else(|| format!("{} needs a value", super::options::CACHE))?;
            caches.push(PathBuf::from(folder));
        } else if word == WARM || word == COLD {
            let prefix: Vec<OsString> = words.cloned().collect();
            if prefix.is_empty() {
                return Err(format!("{} needs a sandbox", word.to_string_lossy()));
            }
            let prefix = if word == WARM {
                SparePrefix::Warm(prefix)
            } else {
                SparePrefix::Cold(prefix)
            };
            return Ok((caches, Some(prefix)));
        } else {
            return Err(format!("unknown argument {}", word.to_string_lossy()));
        }
    }
    Ok((caches, None))
}

/// A spare's arguments after the reaper's subcommand, which [`parse_args`] reads back:
/// [`SPARE`], the cache folders its warm sandbox gets a layer over (`--cache <folder>`), and
/// the sandbox it is told of.
pub fn args(caches: &[PathBuf], prefix: Option<&SparePrefix>) -> Vec<OsString> {
    let mut args = vec![OsString::from(SPARE)];
    for cache in caches {
        args.extend([super::options::CACHE.into(), cache.clone().into_os_string()]);
    }
    match prefix {
        Some(SparePrefix::Warm(words)) => {
            args.extend(std::iter::once(WARM.into()).chain(words.iter().cloned()))
        }
        Some(SparePrefix::Cold(words)) => {
            args.extend(std::iter::once(COLD.into()).chain(words.iter().cloned()))
        }
        None => {}
    }
    args
}

/// A new control socket pair: `serve`'s end and the spare's (at descriptor 5 or above, so
/// that placing it at [`CONTROL_FD`] in the child never clobbers stdio or the report pipe).
pub fn pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let theirs = if rustix::fd::AsRawFd::as_raw_fd(&theirs) <= CONTROL_FD {
        rustix::io::fcntl_dupfd_cloexec(&theirs, CONTROL_FD + 1)?
    } else {
        theirs
    };
    const { assert!(REPORT_FD < CONTROL_FD) };
    Ok((ours, theirs))
}

/// The spec of a call as bytes: the length, then each argument and a NUL. `None` when it is
/// larger than [`MAX_SPEC`].
pub fn encode(options: &Options) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    for arg in options.to_args() {
        body.extend_from_slice(arg.as_bytes());
        body.push(0);
    }
    if body.len() > MAX_SPEC {
        return None;
    }
    let len = u32::try_from(body.len()).ok()?;
    let mut spec = Vec::with_capacity(4 + body.len());
    spec.extend_from_slice(&len.to_le_bytes());
    spec.extend_from_slice(&body);
    Some(spec)
}

/// `serve`'s side: sends `spec` ([`encode`]) with the working folder `cwd` (and `net`, the
/// sandbox's end of the call's proxy channel, for a call with one) on the control socket,
/// whole, or fails (the spare is gone: `EPIPE`, never SIGPIPE).
pub fn send(
    control: BorrowedFd<'_>,
    spec: &[u8],
    cwd: BorrowedFd<'_>,
    net: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let both;
    let one;
    let fds: &[BorrowedFd<'_>] = match net {
        Some(net) => {
            both = [cwd, net];
            &both
        }
        None => {
            one = [cwd];
            &one
        }
    };
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other(
            "no room for the working folder's descriptor",
        ));
    }
    let mut sent = loop {
        match rustix::net::sendmsg(
            control,
            &[IoSlice::new(spec)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        ) {
            Err(Errno::INTR) => {}
            other => break other?,
        }
    };
    while sent < spec.len() {
        match rustix::net::send(control, &spec[sent..], SendFlags::NOSIGNAL) {
            Ok(0) => return Err(Errno::PIPE.into()),
            Ok(n) => sent += n,
            Err(Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// A spare's control socket, fd 4, taken over at the spare's start.
#[derive(Debug)]
pub struct Control {
    fd: OwnedFd,
}

/// A call, as a spare received it.
#[derive(Debug)]
pub struct Call {
    /// How to run it.
    pub options: Options,
    /// Its working folder, when one came (close-on-exec).
    pub cwd: Option<OwnedFd>,
    /// The sandbox's end of its proxy channel, when one came after the folder.
    pub net: Option<OwnedFd>,
}

impl Control {
    /// Takes fd 4 over, close-on-exec; `None` when it is not an open socket (a spare started
    /// by hand, without its parent).
    pub fn from_fd4() -> Option<Self> {
        use crate::spawn::inherited::{self, Kind, OnExec};
        // By the launch contract, this spare's control socket.
        let fd = inherited::take(CONTROL_FD, Kind::Socket, OnExec::Close).ok()?;
        Some(Self { fd })
    }

    /// Waits for the call, or a stop. `Ok(None)`: a stop came, or the socket ended (or said
    /// something that is not a spec) before a spec was whole; nothing may run.
    pub fn wait_for_call(&self, signals: &BlockedSignals) -> io::Result<Option<Call>> {
        let signal_fd = signals.fd();
        loop {
            let mut fds = [
                PollFd::new(&self.fd, PollFlags::IN),
                PollFd::new(&signal_fd, PollFlags::IN),
            ];
            match poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
            let readable = !fds[0].revents().is_empty();
            if signals.take().stop {
                return Ok(None);
            }
            if readable {
                return self.receive();
            }
        }
    }

    /// Reads the spec whole (the socket is blocking; `serve` writes it at once).
    pub(super) fn receive(&self) -> io::Result<Option<Call>> {
        let mut header = [0u8; 4];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
        let mut ancillary = RecvAncillaryBuffer::new(&mut space);
        let got = loop {
            match rustix::net::recvmsg(
                &self.fd,
                &mut [IoSliceMut::new(&mut header)],
                &mut ancillary,
                RecvFlags::CMSG_CLOEXEC,
            ) {
                Err(Errno::INTR) => {}
                other => break other?.bytes,
            }
        };
        let mut received = Vec::new();
        for message in ancillary.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = message {
                received.extend(fds);
            }
        }
        // The folder, then the proxy channel; anything more is closed here, as it is dropped.
        let mut received = received.into_iter();
        let cwd = received.next();
        let net = received.next();
        if got == 0 || !crate::fill::fill(&self.fd, &mut header[got..])? {
            return Ok(None);
        }
        let len = u32::from_le_bytes(header) as usize;
        if len > MAX_SPEC {
            return Ok(None);
        }
        let mut body = vec![0u8; len];
        if !crate::fill::fill(&self.fd, &mut body)? {
            return Ok(None);
        }
        let Some(args) = body.strip_suffix(&[0]) else {
            return Ok(None);
        };
        let args = args
            .split(|b| *b == 0)
            .map(|a| OsString::from_vec(a.to_vec()));
        match Options::parse(args) {
            Ok(options) => Ok(Some(Call { options, cwd, net })),
            Err(_) => Ok(None),
        }
    }
}

impl AsFd for Control {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::*;

    fn options() -> Options {
        let mut options = Options::new(
            vec!["/usr/bin/bwrap".into(), "--".into(), "a\nb c".into()],
            Duration::ZERO,
            Duration::from_secs(1),
        );
        options.null_stdin = true;
        options
    }

    #[test]
    fn a_spare_reads_its_caches_then_its_warm_sandbox() {
        let words = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(parse_args(&[]), Ok((vec![], None)));
        assert_eq!(
            parse_args(&words(&[
                "--cache", "/a", "--cache", "/b", "--warm", "bwrap", "--x"
            ])),
            Ok((
                vec![PathBuf::from("/a"), PathBuf::from("/b")],
                Some(SparePrefix::Warm(words(&["bwrap", "--x"])))
            ))
        );
        assert_eq!(
            parse_args(&words(&[
                "--cold",
                "bwrap",
                "--ro-bind-fd",
                "100",
                "/w/.git"
            ])),
            Ok((
                vec![],
                Some(SparePrefix::Cold(words(&[
                    "bwrap",
                    "--ro-bind-fd",
                    "100",
                    "/w/.git"
                ])))
            ))
        );
        assert!(parse_args(&words(&["--cache"])).is_err());
        assert!(parse_args(&words(&["--warm"])).is_err());
        assert!(parse_args(&words(&["--cold"])).is_err());
        assert!(parse_args(&words(&["--what"])).is_err());
    }

    #[test]
    fn a_spare_reads_back_the_arguments_it_was_given() {
        let words = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        let caches = [PathBuf::from("/a"), PathBuf::from("/b")];
        for (caches, prefix) in [
            (
                &caches[..],
                Some(SparePrefix::Warm(words(&["bwrap", "--x"]))),
            ),
            (
                &[][..],
                Some(SparePrefix::Cold(words(&[
                    "bwrap",
                    "--ro-bind-fd",
                    "100",
                    "/g",
                ]))),
            ),
            (&[][..], None),
        ] {
            let args = args(caches, prefix.as_ref());
            assert_eq!(args[0], SPARE);
            assert_eq!(parse_args(&args[1..]), Ok((caches.to_vec(), prefix)));
        }
    }

    #[test]
    fn a_spec_is_its_length_then_its_arguments() {
        let spec = encode(&options()).unwrap();
        let len = u32::from_le_bytes(spec[..4].try_into().unwrap()) as usize;
        assert_eq!(len, spec.len() - 4);
        assert!(spec.ends_with(b"a\nb c\0"));
    }

    #[test]
    fn a_spec_too_large_is_not_encoded() {
        let options = Options::new(
            vec!["x".into(), OsString::from("y".repeat(MAX_SPEC))],
            Duration::ZERO,
            Duration::ZERO,
        );
        assert!(encode(&options).is_none());
    }

    /// Both ends in one process: what is sent is received, with a working folder.
    #[test]
    fn the_spec_and_the_folder_arrive_whole() {
        let (ours, theirs) = pair().unwrap();
        assert!(rustix::fd::AsRawFd::as_raw_fd(&theirs) > CONTROL_FD);
        let control = Control { fd: theirs };
        let folder = std::fs::File::open("/").unwrap();
        let spec = encode(&options()).unwrap();
        send(ours.as_fd(), &spec, folder.as_fd(), None).unwrap();
        let call = control.receive().unwrap().unwrap();
        assert_eq!(call.options, options());
        assert!(call.net.is_none());
        let cwd = call.cwd.unwrap();
        let flags = rustix::io::fcntl_getfd(&cwd).unwrap();
        assert!(flags.contains(rustix::io::FdFlags::CLOEXEC));
        let stat = rustix::fs::fstat(&cwd).unwrap();
        let root = rustix::fs::stat("/").unwrap();
        assert_eq!((stat.st_dev, stat.st_ino), (root.st_dev, root.st_ino));
    }

    /// A call with a proxy brings its channel after its folder.
    #[test]
    fn the_proxy_channel_arrives_after_the_folder() {
        let (ours, theirs) = pair().unwrap();
        let control = Control { fd: theirs };
        let folder = std::fs::File::open("/").unwrap();
        let (_net_ours, net_theirs) = crate::net::channel::pair().unwrap();
        let mut options = options();
        options.net = true;
        let spec = encode(&options).unwrap();
        send(
            ours.as_fd(),
            &spec,
            folder.as_fd(),
            Some(net_theirs.as_fd()),
        )
        .unwrap();
        let call = control.receive().unwrap().unwrap();
        assert!(call.options.net);
        let net = call.net.unwrap();
        let kind = rustix::fs::fstat(&net).unwrap();
        assert_eq!(
            rustix::fs::FileType::from_raw_mode(kind.st_mode),
            rustix::fs::FileType::Socket
        );
        assert!(call.cwd.is_some());
    }

    /// A spec cut short by the end of the socket is no call.
    #[test]
    fn a_spec_cut_short_is_no_call() {
        let spec = encode(&options()).unwrap();
        for cut in [0, 2, 4, spec.len() - 1] {
            let (ours, theirs) = pair().unwrap();
            let control = Control { fd: theirs };
            if cut > 0 {
                rustix::io::write(&ours, &spec[..cut]).unwrap();
            }
            drop(ours);
            assert!(control.receive().unwrap().is_none(), "cut at {cut}");
        }
    }

    /// A spec that is not the reaper's options (no `--`, say) is no call.
    #[test]
    fn a_malformed_spec_is_no_call() {
        let (ours, theirs) = pair().unwrap();
        let control = Control { fd: theirs };
        let body = b"--what\0";
        let mut spec = (body.len() as u32).to_le_bytes().to_vec();
        spec.extend_from_slice(body);
        rustix::io::write(&ours, &spec).unwrap();
        assert!(control.receive().unwrap().is_none());
    }
}
