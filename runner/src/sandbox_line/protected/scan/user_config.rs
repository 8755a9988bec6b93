//! The `core.hooksPath` of the user's own git configuration (the system's, the global one, and
//! the files they include). A relative one (`.githooks`) is taken by git relative to the top
//! of each repository's working tree, and one that names a folder inside the files folder is
//! as much the user's git's to run as a repository's own: held read-only like it. Without this,
//! a program writes `.githooks/pre-commit` and the user's next `git commit` runs it.

use std::io::Read;
use std::path::{Path, PathBuf};

use super::git_config::{expand_home, named_paths};

/// The most of a configuration file read.
const MAX_CONFIG: u64 = 1 << 20;
/// How deep includes are followed (git's own limit is 10).
const MAX_DEPTH: usize = 10;
/// How many files are read in all.
const MAX_FILES: usize = 32;

/// The `core.hooksPath` values of the user's configuration, `~` expanded: the system's file,
/// then the global ones, each followed by those of the files it includes.
pub(super) fn user_hooks_paths() -> Vec<String> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let home = var("HOME").map(PathBuf::from);
    let mut files = Vec::new();
    match var("GIT_CONFIG_SYSTEM") {
        Some(system) => files.push(PathBuf::from(system)),
        None if var("GIT_CONFIG_NOSYSTEM").is_none() => {
            files.extend(["/etc/gitconfig", "/usr/local/etc/gitconfig"].map(PathBuf::from));
        }
        None => {}
    }
    match var("GIT_CONFIG_GLOBAL") {
        Some(global) => files.push(PathBuf::from(global)),
        None => {
            let xdg = var("XDG_CONFIG_HOME")
                .map(PathBuf::from)
                .or_else(|| home.as_ref().map(|h| h.join(".config")));
            files.extend(xdg.map(|x| x.join("git/config")));
            files.extend(home.as_ref().map(|h| h.join(".gitconfig")));
        }
    }
    let mut hooks = Vec::new();
    let mut read = 0;
    for file in files {
        collect(&file, home.as_deref(), 0, &mut read, &mut hooks);
    }
    hooks
}

/// Adds the hooks paths of `file` and of what it includes.
fn collect(
    file: &Path,
    home: Option<&Path>,
    depth: usize,
    read: &mut usize,
    hooks: &mut Vec<String>,
) {
    if depth > MAX_DEPTH || *read >= MAX_FILES {
        return;
    }
    let Ok(opened) = std::fs::File::open(file) else {
        return;
    };
    *read += 1;
    let mut text = Vec::new();
    if opened.take(MAX_CONFIG).read_to_end(&mut text).is_err() {
        return;
    }
    let (found, includes) = named_paths(&String::from_utf8_lossy(&text));
    for hook in found {
        hooks.extend(expand_home(&hook, home));
    }
    let folder = file.parent().unwrap_or(Path::new("/"));
    for include in includes {
        let Some(path) = expand_home(&include, home) else {
            continue;
        };
        collect(&folder.join(path), home, depth + 1, read, hooks);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_hooks_path_of_an_included_file_counts() {
        let dir = tempfile::tempdir().unwrap();
        let main = dir.path().join("main");
        std::fs::write(
            &main,
            "[include]\n\tpath = more\n[core]\n\thooksPath = .githooks\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("more"), "[core]\n\thooksPath = ~/hooks\n").unwrap();
        let mut hooks = Vec::new();
        collect(&main, Some(Path::new("/h")), 0, &mut 0, &mut hooks);
        assert_eq!(hooks, [".githooks", "/h/hooks"]);
    }
}
