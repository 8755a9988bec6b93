//! The index's names on disk: each made as a hard link of its run's lock (an empty file of its
//! own when the run has none), folders made as needed, and read back by name alone.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{AtFlags, Mode};
use rustix::io::Errno;

use crate::error::{Error, Op};
use crate::id::RunId;
use crate::layout::StateDir;

/// Makes the index name `path` for run `id`: a hard link of its lock file, or an empty file
/// when it has none. A name that exists already is left as it is.
pub(crate) fn name(state: &StateDir, id: &RunId, path: &Path) -> Result<(), Error> {
    let lock = state.lock(id);
    // Not following a link: the name links the lock's own inode, whatever it is, and only the
    // name is ever read.
    let link = || {
        rustix::fs::linkat(
            rustix::fs::CWD,
            &lock,
            rustix::fs::CWD,
            path,
            AtFlags::empty(),
        )
    };
    match link() {
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(Errno::NOENT) if !path.parent().is_some_and(Path::exists) => {
            if let Some(parent) = path.parent() {
                make_dirs(parent)?;
            }
            match link() {
                Ok(()) | Err(Errno::EXIST) => Ok(()),
                Err(Errno::NOENT) => touch(path),
                Err(e) => Err(Error::io(Op::Create, path, e)),
            }
        }
        // No lock (or a file system without links): an empty file of its own.
        Err(_) => touch(path),
    }
}

/// Makes an empty file (and its folders, 0700), if missing.
pub(super) fn touch(path: &Path) -> Result<(), Error> {
    let create = || {
        rustix::fs::open(
            path,
            rustix::fs::OFlags::CREATE
                | rustix::fs::OFlags::WRONLY
                | rustix::fs::OFlags::CLOEXEC
                | rustix::fs::OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )
    };
    match create() {
        Ok(_) => Ok(()),
        Err(Errno::NOENT) => {
            if let Some(parent) = path.parent() {
                make_dirs(parent)?;
            }
            create()
                .map(drop)
                .map_err(|e| Error::io(Op::Create, path, e))
        }
        Err(e) => Err(Error::io(Op::Create, path, e)),
    }
}

pub(super) fn make_dir(dir: &Path) -> Result<(), Error> {
    match rustix::fs::mkdir(dir, Mode::from_raw_mode(0o700)) {
        Ok(()) | Err(Errno::EXIST) => Ok(()),
        Err(e) => Err(Error::io(Op::MakeDir, dir, e)),
    }
}

pub(super) fn make_dirs(dir: &Path) -> Result<(), Error> {
    fs::DirBuilder::new()
        .recursive(true)
        .create(dir)
        .map_err(|e| Error::io(Op::MakeDir, dir, e))
}

pub(super) fn remove(path: &Path) -> Result<(), Error> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(Op::Remove, path, e)),
    }
}

/// Removes a folder of the index if it is empty (a start filing into it meanwhile makes it
/// again).
pub(super) fn remove_empty_dir(dir: &Path) {
    let _ = fs::remove_dir(dir);
}

/// The names in `dir` (none if it does not exist), with their paths.
pub(crate) fn names_in(dir: &Path) -> Result<Vec<(String, PathBuf)>, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(Op::List, dir, e)),
    };
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(Op::List, dir, e))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push((name, entry.path()));
        }
    }
    Ok(names)
}

/// The run ids named in `dir`, each with its name's age.
pub(super) fn ids_in(dir: &Path) -> Result<Vec<(RunId, Duration)>, Error> {
    Ok(names_in(dir)?
        .into_iter()
        .filter_map(|(name, path)| {
            let id = RunId::parse(&name).ok()?;
            Some((id, age_of(&path).unwrap_or(Duration::ZERO)))
        })
        .collect())
}

/// How long ago `path` was last modified; `None` when it is gone.
pub(super) fn age_of(path: &Path) -> Option<Duration> {
    let modified = fs::symlink_metadata(path).and_then(|m| m.modified()).ok()?;
    Some(modified.elapsed().unwrap_or(Duration::ZERO))
}
