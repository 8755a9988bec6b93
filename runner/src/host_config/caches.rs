//! `config`'s part of the caches: the recommended line it builds for this machine gets this
//! machine's caches ([`crate::caches::found`]) as `--cache` flags, and the word `{caches}` right
//! after the files folder's bind, so that builds read what the person fetched and write to a
//! layer of each sandbox's own.
//!
//! Only for the recommended line (a line given after `--` is the person's), and only when the
//! person gave no `--cache` of their own (then those are the caches). A cache that serve would
//! refuse (inside `--files`, on the never-list, around the state folder) is left out, as is one
//! inside another.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::sandbox_line::never_list;

/// The flag serve takes a cache folder with.
pub const FLAG: &str = "--cache";

/// Adds this machine's caches to serve's `argv` (its flags, before `--`) and `{caches}` to
/// `sandbox` (the recommended line) after the bind of `files`, unless `argv` names caches
/// already. `home` is the person's home.
pub fn add(argv: &mut Vec<OsString>, sandbox: &mut Vec<OsString>, home: &Path, files: &Path) {
    if argv.iter().any(|word| word == FLAG) {
        return;
    }
    let found = crate::caches::found::on_this_machine(home);
    add_found(
        argv,
        sandbox,
        home,
        files,
        found.into_iter().map(|f| f.path),
    );
}

/// [`add`], with `found` as this machine's caches.
fn add_found(
    argv: &mut Vec<OsString>,
    sandbox: &mut Vec<OsString>,
    home: &Path,
    files: &Path,
    found: impl Iterator<Item = PathBuf>,
) {
    let paths = usable(found, argv, home, files);
    if paths.is_empty() {
        return;
    }
    for path in &paths {
        argv.push(FLAG.into());
        argv.push(path.clone().into_os_string());
    }
    let files = files.as_os_str();
    let after_files = sandbox
        .windows(3)
        .position(|w| w[0] == "--bind" && w[1] == files && w[2] == files)
        .map(|at| at + 3)
        .unwrap_or(sandbox.len());
    sandbox.insert(after_files, crate::sandbox_line::CACHES.into());
}

/// The caches of `found` that serve would take: not inside or holding `files` or the home,
/// away from the never-list and the state folder and keyring `argv` names, and not inside
/// another.
fn usable(
    found: impl Iterator<Item = PathBuf>,
    argv: &[OsString],
    home: &Path,
    files: &Path,
) -> Vec<PathBuf> {
    let named = |flag: &str| {
        argv.windows(2)
            .find(|w| w[0] == flag)
            .map(|w| PathBuf::from(&w[1]))
    };
    let state = named("--state");
    let keyring = named("--keyring");
    let mut others: Vec<(&str, &Path)> = Vec::new();
    if let Some(state) = &state {
        others.push(("the state folder", state));
    }
    if let Some(keyring) = &keyring {
        others.push(("the keyring", keyring));
    }
    let mut kept: Vec<(PathBuf, PathBuf)> = Vec::new();
    for path in found {
        let Ok(real) = path.canonicalize() else {
            continue;
        };
        let refused = [&path, &real].into_iter().any(|form| {
            never_list::overlap(form, files)
                || home.starts_with(form)
                || never_list::touches(form, Some(home), &others).is_some()
        });
        let nested = kept
            .iter()
            .any(|(_, other)| never_list::overlap(other, &real));
        if refused || nested {
            tracing::info!(cache = %path.display(), "a cache left out of the line");
            continue;
        }
        kept.push((path, real));
    }
    kept.into_iter().map(|(path, _)| path).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testing::words;

    #[test]
    fn caches_serve_would_refuse_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        for folder in ["work/cache", "c", "c/inner", ".ssh", "state/cache", "d"] {
            std::fs::create_dir_all(home.join(folder)).unwrap();
        }
        let found = [
            "work/cache",
            "c",
            "c/inner",
            ".ssh",
            "state/cache",
            "d",
            "gone",
        ]
        .iter()
        .map(|p| home.join(p));
        let state = home.join("state");
        let argv = vec![OsString::from("--state"), state.into_os_string()];
        let kept = usable(found, &argv, &home, &home.join("work"));
        assert_eq!(kept, [home.join("c"), home.join("d")]);
    }

    #[test]
    fn the_word_goes_right_after_the_files_bind() {
        let mut argv = words(&["serve", "--files", "/w"]);
        let mut sandbox = words(&["bwrap", "--tmpfs", "/h", "--bind", "/w", "/w", "--x"]);
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        // No caches: nothing is added.
        let none = std::iter::empty();
        add_found(&mut argv, &mut sandbox, &home, Path::new("/w"), none);
        assert_eq!(argv.len(), 3);
        assert_eq!(sandbox.len(), 7);
        // One: its flag, and the word after the files folder's bind.
        std::fs::create_dir_all(home.join(".npm")).unwrap();
        let npm = std::iter::once(home.join(".npm"));
        add_found(&mut argv, &mut sandbox, &home, Path::new("/w"), npm);
        assert!(
            argv.windows(2)
                .any(|w| w[0] == FLAG && w[1] == home.join(".npm")),
            "{argv:?}"
        );
        assert_eq!(sandbox[6], "{caches}", "{sandbox:?}");
        // Caches the person named are theirs: nothing more is added.
        let before = (argv.clone(), sandbox.clone());
        add(&mut argv, &mut sandbox, &home, Path::new("/w"));
        assert_eq!((argv, sandbox), before);
    }
}
