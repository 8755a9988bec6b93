//! Slots: how `--background` is kept, by the kernel, however many starts race.
//!
//! `<state>/slots/` holds one empty file per slot, `0`, `1`, … (made when first needed, mode
//! 0600, in a folder of mode 0700). A run holds an exclusive `flock(2)` on one of them for its
//! whole life: `start` takes a free one ([`Slot::take`], trying without waiting from a random
//! slot below the cap, then the next, wrapping), hands the locked file to the supervisor as its
//! **stdout**, and the supervisor adopts it with its run's lock ([`crate::LockGuard::adopt_stdin`])
//! and holds it until it exits — the kernel frees it however the supervisor dies. So:
//!
//! * the number of running runs is the number of held slots, and a start that finds every
//!   slot below its cap held is refused: exact under racing starts from any number of `serve`s,
//!   with no count, no listing and no lock shared between starts;
//! * a start costs what it tries: one `open` and one `flock` per slot tried, about one when
//!   most slots are free, whatever the folder keeps;
//! * nobody but a start and a supervisor ever touches a slot, so a sweep, a `list` or a
//!   `stop` testing a run's lock (`<id>.lock`) can never make a start believe a run is running.
//!
//! A descriptor of a slot copied into another process (a fork in a multi-threaded `serve`, for
//! the instant before its `exec`) keeps the slot looking held; all of them are `O_CLOEXEC`, and
//! a start that finds one held tries another.

use std::fs::File;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Op};
use crate::layout::StateDir;
use crate::trust;

/// The folder of slots, inside the state folder.
pub const SLOTS_DIR: &str = "slots";

/// A held slot: the locked file. Dropping it (and every duplicate) frees the slot.
#[derive(Debug)]
pub struct Slot {
    file: File,
    index: u32,
}

impl Slot {
    /// Takes a free slot below `cap`; `None` when all `cap` are held.
    pub fn take(state: &StateDir, cap: u32) -> Result<Option<Slot>, Error> {
        if cap == 0 {
            return Ok(None);
        }
        let dir = ensure_dir(state)?;
        let first = random_below(cap)?;
        for step in 0..cap {
            let index = (first + step) % cap;
            let path = dir.join(index.to_string());
            let file = open_slot(&path)?;
            match file.try_lock() {
                Ok(()) => return Ok(Some(Slot { file, index })),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(Op::Lock, path, e)),
            }
        }
        Ok(None)
    }

    /// Which slot it is.
    pub fn index(&self) -> u32 {
        self.index
    }

    /// The locked file, to hand to the supervisor (the slot stays held while it is open).
    pub fn into_file(self) -> File {
        self.file
    }
}

/// Whether the open file `file` is a slot of `state` (a regular file of the user's directly in
/// `<state>/slots/`, named by a number); the supervisor checks what it was handed.
pub fn is_slot(state: &StateDir, file: &impl AsFd) -> bool {
    let Ok(stat) = rustix::fs::fstat(file) else {
        return false;
    };
    if trust::check_owned_regular(&stat, Path::new("slot")).is_err() {
        return false;
    }
    let link = format!(
        "/proc/self/fd/{}",
        rustix::fd::AsRawFd::as_raw_fd(&file.as_fd())
    );
    let Ok(target) = std::fs::read_link(link) else {
        return false;
    };
    let named_slot = target.parent() == Some(&state.path().join(SLOTS_DIR))
        && target
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    named_slot
        && rustix::fs::lstat(&target)
            .is_ok_and(|named| named.st_dev == stat.st_dev && named.st_ino == stat.st_ino)
}

/// `<state>/slots`, made 0700 if missing, and checked as the state folder is.
fn ensure_dir(state: &StateDir) -> Result<PathBuf, Error> {
    let dir = state.path().join(SLOTS_DIR);
    match rustix::fs::mkdir(&dir, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(Error::io(Op::MakeDir, &dir, e)),
    }
    if rustix::fs::lstat(&dir).is_ok_and(|s| {
        rustix::fs::FileType::from_raw_mode(s.st_mode) == rustix::fs::FileType::Symlink
    }) {
        return Err(Error::Symlink { path: dir });
    }
    trust::check_state_folder(&dir)?;
    Ok(dir)
}

fn open_slot(path: &Path) -> Result<File, Error> {
    let fd = rustix::fs::open(
        path,
        OFlags::CREATE | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK,
        Mode::from_raw_mode(0o600),
    )
    .map_err(|e| Error::io(Op::Open, path, e))?;
    let stat = rustix::fs::fstat(&fd).map_err(|e| Error::io(Op::Stat, path, e))?;
    trust::check_owned_regular(&stat, path)?;
    Ok(File::from(fd))
}

fn random_below(n: u32) -> Result<u32, Error> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|source| Error::Random { source })?;
    Ok(u32::from_ne_bytes(bytes) % n)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn the_cap_is_the_number_of_slots_held() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let held: Vec<Slot> = (0..3)
            .map(|_| Slot::take(&state, 3).unwrap().expect("a free slot"))
            .collect();
        let mut indexes: Vec<u32> = held.iter().map(Slot::index).collect();
        indexes.sort_unstable();
        assert_eq!(indexes, vec![0, 1, 2]);
        assert!(Slot::take(&state, 3).unwrap().is_none(), "a fourth");
        assert!(Slot::take(&state, 0).unwrap().is_none());
        // A larger cap (another serve's) finds the slots above.
        let fourth = Slot::take(&state, 4).unwrap().expect("slot 3");
        assert_eq!(fourth.index(), 3);
        let file = held.into_iter().next().unwrap().into_file();
        assert!(is_slot(&state, &file));
        drop(file);
        // Free once every copy of its descriptor is closed: another test of this process that
        // forks at this moment holds a copy until its child execs (close-on-exec), so the
        // freed slot is looked for again, briefly, rather than once.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let freed = loop {
            match Slot::take(&state, 3).unwrap() {
                Some(slot) => break Some(slot),
                None if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                None => break None,
            }
        };
        assert!(freed.is_some(), "a freed slot");
        let other = tempfile::tempfile().unwrap();
        assert!(!is_slot(&state, &other));
    }
}
