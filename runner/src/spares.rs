//! Spare reapers: a call's reaper started ahead of the call, so that a call hands its spec to a
//! reaper that already runs instead of waiting for one to start (most of a call's overhead);
//! and, unless calls start cold ([`crate::warm`]), with the call's sandbox already started
//! inside it (`--warm <sandbox>…`, [`lnk_proc::reaper::warm`]).
//!
//! One thread of `serve`'s, `spares`, keeps [`SPARES`] spares ready (`LNK_SPARES`): `lnk-link-run reap --spare`,
//! launched as every call's reaper is (`lnk_proc::reaper::launch`), its stdio already the
//! pipes a call reads, waiting on its control socket (see `lnk_proc::reaper::spare`). A call
//! takes it ([`hand`]), waits for its `ready` if it is still starting, and sends its spec and
//! its working folder. Once the call is answered, the thread starts the next spare
//! ([`RefillHold`]): while a call runs, starting one would compete with it for a CPU. A call that
//! finds no spare (more calls at once than spares), or whose spare is gone, starts a reaper of
//! its own, as before spares: nothing is lost but time.
//!
//! A warm spare's sandbox shows the files folder it was started with. Its device and inode are
//! taken when the spare starts and compared with the folder's when the call arrives: a spare
//! of a folder replaced since is thrown away, never used (and the stub checks the same inside,
//! against the identity at the call's arrival, [`lnk_proc::reaper::warm_wire::Place`]).
//!
//! The parent-death signal of a spare, and so of the call that takes it, is tied to the thread
//! that spawned it: the `spares` thread never ends while `serve` runs. When `serve` dies its
//! spare gets SIGTERM and its control socket ends, and it exits having run nothing.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};
use std::{io, thread};

use lnk_common::record::FileId;
use lnk_proc::reaper::COLD;
use lnk_proc::reaper::warm::{Place, WARM};
use lnk_proc::reaper::{Event, Options, Reports, launch, report, spare};
use rustix::event::{PollFd, PollFlags, Timespec, poll};

use crate::reaper::{REAP, Reaper};
use crate::sandbox_line::pass::Passed;
use crate::sandbox_line::{Expanded, Protected};
use crate::sync::lock;

/// How long a call waits for a spare still starting to say `ready` before it starts a reaper of
/// its own (a safety net: a spare is ready within milliseconds).
const READY_WITHIN: Duration = Duration::from_secs(5);
/// How long serve's start waits for the first spare to be spawned.
const FIRST_WITHIN: Duration = Duration::from_secs(2);
/// After a spare could not be started, how long until the next try.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// How many spares `serve` keeps ready. Agents make a few calls at once (a host's parallel tool
/// calls), and every idle spare costs memory (a reaper, and a warm sandbox's few processes):
/// four cover the usual bursts; the fifth call of a burst starts cold, which waits for no other
/// call's spare. (`docs/choices.md`.) `LNK_SPARES=<n>` (1 to [`MAX_SPARES`]) changes it.
pub const SPARES: usize = 4;
/// The most spares `LNK_SPARES` may ask for.
pub const MAX_SPARES: usize = 64;

/// How many spares to keep: `LNK_SPARES` when it is a number from 1 to [`MAX_SPARES`], else
/// [`SPARES`].
fn how_many() -> usize {
    std::env::var("LNK_SPARES")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|n| (1..=MAX_SPARES).contains(n))
        .unwrap_or(SPARES)
}

/// The spares of this process, once [`start`] ran (only `serve` starts them).
static SPARES_OF_SERVE: OnceLock<Arc<Spares>> = OnceLock::new();

/// How spares are started.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The files folder (canonical), whose identity a warm spare's sandbox shows.
    pub files: PathBuf,
    /// The sandbox prefix as given (its words expanded for each spare), for warm spares;
    /// `None` for cold starts.
    pub warm: Option<Vec<OsString>>,
    /// For cold spares, the sandbox prefix as given when it names descriptors to hold
    /// ([`crate::sandbox_line::holds_protected`]): each cold spare holds those of its own
    /// expansion, and runs a call whose line protects the same.
    pub cold: Option<Vec<OsString>>,
    /// The cache folders: the binds the line's `{caches}` becomes, and those a warm spare's
    /// sandbox gets a layer of its own over (its call's).
    pub caches: crate::caches::Caches,
}

/// The spares ready, oldest first, and the refill thread's wake-up.
#[derive(Debug)]
struct Spares {
    settings: Settings,
    count: usize,
    slot: Mutex<VecDeque<Spare>>,
    taken: Condvar,
    /// Set at serve's end: no spare is kept from then on.
    closing: AtomicBool,
    /// Whether the refill thread is starting a spare now.
    starting: AtomicBool,
}

/// A spare reaper, started: its process (stdio piped), its reports, `serve`'s end of its
/// control socket, and for a warm one the files folder's identity when it started.
#[derive(Debug)]
pub struct Spare {
    child: Child,
    reports: Reports,
    control: OwnedFd,
    files_id: Option<(u64, u64)>,
    /// A warm one's sandbox prefix, as expanded for it.
    prefix: Vec<OsString>,
    /// What its sandbox (warm, or for a cold one, the line it holds descriptors for) protects.
    protected: Protected,
    /// How many descriptors it holds for its sandbox.
    passes: usize,
}

/// The device and inode of the folder at `path`.
pub fn folder_id(path: &Path) -> Option<(u64, u64)> {
    FileId::of_path(path).map(|id| (id.dev, id.ino))
}

/// Starts the `spares` thread and waits (briefly) until it has spawned the first spare, so that
/// the first call finds one. A failure is logged; calls then start reapers of their own.
pub fn start(settings: Settings) {
    let spares = Arc::new(Spares {
        settings,
        count: how_many(),
        slot: Mutex::default(),
        taken: Condvar::new(),
        closing: AtomicBool::new(false),
        starting: AtomicBool::new(false),
    });
    if SPARES_OF_SERVE.set(Arc::clone(&spares)).is_err() {
        return;
    }
    let (first_tx, first_rx) = mpsc::channel();
    let started = thread::Builder::new()
        .name("spares".into())
        .spawn(move || spares.refill(first_tx));
    match started {
        Ok(_) => {
            let _ = first_rx.recv_timeout(FIRST_WITHIN);
        }
        Err(err) => tracing::warn!(
            "no spare reapers ({err}): each call starts its own reaper, which is slower"
        ),
    }
}

/// Hands a call to a spare, when one is there and takes it: the call's reaper, running the
/// call. `workdir` is the call's working folder (canonical, inside the files folder); `net` the
/// sandbox's end of the call's proxy channel, for a call with one. `None`: no spare (or it
/// could not take the call, and was disposed of); the caller starts a reaper of its own.
pub fn hand(
    options: &Options,
    (passed, protected): (&Passed, &Protected),
    cwd: BorrowedFd<'_>,
    workdir: &Path,
    with_input: bool,
    net: Option<BorrowedFd<'_>>,
) -> Option<Reaper> {
    let spares = SPARES_OF_SERVE.get()?;
    let mut options = options.clone();
    options.null_stdin = !with_input;
    let files = &spares.settings.files;
    let spare = loop {
        let spare = spares.take()?;
        // A sandbox made before a protected path appeared, went or was replaced protects what
        // was there then, and a cold spare holds the descriptors of its own finding: never
        // used for a call whose line protects something else. (A cold spare whose line passes
        // nothing holds nothing, and runs the call's line as it is.)
        if spare.protected != *protected
            || (spare.files_id.is_none() && spare.passes != passed.len())
        {
            tracing::debug!("a spare whose protected paths changed is thrown away");
            spare.dispose();
            refill();
            continue;
        }
        let Some(id) = spare.files_id else {
            break spare;
        };
        match (folder_id(files), workdir.strip_prefix(files)) {
            (Some(now), Ok(dir)) if now == id => {
                options.warm = Some(Place {
                    files: files.clone(),
                    dir: dir.to_path_buf(),
                    id: now,
                });
                break spare;
            }
            // Its sandbox may show a files folder replaced since it started: never used.
            (Some(_), _) => {
                tracing::debug!("a warm spare of a replaced files folder is thrown away");
                spare.dispose();
                refill();
            }
            // The folder cannot be looked at: the spare runs the call cold.
            (None, _) => break spare,
        }
    };
    // A spec too large for a spare goes the old way, where the kernel's limit decides.
    let Some(spec) = spare::encode(&options) else {
        spare.dispose();
        return None;
    };
    match spare.hand(&spec, cwd, with_input, net) {
        Ok(reaper) => Some(reaper),
        Err(err) => {
            tracing::debug!(
                "a spare reaper could not take a call ({}); starting one for it",
                lnk_common::Causes(&err)
            );
            None
        }
    }
}

/// How long serve's end waits for a spare being started to be done, to dispose of it too.
const STOP_WITHIN: Duration = Duration::from_secs(5);

/// At serve's end: disposes of every spare (its warm sandbox killed, and reaped), and keeps no
/// other, so that what their sandboxes held is free (the placeholders of the protected paths,
/// [`crate::sandbox_line::protected`]).
pub fn stop_all() {
    let Some(spares) = SPARES_OF_SERVE.get() else {
        return;
    };
    spares.closing.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + STOP_WITHIN;
    loop {
        let ready: Vec<Spare> = lock(&spares.slot).drain(..).collect();
        for spare in ready {
            spare.dispose();
        }
        if !spares.starting.load(Ordering::SeqCst) || Instant::now() > deadline {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Has the `spares` thread start the next spare if one is missing (once no call holds it back,
/// [`RefillHold`]).
pub fn refill() {
    if let Some(spares) = SPARES_OF_SERVE.get() {
        // Under the lock, so that the thread cannot miss it between its look and its wait.
        drop(lock(&spares.slot));
        spares.taken.notify_one();
    }
}

/// Calls in flight ([`RefillHold`]).
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// The longest the `spares` thread holds back while calls are in flight before it starts a
/// spare anyway.
const DEFER_AT_MOST: Duration = Duration::from_millis(100);

/// A `command` call in flight, from its arrival until its answer is out. While any is, the
/// `spares` thread holds back (up to [`DEFER_AT_MOST`] for each spare it starts): starting a
/// spare costs a fork of serve and an exec, and a warm one its sandbox's start, which would
/// take a CPU from the call (from the program itself, or from the hops of its answer, when
/// another process keeps the other CPUs busy). So a call's spare is replaced after its answer,
/// in the time before the next call, as agents make them; calls back to back still find the
/// other spares ready, and in a burst of calls at once most find none and start cold, which
/// warm sandboxes starting meanwhile would only slow. A call that runs for long gets its spare
/// replaced all the same, [`DEFER_AT_MOST`] after it took it.
#[derive(Debug)]
pub struct RefillHold(());

impl RefillHold {
    /// A call arrives.
    pub fn begin() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        RefillHold(())
    }
}

impl Drop for RefillHold {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        refill();
    }
}

impl Spares {
    /// Takes the oldest spare, if there is one, and tells the `spares` thread, which starts the
    /// next one once no call holds it back ([`RefillHold`]).
    fn take(&self) -> Option<Spare> {
        let spare = lock(&self.slot).pop_front();
        if spare.is_some() {
            self.taken.notify_one();
        }
        spare
    }

    /// The `spares` thread: keeps its count of spares ready, for good.
    fn refill(&self, first: mpsc::Sender<()>) {
        let mut first = Some(first);
        let mut failures = 0u32;
        loop {
            {
                let mut slot = lock(&self.slot);
                let mut deferred_since: Option<Instant> = None;
                loop {
                    if slot.len() >= self.count {
                        deferred_since = None;
                        slot = self
                            .taken
                            .wait(slot)
                            .unwrap_or_else(PoisonError::into_inner);
                        continue;
                    }
                    if IN_FLIGHT.load(Ordering::SeqCst) > 0 {
                        let since = *deferred_since.get_or_insert_with(Instant::now);
                        let left = DEFER_AT_MOST.saturating_sub(since.elapsed());
                        if !left.is_zero() {
                            slot = self
                                .taken
                                .wait_timeout(slot, left)
                                .unwrap_or_else(PoisonError::into_inner)
                                .0;
                            continue;
                        }
                    }
                    break;
                }
            }
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            self.starting.store(true, Ordering::SeqCst);
            let started = Spare::start(&self.settings);
            match started {
                Ok(spare) if self.closing.load(Ordering::SeqCst) => spare.dispose(),
                Ok(spare) => {
                    lock(&self.slot).push_back(spare);
                    failures = 0;
                }
                Err(err) => {
                    failures = failures.saturating_add(1);
                    if failures == 1 {
                        tracing::warn!(
                            "a spare reaper could not be started ({err}); calls start their \
                             own until one can"
                        );
                    }
                    thread::sleep(RETRY_AFTER);
                }
            }
            self.starting.store(false, Ordering::SeqCst);
            if let Some(first) = first.take() {
                let _ = first.send(());
            }
        }
    }
}

impl Spare {
    /// Starts a spare: `lnk-link-run reap --spare [--cache <folder>]… [--warm <sandbox>…]`,
    /// with piped stdio, its report pipe at fd 3 and its control socket at fd 4.
    pub fn start(settings: &Settings) -> io::Result<Spare> {
        // Before the sandbox is started: a folder replaced after this is another folder.
        let files_id = match &settings.warm {
            Some(_) => Some(
                folder_id(&settings.files)
                    .ok_or_else(|| io::Error::other("the files folder cannot be looked at"))?,
            ),
            None => None,
        };
        // Expanded for this sandbox: the protected paths found now, placeholders made.
        let line = match settings.warm.as_ref().or(settings.cold.as_ref()) {
            Some(prefix) => crate::sandbox_line::expand(prefix, &settings.files, &settings.caches)
                .map_err(io::Error::other)?,
            None => Expanded::default(),
        };
        let (read, write) = report::pipe()?;
        let (control, theirs) = spare::pair()?;
        let mut command = Command::new("/proc/self/exe");
        command.arg0("lnk-link-run").arg(REAP).arg(spare::SPARE);
        if settings.warm.is_some() {
            for cache in settings.caches.layers() {
                command.arg(lnk_proc::reaper::options::CACHE).arg(cache);
            }
            command.arg(WARM).args(&line.words);
        } else if settings.cold.is_some() {
            command.arg(COLD).args(&line.words);
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // An empty environment, a session of its own, its signals blocked, SIGTERM at the death
        // of this thread (which lives as long as serve): as every call's reaper.
        launch::prepare_spare(&mut command, &write, &theirs);
        let staged = line.passed.pass_to(&mut command)?;
        let mut child = command.spawn()?;
        drop((write, theirs, staged));
        match Reports::new(read) {
            Ok(reports) => Ok(Spare {
                child,
                reports,
                control,
                files_id,
                passes: line.passed.len(),
                prefix: line.words,
                protected: line.protected,
            }),
            Err(err) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(err)
            }
        }
    }

    /// Gives the spare its call: waits for its `ready`, sends the spec with the working
    /// folder (and `net`, the call's proxy channel's sandbox end, for a call with one), and
    /// closes the control socket. The spare is killed and reaped on any failure.
    pub fn hand(
        mut self,
        spec: &[u8],
        cwd: BorrowedFd<'_>,
        with_input: bool,
        net: Option<BorrowedFd<'_>>,
    ) -> io::Result<Reaper> {
        let handed = self
            .await_ready()
            .and_then(|()| spare::send(self.control.as_fd(), spec, cwd, net));
        if let Err(err) = handed {
            self.dispose();
            return Err(err);
        }
        let Spare {
            mut child,
            reports,
            control,
            ..
        } = self;
        drop(control);
        if !with_input {
            // The spare puts /dev/null in place of its stdin pipe (`--null-stdin`).
            child.stdin = None;
        }
        Ok(Reaper { child, reports })
    }

    /// The sandbox prefix a warm spare runs, as expanded for it (empty for a cold one).
    pub fn prefix(&self) -> &[OsString] {
        &self.prefix
    }

    /// Waits until the spare has said `ready`.
    fn await_ready(&mut self) -> io::Result<()> {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            let events = self.reports.read()?;
            if let Some(event) = events.iter().find(|e| **e != Event::Ready) {
                return Err(io::Error::other(format!(
                    "the spare reaper reported {event:?} while waiting"
                )));
            }
            if self.reports.ended() {
                return Err(io::Error::other("the spare reaper ended"));
            }
            if !events.is_empty() {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::other("the spare reaper was not ready in time"));
            }
            let timeout = Timespec::try_from(left).ok();
            let mut fds = [PollFd::new(&self.reports, PollFlags::IN)];
            match poll(&mut fds, timeout.as_ref()) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Stops and reaps a spare that will not run a call. It has run nothing (it runs a call
    /// only once the spec is whole, and a spec that was sent whole is not taken back); asked to
    /// stop, it kills its warm sandbox, if any, before it ends. One a program stopped (which a
    /// sandbox without a PID namespace allows) is woken, and one that does not end is killed
    /// ([`Reaper::stop_and_finish`]): the call that threw it away never waits on it for long.
    pub fn dispose(self) {
        let Spare {
            child,
            reports,
            control,
            ..
        } = self;
        drop(control);
        let _ = Reaper { child, reports }.stop_and_finish();
    }
}
