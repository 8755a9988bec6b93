//! What `config` refuses, writing nothing: a sandbox line the check refuses (with the check's
//! words), the recommended line on a machine without bubblewrap (saying what to install), a
//! scope the host does not have, and what serve itself would refuse.

use crate::home::{Home, flags, passthrough, stderr};
use lnk_tests::readme;
use lnk_tests::sandbox::{Sandbox, path_str};

#[test]
fn a_line_the_check_refuses_is_refused_with_its_words_and_nothing_is_written() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let home = Home::new();
    let root = path_str(&home.path);
    let mut line = readme::recommended_sandbox(&home.work(), &[]);
    let at = line.iter().position(|a| a == "--bind").unwrap();
    line.splice(at..at, ["--bind".to_owned(), root.clone(), root.clone()]);
    let mut args = vec!["claude-code".to_owned(), "--write".to_owned()];
    args.extend(flags(&[]));
    args.push("--".to_owned());
    args.extend(line);
    let out = home.config(&args, None);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for words in [
        "serve would refuse to start",
        "appeared there",
        "--ro-bind",
        &root,
    ] {
        assert!(err.contains(words), "`{words}` missing: {err}");
    }
    assert!(out.stdout.is_empty());
    assert!(!home.work().join(".mcp.json").exists());
    assert!(!home.work().join(".claude").exists());
}

#[test]
fn without_bubblewrap_nothing_is_written_and_it_says_what_to_install() {
    let home = Home::new();
    let empty = home.path.join("no-bwrap-here");
    std::fs::create_dir(&empty).unwrap();
    let mut args = vec!["gemini".to_owned(), "--write".to_owned()];
    args.extend(flags(&[]));
    let out = home.config(&args, Some(&empty));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for words in [
        "bubblewrap",
        "apt-get install bubblewrap",
        "dnf install bubblewrap",
    ] {
        assert!(err.contains(words), "`{words}` missing: {err}");
    }
    assert!(out.stdout.is_empty());
    assert!(!home.path.join(".gemini").exists());
}

#[test]
fn serve_s_own_refusals_and_a_scope_the_host_lacks_are_refused() {
    let home = Home::new();
    let mut args = vec![
        "codex".to_owned(),
        "--scope".to_owned(),
        "project".to_owned(),
    ];
    args.extend(flags(&[]));
    args.extend(passthrough());
    let out = home.config(&args, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no project scope"),
        "{}",
        stderr(&out)
    );
    let mut args = vec!["vscode".to_owned()];
    args.extend(flags(&["--hops", "x"]));
    let out = home.config(&args, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--hops"), "{}", stderr(&out));
    let out = home.config(&["nohost".to_owned()], None);
    assert_eq!(out.status.code(), Some(2));
}
