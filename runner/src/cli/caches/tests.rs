#![allow(clippy::unwrap_used)]

use super::*;
use crate::cli::refusal::tests::refusal;

/// A home with a files folder and `folders` in it.
fn home(folders: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap().join("home");
    for folder in folders.iter().chain(&["work"]) {
        std::fs::create_dir_all(home.join(folder)).unwrap();
    }
    (dir, home)
}

fn checked(home: &Path, given: &[PathBuf]) -> Result<Vec<CacheFolder>, Refusal> {
    check_with(given, &home.join("work"), None, Some(home.to_path_buf()))
}

#[test]
fn caches_are_kept_as_given_with_their_real_paths_once() {
    let (_dir, home) = home(&[".cargo/registry", "data/npm"]);
    std::os::unix::fs::symlink(home.join("data/npm"), home.join(".npm")).unwrap();
    let registry = home.join(".cargo/registry");
    let given = [
        registry.clone(),
        home.join("./.npm"),
        home.join(".cargo//registry"),
    ];
    let folders = checked(&home, &given).unwrap();
    assert_eq!(
        folders,
        [
            CacheFolder {
                path: registry.clone(),
                real: registry
            },
            CacheFolder {
                path: home.join(".npm"),
                real: home.join("data/npm")
            },
        ]
    );
}

#[test]
fn a_cache_must_be_an_absolute_existing_folder() {
    let (_dir, home) = home(&[]);
    std::fs::write(home.join("file"), b"").unwrap();
    let err = refusal(checked(&home, &[PathBuf::from("~/.npm")]));
    assert!(err.starts_with("--cache ~/.npm starts with `~`"), "{err}");
    let err = refusal(checked(&home, &[home.join("missing")]));
    assert!(
        err.starts_with(&format!("--cache {}: ", home.join("missing").display())),
        "{err}"
    );
    let err = refusal(checked(&home, &[home.join("file")]));
    assert!(err.ends_with("is not a folder"), "{err}");
    let err = refusal(checked(&home, &[home.join("work/../x")]));
    assert!(err.contains("holds `..`"), "{err}");
}

#[test]
fn a_cache_never_shows_the_home_the_files_or_what_is_never_bound() {
    let (_dir, home) = home(&[
        ".ssh",
        ".cargo/registry",
        "work/cache",
        ".config/gh",
        "state",
    ]);
    let err = refusal(checked(&home, std::slice::from_ref(&home)));
    assert!(err.contains("holds --files"), "{err}");
    let elsewhere = home.parent().unwrap().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let home_alone = check_with(
        std::slice::from_ref(&home),
        &elsewhere,
        None,
        Some(home.clone()),
    );
    let err = refusal(home_alone);
    assert!(err.contains("is the home or holds it"), "{err}");
    let err = refusal(checked(&home, &[PathBuf::from("/")]));
    assert!(
        err.contains("holds --files") || err.contains("is the home"),
        "{err}"
    );
    let err = refusal(checked(&home, &[home.join("work/cache")]));
    assert!(err.contains("lies inside --files"), "{err}");
    let err = refusal(checked(&home, &[home.join(".ssh")]));
    assert!(err.contains("touches ~/.ssh"), "{err}");
    let err = refusal(checked(&home, &[home.join(".config")]));
    assert!(err.contains("touches ~/.config/"), "{err}");
    let err = refusal(checked(&home, &[home.join(".cargo")]));
    assert!(err.contains("touches ~/.cargo/credentials"), "{err}");
    let err = refusal(checked(
        &home,
        &[
            home.join(".cargo/registry"),
            home.join(".cargo/registry/.."),
        ],
    ));
    assert!(err.contains("holds `..`"), "{err}");
}

#[test]
fn caches_may_not_nest() {
    let (_dir, home) = home(&["c/a/b"]);
    let err = refusal(checked(&home, &[home.join("c/a"), home.join("c/a/b")]));
    assert!(err.contains("lie one inside the other"), "{err}");
}
