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

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lnk_common::record::FileId;
use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
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

    /// Writes down which folder the key stands for, for [`sweep`].
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

/// How many other folders' lists one start looks at.
const SWEPT: usize = 64;

/// Removes the lock and lists of files folders that no longer exist (a test's, say), when no
/// process holds their lock.
fn sweep(dir: BorrowedFd<'_>, ours: &str) {
    let Ok(fd) = rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let Ok(entries) = rustix::fs::Dir::new(fd) else {
        return;
    };
    let keys: Vec<String> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str().ok()?;
            let key = name.strip_prefix("protected-")?.strip_suffix(".files")?;
            (key != ours).then(|| key.to_owned())
        })
        .take(SWEPT)
        .collect();
    for key in keys {
        let named = format!("protected-{key}.files");
        let Ok(fd) = rustix::fs::openat(
            dir,
            &named,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            continue;
        };
        let mut path = Vec::new();
        if std::fs::File::from(fd)
            .take(1 << 16)
            .read_to_end(&mut path)
            .is_err()
        {
            continue;
        }
        let files =
            PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(path));
        if files.as_os_str().is_empty() || files.symlink_metadata().is_ok() {
            continue;
        }
        let lock = format!("protected-{key}.lock");
        let Ok(lock_fd) = rustix::fs::openat(
            dir,
            &lock,
            OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            let _ = rustix::fs::unlinkat(dir, &named, AtFlags::empty());
            continue;
        };
        if rustix::fs::flock(&lock_fd, FlockOperation::NonBlockingLockExclusive).is_ok() {
            for name in [
                format!("protected-{key}.made"),
                format!("protected-{key}.started"),
                named,
                lock,
            ] {
                let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
            }
        }
    }
}

/// One line of the list: kind, device, inode, the path (relative, in hex).
fn line(made: &Made) -> String {
    let kind = match made.kind {
        Placeholder::File => 'f',
        _ => 'd',
    };
    format!(
        "{kind} {} {} {}\n",
        made.id.dev,
        made.id.ino,
        hex::encode(made.rel.as_os_str().as_bytes())
    )
}

fn parse(line: &str) -> Option<Made> {
    let mut words = line.split(' ');
    let kind = match words.next()? {
        "f" => Placeholder::File,
        "d" => Placeholder::Folder,
        _ => return None,
    };
    let dev = words.next()?.parse().ok()?;
    let ino = words.next()?.parse().ok()?;
    let rel = hex::decode(words.next()?).ok()?;
    Some(Made {
        rel: PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(rel)),
        kind,
        id: FileId { dev, ino },
    })
}

/// Removes the listed placeholders that are unused, under the exclusive lock; keeps the others
/// listed.
fn clean_up(lease: &Lease) {
    if run_starting(lease) {
        tracing::debug!("a background run may still be starting: placeholders left for later");
        return;
    }
    let mut text = String::new();
    if let Ok(fd) = rustix::fs::openat(
        &lease.dir,
        lease.list(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        let _ = std::fs::File::from(fd)
            .take(16 << 20)
            .read_to_string(&mut text);
    }
    let mut listed: Vec<Made> = text.lines().filter_map(parse).collect();
    // What a placeholder holds goes before it (a `workflows` in a `.github` made for it).
    listed.sort_by_key(|made| std::cmp::Reverse(made.rel.components().count()));
    listed.dedup();
    let Ok(root) = rustix::fs::open(
        &lease.files,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        // The folder is gone: so are its placeholders.
        write_list(lease, &[]);
        return;
    };
    // What is gone or was replaced is no placeholder of ours any more.
    let present: Vec<&Made> = listed
        .iter()
        .filter(|made| still_there(root.as_fd(), made))
        .collect();
    let paths: HashSet<PathBuf> = present.iter().map(|m| lease.files.join(&m.rel)).collect();
    let used = mounts::in_use(&paths);
    let mut kept = Vec::new();
    for made in present {
        let removed = !used.contains(&lease.files.join(&made.rel))
            && is_empty(root.as_fd(), made)
            && remove(root.as_fd(), made);
        if !removed {
            kept.push(made.clone());
        }
    }
    write_list(lease, &kept);
}

/// Whether `made` is still there, the same file.
fn still_there(root: BorrowedFd<'_>, made: &Made) -> bool {
    let Some((parent, name)) = parent_of(root, &made.rel) else {
        return false;
    };
    rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileId::from_stat(&stat) == made.id)
}

/// Whether `made` holds nothing (what the user put in it makes it theirs).
fn is_empty(root: BorrowedFd<'_>, made: &Made) -> bool {
    let Some((parent, name)) = parent_of(root, &made.rel) else {
        return false;
    };
    let Ok(stat) = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return false;
    };
    match (made.kind, FileType::from_raw_mode(stat.st_mode)) {
        (Placeholder::File, FileType::RegularFile) => stat.st_size == 0,
        (Placeholder::Folder, FileType::Directory) => is_empty_folder(parent.as_fd(), name),
        _ => false,
    }
}

fn is_empty_folder(parent: BorrowedFd<'_>, name: &std::ffi::OsStr) -> bool {
    let Ok(fd) = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let Ok(dir) = rustix::fs::Dir::new(fd) else {
        return false;
    };
    dir.filter_map(Result::ok)
        .all(|e| matches!(e.file_name().to_bytes(), b"." | b".."))
}

/// Removes a placeholder. A folder goes with `rmdir`, which fails should something have been
/// put in it. A file is first renamed aside and checked there, so that a file the user put in
/// its place a moment ago is put back rather than removed.
fn remove(root: BorrowedFd<'_>, made: &Made) -> bool {
    let Some((parent, name)) = parent_of(root, &made.rel) else {
        return false;
    };
    if made.kind == Placeholder::Folder {
        return rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).is_ok();
    }
    let mut aside = std::ffi::OsString::from(".lnk-placeholder-");
    aside.push(hex::encode(made.id.ino.to_le_bytes()));
    if rustix::fs::renameat_with(
        &parent,
        name,
        &parent,
        &aside,
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .is_err()
    {
        return false;
    }
    let ours = rustix::fs::statat(&parent, &aside, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|s| FileId::from_stat(&s) == made.id && s.st_size == 0);
    if ours {
        return rustix::fs::unlinkat(&parent, &aside, AtFlags::empty()).is_ok();
    }
    let _ = rustix::fs::renameat_with(
        &parent,
        &aside,
        &parent,
        name,
        rustix::fs::RenameFlags::NOREPLACE,
    );
    false
}

/// The folder holding `rel` (opened from `root` without following links) and its last name.
fn parent_of<'a>(root: BorrowedFd<'_>, rel: &'a Path) -> Option<(OwnedFd, &'a std::ffi::OsStr)> {
    let name = rel.file_name()?;
    let mut fd =
        rustix::fs::openat(root, ".", OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok()?;
    for part in rel.parent()?.components() {
        fd = rustix::fs::openat(
            &fd,
            part.as_os_str(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
    }
    Some((fd, name))
}

fn write_list(lease: &Lease, kept: &[Made]) {
    let text: String = kept.iter().map(line).collect();
    let temporary = format!("{}.{}.tmp", lease.list(), std::process::id());
    let written = rustix::fs::openat(
        &lease.dir,
        &temporary,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(std::io::Error::from)
    .and_then(|fd| std::fs::File::from(fd).write_all(text.as_bytes()))
    .and_then(|()| {
        rustix::fs::renameat(&lease.dir, &temporary, &lease.dir, lease.list())
            .map_err(std::io::Error::from)
    });
    if let Err(err) = written {
        let _ = rustix::fs::unlinkat(&lease.dir, &temporary, AtFlags::empty());
        tracing::warn!("cannot rewrite the list of placeholders: {err}");
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

#[cfg(test)]
#[path = "lifetime_tests.rs"]
mod tests;
