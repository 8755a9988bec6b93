//! The state folder's logs: a run's supervisor's (`<id>.log`, its stderr) and the sweeps'
//! (`sweep.log`), named in [`crate::layout`]. The runner opens them, bounded, for the processes
//! it starts ([`StateDir::open_log`]); the supervisor gives back what a run's log reserved once
//! the run's end is recorded ([`StateDir::trim_log`]).

use std::fs;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::OFlags;

use crate::error::{Error, Op};
use crate::id::RunId;
use crate::layout::StateDir;
use crate::trust;

/// A log longer than this when it is opened starts again empty, so logs stay bounded.
pub const LOG_LIMIT: u64 = 1024 * 1024;
/// Bytes a log reserves past its end when it is opened, for what is said on a full disk.
pub const LOG_RESERVE: u64 = 64 * 1024;

impl StateDir {
    /// Gives back the room run `id`'s log reserved past its end ([`StateDir::open_log`]),
    /// and removes the log if it is empty: for a run whose end is in its record, so that an
    /// ended run holds no block but its record's and its output's. Best effort.
    pub fn trim_log(&self, id: &RunId) {
        let path = self.log(id);
        let Ok(file) = fs::OpenOptions::new()
            .write(true)
            .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32)
            .open(&path)
        else {
            return;
        };
        let Ok(stat) = rustix::fs::fstat(&file) else {
            return;
        };
        if trust::check_owned_regular(&stat, &path).is_err() {
            return;
        }
        match u64::try_from(stat.st_size) {
            Ok(0) => {
                let _ = fs::remove_file(&path);
            }
            Ok(len) => {
                let _ = file.set_len(len);
            }
            Err(_) => {}
        }
    }

    /// Opens a log of this folder for appending (`O_CLOEXEC|O_NOFOLLOW`, mode 0600), emptied
    /// first when it has grown past [`LOG_LIMIT`]. Handed to a child as its stderr.
    pub fn open_log(&self, path: &Path) -> Result<fs::File, Error> {
        let file = fs::OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .custom_flags((OFlags::NOFOLLOW | OFlags::NONBLOCK).bits() as i32)
            .open(path)
            .map_err(|e| Error::io(Op::Open, path, e))?;
        let stat = rustix::fs::fstat(&file).map_err(|e| Error::io(Op::Stat, path, e))?;
        trust::check_owned_regular(&stat, path)?;
        let len = u64::try_from(stat.st_size).unwrap_or(0);
        if len > LOG_LIMIT {
            file.set_len(0).map_err(|e| Error::io(Op::Write, path, e))?;
        }
        // Room reserved past the end, so that a log still takes what its writer has to say
        // (above all that the disk is full) when the disk is full. Best effort.
        let _ = rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, LOG_RESERVE);
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn logs_start_again_empty_past_their_limit() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let path = state.sweep_log();
        let mut log = state.open_log(&path).unwrap();
        log.write_all(b"first\n").unwrap();
        drop(state.open_log(&path).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"first\n", "a short log is kept");
        fs::write(&path, vec![b'x'; LOG_LIMIT as usize + 1]).unwrap();
        let mut log = state.open_log(&path).unwrap();
        log.write_all(b"again\n").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"again\n");
        std::os::unix::fs::symlink(&path, dir.path().join("link.log")).unwrap();
        assert!(
            state.open_log(&dir.path().join("link.log")).is_err(),
            "a link is refused"
        );
    }
}
