//! A warm sandbox: a spare reaper ([`super::spare`]) that has already run its sandbox, so that
//! a call pays no sandbox start-up.
//!
//! A spare started with `--warm <sandbox>…` (the very prefix a cold call of the same `serve`
//! runs) forks `<sandbox> -- /proc/self/fd/3 warm-stub` at its start, as it forks a cold call's
//! sandbox (the leader of a group of its own, an empty environment and signal mask, every
//! signal at its default), with its own executable at fd 3 and one end of a socket pair at
//! fd 4. The stub, the runner's own code, closes fd 3 first thing, says it is ready, and waits
//! for the call ([`crate::stub::wire`]). The spare reports `ready` to `serve` only once the stub
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
//! - the stub did not take the call within [`super::HAND_OFF_LIMIT`] (it was stopped by a program of
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
//!
//! A call with a proxy (`--net-allow`) always runs under the stub, which hands the proxy its
//! listener just before its `exec` ([`crate::net::channel`]): warm, the channel goes to the
//! stub with the spec; cold, the sandbox is started with the stub in it at once and handed the
//! call as soon as its stub is ready ([`cold_stub`]), in the folder it started in, as a cold
//! start's program is.

use std::ffi::OsString;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, poll};
use rustix::io::Errno;
use rustix::net::RecvFlags;
use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};

use crate::stub::wire::{READY, StubSpec};

use super::blocked_signals::BlockedSignals;
use super::children;
use super::hand_off::NotTaken;
use super::layers::Layers;
use super::options::Options;
use super::report::{Event, Reporter};
use super::spare::{Call, Control};
use super::warm_sandbox::{Waiting, after_prefix, spawn};

/// How many warm sandboxes in a row may end before their stub is ready before the spare gives
/// up on them and waits as an ordinary spare.
pub const TRIES: u32 = 2;
/// How long a sandbox started for its call may take until its stub is ready ([`cold_stub`]):
/// as long as a cold start may take (a sandbox slow to start is the machine's, not a fault).
pub const STUB_READY_LIMIT: Duration = Duration::from_secs(30);

/// A spare's warm sandbox, while it has one.
#[derive(Debug)]
pub struct Warm {
    prefix: Vec<OsString>,
    /// The cache layers each warm sandbox gets (one per sandbox: a stub replaced gets new ones).
    layers: Option<Layers>,
    sandbox: Option<Waiting>,
    failures: u32,
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
    /// A stop came while the sandbox started for the call was getting ready: it was killed,
    /// and nothing ran.
    Stopped,
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

    /// Hands the call of `options` to the warm sandbox, when it can take it, with `net`, the
    /// sandbox's end of the call's proxy channel, if it has one. A signal that arrives
    /// meanwhile (read later by the reaper) ends the wait for the stub's `exec`.
    pub fn hand(
        &mut self,
        options: &Options,
        signals: &BlockedSignals,
        net: Option<BorrowedFd<'_>>,
    ) -> Handed {
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
            place: Some(place),
            null_stdin: options.null_stdin,
            net: net.is_some(),
            argv: argv.to_vec(),
        };
        self.hand_stub(&spec, options.warm_only, signals, net)
    }

    /// Hands `spec` to the stub, when it is ready; a failure is the call's when `warm_only`.
    fn hand_stub(
        &mut self,
        spec: &StubSpec,
        warm_only: bool,
        signals: &BlockedSignals,
        net: Option<BorrowedFd<'_>>,
    ) -> Handed {
        let cold = |warm: &mut Warm, why: &str| {
            warm.discard();
            if warm_only {
                Handed::Failed(io::Error::other(format!("no warm sandbox: {why}")))
            } else {
                Handed::Cold
            }
        };
        let Some(spec) = spec.encode() else {
            return cold(self, "the call is too large for the stub");
        };
        let Some(waiting) = self.sandbox.take_if(|waiting| waiting.ready) else {
            return cold(self, "the stub is not ready");
        };
        let not_taken = match waiting.hand(&spec, signals.fd(), net) {
            Ok(()) => return Handed::Warm(waiting.pid, waiting.layer_ns),
            Err(not_taken) => not_taken,
        };
        self.sandbox = Some(waiting);
        self.discard();
        match not_taken {
            not_taken if warm_only => Handed::Failed(not_taken.into_error()),
            NotTaken::Failed(_) => Handed::Cold,
            NotTaken::NotRun(event) => Handed::NotRun(event),
        }
    }

    /// Starts the sandbox now and waits until its stub is ready ([`cold_stub`]).
    fn start_now(&mut self, signals: &BlockedSignals) -> Started {
        match spawn(&self.prefix, self.layers.as_ref()) {
            Ok(waiting) => self.sandbox = Some(waiting),
            Err(err) => return Started::Failed(err),
        }
        let limit = Instant::now() + STUB_READY_LIMIT;
        loop {
            let Some(waiting) = &self.sandbox else {
                return Started::Failed(io::Error::other("the sandbox is gone"));
            };
            let signal_fd = signals.fd();
            let mut fds = [
                PollFd::new(&waiting.channel, PollFlags::IN),
                PollFd::new(&signal_fd, PollFlags::IN),
            ];
            match crate::poll::poll_until(&mut fds, Some(limit)) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(err) => return Started::Failed(err.into()),
            }
            let heard = !fds[0].revents().is_empty();
            let signalled = !fds[1].revents().is_empty();
            if heard {
                let mut byte = [0u8; 1];
                match rustix::net::recv(&waiting.channel, &mut byte, RecvFlags::DONTWAIT) {
                    Ok((1, _)) if byte[0] == READY => {
                        if let Some(waiting) = &mut self.sandbox {
                            waiting.ready = true;
                        }
                        return Started::Ready;
                    }
                    Err(Errno::AGAIN | Errno::INTR) => {}
                    // The stub ended before it was ready: the sandbox could not run it.
                    _ => return self.ended_unready(),
                }
            }
            if signalled {
                let arrived = signals.take();
                if arrived.stop {
                    self.discard();
                    return Started::Stopped;
                }
                let ended = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
                if matches!(waitid(WaitId::Pid(waiting.pid), ended), Ok(Some(_))) {
                    return self.ended_unready();
                }
            }
            if Instant::now() >= limit {
                self.discard();
                return Started::Failed(io::Error::other(format!(
                    "the sandbox's stub was not ready within {STUB_READY_LIMIT:?}"
                )));
            }
        }
    }

    /// The sandbox, started for its call, ended (or its stub did) before the stub was ready:
    /// its process, unreaped, is the call's sandbox, whose end (and what it wrote on stderr)
    /// is the call's answer, as a cold start's would be.
    fn ended_unready(&mut self) -> Started {
        match self.sandbox.take() {
            Some(waiting) => Started::Ended(waiting.pid, waiting.layer_ns),
            None => Started::Failed(io::Error::other("the sandbox is gone")),
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

/// How a sandbox started for its call got on ([`Warm::start_now`]).
enum Started {
    /// Its stub is ready for the call.
    Ready,
    /// It ended first: this process, unreaped (and the mount namespace of its cache layers).
    Ended(Pid, Option<OwnedFd>),
    /// A stop came first; it was killed.
    Stopped,
    /// It could not be started.
    Failed(io::Error),
}

/// A cold start of a call that runs under the stub (a call with a proxy): its sandbox,
/// `options.argv`'s first `words` words, started now with the stub in it, and handed the call
/// once its stub is ready, with `net`, the sandbox's end of the call's proxy channel, and with
/// `layers` over the cache folders, if any. The stub stays in the folder the sandbox started in
/// (the call's), with the stdin the sandbox got.
pub fn cold_stub(
    options: &Options,
    words: usize,
    signals: &BlockedSignals,
    net: Option<BorrowedFd<'_>>,
    layers: Option<Layers>,
) -> Handed {
    let Some(prefix) = options.argv.get(..words) else {
        return Handed::Failed(io::Error::other(
            "the call has fewer words than its sandbox",
        ));
    };
    let Some(argv) = after_prefix(prefix, &options.argv) else {
        return Handed::Failed(io::Error::other(
            "the call's command line does not start with its sandbox and `--`",
        ));
    };
    let spec = StubSpec {
        place: None,
        null_stdin: false,
        net: net.is_some(),
        argv: argv.to_vec(),
    };
    let mut warm = Warm::new(prefix.to_vec(), layers);
    match warm.start_now(signals) {
        Started::Ready => warm.hand_stub(&spec, true, signals, net),
        Started::Ended(pid, layer_ns) => Handed::Warm(pid, layer_ns),
        Started::Stopped => Handed::Stopped,
        Started::Failed(err) => Handed::Failed(err),
    }
}
