//! `plant <path>...`: every way a program could change a protected path, tried on each: write
//! it, create in it, truncate it, rename something over it (a file, a folder, a link), swap it
//! with something (`RENAME_EXCHANGE`), remove it, hard-link it and write through the link,
//! write through a symbolic link to it, rename the folder above it, change its mode.
//! `unpin <folder>...`: rename or remove a pinned folder (one whose content stays writable).
//! One line each: `held: …` or `BROKE: …`. The test looks from outside too.

use std::io::Write;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use rustix::fs::{RenameFlags, renameat_with};

use super::{broke, held};

/// What a program writes where it can.
const PAYLOAD: &[u8] = b"#!/bin/sh\ntouch /tmp/planted\n";

pub fn plant(paths: &[String]) {
    for path in paths {
        let path = Path::new(path);
        let Ok(meta) = std::fs::symlink_metadata(path) else {
            // Missing: make it, as a file and as a folder.
            try_it("create the missing", path, std::fs::write(path, PAYLOAD));
            try_it("make the missing folder", path, std::fs::create_dir(path));
            continue;
        };
        if meta.is_dir() {
            folder(path);
        } else {
            file(path);
        }
        common(path, meta.is_dir());
    }
}

fn try_it<T>(way: &str, path: &Path, done: std::io::Result<T>) {
    match done {
        Ok(_) => broke(way, path.display()),
        Err(err) => held(way, format!("{}: {err}", path.display())),
    }
}

fn file(path: &Path) {
    let appended = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(PAYLOAD));
    try_it("write", path, appended);
    let truncated = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path);
    try_it("truncate", path, truncated);
    // A hard link to it, written through.
    let link = beside(path, "hard-link");
    let linked = std::fs::hard_link(path, &link).and_then(|()| {
        std::fs::OpenOptions::new()
            .append(true)
            .open(&link)
            .and_then(|mut f| f.write_all(PAYLOAD))
    });
    let _ = std::fs::remove_file(&link);
    try_it("hard-link and write through the link", path, linked);
}

fn folder(path: &Path) {
    let inside = path.join("planted");
    try_it("create in", path, std::fs::write(&inside, PAYLOAD));
    try_it(
        "make a folder in",
        path,
        std::fs::create_dir(path.join("planted-dir")),
    );
    // What it holds, each entry.
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.filter_map(Result::ok).take(8) {
            let entry = entry.path();
            if entry.is_file() {
                file(&entry);
                try_it("remove from", &entry, std::fs::remove_file(&entry));
            }
        }
    }
}

/// The ways that work on a file or a folder alike.
fn common(path: &Path, is_dir: bool) {
    // Something renamed over it: a file, a folder, a link.
    let other = beside(path, "other");
    let made = if is_dir {
        std::fs::create_dir(&other).and_then(|()| std::fs::write(other.join("x"), PAYLOAD))
    } else {
        std::fs::write(&other, PAYLOAD)
    };
    if made.is_ok() {
        try_it("rename over", path, std::fs::rename(&other, path));
        let swapped = renameat_with(
            rustix::fs::CWD,
            &other,
            rustix::fs::CWD,
            path,
            RenameFlags::EXCHANGE,
        );
        try_it("swap with", path, swapped.map_err(std::io::Error::from));
        let _ = std::fs::remove_dir_all(&other);
        let _ = std::fs::remove_file(&other);
    }
    let link = beside(path, "link");
    if symlink("/etc", &link).is_ok() {
        try_it("rename a link over", path, std::fs::rename(&link, path));
        let _ = std::fs::remove_file(&link);
    }
    // Written through a link to it.
    if symlink(path, &link).is_ok() {
        let target = if is_dir {
            link.join("via-link")
        } else {
            link.clone()
        };
        let written = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&target)
            .and_then(|mut f| f.write_all(PAYLOAD));
        try_it("write through a link to", path, written);
        let _ = std::fs::remove_file(&link);
    }
    let removed = if is_dir {
        std::fs::remove_dir(path)
    } else {
        std::fs::remove_file(path)
    };
    try_it("remove", path, removed);
    let mode = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777));
    try_it("change the mode of", path, mode);
    // The folder above it, moved away (another put in its place would not be protected).
    if let Some(parent) = path.parent()
        && parent
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'))
            | parent.join(".git").exists()
    {
        let moved = with_suffix(parent, ".moved");
        let renamed = std::fs::rename(parent, &moved);
        if renamed.is_ok() {
            let _ = std::fs::rename(&moved, parent);
        }
        try_it("rename the folder above", path, renamed);
    }
}

pub fn unpin(paths: &[String]) {
    for path in paths {
        let path = Path::new(path);
        let moved = with_suffix(path, ".moved");
        let renamed = std::fs::rename(path, &moved);
        if renamed.is_ok() {
            let _ = std::fs::rename(&moved, path);
        }
        try_it("rename the pinned folder", path, renamed);
        let other = beside(path, "other");
        if std::fs::create_dir(&other).is_ok() {
            try_it(
                "rename a folder over the pinned",
                path,
                std::fs::rename(&other, path),
            );
            let _ = std::fs::remove_dir(&other);
        }
        try_it("remove the pinned folder", path, std::fs::remove_dir(path));
    }
}

/// A name beside `path`, in its folder.
fn beside(path: &Path, what: &str) -> PathBuf {
    with_suffix(path, &format!(".{what}-{}", std::process::id()))
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}
