//! A repository's parts: its git folder pinned and what in it makes git run something held
//! read-only, the git folders a `gitdir:` file or a `commondir` leads to, and, for a nested
//! one, the folders down to it pinned and the protected names it holds.

use std::io::Read;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{
    GIT, GIT_PARTS, GITHUB, Hold, MAX_POINTER, MAX_REPOSITORIES, NESTED_LEVELS, Placeholder,
    Search, TOP, WORKFLOWS, identity,
};

impl Search<'_> {
    /// Protects the repository at `repo` (relative; empty for the files folder itself), which
    /// holds a `.git`: its git folder's parts, and for a nested one, the folders down to it
    /// pinned and the protected names it holds. Its git folder is a folder or a `gitdir:` file.
    pub(super) fn repository(&mut self, repo: &Path, top: bool) -> Result<(), String> {
        if !top {
            self.pin_down_to(repo)?;
        }
        let dir = self.reopen(repo)?;
        let git = repo.join(GIT);
        let found = self.open_at(dir.as_fd(), &git)?;
        if let Some((fd, FileType::Directory)) = &found {
            self.watch(fd.as_fd(), &git);
        }
        match found {
            // A git folder with no `HEAD` is no repository (the placeholder at the top is
            // one): held read-only as a whole, so that no program makes one of it.
            Some((fd, FileType::Directory))
                if rustix::fs::statat(&fd, "HEAD", AtFlags::SYMLINK_NOFOLLOW).is_err() =>
            {
                self.add(&git, Hold::ReadOnly, fd)?;
            }
            Some((fd, FileType::Directory)) => {
                self.add(&git, Hold::Pin, fd)?;
                self.no_common_folder(&git)?;
                self.git_folder(&git, top)?;
            }
            Some((fd, FileType::RegularFile)) => {
                self.add(&git, Hold::ReadOnly, fd)?;
                if let Some(target) = self.pointer(&git, repo)? {
                    self.pointed_git_folder(&target, top)?;
                }
            }
            Some((_, FileType::Symlink)) if top => return Err(self.refuse_link(&git)),
            Some((_, FileType::Symlink)) | None => return Ok(()),
            // Something else (a FIFO, say): held as it is, so that no repository takes its place.
            Some((fd, _)) => self.add(&git, Hold::ReadOnly, fd)?,
        }
        if !top {
            for name in TOP {
                self.name(dir.as_fd(), &repo.join(name.name), Placeholder::None, false)?;
            }
            let github = self.open_at(dir.as_fd(), &repo.join(GITHUB))?;
            if let Some((fd, FileType::Directory)) = &github {
                self.watch(fd.as_fd(), &repo.join(GITHUB));
            }
            if let Some((fd, FileType::Directory)) = github
                && let Some((workflows, kind)) = self.open_at(fd.as_fd(), Path::new(WORKFLOWS))?
                && kind != FileType::Symlink
            {
                self.add(&repo.join(GITHUB), Hold::Pin, fd)?;
                self.add(
                    &repo.join(GITHUB).join(WORKFLOWS),
                    Hold::ReadOnly,
                    workflows,
                )?;
            }
        }
        Ok(())
    }

    /// Protects the git folder `git` (relative, pinned already): its parts, placeholders for the
    /// missing ones that need one, and the common folder its `commondir` names.
    pub(super) fn git_folder(&mut self, git: &Path, strict: bool) -> Result<(), String> {
        let fd = self.reopen(git)?;
        let id = identity(fd.as_fd())?;
        if !self.gitdirs.insert(id) {
            return Ok(());
        }
        if self.gitdirs.len() > MAX_REPOSITORIES {
            return Err(format!(
                "the files folder holds more than {MAX_REPOSITORIES} repositories within {} \
                 levels; Link Run protects each one's git folder and will not protect only \
                 some: give a folder with fewer as --files",
                NESTED_LEVELS
            ));
        }
        for part in GIT_PARTS {
            self.name(fd.as_fd(), &git.join(part.name), part.missing, strict)?;
        }
        self.hooks_are_their_own(&git.join("hooks"))?;
        let worktree = git.parent().unwrap_or(Path::new(""));
        self.named_by_config(git, worktree)?;
        if let Some(common) = self.pointer(&git.join("commondir"), git)? {
            self.pointed_git_folder(&common, false)?;
        }
        Ok(())
    }

    /// Refuses a repository's own git folder (`git`, relative: a `.git` folder) that holds a
    /// `commondir`. Git makes one only in a linked worktree's git folder; in a repository's
    /// own it sends the user's git to another git folder, with its own configuration and hooks,
    /// and it cannot be held away (a placeholder of that name would break every git command):
    /// a program put it there, so no sandbox is made until it is gone.
    fn no_common_folder(&self, git: &Path) -> Result<(), String> {
        let common = git.join("commondir");
        match rustix::fs::statat(&self.root, &common, AtFlags::SYMLINK_NOFOLLOW) {
            Err(_) => Ok(()),
            Ok(_) => Err(format!(
                "{} exists: git makes one only in a linked worktree's git folder, and here it \
                 sends your git to another git folder, whose configuration and hooks it would \
                 obey; a program must have put it there. Look at it and remove it (and the git \
                 folder it names, if that is not yours) before running git there; Link Run makes \
                 no sandbox for this folder until then",
                self.shown(&common)
            )),
        }
    }

    /// Protects a git folder another points to (`target`, relative), pinning the folders down
    /// to it. One under a path already read-only (a worktree's, under `.git/worktrees`) is held
    /// already.
    pub(super) fn pointed_git_folder(&mut self, target: &Path, strict: bool) -> Result<(), String> {
        if self.held_read_only(target) {
            return Ok(());
        }
        self.pin_down_to(target)?;
        self.git_folder(target, strict)
    }

    /// Where the file `rel` (a `gitdir:` file, or a `commondir`) points, relative to the files
    /// folder, when that is inside it; `base` is what a relative pointer is relative to.
    pub(super) fn pointer(&mut self, rel: &Path, base: &Path) -> Result<Option<PathBuf>, String> {
        let Ok(fd) = rustix::fs::openat(
            &self.root,
            rel,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return Ok(None);
        };
        // Where it leads may change in folders no watch covers.
        self.follows();
        let mut text = Vec::new();
        if std::fs::File::from(fd)
            .take(MAX_POINTER)
            .read_to_end(&mut text)
            .is_err()
        {
            return Ok(None);
        }
        let text = String::from_utf8_lossy(&text);
        let line = text.lines().next().unwrap_or_default().trim();
        let target = line.strip_prefix("gitdir:").unwrap_or(line).trim();
        if target.is_empty() {
            return Ok(None);
        }
        // Followed as the user's git follows it, to learn where it leads; what is then
        // protected is opened again from the files folder without following any link.
        let written = self.files.join(base).join(target);
        let resolved = match written.canonicalize() {
            Ok(resolved) => resolved,
            // A folder on the way that this user may not search: inside the files folder, a
            // program could have taken its permissions away to hide the git folder, and put
            // them back in the next sandbox.
            Err(err)
                if err.kind() == std::io::ErrorKind::PermissionDenied
                    && lexically(&written).starts_with(self.files) =>
            {
                return Err(format!(
                    "{} points to {}, which cannot be reached (a folder on the way takes this \
                     user's searching away); a program could take the permissions away to hide \
                     the git folder it names from the protected paths: give them back (`chmod \
                     u+rx`); Link Run makes no sandbox for this folder until then",
                    self.shown(rel),
                    written.display()
                ));
            }
            Err(_) => return Ok(None),
        };
        Ok(resolved
            .strip_prefix(self.files)
            .ok()
            .filter(|inside| !inside.as_os_str().is_empty())
            .map(Path::to_path_buf))
    }

    /// Pins each folder from the top down to `rel` (included).
    pub(super) fn pin_down_to(&mut self, rel: &Path) -> Result<(), String> {
        let mut at = PathBuf::new();
        for part in rel.components() {
            at.push(part);
            if self.bound.contains_key(&at) {
                continue;
            }
            let fd = self.reopen(&at)?;
            self.add(&at.clone(), Hold::Pin, fd)?;
        }
        Ok(())
    }
}

/// `path` with its `.` and `..` taken as written, following no link.
fn lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            part => out.push(part),
        }
    }
    out
}
