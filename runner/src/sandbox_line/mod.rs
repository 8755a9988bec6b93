//! The sandbox line as a call runs it: the words after serve's `--`, with the words that stand
//! for something serve knows replaced by it.
//!
//! A line may name the files folder as `{files}` (for instance bubblewrap's `--bind {files}
//! {files}`), so that one line serves whatever folder `--files` names, and the line a host's
//! entry holds does not repeat the folder. Every use of the sandbox — a call, a warm sandbox
//! started ahead of its call, the sandbox check's probe, a background run's record — takes the
//! line from here, so all of them run the same words.

use std::ffi::OsString;
use std::path::Path;

/// The word that stands for the files folder.
pub const FILES: &str = "{files}";

/// `line` with each word that stands for something replaced: [`FILES`] by `files`.
pub fn expand(line: &[OsString], files: &Path) -> Vec<OsString> {
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
            expand(&line, Path::new("/home/me/work")),
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
        assert_eq!(expand(&line, Path::new("/w")), line);
    }
}
