//! Writing a host's file: parent folders made, the file as it was kept beside it as a backup
//! (`<file>.bak`, or `<file>.bak.1`, `.bak.2`, … each created new, never over a file that is
//! there; an empty file, such as a protected path's placeholder, has nothing to keep), and the
//! new text written to a temporary file in the same folder and renamed over it, so that the
//! host never reads half a file.
//!
//! Two kinds of file, two ways:
//! - a file of the person's own (user scope, outside the files folder) may be a symbolic link
//!   (a dotfiles checkout): it is written where the link leads;
//! - a file in the files folder (project scope), where the agent's programs can write, is
//!   reached from the files folder one component at a time without following any link
//!   ([`InFiles`]): a link there, at the file or at any folder above it, may be the agent's,
//!   put there to have `config` write somewhere else, so it is refused, and nothing is written.

use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

/// The most of a host's file read.
const MAX_FILE: u64 = 16 << 20;

/// The file's text, or `None` when it does not exist yet.
pub fn read(path: &Path) -> Result<Option<String>, String> {
    match fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(format!("cannot read {}: {err}", path.display())),
    }
}

/// What [`replace`] did.
#[derive(Debug)]
pub struct Written {
    /// The file written.
    pub path: PathBuf,
    /// Where the file as it was is kept, when there was one.
    pub backup: Option<PathBuf>,
}

/// The name of the `n`th backup of `name`: `<name>.bak`, then `<name>.bak.1`, ….
fn backup_name(name: &std::ffi::OsStr, n: u32) -> std::ffi::OsString {
    let mut backup = name.to_owned();
    backup.push(".bak");
    if n > 0 {
        backup.push(format!(".{n}"));
    }
    backup
}

/// How many backup names are tried before giving up.
const BACKUPS: u32 = 1000;

/// Replaces `path` (the person's own file) with `text`, keeping a backup of what was there.
pub fn replace(path: &Path, text: &str) -> Result<Written, String> {
    // Through a link to its target, so that the link stays a link.
    let path = match path.canonicalize() {
        Ok(target) => target,
        Err(_) => path.to_path_buf(),
    };
    let folder = path
        .parent()
        .ok_or_else(|| format!("{} has no folder", path.display()))?;
    let file_name = path
        .file_name()
        .ok_or_else(|| format!("{} names no file", path.display()))?;
    fs::create_dir_all(folder)
        .map_err(|err| format!("cannot make the folder {}: {err}", folder.display()))?;
    let existing = fs::metadata(&path).ok();
    let backup = match &existing {
        Some(meta) if meta.len() > 0 => {
            let before =
                fs::read(&path).map_err(|err| format!("cannot read {}: {err}", path.display()))?;
            let mode = existing.as_ref().map_or(0o600, |m| m.permissions().mode());
            let mut made = None;
            for n in 0..BACKUPS {
                let candidate = folder.join(backup_name(file_name, n));
                match OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(mode & 0o7777)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&candidate)
                {
                    Ok(mut file) => {
                        file.write_all(&before).map_err(|err| {
                            format!(
                                "cannot keep {} as {}: {err}",
                                path.display(),
                                candidate.display()
                            )
                        })?;
                        made = Some(candidate);
                        break;
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(err) => {
                        return Err(format!(
                            "cannot keep {} as {}: {err}",
                            path.display(),
                            candidate.display()
                        ));
                    }
                }
            }
            Some(made.ok_or_else(|| format!("no free backup name beside {}", path.display()))?)
        }
        Some(_) | None => None,
    };
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(file_name);
    temporary_name.push(format!(".link-run-{}.tmp", std::process::id()));
    let temporary = folder.join(temporary_name);
    // The new file gets the old one's permissions (a file of secrets stays private).
    let mode = existing.map_or(0o644, |m| m.permissions().mode() & 0o7777);
    let written = (|| -> std::io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temporary)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        fs::rename(&temporary, &path)
    })();
    if let Err(err) = written {
        let _ = fs::remove_file(&temporary);
        return Err(format!("cannot write {}: {err}", path.display()));
    }
    tracing::debug!(path = %path.display(), "written");
    Ok(Written { path, backup })
}

/// A file of the files folder, reached without following links.
pub struct InFiles<'a> {
    /// The files folder (canonical).
    pub files: &'a Path,
    /// The file, relative to it.
    pub rel: &'a Path,
}

impl InFiles<'_> {
    fn path(&self) -> PathBuf {
        self.files.join(self.rel)
    }

    fn link(&self, at: &Path) -> String {
        format!(
            "{} is a symbolic link{}: config writes a host's file in the files folder only \
             where the agent's programs cannot lead it somewhere else, so nothing was written. \
             Look at what the link is (the agent's programs may have made it), remove it, and \
             run config again; or use --scope user",
            self.files.join(at).display(),
            if at == self.rel {
                String::new()
            } else {
                format!(", on the way to {}", self.path().display())
            }
        )
    }

    /// The folder holding the file, opened from the files folder without following a link;
    /// missing folders made when `make`. `None` when one is missing (and not made).
    fn folder(&self, make: bool) -> Result<Option<OwnedFd>, String> {
        let mut fd = rustix::fs::open(
            self.files,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot open the files folder {}: {e}", self.files.display()))?;
        let mut at = PathBuf::new();
        let parent = self.rel.parent().unwrap_or(Path::new(""));
        for part in parent.components() {
            let Component::Normal(name) = part else {
                return Err(format!("{} is not a plain path", self.rel.display()));
            };
            at.push(name);
            let open = |fd: &OwnedFd| {
                rustix::fs::openat(
                    fd,
                    name,
                    OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
            };
            fd = match open(&fd) {
                Ok(next) => next,
                Err(Errno::NOENT) if make => {
                    match rustix::fs::mkdirat(&fd, name, Mode::from_raw_mode(0o755)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(err) => {
                            return Err(format!(
                                "cannot make the folder {}: {err}",
                                self.files.join(&at).display()
                            ));
                        }
                    }
                    open(&fd).map_err(|e| self.refusal(&at, e))?
                }
                Err(Errno::NOENT) => return Ok(None),
                Err(err) => return Err(self.refusal(&at, err)),
            };
        }
        Ok(Some(fd))
    }

    fn refusal(&self, at: &Path, err: Errno) -> String {
        match err {
            // `O_NOFOLLOW` on a link: ELOOP; a link where a folder should be: ENOTDIR.
            Errno::LOOP | Errno::NOTDIR
                if rustix::fs::lstat(self.files.join(at))
                    .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::Symlink) =>
            {
                self.link(at)
            }
            err => format!("cannot open {}: {err}", self.files.join(at).display()),
        }
    }

    fn name(&self) -> Result<&std::ffi::OsStr, String> {
        self.rel
            .file_name()
            .ok_or_else(|| format!("{} names no file", self.rel.display()))
    }

    /// Opens the file itself for reading: `None` when it is missing. A link, something that
    /// is not a plain file, or a file with other names (a hard link to a file elsewhere) is
    /// refused.
    fn open(&self, folder: BorrowedFd<'_>) -> Result<Option<(fs::File, fs::Metadata)>, String> {
        let name = self.name()?;
        let fd = match rustix::fs::openat(
            folder,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(err) => return Err(self.refusal(self.rel, err)),
        };
        let file = fs::File::from(fd);
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot look at {}: {e}", self.path().display()))?;
        if !meta.is_file() {
            return Err(format!(
                "{} is not a plain file; nothing was written",
                self.path().display()
            ));
        }
        if meta.nlink() > 1 {
            return Err(format!(
                "{} has other names (hard links): writing it could change a file elsewhere, \
                 which the agent's programs may have linked there; nothing was written. Look \
                 at it, replace it with a copy, and run config again",
                self.path().display()
            ));
        }
        Ok(Some((file, meta)))
    }

    /// Whether an empty folder stands where the file goes: a protected path's placeholder
    /// (`.mcp.json` while a sandbox of the folder runs), which the file replaces.
    fn placeholder(&self, folder: BorrowedFd<'_>) -> Result<bool, String> {
        let name = self.name()?;
        let Ok(stat) = rustix::fs::statat(folder, name, AtFlags::SYMLINK_NOFOLLOW) else {
            return Ok(false);
        };
        if FileType::from_raw_mode(stat.st_mode) != FileType::Directory {
            return Ok(false);
        }
        let fd = rustix::fs::openat(
            folder,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| format!("cannot look in {}: {e}", self.path().display()))?;
        let dir = rustix::fs::Dir::new(fd)
            .map_err(|e| format!("cannot look in {}: {e}", self.path().display()))?;
        Ok(dir
            .filter_map(Result::ok)
            .all(|e| matches!(e.file_name().to_bytes(), b"." | b"..")))
    }

    /// The file's text, or `None` when it does not exist yet.
    pub fn read(&self) -> Result<Option<String>, String> {
        let Some(folder) = self.folder(false)? else {
            return Ok(None);
        };
        if self.placeholder(folder.as_fd())? {
            return Ok(None);
        }
        let Some((file, _)) = self.open(folder.as_fd())? else {
            return Ok(None);
        };
        let mut text = String::new();
        file.take(MAX_FILE)
            .read_to_string(&mut text)
            .map_err(|e| format!("cannot read {}: {e}", self.path().display()))?;
        Ok(Some(text))
    }

    /// Replaces the file with `text`, keeping a backup of what was there: every step relative
    /// to the folder's handle, every file created new.
    pub fn replace(&self, text: &str) -> Result<Written, String> {
        let folder = self
            .folder(true)?
            .ok_or_else(|| format!("cannot make the folder of {}", self.path().display()))?;
        let name = self.name()?;
        let path = self.path();
        let placeholder = self.placeholder(folder.as_fd())?;
        let existing = if placeholder {
            None
        } else {
            self.open(folder.as_fd())?
        };
        let mode = existing
            .as_ref()
            .map_or(0o644, |(_, meta)| meta.permissions().mode() & 0o7777);
        let backup = match existing {
            Some((file, _)) => {
                let mut before = Vec::new();
                file.take(MAX_FILE)
                    .read_to_end(&mut before)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                if before.is_empty() {
                    None
                } else {
                    Some(self.keep(folder.as_fd(), name, &before, mode)?)
                }
            }
            None => None,
        };
        let mut temporary = std::ffi::OsString::from(".");
        temporary.push(name);
        temporary.push(format!(".link-run-{}.tmp", std::process::id()));
        let written = create_new(folder.as_fd(), &temporary, mode)
            .and_then(|mut file| {
                file.write_all(text.as_bytes())?;
                file.sync_all()
            })
            .and_then(|()| {
                // The placeholder goes just before the file takes its place (a folder cannot
                // be renamed over); `rmdir` fails should anything have been put in it.
                if placeholder {
                    rustix::fs::unlinkat(&folder, name, AtFlags::REMOVEDIR)?;
                }
                rustix::fs::renameat(&folder, &temporary, &folder, name).map_err(Into::into)
            });
        if let Err(err) = written {
            let _ = rustix::fs::unlinkat(&folder, &temporary, AtFlags::empty());
            return Err(format!("cannot write {}: {err}", path.display()));
        }
        Ok(Written { path, backup })
    }

    /// Keeps `before` as the first free backup name, created new.
    fn keep(
        &self,
        folder: BorrowedFd<'_>,
        name: &std::ffi::OsStr,
        before: &[u8],
        mode: u32,
    ) -> Result<PathBuf, String> {
        for n in 0..BACKUPS {
            let backup = backup_name(name, n);
            match create_new(folder, &backup, mode) {
                Ok(mut file) => {
                    let shown = self.files.join(self.rel.with_file_name(&backup));
                    file.write_all(before).map_err(|e| {
                        format!(
                            "cannot keep {} as {}: {e}",
                            self.path().display(),
                            shown.display()
                        )
                    })?;
                    return Ok(shown);
                }
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(err) => {
                    return Err(format!(
                        "cannot keep a backup of {}: {err}",
                        self.path().display()
                    ));
                }
            }
        }
        Err(format!(
            "no free backup name beside {}",
            self.path().display()
        ))
    }
}

/// A new file `name` in `folder` (never an existing one, never through a link), with `mode`.
fn create_new(
    folder: BorrowedFd<'_>,
    name: &std::ffi::OsStr,
    mode: u32,
) -> std::io::Result<fs::File> {
    let fd = rustix::fs::openat(
        folder,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(mode),
    )?;
    let file = fs::File::from(fd);
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    Ok(file)
}

#[cfg(test)]
mod tests;
