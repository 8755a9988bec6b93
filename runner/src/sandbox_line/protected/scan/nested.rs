//! The search for nested repositories: folders down to [`NESTED_LEVELS`] below the files
//! folder that hold a `.git`.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType};

use super::{GIT, GITHUB, MAX_FOLDERS, NESTED_LEVELS, NOT_SEARCHED, Search, TOP, open_dir};

impl Search<'_> {
    /// The nested repositories: folders down to [`NESTED_LEVELS`] below the top that hold a
    /// `.git`, searched depth first without following links, each folder opened from its
    /// parent's handle (at most one handle a level is open at a time).
    pub(super) fn nested(&mut self) -> Result<(), String> {
        let top = open_dir(self.root.as_fd(), Path::new("."))
            .map_err(|e| format!("cannot read the files folder {}: {e}", self.files.display()))?;
        let mut repositories = Vec::new();
        self.search(top, PathBuf::new(), 0, &mut repositories)?;
        for repo in repositories {
            // Reached again without following a link: a folder swapped for one since it was
            // listed holds nothing of the user's to protect.
            if self.reopen(&repo).is_ok() {
                self.repository(&repo, false)?;
            }
        }
        Ok(())
    }

    /// Looks through the folder `dir` (at `rel`, `depth` levels down) for folders that hold a
    /// `.git`, and below them while under [`NESTED_LEVELS`].
    pub(super) fn search(
        &mut self,
        dir: OwnedFd,
        rel: PathBuf,
        depth: usize,
        found: &mut Vec<PathBuf>,
    ) -> Result<(), String> {
        let Ok(entries) = rustix::fs::Dir::new(dir.try_clone().map_err(|e| e.to_string())?) else {
            return Ok(());
        };
        for entry in entries {
            // A folder that cannot be read to its end holds nothing more a program here could
            // read either.
            let Ok(entry) = entry else { break };
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." || name == GIT || NOT_SEARCHED.iter().any(|s| name == *s)
            {
                continue;
            }
            // The top's protected names are held read-only as a whole already.
            if depth == 0 && (name == GITHUB || TOP.iter().any(|t| name == t.name)) {
                continue;
            }
            if !matches!(entry.file_type(), FileType::Directory | FileType::Unknown) {
                continue;
            }
            // Opened without following a link: a link (or, for an unknown kind, anything but
            // a folder) fails here and is passed over.
            let Ok(child) = open_dir(dir.as_fd(), Path::new(name)) else {
                continue;
            };
            let child_rel = rel.join(name);
            self.watch(child.as_fd(), &child_rel);
            self.folders += 1;
            if self.folders > MAX_FOLDERS {
                return Err(format!(
                    "the files folder {} holds more than {MAX_FOLDERS} folders within {} \
                     levels (not counting {}); Link Run looks through them all for nested \
                     repositories to protect, and will not protect only some: give a smaller \
                     folder as --files",
                    self.files.display(),
                    NESTED_LEVELS,
                    NOT_SEARCHED.join(", ")
                ));
            }
            let holds_git =
                rustix::fs::statat(&child, GIT, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|s| {
                    matches!(
                        FileType::from_raw_mode(s.st_mode),
                        FileType::Directory | FileType::RegularFile
                    )
                });
            if holds_git {
                found.push(child_rel.clone());
            }
            if depth + 1 < NESTED_LEVELS {
                self.search(child, child_rel, depth + 1, found)?;
            }
        }
        Ok(())
    }
}
