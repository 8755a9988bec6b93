//! The sandbox line as a call runs it: the words after serve's `--`, with the words that stand
//! for something serve knows replaced by it.
//!
//! A line may name the files folder as `{files}` (for instance bubblewrap's `--bind {files}
//! {files}`), so that one line serves whatever folder `--files` names, and the line a host's
//! entry holds does not repeat the folder. Every use of the sandbox — a call, a warm sandbox
//! started ahead of its call, the sandbox check's probe, a background run's record — takes the
//! line from here, so all of them run the same words.
//!
//! | word | becomes |
//! |---|---|
//! | `{files}` | the files folder |
//! | `{caches}` | the binds of the cache folders ([`caches`]): each read-write over the sandbox's own layer, or read-only where the layers cannot be made |

mod caches;

use std::ffi::OsString;
use std::path::Path;

/// The word that stands for the files folder.
pub const FILES: &str = "{files}";
pub use caches::CACHES;

/// `line` with each word that stands for something replaced: [`FILES`] by `files`, [`CACHES`]
/// by the binds of `caches`.
pub fn expand(line: &[OsString], files: &Path, caches: &crate::caches::Caches) -> Vec<OsString> {
    let mut out = Vec::with_capacity(line.len());
    for word in line {
        if word == FILES {
            out.push(files.as_os_str().to_owned());
        } else if word == CACHES {
            out.extend(caches::binds(caches));
        } else {
            out.push(word.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(w: &[&str]) -> Vec<OsString> {
        w.iter().map(OsString::from).collect()
    }

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
            expand(&line, Path::new("/home/me/work"), &Default::default()),
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
        let line = words(&["sb", "{files}/x", "x{files}", "{FILES}"]);
        assert_eq!(expand(&line, Path::new("/w"), &Default::default()), line);
    }
}
