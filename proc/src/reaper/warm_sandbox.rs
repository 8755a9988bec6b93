//! A warm sandbox's process and its stub, from the reaper's side ([`super::warm`]): starting
//! `<sandbox> -- /proc/self/fd/3 warm-stub`, and handing the stub its call.

use std::ffi::{CString, OsString};
use std::io::{self, IoSlice};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::Instant;

use rustix::event::{PollFd, PollFlags};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, SendAncillaryBuffer, SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};
use rustix::process::Pid;

use super::hand_off::{HAND_OFF_LIMIT, NotTaken};
use super::layers::Layers;
use super::report::Event;
use super::sandbox_start::{ABOVE, BeforeExec, Spawn, fork_sandbox};
use crate::stub::wire::{FAILED, FOLDER_REFUSED, STUB, STUB_CHANNEL_FD, STUB_EXE_FD};

/// A warm sandbox started: its process (the leader of its group), and the reaper's end of the
/// stub's channel.
#[derive(Debug)]
pub(super) struct Waiting {
    pub(super) pid: Pid,
    pub(super) channel: OwnedFd,
    pub(super) ready: bool,
    /// The mount namespace of its cache layers, held open ([`super::sandbox_start::Sandbox`]).
    pub(super) layer_ns: Option<OwnedFd>,
}

impl Waiting {
    /// Sends the spec (with `net`, the sandbox's end of its proxy channel, on its first bytes)
    /// and waits for the stub's `exec` (its channel's end) or its failure, for at most
    /// [`HAND_OFF_LIMIT`]. A pending signal with nothing from the stub ends the wait as an
    /// `exec`: a stop must not wait, and a sandbox that ended before its stub could answer is
    /// seen as ended.
    pub(super) fn hand(
        &self,
        spec: &[u8],
        signal_fd: BorrowedFd<'_>,
        net: Option<BorrowedFd<'_>>,
    ) -> Result<(), NotTaken> {
        let failed = |err: Errno| NotTaken::Failed(err.into());
        // The sandbox's own processes (its group) may have been stopped while they waited, by
        // a program that could see them (no PID namespace): a stopped sandbox would hold the
        // call past its program's end. (The stub, in a session of its own under some
        // sandboxes, has the hand-off's limit.)
        let _ = rustix::process::kill_process_group(self.pid, rustix::process::Signal::CONT);
        let mut sent = match net {
            Some(net) => send_with(&self.channel, spec, net).map_err(failed)?,
            None => 0,
        };
        while sent < spec.len() {
            match rustix::net::send(&self.channel, &spec[sent..], SendFlags::NOSIGNAL) {
                Ok(0) => return Err(failed(Errno::PIPE)),
                Ok(n) => sent += n,
                Err(Errno::INTR) => {}
                Err(err) => return Err(failed(err)),
            }
        }
        let limit = Instant::now() + HAND_OFF_LIMIT;
        let mut said = [0u8; 5];
        let mut got = 0;
        loop {
            if Instant::now() >= limit {
                return Err(NotTaken::NotRun(Event::StubStuck));
            }
            let mut fds = [
                PollFd::new(&self.channel, PollFlags::IN),
                PollFd::new(&signal_fd, PollFlags::IN),
            ];
            match crate::poll::poll_until(&mut fds, Some(limit)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(err) => return Err(failed(err)),
            }
            let heard = !fds[0].revents().is_empty();
            let signalled = !fds[1].revents().is_empty();
            if !heard {
                if signalled {
                    return Ok(());
                }
                continue;
            }
            match rustix::io::read(&self.channel, &mut said[got..]) {
                // The end: the exec happened (or the stub died, which the reaper sees as the
                // sandbox's own end).
                Ok(0) if got == 0 => return Ok(()),
                Ok(0) => {
                    let cut = io::Error::other("the stub's answer was cut short");
                    return Err(NotTaken::Failed(cut));
                }
                Ok(n) => got += n,
                Err(Errno::INTR) => continue,
                Err(err) => return Err(failed(err)),
            }
            if said[0] != FAILED && said[0] != FOLDER_REFUSED {
                let other = io::Error::other("the stub said something else");
                return Err(NotTaken::Failed(other));
            }
            if got == said.len() {
                let errno = i32::from_ne_bytes([said[1], said[2], said[3], said[4]]);
                return Err(match said[0] {
                    FOLDER_REFUSED => NotTaken::NotRun(Event::FolderRefused(errno)),
                    _ => NotTaken::Failed(io::Error::from_raw_os_error(errno)),
                });
            }
        }
    }
}

/// Sends the first bytes of `spec` with `fd` (`SCM_RIGHTS`); how many went.
fn send_with(channel: &OwnedFd, spec: &[u8], fd: BorrowedFd<'_>) -> Result<usize, Errno> {
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = SendAncillaryBuffer::new(&mut space);
    if !ancillary.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(Errno::NOBUFS);
    }
    loop {
        match rustix::net::sendmsg(
            channel,
            &[IoSlice::new(spec)],
            &mut ancillary,
            SendFlags::NOSIGNAL,
        ) {
            Ok(0) => return Err(Errno::PIPE),
            Err(Errno::INTR) => {}
            other => return other,
        }
    }
}

/// The words after `prefix` and its `--` in `argv`, when `argv` starts so.
pub(super) fn after_prefix<'a>(
    prefix: &[OsString],
    argv: &'a [OsString],
) -> Option<&'a [OsString]> {
    let rest = argv.strip_prefix(prefix)?;
    let (dashes, program) = rest.split_first()?;
    (dashes == "--" && !program.is_empty()).then_some(program)
}

/// Starts a warm sandbox: `<prefix> -- /proc/self/fd/3 warm-stub`, as a cold call's sandbox
/// starts, with this executable at fd 3 and the stub's channel at fd 4, and with `layers` over
/// the cache folders if any (then forked, to make them before the exec).
pub(super) fn spawn(prefix: &[OsString], layers: Option<&Layers>) -> io::Result<Waiting> {
    let Some(program) = prefix.first().filter(|p| p.as_bytes().starts_with(b"/")) else {
        return Err(io::Error::other("the sandbox is not an absolute path"));
    };
    let c = |arg: &[u8]| CString::new(arg).map_err(|_| io::Error::from(Errno::INVAL));
    let path = c(program.as_bytes())?;
    let mut argv = prefix
        .iter()
        .map(|a| c(a.as_bytes()))
        .collect::<io::Result<Vec<_>>>()?;
    argv.push(c(b"--")?);
    argv.push(c(format!("/proc/self/fd/{STUB_EXE_FD}").as_bytes())?);
    argv.push(c(STUB.as_bytes())?);

    let exe = rustix::fs::open(
        "/proc/self/exe",
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let exe = rustix::io::fcntl_dupfd_cloexec(&exe, ABOVE)?;
    let (channel, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::STREAM,
        SocketFlags::CLOEXEC,
        None,
    )?;
    let theirs = rustix::io::fcntl_dupfd_cloexec(&theirs, ABOVE)?;
    let dups = [
        (exe.as_raw_fd(), STUB_EXE_FD),
        (theirs.as_raw_fd(), STUB_CHANNEL_FD),
    ];

    let (pid, layer_ns) = if let Some(layers) = layers {
        let program = (path, argv);
        let before = BeforeExec {
            hold: None,
            layers: Some(layers),
            dups: &dups,
        };
        match fork_sandbox(&program, before) {
            Ok(sandbox) => (sandbox.pid, sandbox.layer_ns),
            Err(Spawn::Exec(errno)) => return Err(io::Error::from_raw_os_error(errno)),
            Err(Spawn::Layer(failure)) => return Err(io::Error::other(layers.describe(&failure))),
            Err(Spawn::Setup(err)) => return Err(err),
        }
    } else {
        let place = [
            (exe.as_fd(), STUB_EXE_FD),
            (theirs.as_fd(), STUB_CHANNEL_FD),
        ];
        let pid = crate::spawn::spawn(&crate::spawn::Program {
            path: &path,
            argv: &argv,
            env: &[],
            leader: crate::spawn::Leader::Group,
            place: &place,
        })?;
        (pid, None)
    };
    drop((exe, theirs));
    Ok(Waiting {
        pid,
        channel,
        ready: false,
        layer_ns,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_matches_only_its_own_prefix() {
        let prefix: Vec<OsString> = vec!["/usr/bin/bwrap".into(), "--unshare-all".into()];
        let argv = |words: &[&str]| words.iter().map(OsString::from).collect::<Vec<_>>();
        let call = argv(&["/usr/bin/bwrap", "--unshare-all", "--", "/bin/echo", "hi"]);
        assert_eq!(
            after_prefix(&prefix, &call),
            Some(&argv(&["/bin/echo", "hi"])[..])
        );
        let other = argv(&["/usr/bin/bwrap", "--", "/bin/echo"]);
        assert_eq!(after_prefix(&prefix, &other), None);
        let longer = argv(&["/usr/bin/bwrap", "--unshare-all", "--x", "--", "/bin/echo"]);
        assert_eq!(after_prefix(&prefix, &longer), None);
        let nothing = argv(&["/usr/bin/bwrap", "--unshare-all", "--"]);
        assert_eq!(after_prefix(&prefix, &nothing), None);
    }
}
