//! Records that no index names: a `<id>.json` written into the state folder outside the index
//! (a crash between steps, an older `serve` beside a newer one, a person). The index is what a
//! sweep reads, so such a record would never be reported, moved aside, swept or removed.
//!
//! Finding them costs a read of the folder's top level and of the index's `started` names
//! (about a third of a second for 100,000 kept runs), so a routine sweep (those `serve` starts,
//! at its start and every minute) pays it only when the folder has changed since the last such
//! look, and at most once every [`LOOK_EVERY`] ([`look_due`]); a sweep a person or a bridge
//! asks for looks every time ([`look_now`]). For the routine ones: the folder's
//! modification time (changed by every name made, removed or renamed in it, a record's rewrite
//! included) is compared with `index/looked`'s, which is set to the folder's after each look,
//! and `index/looked`'s access time is when that look was made. A busy folder changes all the
//! time (its runs end, are removed), so without the second rule every sweep would read it
//! whole. With nothing changed, or a look made less than [`LOOK_EVERY`] ago, the cost is two
//! `stat`s; a stray record is found within [`LOOK_EVERY`] and a sweep.
//!
//! A look notes the folder's time **before** reading it, so that a name made during the read
//! makes the next look happen. A time less than [`SETTLE`] old when noted is not kept as it is:
//! the kernel stamps folders with a coarse clock (a tick of up to 10 ms), so a change made just
//! after the note, within the same tick, would carry the same time and be missed; the next look
//! happens instead.

use std::fs;
use std::io::ErrorKind;
use std::os::unix::fs::OpenOptionsExt as _;
use std::time::{Duration, SystemTime};

use lnk_common::error::{Error, Op};
use lnk_common::id::RunId;
use lnk_common::index::{self, INDEX_DIR, LOOKED_FILE};
use lnk_common::layout::StateDir;
/// How old the folder's time must be, when noted, to be kept as the last look's: several
/// ticks of the kernel's coarse clock.
pub(crate) const SETTLE: Duration = Duration::from_millis(100);
/// The least time between two looks at a folder that changed.
pub(crate) const LOOK_EVERY: Duration = Duration::from_secs(10 * 60);

/// A look at the folder's top level that is due: the folder's time when it was decided.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Look {
    seen: SystemTime,
    /// Whether `seen` was at least [`SETTLE`] old when it was noted.
    settled: bool,
}

/// A [`Look`] when the folder has changed since the last one and that one is at least
/// [`LOOK_EVERY`] old (or none was ever made), else `None`.
pub(crate) fn look_due(state: &StateDir) -> Result<Option<Look>, Error> {
    let seen = fs::metadata(state.path())
        .and_then(|m| m.modified())
        .map_err(|e| Error::io(Op::Stat, state.path(), e))?;
    let now = SystemTime::now();
    let settled = now.duration_since(seen).is_ok_and(|age| age >= SETTLE);
    let looked = looked_path(state);
    let last = match fs::symlink_metadata(&looked) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Some(Look { seen, settled })),
        Err(e) => return Err(Error::io(Op::Stat, looked, e)),
    };
    let (Ok(last_seen), Ok(last_look)) = (last.modified(), last.accessed()) else {
        return Ok(Some(Look { seen, settled }));
    };
    // A look "in the future" (the clock was set back) counts as old.
    let recent = now
        .duration_since(last_look)
        .is_ok_and(|age| age < LOOK_EVERY);
    if last_seen == seen || recent {
        return Ok(None);
    }
    Ok(Some(Look { seen, settled }))
}

/// A [`Look`] now, due or not: for a sweep a person or a bridge asked for, which looks at
/// everything.
pub(crate) fn look_now(state: &StateDir) -> Result<Look, Error> {
    let seen = fs::metadata(state.path())
        .and_then(|m| m.modified())
        .map_err(|e| Error::io(Op::Stat, state.path(), e))?;
    let settled = SystemTime::now()
        .duration_since(seen)
        .is_ok_and(|age| age >= SETTLE);
    Ok(Look { seen, settled })
}

impl Look {
    /// The records of the folder's top level that have no `started` name, in id order. The top
    /// level is read first: a record written before that read had its names made before it.
    pub(crate) fn unindexed(&self, state: &StateDir) -> Result<Vec<RunId>, Error> {
        let listing = state.list()?;
        let indexed = started_ids(state)?;
        Ok(listing
            .record_ids()
            .filter(|id| !indexed.contains(*id))
            .cloned()
            .collect())
    }

    /// Notes that the look was made: `index/looked` takes the folder's time as it was seen (or
    /// a time just before it when that was less than [`SETTLE`] old, so that the next look
    /// happens) as its modification time, and now as its access time.
    pub(crate) fn done(self, state: &StateDir) -> Result<(), Error> {
        let keep = if self.settled {
            self.seen
        } else {
            self.seen
                .checked_sub(Duration::from_nanos(1))
                .unwrap_or(SystemTime::UNIX_EPOCH)
        };
        let looked = looked_path(state);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .mode(0o600)
            .open(&looked)
            .map_err(|e| Error::io(Op::Create, &looked, e))?;
        let times = fs::FileTimes::new()
            .set_modified(keep)
            .set_accessed(SystemTime::now());
        file.set_times(times)
            .map_err(|e| Error::io(Op::Write, &looked, e))
    }
}

fn looked_path(state: &StateDir) -> std::path::PathBuf {
    state.path().join(INDEX_DIR).join(LOOKED_FILE)
}

/// The ids that have a `started` name: every run the index knows of. Reads the whole
/// `started` tree (what a look at the folder's top level costs anyway).
fn started_ids(state: &StateDir) -> Result<std::collections::HashSet<RunId>, Error> {
    index::started_ids(state)
}
