//! Opening files under the files folder, which sandboxed programs can write.
//!
//! The agent may have made `background` or `background/<id>.out` a symbolic link to somewhere
//! else, a FIFO, a hard link to another file, or a folder. So nothing here resolves a path
//! string twice:
//!
//! 1. the files folder is opened once ([`FilesDir::open`], `O_DIRECTORY|O_NOFOLLOW|O_CLOEXEC`);
//! 2. `background` is made with `mkdirat` (mode 0700; a link there makes it fail with `EEXIST`,
//!    never follows it) and opened with `openat(…, O_DIRECTORY|O_NOFOLLOW)`
//!    ([`FilesDir::ensure_background_dir`]);
//! 3. every file is then opened, created, renamed or removed relative to that folder handle
//!    ([`BackgroundDir`]), by a single plain name, with `O_NOFOLLOW|O_CLOEXEC|O_NOCTTY` — a
//!    symbolic link fails with `ELOOP`, reported as [`Error::Symlink`];
//! 4. files are opened `O_NONBLOCK`, so a FIFO cannot block the open, then checked with `fstat`
//!    to be regular files ([`Error::NotRegularFile`]) before `O_NONBLOCK` is cleared; they must
//!    also have exactly one link ([`Error::HardLinked`]), so writing one cannot change a file
//!    elsewhere, and reading one cannot show a file from elsewhere.
//!
//! `unlinkat` and `renameat` act on names, never following a link, so removing or replacing a
//! planted link touches only the link.

use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, FileKind, Op};
use crate::id::RunId;
use crate::layout::{BACKGROUND_DIR, output_file_name, rotation_temp_name};
use crate::record::FileId;
use crate::shown::shown;

/// Mode of the background folder: only the owner (the supervisor's and the agent's user).
const BACKGROUND_DIR_MODE: u32 = 0o700;
/// Mode of output files: they are the agent's to read, in the agent's own folder.
const OUTPUT_MODE: u32 = 0o644;

/// An open handle on the files folder.
#[derive(Debug)]
pub struct FilesDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// An open handle on `<files>/background`, through which every output file is reached.
#[derive(Debug)]
pub struct BackgroundDir {
    fd: OwnedFd,
    path: PathBuf,
}

/// A rotation's new file, created under a temporary name beside the output file.
#[derive(Debug)]
pub struct RotationTemp {
    /// The new file, open for reading and writing (not `O_APPEND`: see
    /// [`BackgroundDir::create_rotation_temp`]).
    pub file: File,
    name: String,
}

impl FilesDir {
    /// Opens the files folder. Give it the canonical path (as the record stores it): a link as
    /// its last component is refused, and links in the components above are followed.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let fd = rustix::fs::open(path, dir_flags(), Mode::empty())
            .map_err(|e| dir_open_error(e, rustix::fs::CWD, path, path.to_owned()))?;
        Ok(FilesDir {
            fd,
            path: path.to_owned(),
        })
    }

    /// The folder's path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens the folder `relative` (to the files folder) one component at a time, each with
    /// `O_PATH|O_DIRECTORY|O_NOFOLLOW`, so that no symbolic link — one swapped in a moment ago
    /// included — is followed. For a working folder: the caller `fchdir`s to the handle
    /// instead of resolving a path again. `relative` holds plain components only (the
    /// caller resolves in-folder links first); `..` or an absolute path is refused.
    pub fn open_dir_beneath(&self, relative: &Path) -> Result<OwnedFd, Error> {
        use std::path::Component;
        let mut current: Option<OwnedFd> = None;
        let mut path = self.path.clone();
        for component in relative.components() {
            let name = match component {
                Component::CurDir => continue,
                Component::Normal(name) => name,
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(Error::BadName {
                        name: shown(&relative.to_string_lossy()),
                    });
                }
            };
            path.push(name);
            let parent = current.as_ref().map_or(self.fd.as_fd(), |fd| fd.as_fd());
            // O_PATH: entering a folder needs only search permission, not read permission.
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(parent, name, flags, Mode::empty())
                .map_err(|e| dir_open_error(e, parent, Path::new(name), path.clone()))?;
            current = Some(fd);
        }
        match current {
            Some(fd) => Ok(fd),
            None => rustix::io::fcntl_dupfd_cloexec(&self.fd, 0)
                .map_err(|e| Error::io(Op::Descriptor, &self.path, e)),
        }
    }

    /// Makes `background` (mode 0700) if missing and opens it; a link there is refused.
    pub fn ensure_background_dir(&self) -> Result<BackgroundDir, Error> {
        let path = self.path.join(BACKGROUND_DIR);
        match rustix::fs::mkdirat(
            &self.fd,
            BACKGROUND_DIR,
            Mode::from_raw_mode(BACKGROUND_DIR_MODE),
        ) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(Error::io(Op::MakeDir, path, e)),
        }
        self.open_background(path)
    }

    /// Opens `background` if it exists (`None` if not); a link there is refused.
    pub fn open_background_dir(&self) -> Result<Option<BackgroundDir>, Error> {
        match self.open_background(self.path.join(BACKGROUND_DIR)) {
            Ok(dir) => Ok(Some(dir)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn open_background(&self, path: PathBuf) -> Result<BackgroundDir, Error> {
        let fd = rustix::fs::openat(&self.fd, BACKGROUND_DIR, dir_flags(), Mode::empty())
            .map_err(|e| dir_open_error(e, &self.fd, Path::new(BACKGROUND_DIR), path.clone()))?;
        Ok(BackgroundDir { fd, path })
    }
}

impl BackgroundDir {
    /// The folder's path (for messages).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates `<id>.out` empty, for appending (and reading: a rotation copies from it).
    /// Whatever the agent put under that name (a file, a link, a FIFO) is unlinked first; a
    /// folder there is refused.
    pub fn create_output(&self, id: &RunId) -> Result<File, Error> {
        let name = output_file_name(id);
        let flags = OFlags::RDWR | OFlags::APPEND | OFlags::CREATE | OFlags::EXCL;
        match self.open_regular(&name, flags, Op::Create) {
            Err(Error::Io { cause, .. })
                if cause.raw_os_error() == Some(Errno::EXIST.raw_os_error()) => {}
            other => return other,
        }
        self.remove_name(&name)?;
        // A second EEXIST means someone re-created it at once: give up rather than loop.
        self.open_regular(&name, flags, Op::Create)
    }

    /// Opens the existing `<id>.out` for appending (and reading: a rotation copies from it).
    pub fn open_output_for_append(&self, id: &RunId) -> Result<File, Error> {
        let flags = OFlags::RDWR | OFlags::APPEND;
        self.open_regular(&output_file_name(id), flags, Op::Open)
    }

    /// Opens `<id>.out` for reading; `None` if there is none.
    pub fn open_output_for_read(&self, id: &RunId) -> Result<Option<File>, Error> {
        match self.open_regular(&output_file_name(id), OFlags::RDONLY, Op::Open) {
            Ok(file) => Ok(Some(file)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates a rotation's new file, `.tmp-<id>-<random>`, open for reading and writing (not
    /// `O_APPEND`: `copy_file_range` refuses such a target; its writes follow the copy).
    ///
    /// Its name is the run's one rotation name ([`rotation_temp_name`]): whatever is there
    /// already (a rotation cut short, or the agent's) is cleared first ([`Self::clear_name`]).
    pub fn create_rotation_temp(&self, id: &RunId) -> Result<RotationTemp, Error> {
        let name = rotation_temp_name(id)?;
        let flags = OFlags::RDWR | OFlags::CREATE | OFlags::EXCL;
        let file = match self.open_regular(&name, flags, Op::Create) {
            Err(Error::Io { cause, .. })
                if cause.raw_os_error() == Some(Errno::EXIST.raw_os_error()) =>
            {
                self.clear_name(&name, id)?;
                self.open_regular(&name, flags, Op::Create)?
            }
            other => other?,
        };
        Ok(RotationTemp { file, name })
    }

    /// Makes `name` (one of run `id`'s own names in `background/`) free: a file or a link is
    /// unlinked; a folder (which a program in the files folder can plant at a name it can
    /// guess) is moved aside whole, to `.tmp-<id>-moved-<random>`, and left to the agent, so
    /// that no folder there ever stops a run's output. Nothing in it is read or followed.
    fn clear_name(&self, name: &str, id: &RunId) -> Result<(), Error> {
        match self.remove_name(name) {
            Err(e) if e.is_folder() => {}
            other => return other,
        }
        let token = crate::id::random_token(12)?;
        let aside = format!("{}-moved-{token}", crate::layout::rotation_temp_prefix(id));
        rustix::fs::renameat_with(
            &self.fd,
            name,
            &self.fd,
            aside.as_str(),
            rustix::fs::RenameFlags::NOREPLACE,
        )
        .map_err(|e| Error::Rename {
            from: self.path.join(name),
            to: self.path.join(&aside),
            cause: e.into(),
        })?;
        tracing::warn!(
            "a folder stood at {} (a name of the run's own): moved aside to {}",
            self.path.join(name).display(),
            self.path.join(&aside).display()
        );
        Ok(())
    }

    /// Puts a rotation's file in place of `<id>.out`, and gives it back: it is the output file
    /// now.
    ///
    /// The two names are exchanged (`renameat2(RENAME_EXCHANGE)`), then the old file, now under
    /// the temporary name, is unlinked. A reader of `<id>.out` finds a whole file either way,
    /// and the exchange spares the file system the flush some (ext4) make when a rename
    /// replaces an existing file, which under a fast writer halved the throughput. Where the
    /// exchange is not supported, or `<id>.out` is gone, a plain rename over it does the same.
    pub fn install_rotation(&self, temp: RotationTemp, id: &RunId) -> Result<File, Error> {
        let output = output_file_name(id);
        match rustix::fs::renameat_with(
            &self.fd,
            temp.name.as_str(),
            &self.fd,
            output.as_str(),
            rustix::fs::RenameFlags::EXCHANGE,
        ) {
            Ok(()) => {
                // The old output file now has the temporary name; a sweep removes it if this
                // unlink does not happen. (What was at `<id>.out` may have been a folder a
                // program put there: it is moved aside.)
                if let Err(e) = self.clear_name(&temp.name, id)
                    && !e.is_not_found()
                {
                    return Err(e);
                }
            }
            Err(Errno::INVAL | Errno::NOSYS | Errno::NOTSUP | Errno::NOENT) => {
                self.rename_within(&temp.name, &output)?;
            }
            Err(e) => {
                return Err(Error::Rename {
                    from: self.path.join(&temp.name),
                    to: self.path.join(&output),
                    cause: e.into(),
                });
            }
        }
        Ok(temp.file)
    }

    /// Renames `from` to `to` inside this folder; both must be plain names.
    pub fn rename_within(&self, from: &str, to: &str) -> Result<(), Error> {
        check_plain_name(from)?;
        check_plain_name(to)?;
        rustix::fs::renameat(&self.fd, from, &self.fd, to).map_err(|e| Error::Rename {
            from: self.path.join(from),
            to: self.path.join(to),
            cause: e.into(),
        })
    }

    /// Finishes a rotation its supervisor was killed in, between storing the record that names
    /// the new file and renaming it: when `named` (the file the record names) is the file at
    /// run `id`'s rotation name and not the one at `<id>.out`, it is put in place, as the
    /// rotation would have. Whether it was. For a sweep, which holds the run's lock.
    pub fn finish_cut_rotation(&self, id: &RunId, named: FileId) -> Result<bool, Error> {
        let name = rotation_temp_name(id)?;
        let temp = match self.open_regular(&name, OFlags::RDONLY, Op::Open) {
            Ok(file) => file,
            Err(e) if e.is_not_found() => return Ok(false),
            Err(Error::NotRegularFile { .. } | Error::Symlink { .. }) => return Ok(false),
            Err(e) => return Err(e),
        };
        if FileId::of(&temp)? != named {
            return Ok(false);
        }
        if let Ok(Some(out)) = self.open_output_for_read(id)
            && FileId::of(&out)? == named
        {
            return Ok(false);
        }
        self.install_rotation(RotationTemp { file: temp, name }, id)?;
        Ok(true)
    }

    /// Removes `<id>.out` and run `id`'s rotation temporary, by name (the folder is never
    /// read, so removing runs one after another stays linear); whether `<id>.out` existed.
    pub fn remove_output(&self, id: &RunId) -> Result<bool, Error> {
        let existed = match self.remove_name(&output_file_name(id)) {
            Ok(()) => true,
            Err(e) if e.is_not_found() => false,
            Err(e) => return Err(e),
        };
        self.remove_rotation_leftovers(id)?;
        Ok(existed)
    }

    /// Removes run `id`'s rotation temporary (a rotation cut short), by name; how many were
    /// removed (0 or 1). A folder there is a program's, not a rotation's: it is left.
    pub fn remove_rotation_leftovers(&self, id: &RunId) -> Result<usize, Error> {
        match self.remove_name(&rotation_temp_name(id)?) {
            Ok(()) => Ok(1),
            Err(e) if e.is_not_found() || e.is_folder() => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// The folder handle, for calls this type does not offer (always relative to it).
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn remove_name(&self, name: &str) -> Result<(), Error> {
        rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()).map_err(|e| {
            let path = self.path.join(name);
            match e {
                Errno::ISDIR => Error::NotRegularFile {
                    path,
                    kind: FileKind::Directory,
                },
                e => Error::io(Op::Remove, path, e),
            }
        })
    }

    /// Opens plain `name` in this folder as a regular file; see the module docs for the checks.
    fn open_regular(&self, name: &str, flags: OFlags, op: Op) -> Result<File, Error> {
        let path = self.path.join(name);
        let flags = flags | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NOCTTY | OFlags::NONBLOCK;
        let fd = match rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(OUTPUT_MODE)) {
            Ok(fd) => fd,
            // A FIFO opened for writing without a reader, or a socket.
            Err(Errno::NXIO) => {
                let kind = self.kind_of(name).unwrap_or(FileKind::Special);
                return Err(Error::NotRegularFile { path, kind });
            }
            Err(Errno::ISDIR) => {
                return Err(Error::NotRegularFile {
                    path,
                    kind: FileKind::Directory,
                });
            }
            Err(e) => return Err(open_error(e, path, op)),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| Error::io(Op::Stat, &path, e))?;
        let file_type = FileType::from_raw_mode(stat.st_mode);
        if file_type != FileType::RegularFile {
            return Err(Error::NotRegularFile {
                path,
                kind: FileKind::from_file_type(file_type),
            });
        }
        if stat.st_nlink != 1 {
            #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
            let links = stat.st_nlink as u64;
            return Err(Error::HardLinked { path, links });
        }
        let status =
            rustix::fs::fcntl_getfl(&fd).map_err(|e| Error::io(Op::Descriptor, &path, e))?;
        rustix::fs::fcntl_setfl(&fd, status - OFlags::NONBLOCK)
            .map_err(|e| Error::io(Op::Descriptor, &path, e))?;
        Ok(File::from(fd))
    }

    fn kind_of(&self, name: &str) -> Option<FileKind> {
        let stat = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).ok()?;
        Some(FileKind::from_file_type(FileType::from_raw_mode(
            stat.st_mode,
        )))
    }
}

impl RotationTemp {
    /// The temporary's name in the background folder.
    pub fn name(&self) -> &str {
        &self.name
    }
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Turns a failed file open into the typed refusal it stands for.
fn open_error(e: Errno, path: PathBuf, op: Op) -> Error {
    match e {
        // O_NOFOLLOW on a symbolic link.
        Errno::LOOP => Error::Symlink { path },
        e => Error::io(op, path, e),
    }
}

/// Turns a failed folder open into the typed refusal it stands for.
///
/// With `O_DIRECTORY|O_NOFOLLOW`, Linux answers `ENOTDIR` for a symbolic link (even one to a
/// folder) as for a file, so a look at the name itself (not following it) tells which.
fn dir_open_error(e: Errno, dir: impl AsFd, name: &Path, path: PathBuf) -> Error {
    match e {
        Errno::LOOP => Error::Symlink { path },
        Errno::NOTDIR => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::Symlink => {
                Error::Symlink { path }
            }
            _ => Error::NotDirectory { path },
        },
        e => Error::io(Op::Open, path, e),
    }
}

/// A single component: not empty, no `/`, no NUL, not `.` or `..`.
fn check_plain_name(name: &str) -> Result<(), Error> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(Error::BadName { name: shown(name) });
    }
    Ok(())
}
