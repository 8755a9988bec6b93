//! `stop --state <dir>` and `remove --state <dir>`: stop every run of a state folder and wait
//! until each has ended and its lock is free; `remove` then removes everything, the folder
//! included. Both are safe to run twice, and beside a sweep or a `serve`.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use lnk_common::id::RunId;
use lnk_common::layout::StateDir;
use lnk_common::lock::{self, LockGuard, StartLock};
use lnk_common::record::Record;

use crate::{reclaim, sweep};

/// How long a supervisor has to record its run's end after being asked to stop.
const ASKED_WAIT: Duration = Duration::from_secs(5);
/// How long after its group was killed by us a supervisor still has to end.
const KILLED_WAIT: Duration = Duration::from_secs(5);
/// How long after the lock's holders were killed the lock has to become free.
const HOLDERS_WAIT: Duration = Duration::from_secs(5);
/// How long to wait for `start.lock` (a start holds it for milliseconds) before its holders
/// are taken for stuck — or for a run that got hold of it — and killed.
const START_LOCK_WAIT: Duration = Duration::from_secs(5);

/// Stops every run, the projects' runs included, and waits for each; returns how many runs
/// it looked at.
pub fn stop(path: &Path) -> Result<usize> {
    let Some(state) = open(path)? else {
        return Ok(0);
    };
    let folders = every_folder_held(&state)?;
    if removed_meanwhile(&state) {
        return Ok(0);
    }
    let mut handled = 0;
    for (folder, _start) in &folders {
        handled += for_each_run_stopped(folder, false, |_, guard| {
            drop(guard);
            Ok(())
        })?;
    }
    Ok(handled)
}

/// Stops every run, the projects' runs included, then removes every record, lock, stop
/// request and output file, each project's state folder, and the state folder.
pub fn remove(path: &Path) -> Result<()> {
    let Some(state) = open(path)? else {
        return Ok(());
    };
    let mut folders = every_folder_held(&state)?;
    if removed_meanwhile(&state) {
        return Ok(());
    }
    // The projects' folders first (the state folder given is the first of them), while every
    // start lock is held: no run starts anywhere meanwhile.
    let (base, base_start) = folders.remove(0);
    for (folder, start) in folders {
        remove_held(&folder, start)?;
    }
    match std::fs::remove_dir(base.path().join(lnk_common::projects::PROJECTS_DIR)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "removing {}/{} (it holds files that are not Link Run's)",
                    base.path().display(),
                    lnk_common::projects::PROJECTS_DIR
                )
            });
        }
    }
    remove_held(&base, base_start)
}

/// The state folder, then each of its projects' state folders ([`StateDir::with_projects`]),
/// each checked as a state folder is, with its `start.lock` held: taken in that order, so
/// that nothing starts in any of them while they are stopped or removed.
fn every_folder_held(state: &StateDir) -> Result<Vec<(StateDir, StartLock)>> {
    let mut held = Vec::new();
    for folder in state.with_projects()? {
        let folder = if folder == *state {
            folder
        } else {
            match StateDir::open(folder.path()) {
                Ok(folder) => folder,
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            }
        };
        let start = take_start_lock(&folder)?;
        held.push((folder, start));
    }
    Ok(held)
}

/// Stops every run of one state folder whose `start.lock` is `start`, then removes its runs'
/// files, its own files and the folder.
fn remove_held(state: &StateDir, start: StartLock) -> Result<()> {
    for_each_run_stopped(state, true, |id, guard| match Record::load(state, id) {
        Ok(record) => sweep::one_run::remove_run(state, &record, guard),
        Err(e) if e.is_not_found() => Ok(guard.remove()?),
        Err(e) => {
            tracing::warn!(%id, "{}; the record is removed without its output file", lnk_common::Causes(&e));
            remove_name(&state.record(id))?;
            Ok(guard.remove()?)
        }
    })?;
    let listing = state.list()?;
    for temp in &listing.temporaries {
        remove_name(temp)?;
    }
    for (id, files) in &listing.runs {
        if files.damaged {
            remove_name(&state.damaged(id))?;
        }
        if files.stop {
            remove_name(&state.stop(id))?;
        }
        if files.log {
            remove_name(&state.log(id))?;
        }
        if files.stdin {
            remove_name(&state.stdin_channel(id))?;
        }
    }
    remove_folder(&state.path().join(lnk_common::slot::SLOTS_DIR))?;
    remove_folder(&state.path().join(lnk_common::layout::TEMP_DIR))?;
    remove_tree(&state.path().join(lnk_common::index::INDEX_DIR))?;
    lnk_common::watch::remove_all(state)?;
    remove_name(&state.sweep_log())?;
    remove_name(&state.start_lock())?;
    drop(start);
    match std::fs::remove_dir(state.path()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| {
            format!(
                "removing {} (it holds files that are not Link Run's)",
                state.path().display()
            )
        }),
    }
}

/// The state folder, checked; `None` when there is none (nothing to do).
fn open(path: &Path) -> Result<Option<StateDir>> {
    match StateDir::open(path) {
        Ok(state) => Ok(Some(state)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Whether a `remove --state` that held `start.lock` before this process removed the folder
/// (this one then waited on a lock file whose folder is gone): nothing is left to do. Two
/// removes at once both succeed.
fn removed_meanwhile(state: &StateDir) -> bool {
    matches!(std::fs::symlink_metadata(state.path()), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
}

/// Takes `start.lock`, so that no run starts meanwhile. Whatever holds it longer than a start
/// ever does (a stuck process, or a run that could reach it) is found by the lock file and
/// killed.
fn take_start_lock(state: &StateDir) -> Result<StartLock> {
    let path = state.start_lock();
    match StartLock::take_within(state, START_LOCK_WAIT) {
        Ok(lock) => return Ok(lock),
        Err(lnk_common::Error::LockTimeout { .. }) => {}
        Err(e @ (lnk_common::Error::Foreign { .. } | lnk_common::Error::NotRegularFile { .. })) => {
            // Not the user's regular file: damaged. Its name goes, and a new one is made.
            tracing::warn!("{}; it is replaced", lnk_common::Causes(&e));
            remove_name(&path)?;
            return StartLock::take_within(state, START_LOCK_WAIT)
                .context("taking start.lock, so that no run starts meanwhile");
        }
        Err(e) => return Err(e).context("taking start.lock, so that no run starts meanwhile"),
    }
    let killed = kill_lock_holders(&path);
    tracing::warn!(
        killed,
        "start.lock was held for {} s; its holders were killed",
        START_LOCK_WAIT.as_secs()
    );
    StartLock::take_within(state, HOLDERS_WAIT).with_context(|| {
        format!("start.lock is still held after killing the {killed} processes that held it")
    })
}

/// Asks every running run to stop, then, one run at a time (so that no descriptor per run is
/// held: a folder may keep 100,000 runs), takes its lock — killing the group of a run whose
/// supervisor does not end in time, then the lock's holders — records it `lost` if it still
/// says `running`, and hands the held lock to `then`. Returns how many runs it handled.
fn for_each_run_stopped(
    state: &StateDir,
    whole: bool,
    mut then: impl FnMut(&RunId, LockGuard) -> Result<()>,
) -> Result<usize> {
    let runs = runs_of(state, whole)?;
    for (id, has_record, _) in &runs {
        if *has_record
            && let Ok(record) = Record::load(state, id)
            && record.status.is_running()
        {
            lnk_proc::run::wake::request_stop(state, id)
                .with_context(|| format!("asking run {id} to stop"))?;
        }
    }
    let mut handled = 0;
    for (id, has_record, has_lock) in &runs {
        let files = lnk_common::layout::RunFiles {
            record: *has_record,
            lock: *has_lock,
            ..Default::default()
        };
        if !files.lock && !files.record {
            continue;
        }
        let guard = match take_run_lock(state, id)? {
            Some(guard) => guard,
            None if files.record => match lock::create_locked(state, id) {
                Ok(guard) => guard,
                // A sweep beside us just made it, or removed the run: look again.
                Err(lnk_common::Error::RunExists { .. }) => match take_run_lock(state, id)? {
                    Some(guard) => guard,
                    None => continue,
                },
                Err(e) => return Err(e).with_context(|| format!("run {id}")),
            },
            None => continue,
        };
        if let Ok(mut record) = Record::load(state, id)
            && record.status.is_running()
        {
            sweep::one_run::record_end_of_gone(state, &mut record, &guard)?;
        }
        then(id, guard)?;
        handled += 1;
    }
    Ok(handled)
}

/// The runs to handle, with whether each has a record and a lock: every run of the folder
/// (`whole`, or a folder not indexed yet), else those the index says may be running (an
/// ended run's lock is free, and nothing starts it again).
fn runs_of(state: &StateDir, whole: bool) -> Result<Vec<(RunId, bool, bool)>> {
    if !whole && lnk_common::index::is_indexed(state) {
        return Ok(lnk_common::index::running(state)?
            .into_iter()
            .map(|(id, _)| {
                let (record, lock) = (state.record(&id).exists(), state.lock(&id).exists());
                (id, record, lock)
            })
            .collect());
    }
    let listing = state.list()?;
    Ok(listing
        .runs
        .into_iter()
        .map(|(id, files)| (id, files.record, files.lock))
        .collect())
}

/// Waits for run `id`'s lock, escalating: its supervisor was asked to stop; then its group is
/// killed; then whatever holds the lock. `None`: there is no lock file. An error that is not
/// a lock held too long (no descriptors left, a damaged lock) is said as it is.
fn take_run_lock(state: &StateDir, id: &RunId) -> Result<Option<LockGuard>> {
    let waited = |result: Result<Option<LockGuard>, lnk_common::Error>| match result {
        Ok(guard) => Ok(Some(guard)),
        Err(lnk_common::Error::LockTimeout { .. }) => Ok(None),
        Err(e) => Err(e).with_context(|| format!("run {id}")),
    };
    if let Some(guard) = waited(lock::lock_blocking(state, id, ASKED_WAIT))? {
        return Ok(guard);
    }
    // The supervisor did not end: stop the run ourselves (its gate, then what is proven the
    // run's); the supervisor then sees its run end, records it, and lets go of the lock.
    if let Ok(record) = Record::load(state, id)
        && record.status.is_running()
    {
        reclaim::kill_run(&record);
    }
    if let Some(guard) = waited(lock::lock_blocking(state, id, KILLED_WAIT))? {
        return Ok(guard);
    }
    // Nothing answers (a stopped or stuck supervisor, or another holder): the lock's holders
    // are found by the lock file itself, never by name, and killed.
    let killed = kill_lock_holders(&state.lock(id));
    match lock::lock_blocking(state, id, HOLDERS_WAIT) {
        Ok(guard) => Ok(guard),
        Err(e) => bail!(
            "run {id} did not end, even after killing the {killed} processes that held its lock: {e}"
        ),
    }
}

/// Removes the index: its folders and the empty files in them, in every depth.
fn remove_tree(dir: &Path) -> Result<()> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}

/// Removes a folder of the state folder's own (slots, temporaries) and the files in it.
fn remove_folder(dir: &Path) -> Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
    };
    for entry in entries {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        remove_name(&entry.path())?;
    }
    match std::fs::remove_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", dir.display())),
    }
}

fn remove_name(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("removing {}", path.display())),
    }
}

/// Kills every process that holds the lock of file `path` (a supervisor that does not end, or
/// whatever got hold of `start.lock`), found through `/proc/<pid>/fd` by the file's device and
/// inode, and `/proc/<pid>/fdinfo` showing the lock; how many were killed.
fn kill_lock_holders(path: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let Ok(lock) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    let me = std::process::id();
    let Ok(pids) = lnk_proc::proc_info::pids() else {
        return 0;
    };
    let mut killed = 0;
    for pid in pids {
        if pid as u32 == me {
            continue;
        }
        let process = std::path::PathBuf::from(format!("/proc/{pid}"));
        let Ok(fds) = std::fs::read_dir(process.join("fd")) else {
            continue;
        };
        // A descriptor of the file whose `fdinfo` lists a lock holds it; one without is a
        // process waiting for it (a start), which is left alone.
        let holds = fds.flatten().any(|fd| {
            let on_lock = std::fs::metadata(fd.path())
                .is_ok_and(|m| m.dev() == lock.dev() && m.ino() == lock.ino());
            on_lock
                && std::fs::read_to_string(process.join("fdinfo").join(fd.file_name()))
                    .map_or(true, |info| info.lines().any(|l| l.starts_with("lock:")))
        });
        if holds && let Some(pid) = rustix::process::Pid::from_raw(pid) {
            tracing::warn!(pid = pid.as_raw_nonzero().get(), lock = %path.display(), "killing a holder of the lock that does not answer");
            if rustix::process::kill_process(pid, rustix::process::Signal::KILL).is_ok() {
                killed += 1;
            }
        }
    }
    killed
}
