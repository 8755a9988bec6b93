//! Lists of files folders that are gone, swept away.

use std::io::Read;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};

/// How many other folders' lists one start looks at.
const SWEPT: usize = 64;

/// Removes the lock and lists of files folders that no longer exist (a test's, say), when no
/// process holds their lock.
pub(super) fn sweep(dir: BorrowedFd<'_>, ours: &str) {
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
