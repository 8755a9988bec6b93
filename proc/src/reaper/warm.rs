//! A warm sandbox: a spare reaper ([`super::spare`]) that has already run its sandbox, so that
//! a call pays no sandbox start-up.
//!
//! A spare started with `--warm <sandbox>…` (the very prefix a cold call of the same `serve`
//! runs) forks `<sandbox> -- /proc/self/fd/3 warm-stub` at its start, as it forks a cold call's
//! sandbox (the leader of a group of its own, an empty environment and signal mask, every
//! signal at its default), with its own executable at fd 3 and one end of a socket pair at
//! fd 4. The stub, the runner's own code, closes fd 3 first thing, says it is ready, and waits
//! for the call ([`super::warm_wire`]). The spare reports `ready` to `serve` only once the stub
//! has, so a call hands its spec to a sandbox that already runs.
//!
//! When the call comes, and its command line is this prefix, `--`, then the program (a cold
//! call's very words), the spare hands the stub the program's words, the folder (by path,
//! with the files folder's identity at the call's arrival) and whether stdin is empty; the
//! stub enters the folder, closes everything but stdio, and `exec`s: the program is the
//! sandbox's process, and from there the reaper holds the call exactly as a cold one. In every
//! other case (a prefix that differs, a test's hold, a stub not ready or gone, a stub that
//! reports a failure: a files folder that is not the call's, a program it cannot execute) the
//! warm sandbox is killed and reaped, and the call starts cold: nothing of the warm one is used.
//!
//! Two failures are the call's answer instead, since a cold start could do no better:
//! - the stub refused the working folder on its way in (a link, not a folder, or gone): the
//!   folder changed after the call arrived and was checked, and a cold start would enter it by
//!   path again, where a sandbox may fall back to another folder (bubblewrap goes to `/`);
//! - the stub did not take the call within [`HAND_OFF_LIMIT`] (it was stopped by a program of
//!   an earlier call, which only a sandbox without a PID namespace allows, or starved): it is
//!   killed and the call is not started again. Once the spec is sent a cold start could run
//!   the program twice, should the stub have been just about to `exec` it. (A program that can
//!   stop the stub can also stop this process between that decision and the kill, and let the
//!   stub run meanwhile: the answer says the program most likely did not run.)
//!
//! An idle warm sandbox costs no CPU (the stub sleeps in a read, the reaper in a poll). A stub
//! that dies while idle is replaced; one that cannot get ready [`TRIES`] times in a row makes
//! the spare an ordinary one. At the spare's end (its socket ends, a stop, its parent's death)
//! the warm sandbox is killed with everything it started; and should the spare itself be
//! killed, the stub's channel ends and the stub exits, having run nothing.

use std::ffi::{CString, OsString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};
use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};

pub use super::warm_wire::{
    FAILED, FOLDER_REFUSED, Place, READY, STUB, STUB_CHANNEL_FD, STUB_EXE_FD, StubSpec,
};

use super::children;
use super::layers::Layers;
use super::options::Options;
use super::report::{Event, Reporter};
use super::sandbox_start::{ABOVE, BeforeExec, Spawn, fork_sandbox};
use super::signals::BlockedSignals;
use super::spare::{Call, Control};

/// The spare's argument that gives it a warm sandbox: `reap --spare --warm <sandbox>…`.
pub const WARM: &str = "--warm";
/// How many warm sandboxes in a row may end before their stub is ready before the spare gives
/// up on them and waits as an ordinary spare.
pub const TRIES: u32 = 2;
/// How long a stub may take from the call's spec to its `exec` (a matter of a millisecond)
/// before it is killed and the call is answered as not run. Under the wait `serve` gives a
/// reaper to report its sandbox's start (a second past the call's deadline), so that a call of
/// any timeout hears it.
pub const HAND_OFF_LIMIT: Duration = Duration::from_millis(500);

/// A spare's warm sandbox, while it has one.
#[derive(Debug)]
pub struct Warm {
    prefix: Vec<OsString>,
    /// The cache layers each warm sandbox gets (one per sandbox: a stub replaced gets new ones).
    layers: Option<Layers>,
    sandbox: Option<Waiting>,
    failures: u32,
}

/// A warm sandbox started: its process (the leader of its group), and the reaper's end of the
/// stub's channel.
#[derive(Debug)]
struct Waiting {
    pid: Pid,
    channel: OwnedFd,
    ready: bool,
    /// The mount namespace of its cache layers, held open ([`super::sandbox_start::Sandbox`]).
    layer_ns: Option<OwnedFd>,
}

/// How a call was handed.
#[derive(Debug)]
pub enum Handed {
    /// The stub `exec`ed the program: the sandbox, this pid, runs the call (with the mount
    /// namespace of its cache layers, held open, if it has them).
    Warm(Pid, Option<OwnedFd>),
    /// The warm sandbox is gone (or never was): start the call cold.
    Cold,
    /// The warm sandbox could not run the call, and the call asked for it alone
    /// ([`Options::warm_only`]).
    Failed(io::Error),
    /// The warm sandbox did not run the call, and a cold start could do no better: this event
    /// ([`Event::FolderRefused`], [`Event::StubStuck`]) is the call's answer. The warm sandbox
    /// is gone.
    NotRun(Event),
}

/// Why a stub did not take the call it was handed.
#[derive(Debug)]
enum NotTaken {
    /// It said so: it could not run the call (a cold start may).
    Failed(io::Error),
    /// It refused the working folder ([`Event::FolderRefused`]), or said nothing within
    /// [`HAND_OFF_LIMIT`] ([`Event::StubStuck`]).
    NotRun(Event),
}

impl NotTaken {
    /// What a call that asked for the warm sandbox alone is told.
    fn into_error(self) -> io::Error {
        match self {
            NotTaken::Failed(err) => err,
            NotTaken::NotRun(Event::FolderRefused(errno)) => io::Error::from_raw_os_error(errno),
            NotTaken::NotRun(_) => io::Error::other(format!(
                "the stub did not take the call within {HAND_OFF_LIMIT:?}"
            )),
        }
    }
}

impl Warm {
    /// A spare's warm side for `prefix` (the sandbox and its options, without `--`), its
    /// sandboxes started with `layers` over the cache folders, if any.
    pub fn new(prefix: Vec<OsString>, layers: Option<Layers>) -> Self {
        Warm {
            prefix,
            layers,
            sandbox: None,
            failures: 0,
        }
    }

    /// Keeps a warm sandbox ready and waits for the call, or a stop (`Ok(None)`: nothing may
    /// run). Reports `ready` once the stub is, or once the spare gave up on warm sandboxes.
    pub fn wait_for_call(
        &mut self,
        control: &Control,
        signals: &BlockedSignals,
        report: &Reporter,
    ) -> io::Result<Option<Call>> {
        let mut told = false;
        loop {
            if self.sandbox.is_none() && self.failures < TRIES {
                match spawn(&self.prefix, self.layers.as_ref()) {
                    Ok(waiting) => self.sandbox = Some(waiting),
                    Err(_) => self.failures = TRIES,
                }
            }
            let ready = self.sandbox.as_ref().is_some_and(|w| w.ready);
            if !told && (ready || self.failures >= TRIES) {
                report.send(Event::Ready);
                told = true;
            }
            let signal_fd = signals.fd();
            let mut fds = vec![
                PollFd::new(control, PollFlags::IN),
                PollFd::new(&signal_fd, PollFlags::IN),
            ];
            if let Some(waiting) = &self.sandbox {
                fds.push(PollFd::new(&waiting.channel, PollFlags::IN));
            }
            match poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
            let control_ready = !fds[0].revents().is_empty();
            let channel_ready = fds.get(2).is_some_and(|fd| !fd.revents().is_empty());
            drop(fds);
            let arrived = signals.take();
            if arrived.stop {
                return Ok(None);
            }
            if channel_ready {
                self.hear_stub();
            }
            if arrived.child {
                self.see_sandbox_end();
            }
            if control_ready {
                return control.receive();
            }
        }
    }

    /// Hands the call of `options` to the warm sandbox, when it can take it. A signal that
    /// arrives meanwhile (read later by the reaper) ends the wait for the stub's `exec`.
    pub fn hand(&mut self, options: &Options, signals: &BlockedSignals) -> Handed {
        let cold = |warm: &mut Warm, why: &str| {
            warm.discard();
            if options.warm_only {
                Handed::Failed(io::Error::other(format!("no warm sandbox: {why}")))
            } else {
                Handed::Cold
            }
        };
        let Some(place) = options.warm.clone() else {
            return cold(self, "the call is not for one");
        };
        if options.hold_exec.is_some() {
            return cold(self, "a hold before the exec needs a cold start");
        }
        let Some(argv) = after_prefix(&self.prefix, &options.argv) else {
            return cold(self, "the call's sandbox is another");
        };
        let layered = self
            .layers
            .as_ref()
            .map(Layers::folders)
            .unwrap_or_default();
        if layered != options.caches.as_slice() {
            return cold(self, "the call's cache folders are others");
        }
        let spec = StubSpec {
            place,
            null_stdin: options.null_stdin,
            argv: argv.to_vec(),
        };
        let Some(spec) = spec.encode() else {
            return cold(self, "the call is too large for the stub");
        };
        let Some(waiting) = self.sandbox.take_if(|waiting| waiting.ready) else {
            return cold(self, "the stub is not ready");
        };
        let not_taken = match waiting.hand(&spec, signals.fd()) {
            Ok(()) => return Handed::Warm(waiting.pid, waiting.layer_ns),
            Err(not_taken) => not_taken,
        };
        self.sandbox = Some(waiting);
        self.discard();
        match not_taken {
            not_taken if options.warm_only => Handed::Failed(not_taken.into_error()),
            NotTaken::Failed(_) => Handed::Cold,
            NotTaken::NotRun(event) => Handed::NotRun(event),
        }
    }

    /// Reads what the stub said while waiting: `ready`, or its end.
    fn hear_stub(&mut self) {
        let Some(waiting) = &mut self.sandbox else {
            return;
        };
        let mut byte = [0u8; 1];
        match rustix::net::recv(&waiting.channel, &mut byte, RecvFlags::DONTWAIT) {
            Ok((1, _)) if byte[0] == READY && !waiting.ready => {
                waiting.ready = true;
                self.failures = 0;
            }
            Err(Errno::AGAIN | Errno::INTR) => {}
            // Its end, or anything else: this sandbox will not run a call.
            _ => self.lost(),
        }
    }

    /// After a SIGCHLD: whether the warm sandbox's process ended; then it is replaced.
    fn see_sandbox_end(&mut self) {
        let Some(waiting) = &self.sandbox else {
            return;
        };
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        if let Ok(Some(_)) = waitid(WaitId::Pid(waiting.pid), options) {
            self.lost();
        }
    }

    /// The warm sandbox is lost while idle: gone with all it started, to be replaced.
    fn lost(&mut self) {
        if !self.sandbox.as_ref().is_some_and(|w| w.ready) {
            self.failures = self.failures.saturating_add(1);
        }
        self.discard();
    }

    /// Kills and reaps the warm sandbox and everything it started (this process is a child
    /// subreaper, and has no other child while it waits).
    pub fn discard(&mut self) {
        if let Some(waiting) = self.sandbox.take() {
            // Its channel's end alone makes the stub exit, should anything escape the kill.
            drop(waiting.channel);
            let _ = rustix::process::kill_process_group(waiting.pid, rustix::process::Signal::KILL);
            let _ = children::kill_all_children();
        }
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        self.discard();
    }
}

impl Waiting {
    /// Sends the spec and waits for the stub's `exec` (its channel's end) or its failure, for
    /// at most [`HAND_OFF_LIMIT`]. A pending signal with nothing from the stub ends the wait as
    /// an `exec`: a stop must not wait, and a sandbox that ended before its stub could answer
    /// is seen as ended.
    fn hand(&self, spec: &[u8], signal_fd: BorrowedFd<'_>) -> Result<(), NotTaken> {
        let failed = |err: Errno| NotTaken::Failed(err.into());
        // The sandbox's own processes (its group) may have been stopped while they waited, by
        // a program that could see them (no PID namespace): a stopped sandbox would hold the
        // call past its program's end. (The stub, in a session of its own under some
        // sandboxes, has the hand-off's limit.)
        let _ = rustix::process::kill_process_group(self.pid, rustix::process::Signal::CONT);
        let mut sent = 0;
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

/// The words after `prefix` and its `--` in `argv`, when `argv` starts so.
fn after_prefix<'a>(prefix: &[OsString], argv: &'a [OsString]) -> Option<&'a [OsString]> {
    let rest = argv.strip_prefix(prefix)?;
    let (dashes, program) = rest.split_first()?;
    (dashes == "--" && !program.is_empty()).then_some(program)
}

/// Starts a warm sandbox: `<prefix> -- /proc/self/fd/3 warm-stub`, as a cold call's sandbox
/// starts, with this executable at fd 3 and the stub's channel at fd 4, and with `layers` over
/// the cache folders if any (then forked, to make them before the exec).
fn spawn(prefix: &[OsString], layers: Option<&Layers>) -> io::Result<Waiting> {
    use nix::spawn::{PosixSpawnAttr, PosixSpawnFileActions, PosixSpawnFlags, posix_spawn};
    use nix::sys::signal::SigSet;
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
        let env: [CString; 0] = [];
        let mut attr = PosixSpawnAttr::init()?;
        attr.set_sigmask(&SigSet::empty())?;
        attr.set_sigdefault(&SigSet::all())?;
        attr.set_pgroup(nix::unistd::Pid::from_raw(0))?;
        attr.set_flags(
            PosixSpawnFlags::POSIX_SPAWN_SETSIGMASK
                | PosixSpawnFlags::POSIX_SPAWN_SETSIGDEF
                | PosixSpawnFlags::POSIX_SPAWN_SETPGROUP,
        )?;
        let mut actions = PosixSpawnFileActions::init()?;
        // dup2 leaves the copies open across the exec; the sources are close-on-exec.
        for (from, to) in dups {
            actions.add_dup2(from, to)?;
        }
        let child = posix_spawn(path.as_c_str(), &actions, &attr, &argv, &env)?;
        let pid = Pid::from_raw(child.as_raw()).ok_or_else(|| io::Error::other("no pid"))?;
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
