//! A run's files, made and removed, each in one order: both ends of a run's life on disk.
//!
//! **Making** ([`make`], by `start`): the run's lock, created locked (`<id>.lock`), then its
//! output file (`background/<id>.out`, named in the record by its identity), then its index
//! names (`running/<id>` and the `started` name, [`crate::index::started`](mod@crate::index::started)), and last its
//! record, written atomically (not flushed: the supervisor stores it durably once it has
//! started the run). Until the caller says the run is made ([`MadeRun::keep`]), dropping the
//! [`MadeRun`] unmakes what was made, in the reverse order, and the lock last, removed while
//! still held, so that no one takes a half-made run for a crashed one.
//!
//! **Removing** ([`remove`], by a sweep or `remove --state`, holding the run's lock): its
//! output file (through the files folder's handle), its stop request, its log, its stdin
//! channel, its watches (`watches/<id>/`, [`crate::watch`]), its record, its names but the
//! `due` one, then its lock, and last its `due` name:
//! a removal cut short leaves a `due` name whose record is gone, which the next sweep tidies.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::index::{self, Found};
use crate::layout::StateDir;
use crate::lock::{self, LockGuard};
use crate::record::{FileId, Record};
use crate::safe_open::BackgroundDir;
use crate::write::Durability;

/// A step of making a run, in the order they are taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MakeStep {
    /// The run's lock file, created locked.
    Lock,
    /// `background/<id>.out`.
    Output,
    /// The run's names in the state folder's index.
    Index,
    /// The record.
    Record,
}

impl MakeStep {
    /// What the step does, as a message says it.
    pub fn doing(self) -> &'static str {
        match self {
            MakeStep::Lock => "creating the run's lock",
            MakeStep::Output => "creating the run's output file",
            MakeStep::Index => "filing the run in the state folder's index",
            MakeStep::Record => "writing the run's record",
        }
    }
}

/// A run that could not be made: the step that failed, and why. What the steps before it
/// made is unmade.
#[derive(Debug, thiserror::Error)]
#[error("{}", step.doing())]
pub struct MakeError {
    /// The step that failed.
    pub step: MakeStep,
    /// Why.
    #[source]
    pub source: Error,
}

/// A run's files as [`make`] made them: unmade when dropped, unless [`kept`](Self::keep).
#[derive(Debug)]
pub struct MadeRun<'a> {
    state: &'a StateDir,
    output_dir: &'a BackgroundDir,
    record: Record,
    lock: Option<LockGuard>,
    made: Option<MakeStep>,
    kept: bool,
}

/// Makes run `record`'s files in the state folder `state` and the output folder `output_dir`,
/// as the module says; `record.output.file` is set to the new output file's identity. The
/// caller holds `start.lock` (shared) and a slot.
pub fn make<'a>(
    state: &'a StateDir,
    output_dir: &'a BackgroundDir,
    record: &mut Record,
) -> Result<MadeRun<'a>, MakeError> {
    make_failing(state, output_dir, record, |_| Ok(()))
}

/// [`make`], with `fail` able to make any [`MakeStep`] fail before it is taken (tests inject
/// failures so).
pub fn make_failing<'a>(
    state: &'a StateDir,
    output_dir: &'a BackgroundDir,
    record: &mut Record,
    fail: impl Fn(MakeStep) -> io::Result<()>,
) -> Result<MadeRun<'a>, MakeError> {
    let at = |step: MakeStep| move |source: Error| MakeError { step, source };
    let injected = |step: MakeStep| {
        fail(step).map_err(|e| at(step)(Error::io(crate::error::Op::Create, state.path(), e)))
    };
    injected(MakeStep::Lock)?;
    let lock = lock::create_locked(state, &record.id).map_err(at(MakeStep::Lock))?;
    let mut made = MadeRun {
        state,
        output_dir,
        record: record.clone(),
        lock: Some(lock),
        made: Some(MakeStep::Lock),
        kept: false,
    };
    injected(MakeStep::Output)?;
    made.made = Some(MakeStep::Output);
    let output = output_dir
        .create_output(&record.id)
        .map_err(at(MakeStep::Output))?;
    record.output.file = FileId::of(&output).ok();
    drop(output);
    made.record = record.clone();
    made.made = Some(MakeStep::Index);
    injected(MakeStep::Index)?;
    index::started(state, record).map_err(at(MakeStep::Index))?;
    made.made = Some(MakeStep::Record);
    injected(MakeStep::Record)?;
    // Atomic, not durable: no `fsync` on the path of the answer. The supervisor stores the
    // record durably once it has started the run; a power cut before that loses a run that
    // had not begun, and a sweep tidies what is left of it.
    record
        .store_with(state, Durability::Atomic)
        .map_err(at(MakeStep::Record))?;
    Ok(made)
}

impl MadeRun<'_> {
    /// The run's lock file, still locked, for the run's supervisor: from here on the lock is
    /// the supervisor's, and an undo leaves its file (a sweep finds it free and the run lost).
    pub fn hand_over_lock(&mut self) -> io::Result<File> {
        self.lock
            .take()
            .map(LockGuard::into_file)
            .ok_or_else(|| io::Error::other("the run's lock was handed over already"))
    }

    /// The run is made: nothing is undone.
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for MadeRun<'_> {
    fn drop(&mut self) {
        if self.kept {
            return;
        }
        let Some(made) = self.made else {
            return;
        };
        let id = &self.record.id;
        let undo = |what: &str, err: &(dyn std::error::Error + 'static)| {
            tracing::warn!(%id, "a failed start could not remove {what}: {}", crate::Causes(err));
        };
        if made == MakeStep::Record {
            let path = self.state.record(id);
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => undo("its record", &e),
                _ => {}
            }
        }
        if matches!(made, MakeStep::Index | MakeStep::Record)
            && let Err(e) = index::forget(self.state, &self.record)
        {
            undo("its index names", &e);
        }
        if made != MakeStep::Lock
            && let Err(e) = self.output_dir.remove_output(id)
        {
            undo("its output file", &e);
        }
        if let Some(lock) = self.lock.take()
            && let Err(e) = lock.remove()
        {
            undo("its lock", &e);
        }
    }
}

/// Removes run `record`'s files, as the module says, holding its `lock`. `output_dir` is its
/// files folder's `background/` (none: the output file stays, the caller says why); `names`
/// is what the caller found of its index names. The `started` minute folder the run's name
/// was in, which the caller removes once empty.
pub fn remove(
    state: &StateDir,
    record: &Record,
    lock: LockGuard,
    output_dir: Option<&BackgroundDir>,
    names: &Found<'_>,
) -> Result<Option<PathBuf>, Error> {
    if let Some(background) = output_dir
        && let Err(err) = background.remove_output(&record.id)
    {
        tracing::warn!(id = %record.id, "the output file stays: {}", crate::Causes(&err));
    }
    let id = &record.id;
    for path in [
        state.stop(id),
        state.log(id),
        state.stdin_channel(id),
        state.record(id),
    ] {
        remove_if_there(&path)?;
    }
    crate::watch::remove_run(state, id)?;
    let minute = index::forget_names(state, record, names)?;
    lock.remove()?;
    index::forget_due(state, record, names)?;
    Ok(minute)
}

fn remove_if_there(path: &Path) -> Result<(), Error> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(Error::io(crate::error::Op::Remove, path, e))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
