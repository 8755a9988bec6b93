//! What a repository's own configuration sends git to inside the files folder: the hooks of
//! `core.hooksPath` (a folder of the project's, such as `.githooks`) and the files of
//! `include.path` and `includeIf.<condition>.path`. The configuration is protected, but what it
//! names there is as much git's to run or obey: it is held read-only too, a placeholder folder
//! (or file) made for it when it is missing, the folders above it pinned.

use std::io::Read;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};

use super::git_config::{expand_home, named_paths};
use super::{Hold, Placeholder, Search};

/// The most of a configuration read.
const MAX_CONFIG: u64 = 1 << 20;

/// How many hooks of a folder are looked at.
const MAX_HOOKS: usize = 256;

impl Search<'_> {
    /// Refuses a hooks folder (`hooks`, relative) whose hooks are not its own: a symbolic link
    /// to a file elsewhere in the files folder, or a file with other names there (a hard link),
    /// which a program could change through that other name, and the user's git would run.
    pub(super) fn hooks_are_their_own(&self, hooks: &Path) -> Result<(), String> {
        let Ok(dir) = self.reopen(hooks) else {
            return Ok(());
        };
        let Ok(readable) = rustix::fs::openat(
            &dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return Ok(());
        };
        let Ok(entries) = rustix::fs::Dir::new(readable) else {
            return Ok(());
        };
        let folder = self.files.join(hooks);
        for entry in entries.filter_map(Result::ok).take(MAX_HOOKS) {
            let name = std::ffi::OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let path = folder.join(name);
            let Ok(stat) = rustix::fs::statat(&dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)
            else {
                continue;
            };
            let elsewhere = match FileType::from_raw_mode(stat.st_mode) {
                FileType::Symlink => {
                    // Where it leads may change in folders no watch covers.
                    self.follows();
                    path.canonicalize()
                        .is_ok_and(|to| to.starts_with(self.files) && !to.starts_with(&folder))
                }
                FileType::RegularFile => stat.st_nlink > 1,
                _ => false,
            };
            if elsewhere {
                return Err(format!(
                    "the hook {} is a link to a file the agent's programs can change (in the \
                     files folder, or with another name there), and your git would run what \
                     they write: put a copy of the hook in its place",
                    path.display()
                ));
            }
        }
        Ok(())
    }

    /// Protects what the configuration of the git folder `git` (relative) names inside the
    /// files folder; `worktree` is what a relative hooks path is relative to.
    pub(super) fn named_by_config(&mut self, git: &Path, worktree: &Path) -> Result<(), String> {
        let Ok(fd) = rustix::fs::openat(
            &self.root,
            git.join("config"),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return Ok(());
        };
        let mut text = Vec::new();
        if std::fs::File::from(fd)
            .take(MAX_CONFIG)
            .read_to_end(&mut text)
            .is_err()
        {
            return Ok(());
        }
        let (hooks, includes) = named_paths(&String::from_utf8_lossy(&text));
        // The user's own `core.hooksPath` too: the repository's own overrides it, but a
        // program could not take that one away, and holding both costs nothing.
        let user_hooks = self.user_hooks.clone();
        if !hooks.is_empty() || !includes.is_empty() || !user_hooks.is_empty() {
            // Where they lead may change in folders no watch covers (and the user's own
            // configuration is not watched at all).
            self.follows();
        }
        for hook in hooks.into_iter().chain(user_hooks) {
            if let Some(rel) = self.inside(worktree, &hook) {
                self.hold_named(&rel, Placeholder::Folder)?;
                self.hooks_are_their_own(&rel)?;
            }
        }
        for include in includes {
            if let Some(rel) = self.inside(git, &include) {
                self.hold_named(&rel, Placeholder::File)?;
            }
        }
        Ok(())
    }

    /// `value` (relative to `base`, or absolute) relative to the files folder, when it lies in
    /// it: its deepest existing folder followed as git follows it, to learn where it leads
    /// (what is then held is opened again without following any link), the missing rest
    /// joined to it.
    fn inside(&self, base: &Path, value: &str) -> Option<PathBuf> {
        let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
        let value = expand_home(value, home.as_deref().map(Path::new))?;
        let path = self.files.join(base).join(value);
        let mut missing = Vec::new();
        let mut existing = path.as_path();
        let resolved = loop {
            if let Ok(real) = existing.canonicalize() {
                break real;
            }
            missing.push(existing.file_name()?);
            existing = existing.parent()?;
        };
        let mut full = resolved;
        for part in missing.iter().rev() {
            match *part {
                name if name == ".." => {
                    full.pop();
                }
                name if name == "." => {}
                name => full.push(name),
            }
        }
        let rel = full.strip_prefix(self.files).ok()?.to_path_buf();
        (!rel.as_os_str().is_empty()).then_some(rel)
    }

    /// Holds `rel` read-only, the folders above it pinned; when it or a folder above it is
    /// missing, the first missing one gets a placeholder (`leaf` when it is `rel` itself).
    fn hold_named(&mut self, rel: &Path, leaf: Placeholder) -> Result<(), String> {
        let mut at = PathBuf::new();
        let parts: Vec<_> = rel.components().collect();
        for (i, part) in parts.iter().enumerate() {
            let parent = self.reopen(&at)?;
            at.push(part);
            let last = i + 1 == parts.len();
            match self.open_at(parent.as_fd(), &at)? {
                Some((_, FileType::Symlink)) => return Ok(()),
                Some((fd, FileType::Directory)) if !last => self.add(&at, Hold::Pin, fd)?,
                Some((fd, _)) if last => return self.add(&at, Hold::ReadOnly, fd),
                Some(_) => return Ok(()),
                None => {
                    let kind = if last { leaf } else { Placeholder::Folder };
                    if let Some(fd) = self.make(parent.as_fd(), &at, kind, false)? {
                        self.add(&at, Hold::ReadOnly, fd)?;
                    }
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}
