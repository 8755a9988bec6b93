//! The lock protocol: who may act on a run, and how anyone tells a live supervisor from a dead one.
//!
//! # The run's lock
//!
//! Each run has `<state>/<id>.lock`, an empty file carrying an exclusive `flock(2)` held by the
//! run's supervisor for its whole life. The kernel drops a flock when the last descriptor of its
//! open file description closes, however the holder dies (even by `SIGKILL`), so **free means the
//! supervisor is gone**. The lock lives on its own file, never on the record: the record is
//! replaced by `rename`, which puts a new, unlocked inode under its name.
//!
//! * **Creation** ([`create_locked`], by `start`): create `<state>/.tmp-<random>` (`O_CREAT|O_EXCL|
//!   O_CLOEXEC`, 0600), take its flock, then rename it to `<id>.lock` without replacing anything
//!   (`renameat2(RENAME_NOREPLACE)`) — the rename keeps the locked inode, so the lock is held from
//!   the first instant its name exists, and **before** `<id>.json` exists. A record therefore
//!   always has a lock file, and nobody ever sees a new run's lock free.
//! * **Hand-over**: `start` passes the locked file as the supervisor's stdin and closes its own
//!   descriptor; both shared one open file description, so the lock is never free in between.
//!   The supervisor takes it with [`LockGuard::adopt_stdin`], which moves it off fd 0, and then
//!   checks the record still says `running`. If the supervisor cannot be started, `start` (still
//!   holding the lock) records the run `lost` or removes it.
//! * **Leftovers of a failed start**: a `<id>.lock` without `<id>.json` whose lock is free is a
//!   start that died between the two; a sweep may remove it. (While the starter lives, the lock
//!   is held.)
//! * **Testing** ([`try_lock_existing`], by `start`'s count, `sweep`, `stop`): open
//!   `<id>.lock` anew (a new open file description) and try the flock without waiting. `Held`:
//!   the supervisor lives. `Free`: it is gone, and the tester now holds the lock — it may then
//!   write the record (mark it `lost`, told, …) and must release it promptly unless it removes the
//!   run. `Missing`: no lock file.
//! * **Writing the record**: only the holder of a run's lock writes `<id>.json` (`start` before
//!   the hand-over, then the supervisor, or whoever got the lock `Free`). Readers need no lock.
//! * **Removal**: remove the output file, the record and `<id>.stop`, then `<id>.lock` last,
//!   while holding its flock ([`LockGuard::remove`]). Someone who opened the lock file just before
//!   the unlink may then get the flock of an unlinked inode; [`try_lock_existing`] checks the
//!   name still leads to the inode it locked, and answers `Missing` otherwise.
//!
//! # A leaked descriptor makes a dead supervisor look alive
//!
//! Any process holding a descriptor of the lock's open file description holds the lock. If the
//! sandbox (or any child) inherited one, the lock would stay held after the supervisor died, and
//! no sweep would ever clean up the run. So every descriptor here is `O_CLOEXEC`, the hand-over to
//! the supervisor is the one deliberate exception, and the supervisor never lets the lock reach
//! the sandbox.
//!
//! A fork in a multi-threaded process copies every descriptor, close-on-exec ones included, into
//! the child until it calls `exec`. For that instant a lock can look held although its holder
//! just released it (never the other way round). So `Held` means "alive, or copied a moment
//! ago": a caller that waits for a lock to be free polls ([`lock_blocking`]) rather than
//! concluding from one try.
//!
//! # `start.lock`
//!
//! [`StartLock`] is a flock on `<state>/start.lock` (created if missing, never removed while the
//! state folder lives). A `start` holds it **shared** while it takes a slot (the cap, kept by
//! [`crate::slot`]), creates the new run's lock and writes its record, so starts never wait for
//! one another; `stop`/`remove --state` hold it **exclusively**, so that no run starts while
//! they stop them all (and kill whatever holds it for longer than a start ever does).
//!
//! # Local file systems only
//!
//! `flock` over NFS is emulated with byte-range locks or not at all, and may hang when the server
//! is away: the state folder must be on a local file system.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, CWD, Mode, OFlags, RenameFlags};
use rustix::io::Errno;

use crate::error::{Error, Op};
use crate::id::RunId;
use crate::layout::StateDir;

/// The first pause between two tries of a blocking lock; it doubles up to [`POLL_MAX`].
const POLL_FIRST: Duration = Duration::from_millis(1);
/// The longest pause between two tries: short enough that a freed lock is seen quickly.
const POLL_MAX: Duration = Duration::from_millis(50);

/// A held run lock: owns the locked file; dropping it releases the lock (if no other descriptor
/// of the same open file description remains).
#[derive(Debug)]
pub struct LockGuard {
    file: File,
    path: PathBuf,
    /// The run's slot ([`crate::slot`]), when the supervisor was handed one: held as long as
    /// the lock.
    slot: Option<File>,
}

/// What testing a run's lock found.
#[derive(Debug)]
pub enum LockState {
    /// Someone holds it: the run's supervisor lives (or someone is testing it right now).
    Held,
    /// Nobody held it; now the caller does.
    Free(LockGuard),
    /// There is no lock file.
    Missing,
}

/// Creates `<id>.lock` already locked, for a new run (see the module docs).
///
/// Refuses with [`Error::RunExists`] if the run's lock file is already there. Nothing is
/// `fsync`ed: a flock does not outlive a reboot anyway, and the `fsync` of the folder after the
/// record's rename makes this rename durable too.
pub fn create_locked(state: &StateDir, id: &RunId) -> Result<LockGuard, Error> {
    let temp = state.temp()?;
    let final_path = state.lock(id);
    let file = open_file(
        &temp,
        OFlags::CREATE | OFlags::EXCL | OFlags::RDWR,
        Op::Create,
    )?;
    let result = lock_now(&file, &temp)
        .and_then(|()| reserve_kept_end(&file, &temp))
        .and_then(|()| rename_no_replace(&temp, &final_path, id));
    if let Err(e) = result {
        // Best effort: a sweep removes temporaries a crash leaves.
        let _ = std::fs::remove_file(&temp);
        return Err(e);
    }
    Ok(LockGuard {
        file,
        path: final_path,
        slot: None,
    })
}

/// Tests run `id`'s lock without waiting.
pub fn try_lock_existing(state: &StateDir, id: &RunId) -> Result<LockState, Error> {
    let path = state.lock(id);
    let file = match open_file(&path, OFlags::RDONLY, Op::Open) {
        Ok(file) => file,
        Err(e) if e.is_not_found() => return Ok(LockState::Missing),
        Err(e) => return Err(e),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => return Ok(LockState::Held),
        Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(Op::Lock, &path, e)),
    }
    // The name may have been unlinked (run removed) between our open and our lock.
    if !same_file(&file, &path)? {
        return Ok(LockState::Missing);
    }
    Ok(LockState::Free(LockGuard {
        file,
        path,
        slot: None,
    }))
}

/// Waits up to `timeout` for run `id`'s lock, polling; `None` if there is no lock file.
pub fn lock_blocking(
    state: &StateDir,
    id: &RunId,
    timeout: Duration,
) -> Result<Option<LockGuard>, Error> {
    let start = Instant::now();
    let mut pause = POLL_FIRST;
    loop {
        match try_lock_existing(state, id)? {
            LockState::Free(guard) => return Ok(Some(guard)),
            LockState::Missing => return Ok(None),
            LockState::Held => {}
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(Error::LockTimeout {
                path: state.lock(id),
                waited,
            });
        }
        thread::sleep(pause.min(timeout - waited));
        pause = (pause * 2).min(POLL_MAX);
    }
}

impl LockGuard {
    /// Takes over a descriptor that should hold run `id`'s lock (the supervisor's stdin).
    ///
    /// Checks that `file` is `<id>.lock` (same device and inode) and that the lock is ours: a
    /// flock on an open file description that already holds it succeeds; one held through
    /// another description fails with [`Error::LockHeldElsewhere`]. (If nobody held it, this takes
    /// it — the caller should then check that the record is still `running`.)
    pub fn adopt(state: &StateDir, id: &RunId, file: File) -> Result<LockGuard, Error> {
        let path = state.lock(id);
        if !same_file(&file, &path)? {
            return Err(Error::NotTheLock { path });
        }
        match file.try_lock() {
            Ok(()) => Ok(LockGuard {
                file,
                path,
                slot: None,
            }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::LockHeldElsewhere { path }),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(Op::Lock, path, e)),
        }
    }

    /// [`adopt`](Self::adopt) for the lock the supervisor received as its stdin, with the
    /// run's slot it received as its stdout ([`crate::slot`]), when that is one.
    ///
    /// Duplicates fd 0 to a new `O_CLOEXEC` descriptor, adopts it, then points fd 0 at
    /// `/dev/null` — so no child can inherit the lock through stdin. The same for a slot on fd
    /// 1 (its flock taken again, which succeeds on the description that holds it), which the
    /// guard then holds with the lock. On error fd 0 is untouched.
    pub fn adopt_stdin(state: &StateDir, id: &RunId) -> Result<LockGuard, Error> {
        let stdin_path = Path::new("/dev/stdin");
        let fd = rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stdin(), 3)
            .map_err(|e| Error::io(Op::Descriptor, stdin_path, e))?;
        let mut guard = Self::adopt(state, id, File::from(fd))?;
        let null = rustix::fs::open("/dev/null", OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| Error::io(Op::Open, "/dev/null", e))?;
        rustix::stdio::dup2_stdin(&null).map_err(|e| Error::io(Op::Descriptor, stdin_path, e))?;
        if crate::slot::is_slot(state, &rustix::stdio::stdout()) {
            let stdout_path = Path::new("/dev/stdout");
            let slot = rustix::io::fcntl_dupfd_cloexec(rustix::stdio::stdout(), 3)
                .map_err(|e| Error::io(Op::Descriptor, stdout_path, e))?;
            let slot = File::from(slot);
            match slot.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(Error::LockHeldElsewhere {
                        path: stdout_path.to_owned(),
                    });
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(Error::io(Op::Lock, stdout_path, e));
                }
            }
            rustix::stdio::dup2_stdout(&null)
                .map_err(|e| Error::io(Op::Descriptor, stdout_path, e))?;
            guard.slot = Some(slot);
        }
        Ok(guard)
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The locked file (to pass as a child's stdin: std makes the child's copy inheritable).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The locked file; the lock stays held while it (or a duplicate) is open.
    pub fn into_file(self) -> File {
        self.file
    }

    /// The locked descriptor; the lock stays held while it (or a duplicate) is open.
    pub fn into_owned_fd(self) -> OwnedFd {
        self.file.into()
    }

    /// Gives back the room [`create_locked`] reserved for a kept end (and drops any end kept
    /// there): for a supervisor whose run's end is stored in the record. Best effort.
    pub fn release_reserve(&self) {
        if self.file.set_len(0).is_ok() {
            return;
        }
        // Held through a read-only descriptor (a sweep's): truncated through a writable one,
        // opened on the same inode.
        let Ok(writable) = open_file(&self.path, OFlags::WRONLY, Op::Open) else {
            return;
        };
        let same = match (rustix::fs::fstat(&writable), rustix::fs::fstat(&self.file)) {
            (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
            _ => false,
        };
        if same {
            let _ = writable.set_len(0);
        }
    }

    /// Removes the lock file while still holding its flock: the last step of removing a run.
    pub fn remove(self) -> Result<(), Error> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(Op::Remove, &self.path, e)),
        }
    }
}

/// The state folder's `start.lock`, held (exclusively) while the guard lives.
#[derive(Debug)]
pub struct StartLock {
    _file: File,
}

impl StartLock {
    /// Takes `start.lock`, waiting as long as it takes (holders only count and write a record).
    pub fn take(state: &StateDir) -> Result<StartLock, Error> {
        let path = state.start_lock();
        let file = open_start_lock(&path)?;
        file.lock().map_err(|e| Error::io(Op::Lock, &path, e))?;
        Ok(StartLock { _file: file })
    }

    /// Takes `start.lock` exclusively (`stop`/`remove --state`: no start may run meanwhile),
    /// giving up with [`Error::LockTimeout`] after `timeout`.
    pub fn take_within(state: &StateDir, timeout: Duration) -> Result<StartLock, Error> {
        Self::take_polling(state, timeout, File::try_lock)
    }

    /// Takes `start.lock` shared, as a start does: starts never wait for each other (the cap
    /// is kept by [`crate::slot`]), only for a `stop`/`remove --state` that holds it
    /// exclusively. Gives up with [`Error::LockTimeout`] after `timeout`.
    pub fn take_shared_within(state: &StateDir, timeout: Duration) -> Result<StartLock, Error> {
        Self::take_polling(state, timeout, File::try_lock_shared)
    }

    fn take_polling(
        state: &StateDir,
        timeout: Duration,
        try_lock: fn(&File) -> Result<(), std::fs::TryLockError>,
    ) -> Result<StartLock, Error> {
        let path = state.start_lock();
        let file = open_start_lock(&path)?;
        let start = Instant::now();
        let mut pause = POLL_FIRST;
        loop {
            match try_lock(&file) {
                Ok(()) => return Ok(StartLock { _file: file }),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(Op::Lock, path, e)),
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(Error::LockTimeout { path, waited });
            }
            thread::sleep(pause.min(timeout - waited));
            pause = (pause * 2).min(POLL_MAX);
        }
    }
}

fn open_start_lock(path: &Path) -> Result<File, Error> {
    open_file(path, OFlags::CREATE | OFlags::RDONLY, Op::Open)
}

/// Opens with `O_CLOEXEC|O_NOFOLLOW` added, mode 0600 if created, and checks for a regular
/// file of the user's ([`crate::trust`]): opened `O_NONBLOCK`, so a FIFO in a lock's place is
/// refused instead of hanging.
fn open_file(path: &Path, flags: OFlags, op: Op) -> Result<File, Error> {
    let fd = rustix::fs::open(
        path,
        flags | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| Error::io(op, path, e))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| Error::io(Op::Stat, path, e))?;
    // A lock of another user's would let them keep a dead run looking alive, or free.
    crate::trust::check_owned_regular(&stat, path)?;
    Ok(File::from(fd))
}

/// Reserves [`KEPT_END_SPACE`] bytes of the lock file (without changing its length), so that a
/// supervisor can keep its run's end there when the disk is full
/// ([`crate::record::Record::store_ended`]). A full disk refuses the run now, saying so; a file
/// system that cannot reserve is let be.
fn reserve_kept_end(file: &File, path: &Path) -> Result<(), Error> {
    match rustix::fs::fallocate(
        file,
        rustix::fs::FallocateFlags::KEEP_SIZE,
        0,
        KEPT_END_SPACE,
    ) {
        Ok(()) | Err(Errno::OPNOTSUPP | Errno::NOSYS | Errno::INVAL) => Ok(()),
        Err(e) => Err(Error::io(Op::Reserve, path, e)),
    }
}

/// The space a run's lock file reserves for its kept end.
pub const KEPT_END_SPACE: u64 = 4096;

/// Takes a fresh file's flock; it cannot be contended, so "would block" is an error too.
fn lock_now(file: &File, path: &Path) -> Result<(), Error> {
    file.try_lock().map_err(|e| {
        let e = match e {
            std::fs::TryLockError::Error(e) => e,
            std::fs::TryLockError::WouldBlock => io::Error::from(io::ErrorKind::WouldBlock),
        };
        Error::io(Op::Lock, path, e)
    })
}

/// Renames `temp` to `target`, refusing to replace an existing `target`.
///
/// Where `renameat2(RENAME_NOREPLACE)` is unsupported (old kernels, some file systems), a hard
/// link then an unlink of the temporary does the same: `link` never replaces either.
fn rename_no_replace(temp: &Path, target: &Path, id: &RunId) -> Result<(), Error> {
    let exists = || Error::RunExists {
        id: id.clone(),
        path: target.to_owned(),
    };
    let renamed = rustix::fs::renameat_with(CWD, temp, CWD, target, RenameFlags::NOREPLACE);
    match renamed {
        Ok(()) => return Ok(()),
        Err(Errno::EXIST) => return Err(exists()),
        Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP) => {}
        Err(e) => {
            return Err(Error::Rename {
                from: temp.to_owned(),
                to: target.to_owned(),
                cause: e.into(),
            });
        }
    }
    match rustix::fs::linkat(CWD, temp, CWD, target, AtFlags::empty()) {
        Ok(()) => {}
        Err(Errno::EXIST) => return Err(exists()),
        Err(e) => {
            return Err(Error::Rename {
                from: temp.to_owned(),
                to: target.to_owned(),
                cause: e.into(),
            });
        }
    }
    std::fs::remove_file(temp).map_err(|e| Error::io(Op::Remove, temp, e))
}

/// Whether `path` (not following a link) is the inode `file` is open on. Missing → false.
fn same_file(file: &File, path: &Path) -> Result<bool, Error> {
    let open = rustix::fs::fstat(file.as_fd()).map_err(|e| Error::io(Op::Stat, path, e))?;
    match rustix::fs::statat(CWD, path, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(named) => Ok(named.st_dev == open.st_dev && named.st_ino == open.st_ino),
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(Error::io(Op::Stat, path, e)),
    }
}
