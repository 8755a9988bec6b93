//! The sandbox line as a call runs it: the words after serve's `--`, with the words that stand
//! for something serve knows replaced by it.
//!
//! A line may name the files folder as `{files}` (for instance bubblewrap's `--bind {files}
//! {files}`), so that one line serves whatever folder `--files` names, and the line a host's
//! entry holds does not repeat the folder; the protected paths as `{protected}`
//! ([`protected`]), found for each sandbox made (in `serve`, as last found while nothing they
//! depend on changed); and the cache folders' binds as
//! `{caches}` ([`caches`]). Every use of the sandbox — a call, a warm sandbox started ahead of
//! its call, the sandbox check's probe, a background run's record — takes the line from here,
//! so all of them run the same words.
//!
//! | word | becomes |
//! |---|---|
//! | `{files}` | the files folder |
//! | `{protected}` | read-only binds over the protected paths of the files folder, found for each sandbox ([`protected`]) |
//! | `{caches}` | the binds of the cache folders ([`caches`]): each read-write over the sandbox's own layer, or read-only where the layers cannot be made |
//!
//! Some words name descriptors (`--ro-bind-fd 100 <path>`): an [`Expanded`] line carries them
//! ([`pass::Passed`]), and whatever starts the sandbox hands them on.

mod caches;
pub mod never_list;
pub mod pass;
pub mod protected;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use lnk_common::record::FileId;
use pass::{FIRST_FD, MAX_PASSED, Passed};

/// The word that stands for the files folder.
pub const FILES: &str = "{files}";
pub use caches::CACHES;

/// What a line protects, as found ([`Expanded::protected`]).
pub type Protected = Vec<(PathBuf, protected::Hold, FileId)>;

/// A line as a sandbox runs it, and the descriptors its words name.
#[derive(Debug, Default)]
pub struct Expanded {
    /// The words.
    pub words: Vec<OsString>,
    /// The descriptors, to hand to the process that runs the sandbox program.
    pub passed: Passed,
    /// What the line protects, as found: two lines with the same words protect the same paths
    /// only when these are equal too.
    pub protected: Protected,
}

/// `line` with each word that stands for something replaced: [`FILES`] by `files`,
/// [`protected::PROTECTED`] by the protected paths' binds (found now, placeholders made),
/// [`CACHES`] by the binds of `caches`.
pub fn expand(
    line: &[OsString],
    files: &Path,
    caches: &crate::caches::Caches,
) -> Result<Expanded, String> {
    let mut expanded = Expanded::default();
    for word in line {
        if word == FILES {
            expanded.words.push(files.as_os_str().to_owned());
        } else if word == CACHES {
            expanded.words.extend(caches::binds(caches));
        } else if word == protected::PROTECTED {
            let first = FIRST_FD
                + i32::try_from(expanded.passed.len()).map_err(|_| "too many descriptors")?;
            let protection = protected::expand(files, first)?;
            expanded.words.extend(protection.words);
            expanded.passed.extend(Passed::new(protection.fds));
            expanded.protected.extend(protection.found);
            if expanded.passed.len() > MAX_PASSED {
                return Err(format!(
                    "the sandbox line would bind more than {MAX_PASSED} protected paths; give \
                     a files folder with fewer repositories in it"
                ));
            }
        } else {
            expanded.words.push(word.clone());
        }
    }
    Ok(expanded)
}

/// `line` as a person reads it: [`FILES`] replaced, the other words left as they are (nothing
/// is found or made).
pub fn shown(line: &[OsString], files: &Path) -> Vec<OsString> {
    line.iter()
        .map(|word| {
            if word == FILES {
                files.as_os_str().to_owned()
            } else {
                word.clone()
            }
        })
        .collect()
}

/// Whether `line` holds the word for the protected paths.
pub fn holds_protected(line: &[OsString]) -> bool {
    line.iter().any(|word| word == protected::PROTECTED)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testing::words;

    #[test]
    fn the_files_word_becomes_the_files_folder() {
        let line = words(&[
            "/usr/bin/bwrap",
            "--bind",
            "{files}",
            "{files}",
            "--unshare-all",
        ]);
        assert_eq!(
            expand(&line, Path::new("/home/me/work"), &Default::default())
                .unwrap()
                .words,
            words(&[
                "/usr/bin/bwrap",
                "--bind",
                "/home/me/work",
                "/home/me/work",
                "--unshare-all"
            ])
        );
    }

    #[test]
    fn other_words_stay_as_they_are() {
        // Only the whole word stands for the folder: a word that holds it is the line's own.
        let line = words(&["sb", "{files}/x", "x{files}", "{FILES}", "{protected}x"]);
        let expanded = expand(&line, Path::new("/w"), &Default::default()).unwrap();
        assert_eq!(expanded.words, line);
        assert_eq!(expanded.passed.len(), 0);
        assert_eq!(shown(&line, Path::new("/w")), line);
    }
}
