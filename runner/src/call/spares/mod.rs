//! Spare reapers: a call's reaper started ahead of the call, so that a call hands its spec to a
//! reaper that already runs instead of waiting for one to start (most of a call's overhead);
//! and, unless calls start cold ([`crate::call::warmth`]), with the call's sandbox already started
//! inside it (`--warm <sandbox>…`, lnk-proc's `reaper::warm`).
//!
//! One thread of `serve`'s, `spares`, keeps a pool of ready spares ([`pool`](mod@pool): how many, and
//! when each is replaced): `lnk-link-run reap --spare`, launched as every call's reaper is
//! (`lnk_proc::reaper::launch`), its stdio already the pipes a call reads, waiting on its
//! control socket (see `lnk_proc::reaper::spare`). A call takes a ready one ([`hand`]) and
//! sends its spec and its working folder. A call that finds none ready (more calls at once
//! than spares, or calls faster than spares are made), or whose spare is gone, starts a reaper
//! of its own at once, as before spares: nothing is lost but time, and no call waits for a
//! spare being started.
//!
//! A warm spare's sandbox shows the files folder it was started with. Its device and inode are
//! taken when the spare starts and compared with the folder's when the call arrives: a spare
//! of a folder replaced since is thrown away, never used (and the stub checks the same inside,
//! against the identity at the call's arrival, [`lnk_proc::reaper::Place`]). A
//! spare whose sandbox protects other paths than the call's line now does (a protected path
//! made, removed or replaced since) is thrown away too.
//!
//! The parent-death signal of a spare, and so of the call that takes it, is tied to the thread
//! that spawned it: the `spares` thread never ends while `serve` runs. When `serve` dies its
//! spare gets SIGTERM and its control socket ends, and it exits having run nothing.

mod pool;
mod spare_reaper;

use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, mpsc};
use std::thread;
use std::time::Duration;

use lnk_proc::reaper::{Options, Place, Reaper, spare as wire};

use crate::sandbox_line::Protected;
use crate::sandbox_line::pass::Passed;
use pool::Pool;

pub use pool::RefillHold;
pub use spare_reaper::{Spare, folder_id};

/// How long a spare may take to say `ready` before the `spares` thread gives up on it (a
/// safety net: a spare is ready within milliseconds; one slow to start is the machine's, not a
/// fault, and no call waits for it meanwhile).
pub const READY_WITHIN: Duration = Duration::from_secs(30);
/// How long serve's start waits for the first spare to be ready, so that its first call finds
/// one.
const FIRST_WITHIN: Duration = Duration::from_secs(2);
/// How long serve's end waits for a spare being started to be done, to dispose of it too.
const STOP_WITHIN: Duration = Duration::from_secs(5);

/// How spares are started.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The files folder (canonical), whose identity a warm spare's sandbox shows.
    pub files: PathBuf,
    /// The sandbox prefix as given (its words expanded for each spare), for warm spares;
    /// `None` for cold starts.
    pub warm: Option<Vec<std::ffi::OsString>>,
    /// For cold spares, the sandbox prefix as given when it names descriptors to hold
    /// ([`crate::sandbox_line::holds_protected`]): each cold spare holds those of its own
    /// expansion, and runs a call whose line protects the same.
    pub cold: Option<Vec<std::ffi::OsString>>,
    /// The cache folders: the binds the line's `{caches}` becomes, and those a warm spare's
    /// sandbox gets a layer of its own over (its call's).
    pub caches: crate::caches::Caches,
}

/// The spares of this process, once [`start`] ran (only `serve` starts them).
static POOL: OnceLock<Arc<Pool>> = OnceLock::new();

fn pool() -> Option<&'static Arc<Pool>> {
    POOL.get()
}

/// Starts the `spares` threads and waits (briefly) until its first spare is ready, so that the
/// first call finds one. A failure is logged; calls then start reapers of their own. From now
/// on the protected paths found for a sandbox are kept for the next while nothing they depend
/// on changes ([`crate::sandbox_line::protected::keep_across_sandboxes`]).
pub fn start(settings: Settings) {
    crate::sandbox_line::protected::keep_across_sandboxes();
    let pool = Arc::new(Pool::new(settings));
    if POOL.set(Arc::clone(&pool)).is_err() {
        return;
    }
    let (first_tx, first_rx) = mpsc::channel();
    for _ in 0..pool::REFILLERS {
        let pool = Arc::clone(&pool);
        let first_tx = first_tx.clone();
        let started = thread::Builder::new()
            .name("spares".into())
            .spawn(move || pool.refill(first_tx));
        if let Err(err) = started {
            tracing::warn!(
                "no spare reapers ({err}): each call starts its own reaper, which is slower"
            );
        }
    }
    drop(first_tx);
    let _ = first_rx.recv_timeout(FIRST_WITHIN);
}

/// Hands a call to a ready spare, when one is there and takes it: the call's reaper, running
/// the call. `workdir` is the call's working folder (canonical, inside the files folder); `net`
/// the sandbox's end of the call's proxy channel, for a call with one. `None`: no spare ready
/// (or it could not take the call, and was disposed of); the caller starts a reaper of its own.
pub fn hand(
    options: &Options,
    (passed, protected): (&Passed, &Protected),
    cwd: BorrowedFd<'_>,
    workdir: &Path,
    with_input: bool,
    net: Option<BorrowedFd<'_>>,
) -> Option<Reaper> {
    let pool = pool()?;
    let mut options = options.clone();
    options.null_stdin = !with_input;
    let files = &pool.settings.files;
    let now = folder_id(files);
    let inside = workdir.strip_prefix(files).ok();
    let spare = pool.take(|spare| {
        // A sandbox made before a protected path appeared, went or was replaced protects what
        // was there then, and a cold spare holds the descriptors of its own finding: never
        // used for a call whose line protects something else. (A cold spare whose line passes
        // nothing holds nothing, and runs the call's line as it is.)
        if spare.protected != *protected
            || (spare.files_id.is_none() && spare.passes != passed.len())
        {
            return false;
        }
        match (spare.files_id, now) {
            // Its sandbox may show a files folder replaced since it started: never used.
            (Some(id), Some(now)) => id == now && inside.is_some(),
            // A cold one; or the folder cannot be looked at, and the spare runs the call cold.
            _ => true,
        }
    })?;
    if let (Some(_), Some(id), Some(dir)) = (spare.files_id, now, inside) {
        options.warm = Some(Place {
            files: files.clone(),
            dir: dir.to_path_buf(),
            id,
        });
    }
    // A spec too large for a spare goes the old way, where the kernel's limit decides.
    let Some(spec) = wire::encode(&options) else {
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

/// At serve's end: disposes of every spare (its warm sandbox killed, and reaped), and keeps no
/// other, so that what their sandboxes held is free (the placeholders of the protected paths,
/// [`crate::sandbox_line::protected`]).
pub fn stop_all() {
    if let Some(pool) = pool() {
        pool.close(STOP_WITHIN);
    }
}
