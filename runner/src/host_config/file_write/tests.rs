#![allow(clippy::unwrap_used)]
use super::*;
use std::os::unix::fs::symlink;

#[test]
fn a_file_is_replaced_with_a_backup_and_no_backup_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a/b/settings.json");
    let first = replace(&path, "one").unwrap();
    assert!(first.backup.is_none());
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    let second = replace(&path, "two").unwrap();
    assert_eq!(fs::read_to_string(second.backup.unwrap()).unwrap(), "one");
    let third = replace(&path, "three").unwrap();
    let backup = third.backup.unwrap();
    assert!(backup.to_string_lossy().ends_with(".bak.1"), "{backup:?}");
    assert_eq!(fs::read_to_string(backup).unwrap(), "two");
    assert_eq!(fs::read_to_string(&path).unwrap(), "three");
    assert_eq!(
        fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 3);
}

#[test]
fn a_user_file_that_is_a_link_is_written_where_it_leads_and_a_backup_never_over_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let dotfiles = dir.path().join("dotfiles/settings.json");
    fs::create_dir_all(dotfiles.parent().unwrap()).unwrap();
    fs::write(&dotfiles, "old").unwrap();
    let home = dir.path().join("home");
    fs::create_dir(&home).unwrap();
    symlink(&dotfiles, home.join("settings.json")).unwrap();
    // A link where the backup would go: passed over, never written through.
    let elsewhere = dir.path().join("elsewhere");
    symlink(&elsewhere, dir.path().join("dotfiles/settings.json.bak")).unwrap();
    let written = replace(&home.join("settings.json"), "new").unwrap();
    assert_eq!(fs::read_to_string(&dotfiles).unwrap(), "new");
    assert!(home.join("settings.json").is_symlink());
    assert!(!elsewhere.exists());
    let backup = written.backup.unwrap();
    assert!(backup.to_string_lossy().ends_with(".bak.1"), "{backup:?}");
    assert_eq!(fs::read_to_string(backup).unwrap(), "old");
}

fn files() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().canonicalize().unwrap().join("work");
    fs::create_dir(&files).unwrap();
    (dir, files)
}

#[test]
fn a_project_file_is_made_with_its_folders_and_replaced_with_a_new_backup() {
    let (_dir, files) = files();
    let file = InFiles {
        files: &files,
        rel: Path::new(".claude/settings.local.json"),
    };
    assert_eq!(file.read().unwrap(), None);
    assert!(file.replace("one").unwrap().backup.is_none());
    assert_eq!(file.read().unwrap().as_deref(), Some("one"));
    let second = file.replace("two").unwrap();
    assert_eq!(fs::read_to_string(second.backup.unwrap()).unwrap(), "one");
    assert_eq!(
        fs::read_to_string(files.join(".claude/settings.local.json")).unwrap(),
        "two"
    );
}

#[test]
fn an_empty_file_or_a_placeholder_folder_leaves_no_backup() {
    let (_dir, files) = files();
    fs::write(files.join(".mcp.json"), "").unwrap();
    let file = InFiles {
        files: &files,
        rel: Path::new(".mcp.json"),
    };
    assert!(file.replace("{}").unwrap().backup.is_none());
    assert_eq!(fs::read_dir(&files).unwrap().count(), 1);
    // A placeholder folder stands where the file goes: the file takes its place.
    fs::remove_file(files.join(".mcp.json")).unwrap();
    fs::create_dir(files.join(".mcp.json")).unwrap();
    assert_eq!(file.read().unwrap(), None);
    assert!(file.replace("{}").unwrap().backup.is_none());
    assert_eq!(fs::read_to_string(files.join(".mcp.json")).unwrap(), "{}");
    // A folder with something in it is nobody's placeholder.
    fs::remove_file(files.join(".mcp.json")).unwrap();
    fs::create_dir_all(files.join(".mcp.json/x")).unwrap();
    assert!(file.replace("{}").is_err());
    let user = files.join("user.json");
    fs::write(&user, "").unwrap();
    assert!(replace(&user, "{}").unwrap().backup.is_none());
}

#[test]
fn links_in_the_files_folder_are_refused_and_nothing_outside_changes() {
    let (dir, files) = files();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("settings.local.json"), "theirs").unwrap();
    fs::write(outside.join(".mcp.json"), "theirs").unwrap();
    // The folder is a link.
    symlink(&outside, files.join(".claude")).unwrap();
    let folder = InFiles {
        files: &files,
        rel: Path::new(".claude/settings.local.json"),
    };
    let err = folder.replace("ours").unwrap_err();
    assert!(
        err.contains("symbolic link") && err.contains(".claude"),
        "{err}"
    );
    assert!(folder.read().unwrap_err().contains("symbolic link"));
    // The file is a link.
    symlink(outside.join(".mcp.json"), files.join(".mcp.json")).unwrap();
    let file = InFiles {
        files: &files,
        rel: Path::new(".mcp.json"),
    };
    assert!(file.replace("ours").unwrap_err().contains("symbolic link"));
    // A hard link to a file elsewhere.
    fs::remove_file(files.join(".mcp.json")).unwrap();
    fs::hard_link(outside.join(".mcp.json"), files.join(".mcp.json")).unwrap();
    assert!(file.replace("ours").unwrap_err().contains("hard link"));
    for name in ["settings.local.json", ".mcp.json"] {
        assert_eq!(fs::read_to_string(outside.join(name)).unwrap(), "theirs");
    }
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 2);
}

#[test]
fn a_backup_is_never_written_over_a_file_or_through_a_link_in_the_files_folder() {
    let (dir, files) = files();
    fs::write(files.join(".mcp.json"), "before").unwrap();
    let target = dir.path().join("target");
    symlink(&target, files.join(".mcp.json.bak")).unwrap();
    fs::write(files.join(".mcp.json.bak.1"), "an older backup").unwrap();
    let file = InFiles {
        files: &files,
        rel: Path::new(".mcp.json"),
    };
    let written = file.replace("after").unwrap();
    assert!(!target.exists());
    assert_eq!(
        fs::read_to_string(files.join(".mcp.json.bak.1")).unwrap(),
        "an older backup"
    );
    let backup = written.backup.unwrap();
    assert!(backup.ends_with(".mcp.json.bak.2"), "{backup:?}");
    assert_eq!(fs::read_to_string(backup).unwrap(), "before");
}
