//! The README's host entries are what `config --write` writes: run with the flags of each
//! README entry (its `/home/me` a private HOME) and no sandbox line, it writes the entry as the
//! README shows it, the recommended line included, and the settings blocks beside it; what it
//! adds for the machine (docs/sandbox.md) is taken out before the two are compared.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::home::{Home, stderr, strings};
use lnk_tests::readme::DOCS;
use lnk_tests::sandbox::{Sandbox, path_str};

/// The block right after `<!-- host-entry: NAME -->`, with `/home/me` replaced by `home`.
fn block(name: &str, home: &Path) -> String {
    let mark = format!("<!-- host-entry: {name} -->\n```");
    let at = DOCS
        .find(&mark)
        .unwrap_or_else(|| panic!("README.md has no {mark:?}"));
    let body = &DOCS[at + mark.len()..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("\n```").unwrap()].replace("/home/me", &path_str(home))
}

/// A host, its README entry, the file it is written to (in HOME), and a settings block of the
/// README with the file it goes to.
type Case = (
    &'static str,
    &'static str,
    &'static str,
    Option<(&'static str, &'static str)>,
);

fn parse(text: &str, toml: bool) -> Value {
    if toml {
        serde_json::to_value(toml::from_str::<toml::Table>(text).unwrap()).unwrap()
    } else {
        serde_json::from_str(text).unwrap()
    }
}

#[test]
fn config_writes_the_readme_s_entries_as_written() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let hosts: [Case; 4] = [
        (
            "claude-code",
            "claude-code",
            ".claude.json",
            Some(("claude-code-settings", ".claude/settings.json")),
        ),
        ("codex", "codex", ".codex/config.toml", None),
        (
            "gemini",
            "gemini-cli",
            ".gemini/settings.json",
            Some(("gemini-cli-trusted-folders", ".gemini/trustedFolders.json")),
        ),
        (
            "claude-desktop",
            "claude-desktop",
            ".config/Claude/claude_desktop_config.json",
            None,
        ),
    ];
    for (host, entry_name, file, settings) in hosts {
        let home = Home::new();
        let toml = file.ends_with(".toml");
        let mut wanted = parse(&block(entry_name, &home.path), toml);
        let servers = if toml { "mcp_servers" } else { "mcpServers" };
        let args = strings(&wanted[servers]["link-run"]["args"]);
        let end = args.iter().position(|a| a == "--").unwrap();
        let mut argv = vec![host.to_owned(), "--write".to_owned()];
        argv.extend(args[1..end].iter().cloned());
        let out = home.config(&argv, None);
        assert!(out.status.success(), "{host}: {}", stderr(&out));
        let path: PathBuf = home.path.join(file);
        let mut written = parse(&std::fs::read_to_string(&path).unwrap(), toml);
        // What config adds for this machine (the docs say what) is not in the README's entry.
        let args = strings(&written[servers]["link-run"]["args"]);
        let (without, machine) = lnk_tests::readme::without_machine_part(&args);
        assert_eq!(
            machine.get(..2),
            Some(&["--tmpfs".to_owned(), path_str(&home.path)][..]),
            "{host}: the home is an empty tmpfs first: {machine:?}"
        );
        written[servers]["link-run"]["args"] = serde_json::json!(without);
        // The README names the binary where the Install section puts it; config, its own path.
        let command = &mut written[servers]["link-run"]["command"];
        assert_eq!(
            command.as_str().map(PathBuf::from),
            Some(lnk_tests::bins::link_run().canonicalize().unwrap())
        );
        *command = wanted[servers]["link-run"]["command"].take();
        wanted[servers]["link-run"]["command"] = command.clone();
        assert_eq!(
            written, wanted,
            "{host}: {path:?} is not the README's entry"
        );
        if let Some((name, file)) = settings {
            let written = parse(
                &std::fs::read_to_string(home.path.join(file)).unwrap(),
                false,
            );
            assert_eq!(
                written,
                parse(&block(name, &home.path), false),
                "{host}: {file}"
            );
        }
    }
}
