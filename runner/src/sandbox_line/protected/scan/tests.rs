#![allow(clippy::unwrap_used)]
use super::*;
use std::fs;
use std::os::unix::fs::symlink;

fn folder() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().canonicalize().unwrap();
    (dir, files)
}

fn git(args: &[&str], dir: &Path) {
    let out = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// What is bound, as `(path, hold)`.
fn holds(found: &Found) -> Vec<(String, Hold)> {
    found
        .bound
        .iter()
        .map(|b| (b.rel.display().to_string(), b.hold))
        .collect()
}

fn held(found: &Found, rel: &str) -> Option<Hold> {
    found
        .bound
        .iter()
        .find(|b| b.rel == Path::new(rel))
        .map(|b| b.hold)
}

#[test]
fn an_empty_folder_gets_a_placeholder_for_every_name_and_no_repository() {
    let (_dir, files) = folder();
    let found = scan(&files, None).unwrap();
    for top in TOP {
        assert_eq!(held(&found, top.name), Some(Hold::ReadOnly), "{}", top.name);
        let meta = fs::symlink_metadata(files.join(top.name)).unwrap();
        assert_eq!(
            meta.is_file(),
            top.missing == Placeholder::File,
            "{}",
            top.name
        );
    }
    // No `git init` at the top: the placeholder is held read-only as a whole.
    assert_eq!(held(&found, ".git"), Some(Hold::ReadOnly));
    assert_eq!(held(&found, ".git/config"), None);
    assert_eq!(held(&found, ".github"), Some(Hold::Pin));
    assert_eq!(held(&found, ".github/workflows"), Some(Hold::ReadOnly));
    assert_eq!(found.made.len(), TOP.len() + 3, "{:?}", found.made);
    // Parents come before what they hold.
    let order: Vec<&Path> = found.bound.iter().map(|b| b.rel.as_path()).collect();
    let github = order.iter().position(|p| *p == Path::new(".github"));
    let workflows = order
        .iter()
        .position(|p| *p == Path::new(".github/workflows"));
    assert!(github < workflows, "{order:?}");
    // A second look makes nothing more, and finds the same.
    let again = scan(&files, None).unwrap();
    assert!(again.made.is_empty(), "{:?}", again.made);
    assert_eq!(holds(&again), holds(&found));
}

#[test]
fn a_repository_is_pinned_and_its_configuration_and_hooks_held_read_only() {
    let (_dir, files) = folder();
    git(&["init", "-q"], &files);
    fs::remove_dir_all(files.join(".git/hooks")).unwrap();
    let found = scan(&files, None).unwrap();
    assert_eq!(held(&found, ".git"), Some(Hold::Pin));
    assert_eq!(held(&found, ".git/config"), Some(Hold::ReadOnly));
    // Missing hooks get a placeholder: a program cannot make a hooks folder.
    assert_eq!(held(&found, ".git/hooks"), Some(Hold::ReadOnly));
    assert!(files.join(".git/hooks").is_dir());
    // What does not exist and needs no placeholder is left alone.
    assert_eq!(held(&found, ".git/modules"), None);
    assert!(!files.join(".git/modules").exists());
}

#[test]
fn nested_repositories_are_protected_down_three_levels_with_every_folder_above_pinned() {
    let (_dir, files) = folder();
    for repo in ["a", "b/c", "d/e/f", "g/h/i/j", "node_modules/k"] {
        fs::create_dir_all(files.join(repo)).unwrap();
        git(&["init", "-q"], &files.join(repo));
    }
    fs::create_dir(files.join("b/c/.vscode")).unwrap();
    let found = scan(&files, None).unwrap();
    for pinned in [
        "a",
        "a/.git",
        "b",
        "b/c",
        "b/c/.git",
        "d",
        "d/e",
        "d/e/f",
        "d/e/f/.git",
    ] {
        assert_eq!(held(&found, pinned), Some(Hold::Pin), "{pinned}");
    }
    for read_only in [
        "a/.git/config",
        "a/.git/hooks",
        "b/c/.git/config",
        "d/e/f/.git/hooks",
    ] {
        assert_eq!(held(&found, read_only), Some(Hold::ReadOnly), "{read_only}");
    }
    // A nested repository's protected names are held when they exist, never made.
    assert_eq!(held(&found, "b/c/.vscode"), Some(Hold::ReadOnly));
    assert_eq!(held(&found, "a/.vscode"), None);
    assert!(!files.join("a/.vscode").exists());
    // Four levels down, and in dependencies, nothing is looked for.
    assert_eq!(held(&found, "g/h/i/j/.git"), None);
    assert_eq!(held(&found, "node_modules/k/.git"), None);
}

#[test]
fn a_link_at_a_protected_name_at_the_top_is_refused_and_one_below_left_alone() {
    let (_dir, files) = folder();
    symlink("/etc", files.join(".vscode")).unwrap();
    let err = scan(&files, None).unwrap_err();
    assert!(
        err.contains(".vscode") && err.contains("symbolic link"),
        "{err}"
    );
    fs::remove_file(files.join(".vscode")).unwrap();
    fs::create_dir(files.join("sub")).unwrap();
    git(&["init", "-q"], &files.join("sub"));
    symlink("/etc", files.join("sub/.claude")).unwrap();
    let found = scan(&files, None).unwrap();
    assert_eq!(held(&found, "sub/.claude"), None);
    assert_eq!(held(&found, "sub/.git/config"), Some(Hold::ReadOnly));
}

#[test]
fn a_gitdir_file_is_held_and_the_folder_it_names_inside_is_protected() {
    let (_dir, files) = folder();
    fs::create_dir(files.join("store")).unwrap();
    git(&["init", "-q", "--bare", "repo.git"], &files.join("store"));
    fs::write(files.join(".git"), "gitdir: store/repo.git\n").unwrap();
    let found = scan(&files, None).unwrap();
    assert_eq!(held(&found, ".git"), Some(Hold::ReadOnly));
    assert_eq!(held(&found, "store"), Some(Hold::Pin));
    assert_eq!(held(&found, "store/repo.git"), Some(Hold::Pin));
    assert_eq!(held(&found, "store/repo.git/config"), Some(Hold::ReadOnly));
    assert_eq!(held(&found, "store/repo.git/hooks"), Some(Hold::ReadOnly));
}

#[test]
fn every_bound_handle_is_the_file_found_opened_without_following_links() {
    let (_dir, files) = folder();
    git(&["init", "-q"], &files);
    let found = scan(&files, None).unwrap();
    for bound in &found.bound {
        let stat = rustix::fs::fstat(&bound.fd).unwrap();
        assert_eq!(FileId::from_stat(&stat), bound.id);
        let outside = rustix::fs::lstat(files.join(&bound.rel)).unwrap();
        assert_eq!(FileId::from_stat(&outside), bound.id, "{:?}", bound.rel);
    }
}

#[test]
fn what_the_configuration_sends_git_to_is_held_too() {
    let (_dir, files) = folder();
    git(&["init", "-q"], &files);
    git(&["config", "core.hooksPath", "tools/hooks"], &files);
    git(&["config", "include.path", "../shared.cfg"], &files);
    fs::write(files.join("shared.cfg"), "[user]\n").unwrap();
    let found = scan(&files, None).unwrap();
    // The hooks folder is missing: the first missing folder stands in for it.
    assert_eq!(held(&found, "tools"), Some(Hold::ReadOnly));
    assert!(files.join("tools").is_dir());
    assert_eq!(held(&found, "shared.cfg"), Some(Hold::ReadOnly));
    fs::remove_dir(files.join("tools")).unwrap();
    fs::create_dir_all(files.join("tools/hooks")).unwrap();
    let found = scan(&files, None).unwrap();
    assert_eq!(held(&found, "tools"), Some(Hold::Pin));
    assert_eq!(held(&found, "tools/hooks"), Some(Hold::ReadOnly));
}

#[test]
fn a_common_folder_planted_in_a_repositorys_own_git_folder_is_refused() {
    let (_dir, files) = folder();
    fs::create_dir(files.join("sub")).unwrap();
    git(&["init", "-q"], &files.join("sub"));
    fs::write(files.join("sub/.git/commondir"), "evil\n").unwrap();
    let err = scan(&files, None).unwrap_err();
    assert!(err.contains("sub/.git/commondir"), "{err}");
    fs::remove_file(files.join("sub/.git/commondir")).unwrap();
    assert!(scan(&files, None).is_ok());
}

#[test]
fn hooks_and_files_held_read_only_must_be_their_own() {
    let (_dir, files) = folder();
    git(&["init", "-q"], &files);
    fs::write(files.join("mine.sh"), "#!/bin/sh\n").unwrap();
    symlink(files.join("mine.sh"), files.join(".git/hooks/pre-commit")).unwrap();
    let err = scan(&files, None).unwrap_err();
    assert!(err.contains("pre-commit"), "{err}");
    fs::remove_file(files.join(".git/hooks/pre-commit")).unwrap();
    fs::hard_link(files.join("mine.sh"), files.join(".git/hooks/pre-commit")).unwrap();
    assert!(scan(&files, None).unwrap_err().contains("pre-commit"));
    fs::remove_file(files.join(".git/hooks/pre-commit")).unwrap();
    // A protected file with another name in the files folder.
    fs::hard_link(files.join(".git/config"), files.join("config-too")).unwrap();
    let err = scan(&files, None).unwrap_err();
    assert!(
        err.contains(".git/config") && err.contains("hard links"),
        "{err}"
    );
}

#[test]
#[ignore]
fn scan_speed() {
    let Some(files) = std::env::var_os("LNK_SCAN_DIR") else {
        return;
    };
    let files = PathBuf::from(files).canonicalize().unwrap();
    for _ in 0..3 {
        let start = std::time::Instant::now();
        let found = scan(&files, None).unwrap();
        eprintln!("{} bound in {:?}", found.bound.len(), start.elapsed());
    }
}
