//! The search for nested repositories: folders down to [`NESTED_LEVELS`] below the files
//! folder that hold a `.git`.

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType};
use rustix::io::Errno;

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
            // a folder) fails here and is passed over; one this user may not read, unless a
            // program of the agent's could have made it so.
            let child = match open_dir(dir.as_fd(), Path::new(name)) {
                Ok(child) => child,
                Err(Errno::ACCESS | Errno::PERM) => {
                    self.unsearchable(dir.as_fd(), name, &rel.join(name))?;
                    continue;
                }
                Err(_) => continue,
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
            let holds_git = match rustix::fs::statat(&child, GIT, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(s) => matches!(
                    FileType::from_raw_mode(s.st_mode),
                    FileType::Directory | FileType::RegularFile
                ),
                Err(Errno::ACCESS | Errno::PERM) => {
                    self.unsearchable(dir.as_fd(), name, &child_rel)?;
                    false
                }
                Err(_) => false,
            };
            if holds_git {
                found.push(child_rel.clone());
            }
            if depth + 1 < NESTED_LEVELS {
                self.search(child, child_rel, depth + 1, found)?;
            }
        }
        Ok(())
    }

    /// A folder (`name` in `dir`, at `rel`) this user may not open or look into. The agent's
    /// programs run as this user, and may change the mode of what this user owns: a program
    /// that took the permissions away from a folder holding a repository would hide it from
    /// this search, and put them back in the next sandbox, which would not protect it. So a
    /// folder of this user's (or one in a folder of this user's that may not be searched) is
    /// a refusal; another user's is passed over, as no program here can change it.
    fn unsearchable(&self, dir: BorrowedFd<'_>, name: &OsStr, rel: &Path) -> Result<(), String> {
        let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .or_else(|_| rustix::fs::fstat(dir));
        let me = rustix::process::geteuid().as_raw();
        match stat {
            Ok(stat) if stat.st_uid != me => Ok(()),
            _ => Err(format!(
                "{} cannot be looked into (its permissions, or its parent's, take this user's \
                 reading or searching away); Link Run looks through the files folder for \
                 repositories to protect, and a program could take the permissions away to hide \
                 one, then put them back: give them back (`chmod u+rx`) or give a smaller folder \
                 as --files; Link Run makes no sandbox for this folder until then",
                self.files.join(rel).display()
            )),
        }
    }
}
