//! Finding what to protect in the files folder, each thing opened as it is found: the
//! folder is opened once, and every path below it one component at a time relative to its
//! parent's handle, never following a link (`O_PATH|O_NOFOLLOW`). The sandbox then binds these
//! very handles (`--bind-fd`, `--ro-bind-fd`): nothing is resolved by path a second time, so a
//! program of another sandbox that swaps a folder for a link meanwhile cannot make the sandbox
//! bind something outside the files folder.
//!
//! What is protected ([`super::names`]): at the top of the files folder, every protected name
//! (a placeholder made for each missing one), `.github/workflows`, and the repository (`.git`,
//! a placeholder folder when there is none); in every repository (the top one, those nested
//! down to [`NESTED_LEVELS`] below it, and the git folders a `gitdir:` file or a `commondir`
//! leads to inside the files folder), the git folder's parts, and in a nested one the
//! protected names it holds. A repository's git folder, and each folder between the files
//! folder and a nested repository, is *pinned*: bound over itself, writable, so that it cannot
//! be renamed or removed and another put in its place.

use std::cell::Cell;
use std::collections::{BTreeMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use lnk_common::record::FileId;
use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::folder_watches::Watches;
use super::names::{
    GIT, GIT_PARTS, GITHUB, HOME_FILES, NESTED_LEVELS, NOT_SEARCHED, Placeholder, TOP, WORKFLOWS,
};

/// How many folders the search for nested repositories may open before it gives up. It does
/// not stop early and protect less: a program could otherwise hide a repository behind enough
/// folders of its own.
pub const MAX_FOLDERS: usize = 20_000;
/// How many repositories (the top one included) may be protected.
pub const MAX_REPOSITORIES: usize = 64;
/// The most of a `gitdir:` file or a `commondir` read.
const MAX_POINTER: u64 = 4096;

/// How a path is held in the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hold {
    /// Bound over itself, writable: it cannot be renamed or removed.
    Pin,
    /// Bound over itself, read-only.
    ReadOnly,
}

/// A path to bind, opened.
#[derive(Debug)]
pub struct Bound {
    /// Relative to the files folder.
    pub rel: PathBuf,
    /// How.
    pub hold: Hold,
    /// The handle the sandbox binds.
    pub fd: OwnedFd,
    /// Its identity when it was opened.
    pub id: FileId,
}

/// A placeholder made by the search, for the clean-up to find again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Made {
    /// Relative to the files folder.
    pub rel: PathBuf,
    /// A folder or a file.
    pub kind: Placeholder,
    /// Its identity.
    pub id: FileId,
}

/// What the search found.
#[derive(Debug, Default)]
pub struct Found {
    /// What to bind, parents before what they hold.
    pub bound: Vec<Bound>,
    /// The placeholders it made.
    pub made: Vec<Made>,
    /// Whether it followed no path by its text ([`Search::followed`]): with every folder it
    /// looked in watched, what it found may be kept until one changes ([`super::kept_search`]).
    pub keepable: bool,
}

/// Whether the user's own git configuration (system, global, their includes) names a
/// `core.hooksPath` now: a search kept from before it did would not hold it.
pub fn user_names_hooks() -> bool {
    !user_config::user_hooks_paths().is_empty()
}

/// Finds what to protect in the files folder `files` (canonical), making the placeholders;
/// with `watches`, each folder it looks in is watched before it looks
/// ([`super::folder_watches`]).
pub fn scan(files: &Path, watches: Option<&Watches>) -> Result<Found, String> {
    let root = open_dir(rustix::fs::CWD, files)
        .map_err(|e| format!("cannot open the files folder {}: {e}", files.display()))?;
    let mut search = Search {
        files,
        root,
        bound: BTreeMap::new(),
        made: Vec::new(),
        gitdirs: HashSet::new(),
        user_hooks: user_config::user_hooks_paths(),
        folders: 0,
        watches,
        followed: Cell::new(false),
    };
    search.watch(search.root.as_fd(), Path::new(""));
    search.top()?;
    search.nested()?;
    Ok(Found {
        bound: search.bound.into_values().collect(),
        made: search.made,
        // The user's own hooks path is read from configuration no watch covers.
        keepable: !search.followed.get() && search.user_hooks.is_empty(),
    })
}

struct Search<'a> {
    files: &'a Path,
    root: OwnedFd,
    bound: BTreeMap<PathBuf, Bound>,
    made: Vec<Made>,
    /// The git folders protected, by identity.
    gitdirs: HashSet<FileId>,
    /// The `core.hooksPath` values of the user's own git configuration, which every
    /// repository's git obeys unless its own configuration says otherwise.
    user_hooks: Vec<String>,
    folders: usize,
    /// The folders looked in, watched before the look.
    watches: Option<&'a Watches>,
    /// Whether the search followed a path by its text (a `gitdir:` file, a `commondir`, a
    /// hooks path or an include, a hook that is a link), which may lead through folders no
    /// watch covers.
    followed: Cell<bool>,
}

/// What is at a name: its handle (`O_PATH`) and kind, or nothing.
type Opened = Option<(OwnedFd, FileType)>;

impl Search<'_> {
    /// Watches the folder `dir` (at `rel`) before the search looks in it.
    fn watch(&self, dir: BorrowedFd<'_>, rel: &Path) {
        if let Some(watches) = self.watches {
            watches.add(dir, rel);
        }
    }

    /// The search followed a path by its text: what it found is not kept.
    fn follows(&self) {
        self.followed.set(true);
    }

    fn shown(&self, rel: &Path) -> String {
        self.files.join(rel).display().to_string()
    }

    fn refuse_link(&self, rel: &Path) -> String {
        format!(
            "{} is a symbolic link, and Link Run holds what it protects read-only with a mount, \
             which a link cannot have (a program could put something else in its place): \
             replace the link with what it points to, or move it out of the files folder",
            self.shown(rel)
        )
    }

    /// The top of the files folder.
    fn top(&mut self) -> Result<(), String> {
        let root = self.root.try_clone().map_err(|e| e.to_string())?;
        let home = std::env::var_os("HOME")
            .and_then(|home| Path::new(&home).canonicalize().ok())
            .is_some_and(|home| home == self.files);
        for top in TOP {
            let missing = if home && HOME_FILES.contains(&top.name) {
                Placeholder::File
            } else {
                top.missing
            };
            self.name(root.as_fd(), Path::new(top.name), missing, true)?;
        }
        // `.github` itself stays the agent's (an issue template, dependabot's settings), but
        // for its `workflows`: a placeholder folder is made when there is none, and pinned.
        let github = Path::new(GITHUB);
        let github_fd = match self.open_at(root.as_fd(), github)? {
            Some((fd, FileType::Directory)) => Some(fd),
            Some((_, FileType::Symlink)) => return Err(self.refuse_link(github)),
            Some((fd, _)) => {
                self.add(github, Hold::ReadOnly, fd)?;
                None
            }
            None => self.make(root.as_fd(), github, Placeholder::Folder, true)?,
        };
        if let Some(fd) = github_fd {
            self.add(github, Hold::Pin, fd)?;
            let dir = self.reopen(github)?;
            self.name(
                dir.as_fd(),
                &github.join(WORKFLOWS),
                Placeholder::Folder,
                true,
            )?;
        }
        match self.open_at(root.as_fd(), Path::new(GIT))? {
            None => self.name(root.as_fd(), Path::new(GIT), Placeholder::Folder, true)?,
            Some((_, FileType::Symlink)) => return Err(self.refuse_link(Path::new(GIT))),
            Some(_) => self.repository(Path::new(""), true)?,
        }
        Ok(())
    }

    /// Protects `rel` (a name in the folder `dir`) read-only: what is there, or a placeholder
    /// of `missing`'s kind. A link is refused when `strict`, else left alone.
    fn name(
        &mut self,
        dir: BorrowedFd<'_>,
        rel: &Path,
        missing: Placeholder,
        strict: bool,
    ) -> Result<(), String> {
        match self.open_at(dir, rel)? {
            Some((_, FileType::Symlink)) if strict => Err(self.refuse_link(rel)),
            Some((_, FileType::Symlink)) => {
                tracing::debug!(path = %self.shown(rel), "a link is not protected");
                Ok(())
            }
            Some((fd, _)) => self.add(rel, Hold::ReadOnly, fd),
            None => match self.make(dir, rel, missing, strict)? {
                Some(fd) => self.add(rel, Hold::ReadOnly, fd),
                None => Ok(()),
            },
        }
    }

    /// Makes a placeholder for `rel` in `dir`, and opens it. `None` when nothing is to be made,
    /// or this user cannot make it (then neither can the sandbox's programs), or (unless
    /// `strict`) a link took its place meanwhile.
    fn make(
        &mut self,
        dir: BorrowedFd<'_>,
        rel: &Path,
        kind: Placeholder,
        strict: bool,
    ) -> Result<Option<OwnedFd>, String> {
        let name = file_name(rel)?;
        let made = match kind {
            Placeholder::None => return Ok(None),
            Placeholder::Folder => rustix::fs::mkdirat(dir, name, Mode::from_raw_mode(0o755)),
            Placeholder::File => rustix::fs::openat(
                dir,
                name,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .map(drop),
        };
        match made {
            Ok(()) => {}
            // Someone made it meanwhile: protect what is there.
            Err(Errno::EXIST) => {}
            Err(Errno::ACCESS | Errno::PERM | Errno::ROFS) => {
                tracing::debug!(path = %self.shown(rel), "no placeholder: the folder is not writable");
                return Ok(None);
            }
            Err(err) => {
                return Err(format!(
                    "cannot make the placeholder {}: {err}",
                    self.shown(rel)
                ));
            }
        }
        let Some((fd, kind_now)) = self.open_at(dir, rel)? else {
            return Err(format!(
                "the placeholder {} went away as it was made",
                self.shown(rel)
            ));
        };
        if kind_now == FileType::Symlink {
            return if strict {
                Err(self.refuse_link(rel))
            } else {
                Ok(None)
            };
        }
        if made.is_ok() {
            self.made.push(Made {
                rel: rel.to_path_buf(),
                kind,
                id: identity(fd.as_fd())?,
            });
        }
        Ok(Some(fd))
    }

    /// Whether `rel` lies under a path already bound read-only.
    fn held_read_only(&self, rel: &Path) -> bool {
        rel.ancestors()
            .skip(1)
            .any(|up| self.bound.get(up).is_some_and(|b| b.hold == Hold::ReadOnly))
    }

    fn add(&mut self, rel: &Path, hold: Hold, fd: OwnedFd) -> Result<(), String> {
        if self.held_read_only(rel) || self.bound.contains_key(rel) {
            return Ok(());
        }
        let stat = rustix::fs::fstat(&fd)
            .map_err(|e| format!("cannot look at {}: {e}", self.shown(rel)))?;
        // Read-only under this name, it would stay writable under another.
        if hold == Hold::ReadOnly
            && FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile
            && stat.st_nlink > 1
        {
            return Err(format!(
                "{} has other names (hard links): a program could change it through another \
                 one, so it cannot be held read-only; replace it with a copy",
                self.shown(rel)
            ));
        }
        let id = FileId::from_stat(&stat);
        self.bound.insert(
            rel.to_path_buf(),
            Bound {
                rel: rel.to_path_buf(),
                hold,
                fd,
                id,
            },
        );
        Ok(())
    }

    /// Opens `rel`'s last component in `dir` (`O_PATH|O_NOFOLLOW`): its handle and kind.
    fn open_at(&self, dir: BorrowedFd<'_>, rel: &Path) -> Result<Opened, String> {
        let name = file_name(rel)?;
        match rustix::fs::openat(
            dir,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => {
                let stat =
                    rustix::fs::fstat(&fd).map_err(|e| format!("{}: {e}", self.shown(rel)))?;
                Ok(Some((fd, FileType::from_raw_mode(stat.st_mode))))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(err) => Err(format!("cannot look at {}: {err}", self.shown(rel))),
        }
    }

    /// Opens the folder `rel` from the top, one component at a time, following no link.
    fn reopen(&self, rel: &Path) -> Result<OwnedFd, String> {
        let mut fd = self.root.try_clone().map_err(|e| e.to_string())?;
        for part in rel.components() {
            let Component::Normal(name) = part else {
                return Err(format!("{} is not a plain path", rel.display()));
            };
            fd = rustix::fs::openat(
                &fd,
                name,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| format!("cannot open {} as a folder: {e}", self.shown(rel)))?;
        }
        self.watch(fd.as_fd(), rel);
        Ok(fd)
    }
}

/// Opens a folder by path for reading, refusing a link as its last component.
fn open_dir(at: BorrowedFd<'_>, path: &Path) -> Result<OwnedFd, Errno> {
    rustix::fs::openat(
        at,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn file_name(rel: &Path) -> Result<&OsStr, String> {
    rel.file_name()
        .ok_or_else(|| format!("{} names nothing", rel.display()))
}

fn identity(fd: BorrowedFd<'_>) -> Result<FileId, String> {
    rustix::fs::fstat(fd)
        .map(|stat| FileId::from_stat(&stat))
        .map_err(|e| format!("cannot look at a protected path: {e}"))
}

mod config_named;
mod git_config;
mod nested;
mod repository;
mod user_config;

#[cfg(test)]
mod tests;
