//! What the last search of a files folder found, kept for the next sandbox while nothing it
//! looked at has changed: in `serve`, every call and every spare needs the protected paths,
//! and a search walks three levels of folders and opens each path (about 2 ms for a small
//! project, 80 ms for 5,000 folders). Kept only in `serve` ([`keep_across_sandboxes`]); a
//! process that makes one sandbox searches once.
//!
//! A search is kept only when every folder it looked in is watched from before it looked
//! ([`super::folder_watches`]) and it followed no path by its text (a `gitdir:` file, a `commondir`,
//! a `core.hooksPath` or an include, a hook that is a symbolic link: where those lead may
//! change in folders no watch covers). A folder whose folders could not all be watched is not
//! watched again: each sandbox searches it afresh, as before. Before a kept search is used, its watches are read: any
//! event since is a change, and the folder is searched afresh (placeholders made, watches set
//! anew). So a protected path that a program made (a repository's `.git/config` or
//! `.git/hooks`, nested or not) is in the very next sandbox, as with a search for each.
//!
//! What is kept is the handles the search opened (`O_PATH`), each sandbox getting copies:
//! a kept handle is the very file it was, and a file renamed or replaced is a change.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::folder_watches::Watches;
use super::scan::{self, Bound};
use crate::sync::lock;

/// Whether searches are kept (in `serve`).
static KEEP: AtomicBool = AtomicBool::new(false);

/// The last search kept: its folder, its watches, what it found.
#[derive(Debug)]
struct Kept {
    files: PathBuf,
    watches: Watches,
    bound: Arc<Vec<Bound>>,
}

/// Kept searches: one, the last.
#[derive(Debug, Default)]
struct Cache {
    kept: Mutex<Option<Kept>>,
    /// A files folder whose folders could not all be watched (too many, or the user's inotify
    /// limits): searched without watches from then on, for each sandbox.
    unwatched: Mutex<Option<PathBuf>>,
}

/// `serve`'s.
static CACHE: Cache = Cache {
    kept: Mutex::new(None),
    unwatched: Mutex::new(None),
};

/// From now on, a search of a files folder is kept for the next sandbox while nothing it
/// looked at changed.
pub fn keep_across_sandboxes() {
    KEEP.store(true, Ordering::SeqCst);
}

/// What to bind in the files folder `files` (canonical), parents before what they hold: the
/// kept search when nothing changed since, else a new one (its placeholders made and written
/// down for the clean-up).
pub fn found(files: &Path) -> Result<Arc<Vec<Bound>>, String> {
    CACHE.found(files, KEEP.load(Ordering::SeqCst))
}

impl Cache {
    /// [`found`], keeping the search when `keep`.
    fn found(&self, files: &Path, keep: bool) -> Result<Arc<Vec<Bound>>, String> {
        if keep {
            let mut kept = lock(&self.kept);
            if let Some(last) = kept.as_ref()
                && last.files == files
                && !last.watches.changed()
                && !scan::user_names_hooks()
            {
                return Ok(Arc::clone(&last.bound));
            }
            // Changed (or another folder): searched afresh below, outside the lock, so that
            // a call never waits for another's search.
            *kept = None;
        }
        let watched = keep && lock(&self.unwatched).as_deref() != Some(files);
        let watches = if watched { Watches::new() } else { None };
        let found = scan::scan(files, watches.as_ref())?;
        super::lifetime::record(files, &found.made);
        let bound = Arc::new(found.bound);
        if let Some(watches) = &watches
            && !watches.whole()
        {
            *lock(&self.unwatched) = Some(files.to_path_buf());
        }
        if let Some(watches) = watches
            && found.keepable
            && watches.whole()
        {
            *lock(&self.kept) = Some(Kept {
                files: files.to_path_buf(),
                watches,
                bound: Arc::clone(&bound),
            });
        }
        Ok(bound)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::path::Path;

    use super::*;
    use crate::sandbox_line::protected::scan::Hold;

    fn folder() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().canonicalize().unwrap();
        (dir, files)
    }

    fn read_only(found: &[Bound], rel: &str) -> bool {
        found
            .iter()
            .any(|b| b.rel == Path::new(rel) && b.hold == Hold::ReadOnly)
    }

    /// Searches until one is kept (the first makes placeholders, a change its own watches see).
    fn kept(cache: &Cache, files: &Path) -> Arc<Vec<Bound>> {
        for _ in 0..3 {
            let first = cache.found(files, true).unwrap();
            let again = cache.found(files, true).unwrap();
            if Arc::ptr_eq(&first, &again) {
                return again;
            }
        }
        panic!("no search of {} was kept", files.display());
    }

    #[test]
    fn a_repository_planted_since_is_protected_by_the_very_next_search() {
        let (_dir, files) = folder();
        let cache = Cache::default();
        for nested in ["mine", "a/b/deep"] {
            let before = kept(&cache, &files);
            assert!(!read_only(&before, &format!("{nested}/.git/config")));
            // What a program of the last call did: a repository with neither hooks nor config.
            std::fs::create_dir_all(files.join(nested).join(".git")).unwrap();
            std::fs::write(
                files.join(nested).join(".git/HEAD"),
                "ref: refs/heads/main\n",
            )
            .unwrap();
            let next = cache.found(&files, true).unwrap();
            assert!(!Arc::ptr_eq(&before, &next), "{nested}: searched again");
            for part in ["config", "hooks"] {
                let rel = format!("{nested}/.git/{part}");
                assert!(read_only(&next, &rel), "{rel} is held: {next:?}");
                assert!(files.join(&rel).exists(), "{rel}'s placeholder");
            }
        }
        // A hook's text changed by the user's git, in a kept repository's git folder: searched
        // again too (the search reads the configuration).
        let before = kept(&cache, &files);
        std::fs::write(files.join("mine/.git/config"), "[core]\n").unwrap();
        let next = cache.found(&files, true).unwrap();
        assert!(!Arc::ptr_eq(&before, &next));
    }

    #[test]
    fn a_search_that_follows_a_configured_path_is_never_kept() {
        let (_dir, files) = folder();
        std::fs::create_dir_all(files.join("mine/.git")).unwrap();
        std::fs::write(files.join("mine/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            files.join("mine/.git/config"),
            "[core]\n\thooksPath = ../hooks-here\n",
        )
        .unwrap();
        let cache = Cache::default();
        let mut last = cache.found(&files, true).unwrap();
        for _ in 0..3 {
            let next = cache.found(&files, true).unwrap();
            assert!(!Arc::ptr_eq(&last, &next), "searched for each sandbox");
            assert!(read_only(&next, "hooks-here"), "{next:?}");
            last = next;
        }
    }

    #[test]
    fn without_keeping_every_search_is_new() {
        let (_dir, files) = folder();
        let cache = Cache::default();
        let first = cache.found(&files, false).unwrap();
        let again = cache.found(&files, false).unwrap();
        assert!(!Arc::ptr_eq(&first, &again));
    }
}
