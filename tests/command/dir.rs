//! The `command` tool's `dir`: a call runs in a folder inside `--files` (links inside it
//! followed), the files folder is resolved once at serve's start, and a `dir` outside it, or
//! not a folder, is refused before anything runs.
use std::os::unix::fs::symlink;

use serde_json::json;

use crate::tool::refused;
use lnk_tests::results::{ran, text};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::setup::Setup;

both_sandboxes!(
    runs_in_dir_inside_files,
    files_folder_is_resolved_once,
    refuses_dir_outside_files,
);

/// The working folder `pwd` reports for a call with this `dir`.
fn pwd_in(serve: &mut lnk_tests::serve::Serve, dir: Option<&str>) -> String {
    let mut arguments = json!({"program": "pwd"});
    if let Some(dir) = dir {
        arguments["dir"] = json!(dir);
    }
    let result = serve.call(arguments);
    let value = ran(&result);
    assert_eq!(value["exit_code"], 0, "{dir:?}: {result}");
    text(&result)
}

fn runs_in_dir_inside_files(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let files = &setup.files;
    std::fs::create_dir_all(files.join("sub/deeper")).unwrap();
    symlink("sub", files.join("inlink")).unwrap();
    let mut serve = setup.serve().start();
    let top = path_str(files);
    let sub = path_str(&files.join("sub"));
    let deeper = path_str(&files.join("sub/deeper"));
    // Each answer holds the folder on a line of its own (followed by the end of the text or a
    // newline), so `files` is not mistaken for `files/sub`.
    let has_line = |text: &str, want: &str| text.lines().any(|l| l.trim_end() == want);
    for (dir, want) in [
        (None, &top),
        (Some("."), &top),
        (Some("sub"), &sub),
        (Some("sub/deeper"), &deeper),
        (Some("sub/deeper/"), &deeper),
        (Some("inlink"), &sub),
    ] {
        let text = pwd_in(&mut serve, dir);
        assert!(has_line(&text, want), "dir {dir:?}: want {want}: {text}");
    }
}

fn files_folder_is_resolved_once(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let other = setup.path("other");
    std::fs::create_dir(&other).unwrap();
    let link = setup.path("link");
    symlink(&setup.files, &link).unwrap();
    let mut serve = setup.serve().files_flag(&link).start();
    let want = path_str(&setup.files);
    let has_line = |text: &str| text.lines().any(|l| l.trim_end() == want);
    let text = pwd_in(&mut serve, None);
    assert!(has_line(&text), "want {want}: {text}");
    // Pointing the link elsewhere after the start changes nothing: --files was resolved once.
    std::fs::remove_file(&link).unwrap();
    symlink(&other, &link).unwrap();
    let text = pwd_in(&mut serve, None);
    assert!(has_line(&text), "want {want}: {text}");
}

fn refuses_dir_outside_files(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let files = &setup.files;
    std::fs::create_dir(files.join("sub")).unwrap();
    std::fs::create_dir(setup.path("outside")).unwrap();
    std::fs::write(files.join("afile"), "a file").unwrap();
    symlink(setup.path("outside"), files.join("out")).unwrap();
    symlink("../outside", files.join("sub/relout")).unwrap();
    symlink(setup.path("nowhere"), files.join("dangling")).unwrap();
    let mut serve = setup.serve().start();
    let absolute_inside = path_str(&files.join("sub"));
    for dir in [
        "..",
        "../",
        "../files",
        "sub/../..",
        "sub/../../outside",
        "/",
        "/tmp",
        &absolute_inside,
        "out",
        "sub/relout",
        "dangling",
        "afile",
        "missing",
    ] {
        // Relative `touch`: had it run, it would leave `touched` in its working folder.
        let result = serve.call(json!({"program": "touch", "args": ["touched"], "dir": dir}));
        refused(&result);
    }
    for place in [
        setup.root.path(),
        files,
        &files.join("sub"),
        &setup.path("outside"),
    ] {
        assert!(
            !place.join("touched").exists(),
            "a refused call ran in {place:?}"
        );
    }
    let result = serve.call(json!({"program": "touch", "args": ["touched"], "dir": "sub"}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    assert!(files.join("sub/touched").exists());
}
