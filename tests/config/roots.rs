//! `config` and `check` with `--files-from roots`: one user-scope entry whose sandbox line binds
//! `{files}`, which serve fills in with each session's project; the line checked against the
//! folder they run in when it may be a project's, else against an empty folder of their own;
//! a project-scope entry refused where no project is.

use std::path::Path;
use std::process::Output;

use assert_cmd::Command;
use serde_json::{Value, json};

use crate::home::{Home, PROBE_FILE, flags, stderr, stdout, strings};
use lnk_tests::bins;
use lnk_tests::readme::recommended_sandbox;
use lnk_tests::results::{is_error, text};
use lnk_tests::roots::{answer, file_uri, initialize_with_roots, roots_result};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::{Era, Serve};

/// serve's flags of the tests with `--files-from roots` in place of `--files ~/work`, and the
/// state folder in `home` (absolute, so that it does not follow the folder a command runs in).
fn roots_flags(home: &Home) -> Vec<String> {
    let mut words = flags(&[]);
    let at = words.iter().position(|w| w == "--files").unwrap();
    words.splice(at..at + 2, ["--files-from".to_owned(), "roots".to_owned()]);
    let at = words.iter().position(|w| w == "--state").unwrap();
    words[at + 1] = path_str(&home.path.join("state"));
    words
}

/// `lnk-link-run <args>` in `dir`, with `home` as HOME.
fn run_in(home: &Home, dir: &Path, args: &[String]) -> Output {
    Command::new(bins::link_run())
        .args(args)
        .current_dir(dir)
        .env("HOME", &home.path)
        .env("XDG_CONFIG_HOME", home.path.join(".config"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap()
}

#[test]
fn one_user_entry_binds_each_session_s_project_folder() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let home = Home::new();
    let mut args = vec![
        "claude-code".to_owned(),
        "--scope".to_owned(),
        "user".to_owned(),
    ];
    args.push("--write".to_owned());
    args.extend(roots_flags(&home));
    // In the home, which may not be a project's folder: an empty folder stands for one.
    let out = home.config(&args, None);
    assert!(out.status.success(), "config failed: {}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("may not be a project's folder, so an empty folder"),
        "{said}"
    );
    let written: Value =
        serde_json::from_slice(&std::fs::read(home.path.join(".claude.json")).unwrap()).unwrap();
    let entry = &written["mcpServers"]["link-run"];
    let entry_args = strings(&entry["args"]);
    let at = entry_args.iter().position(|a| a == "--files-from").unwrap();
    assert_eq!(entry_args[at + 1], "roots");
    assert!(!entry_args.iter().any(|a| a == "--files"), "{entry_args:?}");
    // The README's line, {files} bound, with the machine's part (the home's tmpfs first).
    let (line, machine) = lnk_tests::readme::without_machine_part(&entry_args);
    let dash = line.iter().position(|a| a == "--").unwrap();
    let mut wanted = vec!["--".to_owned()];
    wanted.extend(recommended_sandbox(Path::new("{files}"), &[]));
    assert_eq!(
        line[dash..],
        wanted[..],
        "the README's line, {{files}} bound"
    );
    assert_eq!(
        machine.get(..2),
        Some(
            &[
                "--tmpfs".to_owned(),
                lnk_tests::sandbox::path_str(&home.path)
            ][..]
        ),
        "{machine:?}"
    );
    // Started as a host started in the home starts it: the client's root is the project.
    let command = entry["command"].as_str().unwrap().to_owned();
    let argv: Vec<std::ffi::OsString> = entry_args.iter().map(Into::into).collect();
    let spawn = || {
        Serve::spawn_program(
            Path::new(&command),
            &argv,
            Era::Legacy("2025-11-25"),
            &[("HOME", home.path.as_os_str())],
            Some(&home.path),
            None,
        )
    };
    let mut serve = spawn();
    let asked = initialize_with_roots(&mut serve, "2025-11-25");
    answer(&mut serve, &asked, roots_result(&[&file_uri(&home.work())]));
    let result = serve.call(json!({"program": "ls", "args": ["-a"]}));
    assert!(text(&result).contains(PROBE_FILE), "{result}");
    drop(serve);
    // Without roots, the folder it was started in — the home, refused, saying so.
    let mut serve = spawn();
    serve.initialize("2025-11-25");
    let result = serve.call(json!({"program": "ls"}));
    assert!(
        is_error(&result) && text(&result).contains("is your home folder"),
        "{result}"
    );
}

#[test]
fn a_project_scope_entry_is_refused_where_no_project_is() {
    let home = Home::new();
    let mut args = vec![
        "claude-code".to_owned(),
        "--scope".to_owned(),
        "project".to_owned(),
    ];
    args.extend(roots_flags(&home));
    let mut passthrough = args.clone();
    passthrough.extend(crate::home::passthrough());
    let out = home.config(&passthrough, None);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("a project-scope entry goes into the project this runs in"),
        "{}",
        stderr(&out)
    );
    if !Sandbox::Bwrap.usable() {
        return;
    }
    // In a project's folder it goes there, under a line that holds its protected paths
    // read-only (a project-scope entry is written nowhere else), and names the roots.
    args.push("--".to_owned());
    args.extend(recommended_sandbox(Path::new("{files}"), &[]));
    let out = run_in(
        &home,
        &home.work(),
        &[&["config".to_owned()], &args[..]].concat(),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let entry_args = strings(&doc["mcpServers"]["link-run"]["args"]);
    assert!(
        entry_args
            .windows(2)
            .any(|w| w == ["--files-from", "roots"])
    );
    assert!(
        entry_args.iter().any(|w| w == "{protected}"),
        "{entry_args:?}"
    );
}

#[test]
fn check_checks_the_line_on_the_folder_it_runs_in_or_an_empty_one() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let home = Home::new();
    let mut args = vec!["check".to_owned()];
    args.extend(roots_flags(&home));
    args.push("--".to_owned());
    args.extend(recommended_sandbox(Path::new("{files}"), &[]));
    let absolute = args;
    let out = run_in(&home, &home.work(), &absolute);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    assert!(
        report.contains(&format!(
            "the folder this runs in, {}, stands for one",
            path_str(&home.work())
        )),
        "{report}"
    );
    assert!(
        report.contains(&format!("--bind {0} {0}", path_str(&home.work()))),
        "{report}"
    );
    assert!(report.trim_end().ends_with("serve would start"), "{report}");
    let out = run_in(&home, &home.path, &absolute);
    let report = stdout(&out);
    assert!(out.status.success(), "{report}{}", stderr(&out));
    let line = report
        .lines()
        .find(|l| l.contains("so an empty folder,"))
        .unwrap_or_else(|| panic!("{report}"));
    let made = line
        .split("so an empty folder, ")
        .nth(1)
        .and_then(|rest| rest.split(", stands for one").next())
        .unwrap();
    assert!(!Path::new(made).exists(), "{made} was left behind");
}
