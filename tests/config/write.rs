//! `--write` into files that hold other servers and settings of each host: they are kept
//! (the parsed documents compared), a backup is left, a second `--write` is refused without
//! `--force`, and with it another backup is made.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use crate::home::{
    HOSTS, Home, assert_host_settings, flags, passthrough, printed_entry, start_entry, stderr,
};
use lnk_tests::sandbox::path_str;

/// What is in each host's file before `--write`: another server and settings of the host's.
fn existing(host: &str, home: &Home) -> Vec<(PathBuf, String)> {
    let h = &home.path;
    match host {
        "claude-code" => vec![
            (
                h.join(".claude.json"),
                "{\n    \"mcpServers\": {\n        \"other\": {\"command\": \"/bin/other\", \"args\": []}\n    },\n    \"zzz\": true\n}\n".into(),
            ),
            (
                h.join(".claude/settings.json"),
                "{\"permissions\": {\"allow\": [\"Bash(ls:*)\"], \"deny\": [\"Read(./.env)\"]}, \"model\": \"x\"}\n".into(),
            ),
        ],
        "codex" => vec![(
            h.join(".codex/config.toml"),
            "# my settings\nmodel = \"m\"  # chosen\n\n[mcp_servers.other]\ncommand = \"/bin/other\"\n\n[profiles.fast]\nmodel = \"f\"\n".into(),
        )],
        "gemini" => vec![
            (
                h.join(".gemini/settings.json"),
                "{\n  \"theme\": \"Dark\",\n  \"mcpServers\": {\n    \"other\": {\"command\": \"/bin/other\"}\n  }\n}\n".into(),
            ),
            (
                h.join(".gemini/trustedFolders.json"),
                "{\"/somewhere\": \"TRUST_PARENT\"}".into(),
            ),
        ],
        "claude-desktop" => vec![(
            h.join(".config/Claude/claude_desktop_config.json"),
            "{\"globalShortcut\": \"Ctrl+Space\", \"mcpServers\": {}}\n".into(),
        )],
        "vscode" => vec![(
            h.join(".config/Code/User/mcp.json"),
            "{\n\t\"inputs\": [],\n\t\"servers\": {\n\t\t\"other\": {\"type\": \"stdio\", \"command\": \"/bin/other\"}\n\t}\n}\n".into(),
        )],
        other => panic!("no host {other}"),
    }
}

fn parse(path: &Path, text: &str) -> Value {
    if path.extension().is_some_and(|e| e == "toml") {
        serde_json::to_value(toml::from_str::<toml::Table>(text).unwrap()).unwrap()
    } else {
        serde_json::from_str(text).unwrap_or_else(|err| panic!("{path:?}: {err}\n{text}"))
    }
}

/// `after` less what `config --write` adds must be `before`.
fn without_ours(host: &str, path: &Path, mut after: Value) -> Value {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let servers = match (host, name.as_str()) {
        ("codex", _) => Some("mcp_servers"),
        ("vscode", _) => Some("servers"),
        (_, "settings.json") if host == "claude-code" => None,
        (_, "trustedFolders.json") => None,
        _ => Some("mcpServers"),
    };
    if let Some(servers) = servers {
        after[servers].as_object_mut().unwrap().remove("link-run");
    }
    if name == "settings.json" && host == "claude-code" {
        assert!(after.get("enabledMcpjsonServers").is_none(), "{after}");
        let allow = after["permissions"]["allow"].as_array_mut().unwrap();
        assert_eq!(allow.pop(), Some(json!("mcp__link-run")));
    }
    if name == "trustedFolders.json" {
        after
            .as_object_mut()
            .unwrap()
            .remove(path_str(&path.parent().unwrap().parent().unwrap().join("work")).as_str());
    }
    after
}

#[test]
fn write_merges_keeps_the_rest_and_a_backup_and_refuses_a_second_time_without_force() {
    for host in HOSTS {
        let home = Home::new();
        let files = existing(host, &home);
        for (path, text) in &files {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        let mut args = vec![host.to_owned(), "--write".to_owned()];
        args.extend(flags(&[]));
        args.extend(passthrough());
        let out = home.config(&args, None);
        assert!(out.status.success(), "{host}: {}", stderr(&out));
        let mut first = None;
        for (path, before) in &files {
            let after = std::fs::read_to_string(path).unwrap();
            let backup = format!("{}.bak", path.display());
            assert_eq!(
                &std::fs::read_to_string(&backup).unwrap(),
                before,
                "{host}: {backup}"
            );
            assert_eq!(
                without_ours(host, path, parse(path, &after)),
                parse(path, before),
                "{host}: {path:?} lost or changed something:\n{after}"
            );
            first.get_or_insert_with(|| {
                let (_, entry) = printed_entry(
                    host,
                    &Output {
                        stdout: after.clone().into_bytes(),
                        ..out.clone()
                    },
                );
                entry
            });
        }
        if host == "codex" {
            // toml_edit keeps the rest as it was, comments and blank lines included.
            let mut after = std::fs::read_to_string(&files[0].0).unwrap();
            let start = after.find("[mcp_servers.link-run]\n").unwrap();
            let end = after[start..]
                .find("\n[")
                .map_or(after.len(), |at| start + at + 1);
            after.replace_range(start..end, "");
            assert_eq!(after, files[0].1, "comments and layout kept");
        }
        let entry = first.unwrap();
        assert_host_settings(host, &entry);
        start_entry(&entry, &format!("{host} as written"));

        let written: Vec<String> = files
            .iter()
            .map(|(p, _)| std::fs::read_to_string(p).unwrap())
            .collect();
        let again = home.config(&args, None);
        assert_eq!(
            again.status.code(),
            Some(2),
            "{host}: a second --write is refused"
        );
        assert!(
            stderr(&again).contains("--force"),
            "{host}: {}",
            stderr(&again)
        );
        for ((path, _), text) in files.iter().zip(&written) {
            assert_eq!(
                &std::fs::read_to_string(path).unwrap(),
                text,
                "{host}: refused, yet written"
            );
        }
        args.insert(2, "--force".to_owned());
        let forced = home.config(&args, None);
        assert!(forced.status.success(), "{host}: {}", stderr(&forced));
        let path = &files[0].0;
        assert_eq!(
            std::fs::read_to_string(format!("{}.bak.1", path.display())).unwrap(),
            written[0],
            "{host}: --force keeps the first backup and makes another"
        );
    }
}

/// A HOME written with `..` in it (`<home>/work/..`) is the home: its `~/.claude.json` is not
/// taken for a file in the files folder `~/work`, and the entry is written there.
#[test]
fn a_home_written_with_dot_dot_is_the_home_it_names() {
    let home = Home::new();
    let written = home.path.join("work").join("..");
    let mut args = vec!["claude-code".to_owned(), "--write".to_owned()];
    args.extend(flags(&[]));
    args.extend(passthrough());
    let out = std::process::Command::new(lnk_tests::bins::link_run())
        .arg("config")
        .args(&args)
        .current_dir(&home.path)
        .env("HOME", &written)
        .env("XDG_CONFIG_HOME", home.path.join(".config"))
        .env_remove("CODEX_HOME")
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let entry = parse(
        &home.path.join(".claude.json"),
        &std::fs::read_to_string(home.path.join(".claude.json")).unwrap(),
    );
    assert!(
        entry["mcpServers"]["link-run"]["command"].is_string(),
        "{entry}"
    );
    assert!(!home.work().join(".claude.json").exists());
}
