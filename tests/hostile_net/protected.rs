//! The protected paths against a program that runs as the person (serve as `nobody`, as a
//! person runs it as themselves): it may change the mode of every folder the person owns in
//! the files folder, pinned ones included. A folder it makes unreadable must not hide the
//! repository inside it from the next sandbox's search, which would then leave that
//! repository's configuration writable: the next sandbox is refused instead, and nothing runs.
//! Another user's unreadable folder, which no program here can change, is passed over.

use std::os::unix::fs::PermissionsExt;

use super::{Home, NOBODY, call, close, usable};

/// What the program appends to a git configuration: the person's next `git status` there
/// would run it.
const PLANT: &str =
    "printf '[core]\\n\\tfsmonitor = touch {marker}\\n' >> {config} && echo PLANT\"\"ED";

/// Every way a program may take a folder's permissions away from the search, and where the
/// repository it hides lies: `chmod` of the folder, the folder's git configuration.
const HIDES: &[(&str, &str, &str)] = &[
    // A folder above a nested repository, unreadable and unsearchable.
    ("000", "a", "a/sub/.git/config"),
    // The repository's own folder, readable but not searchable.
    ("644", "a/sub", "a/sub/.git/config"),
    // A folder on the way to the git folder a `.git` file names, where the search does not
    // look for repositories itself.
    ("000", "node_modules", "node_modules/hidden/gd/config"),
];

#[test]
fn a_folder_made_unreadable_hides_no_repository() {
    if !usable() {
        return;
    }
    let home = Home::new("hostile-modes-", Some(NOBODY));
    let files = home.files();
    let marker = home.home.join("planted").display().to_string();
    std::fs::create_dir_all(files.join("a/sub")).unwrap();
    std::fs::create_dir_all(files.join("node_modules/hidden")).unwrap();
    // Another user's folder this user cannot read: no program here can change it.
    std::fs::create_dir_all(files.join("theirs/repo/.git")).unwrap();
    home.hand_over();
    home.git(&["-C", "a/sub", "init", "-q"]);
    let gd = files.join("node_modules/hidden/gd").display().to_string();
    home.git(&["init", "-q", "--separate-git-dir", &gd, "wt"]);
    std::fs::set_permissions(files.join("theirs"), std::fs::Permissions::from_mode(0o700)).unwrap();
    let status = std::process::Command::new("chown")
        .args(["0:0"])
        .arg(files.join("theirs"))
        .status()
        .unwrap();
    assert!(status.success());
    let (command, args) = home.write_entry(&["sh", "git"], &[]);
    let mut serve = home.serve(&command, &args, None);

    for (mode, folder, config) in HIDES {
        let before = std::fs::read(files.join(config)).unwrap();
        // The probe works: the same write lands in a file of the agent's own, and the
        // repository's configuration is held read-only while its folder is readable.
        let plant = PLANT
            .replace("{config}", config)
            .replace("{marker}", &marker);
        let (code, said, _) = call(&mut serve, "sh", &["-c", &plant]);
        assert_ne!(code, Some(0), "{said}");
        assert!(said.contains("Read-only file system"), "{said}");
        let (code, said, _) = call(
            &mut serve,
            "sh",
            &[
                "-c",
                &PLANT
                    .replace("{config}", "mine.cfg")
                    .replace("{marker}", &marker),
            ],
        );
        assert_eq!(code, Some(0), "{said}");
        assert!(said.contains("PLANTED"), "{said}");

        // The attack: the folder's permissions taken away in one call, given back and the
        // configuration written in the next.
        let (code, said, _) = call(&mut serve, "sh", &["-c", &format!("chmod {mode} {folder}")]);
        assert_eq!(code, Some(0), "{said}");
        let (code, said, _) = call(
            &mut serve,
            "sh",
            &["-c", &format!("chmod 755 {folder} && {plant}")],
        );
        assert_eq!(code, None, "the next sandbox was made: {said}");
        assert!(said.contains("cannot be"), "{said}");
        assert!(!said.contains("PLANTED"), "{said}");
        assert_eq!(
            std::fs::read(files.join(config)).unwrap(),
            before,
            "{config} changed"
        );
        // The person gives the permissions back; sandboxes are made again.
        std::fs::set_permissions(files.join(folder), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let (code, said, _) = call(&mut serve, "sh", &["-c", "echo ran"]);
        assert_eq!(code, Some(0), "{said}");
    }
    close(serve);
    // The person's git in each repository runs nothing of the agent's.
    home.git(&["-C", "a/sub", "status", "--short"]);
    home.git(&["-C", "wt", "status", "--short"]);
    assert!(
        !std::path::Path::new(&marker).exists(),
        "the agent's fsmonitor ran"
    );
    // And the probe of that: the file the agent could write is obeyed.
    let include = format!("include.path={}", files.join("mine.cfg").display());
    home.git(&["-c", &include, "status", "--short"]);
    assert!(
        std::path::Path::new(&marker).exists(),
        "the planted fsmonitor did not run"
    );
}
