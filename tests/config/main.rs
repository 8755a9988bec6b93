//! `lnk-link-run config <host>`: for each host the printed entry is the host's own format and
//! serve started with exactly its command and arguments answers `tools/list`; without a sandbox
//! line the entry holds the README's recommended line with `--files` bound (under bubblewrap);
//! `--write` merges into a file that holds other servers and settings, keeps them, leaves a
//! backup, and refuses a second time without `--force`; a line the sandbox check refuses and a
//! machine without bubblewrap write nothing and say why. Each test has its own HOME.
//!
//! Run: `cargo test --workspace --no-run && cargo test -p lnk-tests --test config` (the bubblewrap
//! halves fail without `bwrap`, and skip then with `LNK_ALLOW_SKIP=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// A private HOME, serve's flags as a person types them, and starting an entry as a host does.
mod home;
/// What config adds for the machine, `--read`, a program not on the path, `check` with no
/// line, refusals ending their line.
mod machine;
/// The README's host entries are what `config --write` writes.
mod readme_blocks;
/// What `config` refuses: a leaking line, a machine without bubblewrap, serve's own refusals.
mod refusals;
/// `--files-from roots`: one user entry for every project, and `check` of it.
mod roots;
/// `--write`: merged, the rest kept, a backup, `--force`.
mod write;

use crate::home::{
    HOSTS, Home, assert_host_settings, flags, passthrough, printed_entry, start_entry, strings,
};
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::{bins, readme};
use std::path::PathBuf;

#[test]
fn each_host_gets_its_own_format_and_serve_starts_with_exactly_that() {
    for host in HOSTS {
        let home = Home::new();
        let mut args = vec![host.to_owned()];
        args.extend(flags(&[]));
        args.extend(passthrough());
        let out = home.config(&args, None);
        let (_, entry) = printed_entry(host, &out);
        assert_eq!(
            entry["command"].as_str().map(PathBuf::from),
            Some(bins::link_run().canonicalize().unwrap()),
            "{host}: the entry starts this lnk-link-run by its absolute path"
        );
        assert_host_settings(host, &entry);
        let entry_args = strings(&entry["args"]);
        let work = path_str(&home.work());
        let state = path_str(&home.path.join("state"));
        for (flag, value) in [("--files", &work), ("--state", &state)] {
            let at = entry_args.iter().position(|a| a == flag).unwrap();
            assert_eq!(
                &entry_args[at + 1],
                value,
                "{host}: {flag} made absolute here"
            );
        }
        start_entry(&entry, host);
    }
}

#[test]
fn without_a_sandbox_line_the_entry_holds_the_recommended_line_for_this_machine() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for host in HOSTS {
        let home = Home::new();
        let mut args = vec![host.to_owned()];
        args.extend(flags(&[]));
        let out = home.config(&args, None);
        let (_, entry) = printed_entry(host, &out);
        let entry_args = strings(&entry["args"]);
        // The README's line, --files bound, and the machine's part: the home an empty tmpfs
        // first, the environment as --vars.
        let (line, machine) = readme::without_machine_part(&entry_args);
        let at = line.iter().position(|a| a == "--").unwrap();
        let mut wanted = vec!["--".to_owned()];
        wanted.extend(readme::recommended_sandbox(&home.work(), &[]));
        assert_eq!(
            line[at..],
            wanted[..],
            "{host}: the README's line, --files bound"
        );
        assert_eq!(
            machine[..2],
            ["--tmpfs".to_owned(), path_str(&home.path)],
            "{host}: {machine:?}"
        );
        let vars = readme::vars(&entry_args);
        for var in [
            "PATH=/usr/bin:/bin".to_owned(),
            format!("HOME={}", path_str(&home.path)),
            "TMPDIR=/tmp".to_owned(),
        ] {
            assert!(vars.contains(&var), "{host}: {var} not in {vars:?}");
        }
        assert!(!entry_args.iter().any(|a| a == "--no-sandbox-check"));
        start_entry(&entry, host);
    }
}
