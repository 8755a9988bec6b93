//! The machine's part for a made-up home: the home's tmpfs first and the files folder's bind
//! after it, what is shown, the environment, `--read` and the never-list.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::*;

/// A home with a files folder in it, and serve's flags over it checked into a `Config`.
struct Home {
    _dir: tempfile::TempDir,
    home: PathBuf,
}

impl Home {
    fn new() -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap().join("home");
        std::fs::create_dir_all(home.join("work")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::fs::write(home.join(".ssh/id_ed25519"), "secret").unwrap();
        std::fs::write(home.join(".gitconfig"), "[user]\n\tname = Me\n").unwrap();
        Home { _dir: dir, home }
    }

    fn config(&self, files: &Path, extra: &[&str]) -> Config {
        let mut argv: Vec<OsString> = ["serve", "--files"]
            .into_iter()
            .map(OsString::from)
            .collect();
        argv.push(files.as_os_str().to_owned());
        argv.extend(
            [
                "--programs-path",
                "/usr/bin:/bin",
                "--timeout",
                "1s",
                "--output",
                "1KiB",
                "--program",
                "sh",
            ]
            .into_iter()
            .chain(extra.iter().copied())
            .chain(["--", "/usr/bin/env"])
            .map(OsString::from),
        );
        crate::cli::check_serve_line(&argv).unwrap().0
    }

    fn build(&self, files: &Path, reads: &[PathBuf], force: bool) -> Result<MachinePart, String> {
        let env: BTreeMap<String, OsString> = [
            ("PATH", "/usr/bin:/bin"),
            ("USER", "me"),
            ("LANG", "C.UTF-8"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), OsString::from(v)))
        .collect();
        let config = self.config(files, &["--var", "LANG=fr_FR.UTF-8"]);
        build(
            &config,
            &Asked {
                home: &self.home,
                env,
                reads,
                force,
            },
        )
    }
}

fn text(path: &Path) -> String {
    path.to_str().unwrap().to_owned()
}

#[test]
fn the_home_is_an_empty_tmpfs_with_git_s_settings_and_the_environment_set() {
    let h = Home::new();
    let part = h.build(&h.home.join("work"), &[], false).unwrap();
    assert_eq!(
        part.words,
        [
            "--tmpfs".to_owned(),
            text(&h.home),
            "--ro-bind-try".to_owned(),
            text(&h.home.join(".gitconfig")),
            text(&h.home.join(".gitconfig")),
        ]
    );
    let vars: Vec<String> = part.vars.iter().map(|(n, v)| format!("{n}={v}")).collect();
    assert_eq!(
        vars,
        [
            "PATH=/usr/bin:/bin".to_owned(),
            format!("HOME={}", h.home.display()),
            "USER=me".to_owned(),
            "LOGNAME=me".to_owned(),
            "TMPDIR=/tmp".to_owned(),
        ],
        "LANG is the user's --var's, not replaced"
    );
}

#[test]
fn a_files_folder_that_holds_the_home_is_refused() {
    let h = Home::new();
    let err = h.build(&h.home, &[], false).unwrap_err();
    assert!(err.contains("holds your home folder"), "{err}");
    let err = h.build(h.home.parent().unwrap(), &[], false).unwrap_err();
    assert!(err.contains("holds your home folder"), "{err}");
}

#[test]
fn read_shows_a_path_and_refuses_the_never_list_unless_forced() {
    let h = Home::new();
    std::fs::create_dir_all(h.home.join(".config/tool")).unwrap();
    let part = h
        .build(&h.home.join("work"), &[h.home.join(".config/tool")], false)
        .unwrap();
    let at = part
        .words
        .iter()
        .position(|w| *w == text(&h.home.join(".config/tool")));
    assert!(
        at.is_some_and(|at| part.words[at - 1] == "--ro-bind-try"),
        "{:?}",
        part.words
    );
    for secret in [
        h.home.join(".ssh"),
        h.home.join(".ssh/id_ed25519"),
        h.home.clone(),
    ] {
        let err = h
            .build(&h.home.join("work"), std::slice::from_ref(&secret), false)
            .unwrap_err();
        assert!(
            err.contains("never-list") && err.contains("--force"),
            "{err}"
        );
        let part = h
            .build(&h.home.join("work"), std::slice::from_ref(&secret), true)
            .unwrap();
        assert!(part.words.contains(&text(&secret)), "{:?}", part.words);
        assert!(
            part.warnings.iter().any(|w| w.contains("(--force)")),
            "{:?}",
            part.warnings
        );
    }
    let err = h
        .build(&h.home.join("work"), &[h.home.join("missing")], false)
        .unwrap_err();
    assert!(err.contains("no such file"), "{err}");
}
