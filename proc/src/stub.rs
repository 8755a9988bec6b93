//! The stub of a warm sandbox (`lnk-link-run warm-stub` and `lnk-link-supervise warm-stub`,
//! hidden): the process a reaper starts inside the sandbox ahead of the call (or, for a call
//! with a proxy, at once), which becomes the call's program ([`crate::reaper::warm`]).
//!
//! It runs inside the sandbox as the program of a cold call would, reached through the
//! executable the reaper hands it at fd 3 (as the sandbox check's probe is), with its channel
//! to the reaper at fd 4. It closes fd 3 and every descriptor above 4 first, makes fd 4
//! close-on-exec, makes itself not dumpable (no other process of the user may trace it or
//! open its descriptors while it waits), has itself killed at its parent's death (SIGKILL,
//! which ends even a stopped stub), says it is ready, and sleeps in a read until the call
//! comes. Then it:
//!
//! 1. opens the files folder by its path, as the sandbox shows it, and refuses it unless it is
//!    the very folder (device and inode) the call arrived for: a folder replaced since the
//!    sandbox started is never used;
//! 2. enters the working folder from there one component at a time, following no link and
//!    refusing `..` (a folder inside, entered by path inside the sandbox, never through a
//!    descriptor opened outside);
//! 3. puts `/dev/null` on stdin for a call without input;
//! 4. sets every signal to its default with none blocked (this binary's runtime ignores
//!    SIGPIPE, and an ignored signal would stay ignored across the exec);
//! 5. gives back the parent-death signal the sandbox gave it;
//! 6. for a call with a proxy, makes the listener on the sandbox's own `127.0.0.1:3128` and
//!    hands it out over the channel that came with the call ([`crate::net::channel`]), and
//!    closes it;
//! 7. `exec`s the program with the environment the sandbox gave it (`PWD`, when the sandbox
//!    set it, the call's folder, as a cold start's sandbox sets it), and the call's variables:
//!    the `/usr/bin/env NAME=VALUE…` before the program is done here rather than `exec`ed
//!    ([`assignments`]). fd 4 closes at the exec, so the program has descriptors 0, 1 and 2
//!    only, and nothing of the stub's executable.
//!
//! A sandbox started for its call (a cold start under the stub) sends no folder: the stub
//! stays where the sandbox started it, the call's folder, as a cold start's program does.
//!
//! Any failure is written back ([`FAILED`] and the errno) before the stub exits having run
//! nothing, and the reaper starts the call cold instead; but a working folder it refuses on its
//! way in ([`FOLDER_REFUSED`]: the folder changed after the call arrived) is the call's answer,
//! since a cold start would enter it by path again. The channel's end before a call (the spare
//! was thrown away) ends the stub at once.

use std::ffi::{CString, OsString};
use std::io::{self, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::Component;
use std::process::ExitCode;

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};

use wire::{FAILED, FOLDER_REFUSED, MAX_STUB_SPEC, READY, STUB_CHANNEL_FD, STUB_EXE_FD, StubSpec};

pub use wire::STUB;

mod assignments;
pub(crate) mod wire;

/// Runs the stub; returns only when it did not `exec`.
pub fn main() -> ExitCode {
    let Some(channel) = set_up() else {
        return ExitCode::from(2);
    };
    // Dead with its parent while it waits, stopped or not: without a PID namespace a program
    // of an earlier call can stop a waiting stub, and a stopped one would outlive the channel's
    // end. The program gets the sandbox's own setting back (none, or bubblewrap's SIGKILL with
    // `--die-with-parent`), as a cold start's program has it.
    let Ok(inherited) = rustix::process::parent_process_death_signal() else {
        return ExitCode::from(2);
    };
    let killed = Some(rustix::process::Signal::KILL);
    if rustix::process::set_parent_process_death_signal(killed).is_err() {
        return ExitCode::from(2);
    }
    if write_all(&channel, &[READY]).is_err() {
        return ExitCode::from(2);
    }
    let (spec, net) = match read_spec(&channel) {
        Ok(Some(call)) => call,
        // Thrown away before its call: nothing runs.
        Ok(None) | Err(_) => return ExitCode::SUCCESS,
    };
    let (kind, err) = match run(&spec, inherited, net) {
        NotRun::Folder(err) => (FOLDER_REFUSED, err),
        NotRun::Other(err) => (FAILED, err),
    };
    let errno = err.raw_os_error().unwrap_or(Errno::INVAL.raw_os_error());
    let mut said = vec![kind];
    said.extend_from_slice(&errno.to_ne_bytes());
    let _ = write_all(&channel, &said);
    ExitCode::from(127)
}

/// Closes this executable's descriptor and everything above the channel, and takes the
/// channel over, close-on-exec. `None` when there is no channel.
#[allow(unsafe_code)]
fn set_up() -> Option<OwnedFd> {
    // SAFETY: close_range closes descriptors this process does not use: fd 3 is its own
    // executable, handed over by the reaper and owned by nothing here, and nothing of this
    // process has opened a descriptor above 4 yet (it runs before anything else in `main`).
    let closed = unsafe {
        libc::syscall(libc::SYS_close_range, STUB_EXE_FD, STUB_EXE_FD, 0) == 0
            && libc::syscall(libc::SYS_close_range, STUB_CHANNEL_FD + 1, u32::MAX, 0) == 0
    };
    if !closed {
        return None;
    }
    // Not dumpable while it waits: under a sandbox without a PID namespace another call's
    // program (the same user) could otherwise trace the stub, or open its descriptors through
    // /proc, and so reach a later call. The `exec` makes the program dumpable again, as a cold
    // start's program is.
    if rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
        .is_err()
    {
        return None;
    }
    // The channel, by the reaper's launch contract. (Should it not be a socket, the exchange
    // fails.)
    use crate::spawn::inherited::{self, Kind, OnExec};
    inherited::take(STUB_CHANNEL_FD, Kind::Open, OnExec::Close).ok()
}

/// Reads the call, and the proxy channel that came with its first bytes: `None` when the
/// channel ends first or says something else.
fn read_spec(channel: &OwnedFd) -> io::Result<Option<(StubSpec, Option<OwnedFd>)>> {
    let mut header = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let got = loop {
        match rustix::net::recvmsg(
            channel,
            &mut [IoSliceMut::new(&mut header)],
            &mut ancillary,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Err(Errno::INTR) => {}
            other => break other?.bytes,
        }
    };
    let mut net = None;
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            // One is sent; any more are closed as they are dropped.
            for fd in fds {
                net.get_or_insert(fd);
            }
        }
    }
    if got == 0 || !crate::fill::fill(channel, &mut header[got..])? {
        return Ok(None);
    }
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_STUB_SPEC {
        return Ok(None);
    }
    let mut body = vec![0u8; len];
    if !crate::fill::fill(channel, &mut body)? {
        return Ok(None);
    }
    Ok(StubSpec::decode(&body).map(|spec| (spec, net)))
}

/// Why the stub did not `exec` the call's program.
enum NotRun {
    /// It refused the working folder on its way in from the files folder.
    Folder(io::Error),
    /// Anything else.
    Other(io::Error),
}

/// Goes where the call runs, hands the proxy its listener (for a call with one), and `exec`s
/// the program; returns only the reason it could not.
fn run(
    spec: &StubSpec,
    death_signal: Option<rustix::process::Signal>,
    net: Option<OwnedFd>,
) -> NotRun {
    if let Err(err) = enter(spec) {
        return err;
    }
    let prepared = prepare(spec).and_then(|prepared| {
        rustix::process::set_parent_process_death_signal(death_signal)?;
        match (spec.net, net) {
            (true, Some(net)) => crate::net::channel::hand_listener(net.as_fd())?,
            (true, None) => return Err(Errno::BADF.into()),
            (false, _) => {}
        }
        Ok(prepared)
    });
    match prepared {
        Ok((path, argv, env)) => NotRun::Other(exec(&path, &argv, &env)),
        Err(err) => NotRun::Other(err),
    }
}

type Prepared = (CString, Vec<CString>, Vec<CString>);

/// Enters the call's working folder: the files folder by path, the one the call arrived for,
/// then the rest one component at a time from there, following no link.
fn enter(spec: &StubSpec) -> Result<(), NotRun> {
    let other = |err: Errno| NotRun::Other(err.into());
    let refused = |err: Errno| NotRun::Folder(err.into());
    // Started for its call: already where the call runs.
    let Some(place) = &spec.place else {
        return Ok(());
    };
    let files = rustix::fs::open(
        &place.files,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(other)?;
    let stat = rustix::fs::fstat(&files).map_err(other)?;
    if (stat.st_dev, stat.st_ino) != place.id {
        // Not the folder the call arrived for: the sandbox shows one replaced since.
        return Err(other(Errno::STALE));
    }
    let mut folder = files;
    for component in place.dir.components() {
        match component {
            Component::CurDir => {}
            Component::Normal(name) => {
                folder = rustix::fs::openat(
                    &folder,
                    name,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .map_err(refused)?;
            }
            // `..`, or an absolute path: never outside the files folder.
            _ => return Err(refused(Errno::XDEV)),
        }
    }
    rustix::process::fchdir(&folder).map_err(refused)?;
    Ok(())
}

/// Sets stdin and signals, and builds the exec's words.
fn prepare(spec: &StubSpec) -> io::Result<Prepared> {
    if spec.null_stdin {
        // Without a /dev/null in the sandbox the input pipe stays, and serve has closed its
        // end: the program reads an end at once either way.
        if let Ok(null) = rustix::fs::open("/dev/null", OFlags::RDONLY, Mode::empty()) {
            rustix::stdio::dup2_stdin(&null)?;
        }
    }
    // Every signal at its default, none blocked, as a cold sandbox gives its program.
    crate::spawn::reset_signals()?;
    let c =
        |arg: &OsString| CString::new(arg.as_bytes()).map_err(|_| io::Error::from(Errno::INVAL));
    let (set, words) = assignments::split(&spec.argv).unwrap_or((Vec::new(), &spec.argv));
    let argv: Vec<CString> = words.iter().map(c).collect::<io::Result<_>>()?;
    let path = argv.first().cloned().ok_or(Errno::INVAL)?;
    // A sandbox that tells its program its folder (bubblewrap sets `PWD` to the folder it
    // started in) told the stub its own: the program is told the call's, as a cold start's is.
    // (A sandbox started for its call started in it.)
    let folder = spec
        .place
        .as_ref()
        .map(|place| match place.dir.as_os_str().is_empty() {
            true => place.files.clone(),
            false => place.files.join(&place.dir),
        });
    let mut vars: Vec<(OsString, OsString)> = std::env::vars_os()
        .map(|(name, value)| match (name.as_bytes(), &folder) {
            (b"PWD", Some(folder)) => (name, folder.clone().into_os_string()),
            _ => (name, value),
        })
        .collect();
    assignments::apply(&mut vars, &set);
    let env: Vec<CString> = vars
        .into_iter()
        .map(|(name, value)| {
            let mut pair = name.into_vec();
            pair.push(b'=');
            pair.extend_from_slice(value.as_bytes());
            CString::new(pair).map_err(|_| io::Error::from(Errno::INVAL))
        })
        .collect::<io::Result<_>>()?;
    Ok((path, argv, env))
}

fn exec(path: &CString, argv: &[CString], env: &[CString]) -> io::Error {
    let Err(err) = nix::unistd::execve(path, argv, env);
    err.into()
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::net::send(fd.as_fd(), bytes, rustix::net::SendFlags::NOSIGNAL) {
            Ok(0) => return Err(Errno::PIPE.into()),
            Ok(n) => bytes = &bytes[n..],
            Err(Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}
