//! Slots: how `--background` is kept, by the kernel, however many starts race.
//!
//! `<state>/slots/` holds one empty file per slot, `0`, `1`, … (made when first needed, mode
//! 0600, in a folder of mode 0700). A run holds an exclusive `flock(2)` on one of them for its
//! whole life: `start` takes a free one ([`Slot::take`], trying without waiting from the slot
//! after the one this process took last, or a random one for its first, then the next, wrapping;
//! see [`SlotCursor`]), hands the locked file to the supervisor as its
//! **stdout**, and the supervisor adopts it with its run's lock ([`crate::LockGuard::adopt_stdin`])
//! and holds it until it exits — the kernel frees it however the supervisor dies. So:
//!
//! * the number of running runs is the number of held slots, and a start that finds every
//!   slot below its cap held is refused: exact under racing starts from any number of `serve`s,
//!   with no count, no listing and no lock shared between starts;
//! * a start costs what it tries: one `open` and one `flock` per slot tried. Starts that
//!   follow each other take consecutive slots, so each tries one, however many runs are
//!   alive, as long as the runs end in about the order they started (a slot a run left is
//!   found again when the cursor comes round); starting from a random slot instead would cost
//!   each start the length of the block of held slots it lands in, which grows with the
//!   runs alive (about 70 tries a start with 1,000 of 1,050 held);
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
    tries: u32,
}

/// Where a process's next start begins to look for a free slot: just after the slot it took
/// last (a random one the first time, so that `serve`s sharing a folder spread out). Only a
/// hint: a slot is taken by its `flock` alone, so racing starts, in one process or in many,
/// stay exact.
#[derive(Debug)]
pub struct SlotCursor {
    next: std::sync::atomic::AtomicU32,
}

/// The cursor's value before any slot was taken.
const UNSET: u32 = u32::MAX;

impl SlotCursor {
    /// A cursor that has taken nothing yet.
    pub const fn new() -> Self {
        SlotCursor {
            next: std::sync::atomic::AtomicU32::new(UNSET),
        }
    }

    /// Where to begin below `cap`.
    fn first(&self, cap: u32) -> Result<u32, Error> {
        match self.next.load(std::sync::atomic::Ordering::Relaxed) {
            UNSET => random_below(cap),
            next => Ok(next % cap),
        }
    }

    /// Notes that slot `index` was taken.
    fn took(&self, index: u32) {
        self.next.store(
            index.saturating_add(1) % UNSET,
            std::sync::atomic::Ordering::Relaxed,
        );
    }
}

impl Default for SlotCursor {
    fn default() -> Self {
        Self::new()
    }
}

impl Slot {
    /// Takes a free slot below `cap`, looking from where `cursor` says; `None` when all `cap`
    /// are held.
    pub fn take(state: &StateDir, cap: u32, cursor: &SlotCursor) -> Result<Option<Slot>, Error> {
        if cap == 0 {
            return Ok(None);
        }
        let dir = ensure_dir(state)?;
        let first = cursor.first(cap)?;
        for step in 0..cap {
            let index = (first + step) % cap;
            let path = dir.join(index.to_string());
            let file = open_slot(&path)?;
            match file.try_lock() {
                Ok(()) => {
                    cursor.took(index);
                    return Ok(Some(Slot {
                        file,
                        index,
                        tries: step + 1,
                    }));
                }
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

    /// How many slots were tried to take it (this one included).
    pub fn tries(&self) -> u32 {
        self.tries
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
        let cursor = SlotCursor::new();
        let held: Vec<Slot> = (0..3)
            .map(|_| {
                Slot::take(&state, 3, &cursor)
                    .unwrap()
                    .expect("a free slot")
            })
            .collect();
        let mut indexes: Vec<u32> = held.iter().map(Slot::index).collect();
        indexes.sort_unstable();
        assert_eq!(indexes, vec![0, 1, 2]);
        assert!(
            Slot::take(&state, 3, &cursor).unwrap().is_none(),
            "a fourth"
        );
        assert!(Slot::take(&state, 0, &cursor).unwrap().is_none());
        // A larger cap (another serve's) finds the slots above.
        let fourth = Slot::take(&state, 4, &cursor).unwrap().expect("slot 3");
        assert_eq!(fourth.index(), 3);
        let file = held.into_iter().next().unwrap().into_file();
        assert!(is_slot(&state, &file));
        drop(file);
        // Free once every copy of its descriptor is closed: another test of this process that
        // forks at this moment holds a copy until its child execs (close-on-exec), so the
        // freed slot is looked for again, briefly, rather than once.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let freed = loop {
            match Slot::take(&state, 3, &SlotCursor::new()).unwrap() {
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

    /// Runs started one after another, none ending: each start tries one slot, the thousandth
    /// as the first, though nearly every slot is held by then.
    #[test]
    fn a_start_tries_one_slot_however_many_runs_are_alive() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let cursor = SlotCursor::new();
        let mut held = Vec::new();
        for _ in 0..1000 {
            held.push(
                Slot::take(&state, 1050, &cursor)
                    .unwrap()
                    .expect("a free slot"),
            );
        }
        let tries: Vec<u32> = held.iter().map(Slot::tries).collect();
        let last: u32 = tries[900..].iter().sum();
        assert!(
            tries.iter().all(|t| *t == 1),
            "tries of the last hundred starts: {last} in all ({:?})",
            &tries[900..]
        );
        // A slot a run left is found again once the cursor comes round to it.
        let freed = held.remove(10).index();
        let mut more = Vec::new();
        while let Some(slot) = Slot::take(&state, 1050, &cursor).unwrap() {
            more.push(slot.index());
            held.push(slot);
        }
        assert_eq!(more.len(), 51, "{more:?}");
        assert!(more.contains(&freed), "{more:?}");
    }
}
