//! `{protected}`: the protected paths of the files folder, held read-only in each sandbox
//! made (a cold call's, a spare's, the check's probe, a background run's), so that nothing a
//! program writes there runs outside the sandbox later: the repository's configuration and
//! hooks (the user's `git status` obeys `core.fsmonitor`), a host's or an editor's project
//! settings, and the others of [`names`].
//!
//! The word becomes bubblewrap's binds, found for each sandbox ([`scan`]; in `serve`, the last
//! search kept while the folders it looked in show no change, [`kept_search`]): each
//! protected path bound over itself read-only, each folder above a nested repository and each
//! repository's git folder bound over itself writable (so that none can be renamed and another
//! put in its place), and for each missing name a placeholder made first. Every bind names a
//! descriptor (`--ro-bind-fd <n> <path>`), which the process that starts the sandbox holds
//! ([`super::pass`]), never a path bubblewrap would resolve again. The placeholders are removed
//! when the last process making sandboxes for the folder ends ([`lifetime`]).

mod folder_watches;
mod kept_search;
mod lifetime;
mod mounts;
pub mod names;
mod scan;

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use lnk_common::record::FileId;

pub use kept_search::keep_across_sandboxes;
pub use lifetime::{leave, run_started};
pub use scan::Hold;

/// The word that stands for the protected paths' binds.
pub const PROTECTED: &str = "{protected}";

/// The binds of one sandbox, with the descriptors they name.
#[derive(Debug)]
pub struct Protection {
    /// bubblewrap's words.
    pub words: Vec<OsString>,
    /// The descriptors, in the order their numbers go.
    pub fds: Vec<OwnedFd>,
    /// What is bound, as it was found: two sandboxes protect the same when these are equal.
    pub found: Vec<(PathBuf, Hold, FileId)>,
}

/// The binds for the files folder `files` (canonical), their descriptors numbered from
/// `first_fd`: found now (or, in `serve`, as last found when nothing changed since:
/// [`kept_search`]), the placeholders made.
pub fn expand(files: &Path, first_fd: i32) -> Result<Protection, String> {
    lifetime::hold(files)?;
    let found = kept_search::found(files)?;
    let mut protection = Protection {
        words: Vec::new(),
        fds: Vec::new(),
        found: Vec::new(),
    };
    for (i, bound) in found.iter().enumerate() {
        let number = i32::try_from(i)
            .ok()
            .and_then(|i| first_fd.checked_add(i))
            .ok_or("too many protected paths")?;
        let flag = match bound.hold {
            Hold::Pin => "--bind-fd",
            Hold::ReadOnly => "--ro-bind-fd",
        };
        protection.words.extend([
            OsString::from(flag),
            OsString::from(number.to_string()),
            files.join(&bound.rel).into_os_string(),
        ]);
        let fd = bound.fd.try_clone().map_err(|e| {
            format!(
                "cannot hold {} for the sandbox: {e}",
                files.join(&bound.rel).display()
            )
        })?;
        protection
            .found
            .push((bound.rel.clone(), bound.hold, bound.id));
        protection.fds.push(fd);
    }
    Ok(protection)
}
