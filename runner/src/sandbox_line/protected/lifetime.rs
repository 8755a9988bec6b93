//! How long the placeholders live. A placeholder is a sandbox's mount point: removed while a
//! sandbox still has its mount there, the kernel detaches that mount, and the name is free to
//! make in that sandbox. So a placeholder is removed only when no Link Run process that makes
//! sandboxes for the files folder is running, and no mount namespace has a mount on it.
//!
//! Each process that makes sandboxes for a files folder (serve, `check`, `config`) holds a
//! shared lock on the folder's lock file from its first sandbox to its end, and writes down each
//! placeholder it made (its path and identity). At its end, once its own sandboxes are gone, it
//! tries to take the lock exclusively: when it gets it, no other such process is running, and
//! it removes every placeholder written down that is still the one made, still empty, and no
//! process's `mountinfo` shows as a mount point (a background run's sandbox, which outlives
//! serve). A process that starts also cleans up what an earlier one left (killed, say).
//!
//! The lock files and the lists live in `/tmp/lnk-link-run-<uid>/` (mode 0700, this user's),
//! where no sandbox of the recommended line reaches. Should that folder be unusable (another
//! user made it), placeholders are kept for good: that is safe, only untidy.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::mounts;
use super::names::Placeholder;
use super::scan::Made;
use crate::sync::lock;

/// How long a process waits for another's clean-up (which holds the lock exclusively for a
/// moment) before it makes its first sandbox.
const WAIT_FOR_CLEAN_UP: Duration = Duration::from_secs(10);

/// A files folder's lock, held shared, and where its list is.
#[derive(Debug)]
struct Lease {
    files: PathBuf,
    dir: OwnedFd,
    key: String,
    lock: OwnedFd,
}

/// The leases this process holds, one per files folder; `None` once it has left.
static LEASES: Mutex<Option<Vec<Lease>>> = Mutex::new(Some(Vec::new()));

/// How long after a background run's start its sandbox may still be on its way up: its
/// supervisor starts it after `serve` has answered, and a placeholder removed before then
/// (nothing has a mount on it yet) fails the run's sandbox (bubblewrap cannot bind a removed
/// file). A clean-up that comes sooner, in this process or another, leaves the placeholders to
/// a later one.
const RUN_MAY_START_WITHIN: Duration = Duration::from_secs(10);

/// A background run of `files` was started: its sandbox is on its way up. Written down beside
/// the folder's list, for every process's clean-up to see ([`RUN_MAY_START_WITHIN`]).
pub fn run_started(files: &Path) {
    let leases = lock(&LEASES);
    let Some(lease) = leases
        .as_ref()
        .and_then(|l| l.iter().find(|lease| lease.files == files))
    else {
        return;
    };
    let stamp = rustix::fs::openat(
        &lease.dir,
        lease.started(),
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    );
    match stamp {
        // Its time of change is the stamp.
        Ok(fd) => drop(std::fs::File::from(fd).write_all(b"started\n")),
        Err(err) => tracing::warn!("cannot note a run's start for the clean-up: {err}"),
    }
}

/// Whether a run of the lease's folder started a moment ago.
fn run_starting(lease: &Lease) -> bool {
    rustix::fs::statat(&lease.dir, lease.started(), AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|s| {
        let changed = std::time::UNIX_EPOCH
            + Duration::new(
                u64::try_from(s.st_mtime).unwrap_or(0),
                u32::try_from(s.st_mtime_nsec).unwrap_or(0),
            );
        changed
            .elapsed()
            .map_or(true, |age| age < RUN_MAY_START_WITHIN)
    })
}

/// Holds the files folder's lock (shared) from now to [`leave`], cleaning up what an earlier
/// process left first when no other holds it. Without a usable folder for the lists nothing is
/// held, and placeholders stay.
pub fn hold(files: &Path) -> Result<(), String> {
    let mut leases = lock(&LEASES);
    let Some(leases) = leases.as_mut() else {
        return Err("Link Run is shutting down and makes no new sandbox".into());
    };
    if leases.iter().any(|lease| lease.files == files) {
        return Ok(());
    }
    let dir = match registry() {
        Ok(dir) => dir,
        Err(why) => {
            tracing::warn!(
                "placeholders of protected paths will not be removed: {why} (only untidy: \
                 they are empty, and protect nothing but the name)"
            );
            return Ok(());
        }
    };
    let key = key(files);
    let lock_fd = rustix::fs::openat(
        &dir,
        format!("protected-{key}.lock"),
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| {
        format!(
            "cannot open the protected paths' lock of {}: {e}",
            files.display()
        )
    })?;
    let lease = Lease {
        files: files.to_path_buf(),
        dir,
        key,
        lock: lock_fd,
    };
    lease.name_the_folder();
    sweep(lease.dir.as_fd(), &lease.key);
    if rustix::fs::flock(&lease.lock, FlockOperation::NonBlockingLockExclusive).is_ok() {
        clean_up(&lease);
    }
    let deadline = Instant::now() + WAIT_FOR_CLEAN_UP;
    loop {
        match rustix::fs::flock(&lease.lock, FlockOperation::NonBlockingLockShared) {
            Ok(()) => break,
            Err(Errno::WOULDBLOCK | Errno::INTR) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(err) => {
                return Err(format!(
                    "cannot take the protected paths' lock of {} (another Link Run process \
                     is cleaning up, for more than {} s): {err}",
                    files.display(),
                    WAIT_FOR_CLEAN_UP.as_secs()
                ));
            }
        }
    }
    leases.push(lease);
    Ok(())
}

/// Writes down the placeholders just made in `files`, for the clean-up.
pub fn record(files: &Path, made: &[Made]) {
    if made.is_empty() {
        return;
    }
    let leases = lock(&LEASES);
    let Some(lease) = leases
        .as_ref()
        .and_then(|l| l.iter().find(|lease| lease.files == files))
    else {
        return;
    };
    let text: String = made.iter().map(line).collect();
    let written = rustix::fs::openat(
        &lease.dir,
        lease.list(),
        OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(std::io::Error::from)
    .and_then(|fd| std::fs::File::from(fd).write_all(text.as_bytes()));
    if let Err(err) = written {
        tracing::warn!("cannot write down the placeholders made: {err}; they will stay");
    }
}

/// At the end of the process, once its sandboxes are gone: releases every lock, removing the
/// placeholders when no other process holds the lock. No sandbox is made after this.
pub fn leave() {
    let Some(leases) = lock(&LEASES).take() else {
        return;
    };
    for lease in leases {
        // Our shared lock becomes exclusive only when no other process holds one.
        if rustix::fs::flock(&lease.lock, FlockOperation::NonBlockingLockExclusive).is_ok() {
            clean_up(&lease);
        }
    }
}

impl Lease {
    fn list(&self) -> String {
        format!("protected-{}.made", self.key)
    }

    fn started(&self) -> String {
        format!("protected-{}.started", self.key)
    }

    /// Writes down which folder the key stands for, for [`sweep`](fn@sweep).
    fn name_the_folder(&self) {
        if let Ok(fd) = rustix::fs::openat(
            &self.dir,
            format!("protected-{}.files", self.key),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            let _ = std::fs::File::from(fd).write_all(self.files.as_os_str().as_bytes());
        }
    }
}

/// `/tmp/lnk-link-run-<uid>`, made if missing: a folder of this user's that no one else may
/// write.
fn registry() -> Result<OwnedFd, String> {
    let uid = rustix::process::getuid();
    let path = format!("/tmp/lnk-link-run-{}", uid.as_raw());
    match rustix::fs::mkdir(&path, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(err) => return Err(format!("cannot make {path}: {err}")),
    }
    let fd = rustix::fs::open(
        &path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| format!("cannot open {path}: {e}"))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| format!("cannot look at {path}: {e}"))?;
    if stat.st_uid != uid.as_raw() || stat.st_mode & 0o022 != 0 {
        return Err(format!(
            "{path} is not this user's alone (owner {}, mode {:o})",
            stat.st_uid,
            stat.st_mode & 0o7777
        ));
    }
    Ok(fd)
}

/// A short name for a files folder: FNV-1a of its path.
fn key(files: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in files.as_os_str().as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

mod clean;
mod sweep;

#[cfg(test)]
use clean::parse;
use clean::{clean_up, line};
use sweep::sweep;

#[cfg(test)]
mod tests;
