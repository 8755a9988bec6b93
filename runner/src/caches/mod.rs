//! The cache folders serve was given (`--cache`): tools' caches that programs read, so that what
//! the user fetched builds offline, and whose writes go to a layer of the sandbox's own
//! ([`lnk_proc::reaper::layers`]), never into the user's folder.
//!
//! Whether the layers can be made on this machine is tried once, at start ([`Caches::new`]).
//! Where they cannot (a kernel or a policy that forbids a user namespace, or an overlay in one),
//! a cache is never bound read-write: the sandbox line's `{caches}` binds each folder read-only,
//! serve says so once, and writes into a cache fail inside (a build that needs them fails).
//! Where they can, every sandbox gets layers of its own, and one whose layers then cannot be
//! made (a folder removed since) does not start.
//!
//! [`found`] finds this machine's caches, from the tools' own settings.

pub mod found;

use std::path::{Path, PathBuf};

/// One cache folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheFolder {
    /// The folder as given (absolute, without `.` or `..`): where programs look for it, and
    /// where the sandbox shows it.
    pub path: PathBuf,
    /// The folder as it really is (links resolved): where the layer is made.
    pub real: PathBuf,
}

/// The cache folders, and whether their layers can be made here.
#[derive(Debug, Clone, Default)]
pub struct Caches {
    /// The folders, in the order given.
    pub folders: Vec<CacheFolder>,
    /// Why the layers cannot be made here, when they cannot: the folders are then bound
    /// read-only.
    pub unlayered: Option<String>,
}

impl Caches {
    /// The caches of `folders`, their layers tried once here (a child that makes them in
    /// namespaces of its own and ends: nothing of the user's is touched).
    pub fn new(folders: Vec<CacheFolder>) -> Caches {
        if folders.is_empty() {
            return Caches::default();
        }
        let real: Vec<PathBuf> = folders.iter().map(|f| f.real.clone()).collect();
        let unlayered = lnk_proc::reaper::layers::can_make(&real).err();
        Caches { folders, unlayered }
    }

    /// The folders whose layers every sandbox makes (as they really are): all of them when
    /// the layers can be made here, else none.
    pub fn layers(&self) -> Vec<PathBuf> {
        if self.unlayered.is_some() {
            return Vec::new();
        }
        self.folders.iter().map(|f| f.real.clone()).collect()
    }

    /// What serve says once when the folders are bound read-only.
    pub fn warning(&self) -> Option<String> {
        let why = self.unlayered.as_ref()?;
        let folders: Vec<String> = self
            .folders
            .iter()
            .map(|f| f.path.display().to_string())
            .collect();
        Some(format!(
            "{why}; the cache folders ({}) are bound read-only instead, so programs read them \
             but cannot write them (a build that writes to its cache fails). A kernel or \
             policy that allows unprivileged user namespaces (for AppArmor, \
             kernel.apparmor_restrict_unprivileged_userns=0, or a profile for lnk-link-run and \
             lnk-link-supervise) gives each sandbox a layer of its own",
            folders.join(", ")
        ))
    }

    /// Whether `path` is one of the folders (as given or as it is).
    pub fn holds(&self, path: &Path) -> bool {
        self.folders
            .iter()
            .any(|f| f.path == path || f.real == path)
    }
}
