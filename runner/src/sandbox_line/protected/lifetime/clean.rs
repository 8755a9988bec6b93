//! The clean-up: the list of placeholders made, and their removal when unused.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use lnk_common::record::FileId;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{Lease, Made, Placeholder, mounts, run_starting};

/// One line of the list: kind, device, inode, the path (relative, in hex).
pub(super) fn line(made: &Made) -> String {
    let kind = match made.kind {
        Placeholder::File => 'f',
        _ => 'd',
    };
    format!(
        "{kind} {} {} {}\n",
        made.id.dev,
        made.id.ino,
        hex::encode(made.rel.as_os_str().as_bytes())
    )
}

pub(super) fn parse(line: &str) -> Option<Made> {
    let mut words = line.split(' ');
    let kind = match words.next()? {
        "f" => Placeholder::File,
        "d" => Placeholder::Folder,
        _ => return None,
    };
    let dev = words.next()?.parse().ok()?;
    let ino = words.next()?.parse().ok()?;
    let rel = hex::decode(words.next()?).ok()?;
    Some(Made {
        rel: PathBuf::from(<std::ffi::OsString as std::os::unix::ffi::OsStringExt>::from_vec(rel)),
        kind,
        id: FileId { dev, ino },
    })
}

/// Removes the listed placeholders that are unused, under the exclusive lock; keeps the others
/// listed.
pub(super) fn clean_up(lease: &Lease) {
    if run_starting(lease) {
        tracing::debug!("a background run may still be starting: placeholders left for later");
        return;
    }
    let mut text = String::new();
    if let Ok(fd) = rustix::fs::openat(
        &lease.dir,
        lease.list(),
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        let _ = std::fs::File::from(fd)
            .take(16 << 20)
            .read_to_string(&mut text);
    }
    let mut listed: Vec<Made> = text.lines().filter_map(parse).collect();
    // What a placeholder holds goes before it (a `workflows` in a `.github` made for it).
    listed.sort_by_key(|made| std::cmp::Reverse(made.rel.components().count()));
    listed.dedup();
    let Ok(root) = rustix::fs::open(
        &lease.files,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        // The folder is gone: so are its placeholders.
        write_list(lease, &[]);
        return;
    };
    // What is gone or was replaced is no placeholder of ours any more.
    let present: Vec<&Made> = listed
        .iter()
        .filter(|made| still_there(root.as_fd(), made))
        .collect();
    let paths: HashSet<PathBuf> = present.iter().map(|m| lease.files.join(&m.rel)).collect();
    let used = mounts::in_use(&paths);
    let mut kept = Vec::new();
    for made in present {
        let removed = !used.contains(&lease.files.join(&made.rel))
            && is_empty(root.as_fd(), made)
            && remove(root.as_fd(), made);
        if !removed {
            kept.push(made.clone());
        }
    }
    write_list(lease, &kept);
}

/// Whether `made` is still there: the same file (identity), of the same kind (an inode number
/// reused for the user's file in its place is not the placeholder).
fn still_there(root: BorrowedFd<'_>, made: &Made) -> bool {
    let Some((parent, name)) = parent_of(root, &made.rel) else {
        return false;
    };
    rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW).is_ok_and(|stat| {
        let kind = match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => Placeholder::Folder,
            FileType::RegularFile => Placeholder::File,
            _ => Placeholder::None,
        };
        FileId::from_stat(&stat) == made.id && kind == made.kind
    })
}

/// Whether `made` holds nothing (what the user put in it makes it theirs).
fn is_empty(root: BorrowedFd<'_>, made: &Made) -> bool {
    let Some((parent, name)) = parent_of(root, &made.rel) else {
        return false;
    };
    let Ok(stat) = rustix::fs::statat(&parent, name, AtFlags::SYMLINK_NOFOLLOW) else {
        return false;
    };
    match (made.kind, FileType::from_raw_mode(stat.st_mode)) {
        (Placeholder::File, FileType::RegularFile) => stat.st_size == 0,
        (Placeholder::Folder, FileType::Directory) => is_empty_folder(parent.as_fd(), name),
        _ => false,
    }
}

fn is_empty_folder(parent: BorrowedFd<'_>, name: &std::ffi::OsStr) -> bool {
    let Ok(fd) = rustix::fs::openat(
        parent,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    let Ok(dir) = rustix::fs::Dir::new(fd) else {
        return false;
    };
    dir.filter_map(Result::ok)
        .all(|e| matches!(e.file_name().to_bytes(), b"." | b".."))
}

/// Removes a placeholder. A folder goes with `rmdir`, which fails should something have been
/// put in it. A file is first renamed aside and checked there, so that a file the user put in
/// its place a moment ago is put back rather than removed.
fn remove(root: BorrowedFd<'_>, made: &Made) -> bool {
    let Some((parent, name)) = parent_of(root, &made.rel) else {
        return false;
    };
    if made.kind == Placeholder::Folder {
        return rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR).is_ok();
    }
    let mut aside = std::ffi::OsString::from(".lnk-placeholder-");
    aside.push(hex::encode(made.id.ino.to_le_bytes()));
    if rustix::fs::renameat_with(
        &parent,
        name,
        &parent,
        &aside,
        rustix::fs::RenameFlags::NOREPLACE,
    )
    .is_err()
    {
        return false;
    }
    let ours = rustix::fs::statat(&parent, &aside, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|s| FileId::from_stat(&s) == made.id && s.st_size == 0);
    if ours {
        return rustix::fs::unlinkat(&parent, &aside, AtFlags::empty()).is_ok();
    }
    let _ = rustix::fs::renameat_with(
        &parent,
        &aside,
        &parent,
        name,
        rustix::fs::RenameFlags::NOREPLACE,
    );
    false
}

/// The folder holding `rel` (opened from `root` without following links) and its last name.
fn parent_of<'a>(root: BorrowedFd<'_>, rel: &'a Path) -> Option<(OwnedFd, &'a std::ffi::OsStr)> {
    let name = rel.file_name()?;
    let mut fd =
        rustix::fs::openat(root, ".", OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).ok()?;
    for part in rel.parent()?.components() {
        fd = rustix::fs::openat(
            &fd,
            part.as_os_str(),
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok()?;
    }
    Some((fd, name))
}

fn write_list(lease: &Lease, kept: &[Made]) {
    let text: String = kept.iter().map(line).collect();
    let temporary = format!("{}.{}.tmp", lease.list(), std::process::id());
    let written = rustix::fs::openat(
        &lease.dir,
        &temporary,
        OFlags::WRONLY | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .map_err(std::io::Error::from)
    .and_then(|fd| std::fs::File::from(fd).write_all(text.as_bytes()))
    .and_then(|()| {
        rustix::fs::renameat(&lease.dir, &temporary, &lease.dir, lease.list())
            .map_err(std::io::Error::from)
    });
    if let Err(err) = written {
        let _ = rustix::fs::unlinkat(&lease.dir, &temporary, AtFlags::empty());
        tracing::warn!("cannot rewrite the list of placeholders: {err}");
    }
}
