//! A test's world for the cache layers: a test folder with `files/` and `state/`, and two cache
//! folders of a user's (`home/.cargo/registry` and `home/go/pkg/mod`, the second read-only as
//! Go's module cache is) filled with files, links, an executable and nested folders; serve
//! with `--cache` for both and the recommended line with `{caches}` after the files folder's
//! bind; and a snapshot of a folder that tells a byte, a name, a mode or a time changed.
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::setup::ServeBuilder;

/// `nobody`.
pub const NOBODY: u32 = 65534;

/// The users a test runs serve as: root, and `nobody` when the tests can become it.
pub fn users() -> Vec<Option<u32>> {
    if rustix::process::geteuid().is_root() {
        vec![None, Some(NOBODY)]
    } else {
        eprintln!("note: not root, so serve runs only as this user (no `nobody` half)");
        vec![None]
    }
}

/// The test folder, its two caches and the user serve runs as.
pub struct World {
    /// The folder: `files/`, `state/`, `home/`.
    pub bg: Bg,
    /// The first cache: a registry-like tree.
    pub registry: PathBuf,
    /// The second cache: read-only folders and files, as Go's module cache.
    pub modcache: PathBuf,
    /// The user serve runs as (`None`: this process's).
    pub user: Option<u32>,
}

impl World {
    /// A world with both caches filled, owned by `user`.
    pub fn new(user: Option<u32>) -> World {
        let bg = Bg::new(Sandbox::Bwrap);
        let root = bg.setup.root.path().to_path_buf();
        let home = root.join("home");
        let registry = home.join(".cargo/registry");
        let modcache = home.join("go/pkg/mod");
        fill_registry(&registry);
        fill_modcache(&modcache);
        if let Some(uid) = user {
            std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
            chown_all(&root, uid);
        }
        World {
            bg,
            registry,
            modcache,
            user,
        }
    }

    /// The caches as `--cache` flags.
    pub fn cache_flags(&self) -> Vec<String> {
        [&self.registry, &self.modcache]
            .into_iter()
            .flat_map(|cache| ["--cache".to_owned(), path_str(cache)])
            .collect()
    }

    /// serve with the state folder, both caches and `line`, as the world's user, allowing `sh`.
    pub fn serve(&self, line: Vec<String>) -> ServeBuilder<'_> {
        let flags = self.cache_flags();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let mut builder = self
            .bg
            .serve(&Flags::default())
            .flags(&flags)
            .programs(&["sh"])
            .sandbox(line);
        if let Some(uid) = self.user {
            builder = builder.run_as(uid);
        }
        builder
    }

    /// The README's recommended line with `{caches}` right after the files folder's bind.
    pub fn line(&self) -> Vec<String> {
        with_caches(
            lnk_tests::readme::recommended_sandbox(self.files(), &[]),
            self.files(),
        )
    }

    /// The files folder.
    pub fn files(&self) -> &Path {
        &self.bg.setup.files
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // Read-only folders, as Go leaves them, would keep the test's folder from going.
        writable_again(&self.modcache);
    }
}

/// `line` with `{caches}` right after the bind of `files`.
pub fn with_caches(mut line: Vec<String>, files: &Path) -> Vec<String> {
    let files = path_str(files);
    let at = line
        .windows(3)
        .position(|w| w[0] == "--bind" && w[1] == files && w[2] == files)
        .unwrap_or_else(|| panic!("the line binds {files}: {line:?}"));
    line.insert(at + 3, "{caches}".to_owned());
    line
}

fn write(path: &Path, text: &str, mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A registry-like tree: sources in nested folders, a file to remove, one to rename, an
/// executable, a link, a folder to remove.
fn fill_registry(cache: &Path) {
    write(
        &cache.join("src/dep-0.1.0/Cargo.toml"),
        "[package]\nname = \"dep\"\n",
        0o644,
    );
    write(
        &cache.join("src/dep-0.1.0/src/lib.rs"),
        "pub fn dep() {}\n",
        0o644,
    );
    write(&cache.join("src/old-0.0.1/lib.rs"), "old\n", 0o644);
    write(
        &cache.join("cache/dep-0.1.0.crate"),
        &"\u{1}crate".repeat(512),
        0o644,
    );
    write(&cache.join("remove-me"), "remove me\n", 0o644);
    write(&cache.join("rename-me"), "rename me\n", 0o600);
    write(&cache.join("bin/tool"), "#!/bin/sh\necho tool\n", 0o755);
    std::os::unix::fs::symlink("src/dep-0.1.0/src/lib.rs", cache.join("lib-link")).unwrap();
}

/// A module-cache-like tree: every folder and file read-only, as Go leaves them.
fn fill_modcache(cache: &Path) {
    write(
        &cache.join("example/m@v1.0.0/go.mod"),
        "module example/m\n",
        0o444,
    );
    write(&cache.join("example/m@v1.0.0/m.go"), "package m\n", 0o444);
    for dir in ["example/m@v1.0.0", "example"] {
        std::fs::set_permissions(cache.join(dir), std::fs::Permissions::from_mode(0o555)).unwrap();
    }
}

/// Gives `path` and everything below it to `uid` (and the group of the same number).
pub fn chown_all(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid)).unwrap();
    if path.is_dir() && !path.is_symlink() {
        for entry in std::fs::read_dir(path).unwrap() {
            chown_all(&entry.unwrap().path(), uid);
        }
    }
}

/// Gives back write permission below `path` (as the owner), so the test's folder can be removed.
fn writable_again(path: &Path) {
    for entry in walk(path) {
        let meta = entry.symlink_metadata().unwrap();
        if meta.is_dir() {
            let _ = std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755));
        }
    }
}

/// `path` and everything below it, parents before children.
fn walk(path: &Path) -> Vec<PathBuf> {
    let mut all = vec![path.to_path_buf()];
    let mut at = 0;
    while at < all.len() {
        let here = all[at].clone();
        at += 1;
        let Ok(meta) = here.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(&here)
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            entries.sort();
            all.extend(entries);
        }
    }
    all
}

/// What a folder holds, to the byte: for `path` and each entry below it, its kind, mode,
/// owner, size, modification and change times, and its bytes (a file's) or target (a link's).
pub type Snapshot = BTreeMap<PathBuf, String>;

/// The snapshot of `path`.
pub fn snapshot(path: &Path) -> Snapshot {
    walk(path)
        .into_iter()
        .map(|entry| {
            let meta = entry.symlink_metadata().unwrap();
            let what = if meta.is_file() {
                format!("file {:?}", std::fs::read(&entry).unwrap())
            } else if meta.is_symlink() {
                format!("link {:?}", std::fs::read_link(&entry).unwrap())
            } else {
                "folder".to_owned()
            };
            let line = format!(
                "{what} mode {:o} owner {}:{} size {} mtime {}.{} ctime {}.{}",
                meta.mode(),
                meta.uid(),
                meta.gid(),
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec()
            );
            (entry.strip_prefix(path).unwrap().to_path_buf(), line)
        })
        .collect()
}

/// Fails, naming what changed, unless `now` is `before`.
pub fn assert_unchanged(before: &Snapshot, now: &Snapshot, what: &str) {
    if before == now {
        return;
    }
    let mut changes = Vec::new();
    for (path, line) in before {
        match now.get(path) {
            None => changes.push(format!("gone: {path:?}")),
            Some(other) if other != line => changes.push(format!("changed: {path:?}: {other}")),
            Some(_) => {}
        }
    }
    for path in now.keys().filter(|p| !before.contains_key(*p)) {
        changes.push(format!("new: {path:?}"));
    }
    panic!("{what}: the user's cache changed:\n{}", changes.join("\n"));
}
