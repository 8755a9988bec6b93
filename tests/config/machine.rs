//! What `config` adds for the machine, on its own: the home an empty tmpfs with rustup's
//! folders and git's settings shown read-only, `--read` and the never-list, an allowed program
//! that is not on `--programs-path` refused with where it is, refusals that end their line,
//! and `check` with no line checking the same recommended line.

use std::path::Path;

use crate::home::{Home, flags, printed_entry, stderr, stdout, strings};
use lnk_tests::readme;
use lnk_tests::sandbox::{Sandbox, path_str};

/// The words of `line` after `--tmpfs /tmp`, up to the files folder's `--bind`.
fn machine_words(args: &[String]) -> Vec<String> {
    readme::without_machine_part(args).1
}

#[test]
fn the_home_is_a_tmpfs_with_rustup_and_git_s_settings_shown_and_no_secret() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let home = Home::new();
    std::fs::write(home.path.join(".gitconfig"), "[user]\n\tname = Me\n").unwrap();
    std::fs::create_dir_all(home.path.join(".ssh")).unwrap();
    std::fs::write(home.path.join(".ssh/id_ed25519"), "key").unwrap();
    let cargo_bin = path_str(&home.path.join(".cargo/bin"));
    let path = format!("{cargo_bin}:/usr/bin:/bin");
    let mut args = vec!["claude-code".to_owned()];
    args.extend(flags(&["--program", "cargo"]));
    let at = args.iter().position(|a| a == "/usr/bin:/bin").unwrap();
    args[at] = path.clone();
    let out = home.config(&args, None);
    let (_, entry) = printed_entry("claude-code", &out);
    let entry_args = strings(&entry["args"]);
    let words = machine_words(&entry_args);
    let h = path_str(&home.path);
    assert_eq!(words[..2], ["--tmpfs".to_owned(), h.clone()], "{words:?}");
    let shown = |path: &str| {
        words
            .windows(3)
            .any(|w| w[0].starts_with("--ro-bind") && w[1] == path && w[2] == path)
    };
    assert!(shown(&cargo_bin), "rustup's proxies: {words:?}");
    assert!(
        shown(&format!("{h}/.gitconfig")),
        "git's settings: {words:?}"
    );
    // rustup's home: linked into the test's home, made again inside and bound where it leads.
    if let Some(rustup) = lnk_tests::toolchains::rustup_home() {
        let real = path_str(&rustup.canonicalize().unwrap());
        assert!(shown(&real), "RUSTUP_HOME: {words:?}");
    }
    assert!(
        !words.iter().any(|w| w.contains(".ssh")),
        "nothing of ~/.ssh: {words:?}"
    );
    let vars = readme::vars(&entry_args);
    assert!(vars.contains(&format!("PATH={path}")), "{vars:?}");
    assert!(
        vars.iter().any(|v| v.starts_with("RUSTUP_HOME=")),
        "{vars:?}"
    );
    assert!(
        vars.iter().any(|v| v.starts_with("CARGO_HOME=")),
        "{vars:?}"
    );
    let said = stderr(&out);
    assert!(said.contains("cargo: "), "what cargo runs is said: {said}");
    assert!(said.contains("rustup's proxy"), "{said}");
}

#[test]
fn read_shows_a_path_and_a_secret_only_with_force() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let home = Home::new();
    std::fs::create_dir_all(home.path.join(".config/tool")).unwrap();
    std::fs::create_dir_all(home.path.join(".aws")).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["gemini".to_owned()];
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args.extend(flags(&[]));
        home.config(&args, None)
    };
    let out = run(&["--read", "~/.config/tool"]);
    let (_, entry) = printed_entry("gemini", &out);
    let tool = path_str(&home.path.join(".config/tool"));
    let words = machine_words(&strings(&entry["args"]));
    assert!(
        words
            .windows(3)
            .any(|w| w == ["--ro-bind-try", &tool, &tool]),
        "{words:?}"
    );
    let out = run(&["--read", "~/.aws"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("never-list") && err.contains("--force") && err.ends_with('\n'),
        "{err}"
    );
    assert!(out.stdout.is_empty());
    let out = run(&["--read", "~/.aws", "--force"]);
    let (_, entry) = printed_entry("gemini", &out);
    let aws = path_str(&home.path.join(".aws"));
    assert!(machine_words(&strings(&entry["args"])).contains(&aws));
    assert!(
        stderr(&out).contains("warning: --read") && stderr(&out).contains("(--force)"),
        "{}",
        stderr(&out)
    );
    let out = run(&["--read", "~/no-such-thing"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no such file"), "{}", stderr(&out));
}

#[test]
fn a_program_not_on_the_programs_path_is_refused_saying_where_path_has_it() {
    let home = Home::new();
    let cargo_bin = home.path.join(".cargo/bin");
    let path = format!("{}:/usr/bin:/bin", path_str(&cargo_bin));
    let mut args = vec!["claude-code".to_owned()];
    args.extend(flags(&["--program", "cargo"]));
    let out = home.config(&args, Some(Path::new(&path)));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err,
        format!(
            "lnk-link-run: serve would refuse these arguments: --program `cargo` is not an \
             executable file in any folder of --programs-path (looked in /usr/bin, /bin), so \
             every call of it would fail; on your PATH it is {}/cargo: add {} to \
             --programs-path\n",
            path_str(&cargo_bin),
            path_str(&cargo_bin)
        ),
        "one line, ending with a newline"
    );
    assert!(out.stdout.is_empty());
    // serve refuses it the same way at start, in one line with its newline.
    let out = std::process::Command::new(lnk_tests::bins::link_run())
        .args(["serve", "--files", &path_str(&home.work())])
        .args([
            "--programs-path",
            "/usr/bin:/bin",
            "--timeout",
            "1s",
            "--output",
            "1KiB",
        ])
        .args(["--program", "no-such-program-here", "--", "/usr/bin/env"])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.starts_with("lnk-link-run: --program `no-such-program-here` is not an executable")
            && err.ends_with(
                "it is not on your PATH either; install it, or add the folder that \
                              holds it to --programs-path\n"
            )
            && err.matches('\n').count() == 1,
        "{err:?}"
    );
}

#[test]
fn refusals_of_config_and_serve_end_their_one_line() {
    let home = Home::new();
    let mut args = vec!["codex".to_owned()];
    args.extend(flags(&[]));
    args.retain(|a| a != "--timeout" && a != "30s");
    let out = home.config(&args, None);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.ends_with("e.g. 30s\n") && err.matches('\n').count() == 1,
        "{err:?}"
    );
    let out = std::process::Command::new(lnk_tests::bins::link_run())
        .args([
            "serve",
            "--files",
            &path_str(&home.work()),
            "--",
            "/usr/bin/env",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.ends_with('\n') && err.matches('\n').count() == 1,
        "{err:?}"
    );
}

#[test]
fn check_without_a_line_checks_the_recommended_line_for_this_machine() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let home = Home::new();
    std::fs::write(home.path.join(".gitconfig"), "[user]\n\tname = Me\n").unwrap();
    let mut command = std::process::Command::new(lnk_tests::bins::link_run());
    let mut args = vec!["check".to_owned()];
    args.extend(flags(&["--program", "git"]));
    let out = command
        .args(&args)
        .current_dir(&home.path)
        .env("HOME", &home.path)
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let report = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{report}{}", stderr(&out));
    let h = path_str(&home.path);
    assert!(report.contains("note  git: "), "{report}");
    assert!(
        report.contains(&format!("note  settings shown read-only: {h}/.gitconfig")),
        "{report}"
    );
    let sandbox = report
        .lines()
        .find(|l| l.starts_with("sandbox: "))
        .unwrap_or_default();
    assert!(sandbox.contains(&format!("--tmpfs {h} ")), "{sandbox}");
    assert!(report.trim_end().ends_with("serve would start"), "{report}");
}
