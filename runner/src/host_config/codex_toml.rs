//! Codex's `config.toml`: the `[mcp_servers.link-run]` table, made and merged with `toml_edit`,
//! which keeps the rest of the file — other tables, comments, spacing — as it was.

use toml_edit::{Array, DocumentMut, Item, Table, Value};

use super::json_edit::EditError;

/// What Codex needs in the entry besides the command line.
pub struct CodexEntry<'a> {
    /// The server's name in the hosts' files: the table is `[mcp_servers.<name>]`.
    pub name: &'a str,
    /// The absolute path of `lnk-link-run`.
    pub command: &'a str,
    /// serve's arguments.
    pub args: &'a [String],
    /// `tool_timeout_sec`: above `--timeout`.
    pub tool_timeout_sec: u64,
}

/// The entry as a table, its `args` packed over lines as the README writes them.
fn table(entry: &CodexEntry) -> Table {
    let mut args = Array::new();
    let quoted: Vec<String> = entry.args.iter().map(|a| super::render::quote(a)).collect();
    let starts = super::render::line_starts(entry.args, &quoted, "args = [".len());
    for (i, arg) in entry.args.iter().enumerate() {
        let mut value = Value::from(arg.as_str());
        let prefix = if i == 0 {
            ""
        } else if starts.contains(&i) {
            "\n        "
        } else {
            " "
        };
        value.decor_mut().set_prefix(prefix);
        value.decor_mut().set_suffix("");
        args.push_formatted(value);
    }
    let mut table = Table::new();
    table.insert("command", toml_edit::value(entry.command));
    table.insert("args", Item::Value(Value::Array(args)));
    table.insert("default_tools_approval_mode", toml_edit::value("approve"));
    let seconds = i64::try_from(entry.tool_timeout_sec).unwrap_or(i64::MAX);
    table.insert("tool_timeout_sec", toml_edit::value(seconds));
    table
}

/// `text` (empty: a new file) with the entry merged in; an entry of the same name is replaced
/// only with `force`.
pub fn merge(text: &str, entry: &CodexEntry, force: bool) -> Result<String, EditError> {
    let mut doc: DocumentMut = text.parse().map_err(|err| {
        EditError::Malformed(format!(
            "the file is not TOML: {}",
            lnk_common::Causes(&err)
        ))
    })?;
    let servers = doc
        .entry("mcp_servers")
        .or_insert_with(|| {
            let mut servers = Table::new();
            servers.set_implicit(true);
            Item::Table(servers)
        })
        .as_table_like_mut()
        .ok_or_else(|| EditError::Malformed("`mcp_servers` is not a table".into()))?;
    if servers.contains_key(entry.name) && !force {
        return Err(EditError::Exists(format!("mcp_servers.{}", entry.name)));
    }
    servers.insert(entry.name, Item::Table(table(entry)));
    Ok(doc.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_table_is_added_and_the_rest_kept() {
        let args: Vec<String> = [
            "serve",
            "--files",
            "/w",
            "--",
            "/usr/bin/bwrap",
            "--bind",
            "/w",
            "/w",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        let entry = CodexEntry {
            name: "link-run",
            command: "/b/lnk-link-run",
            args: &args,
            tool_timeout_sec: 300,
        };
        let before = "# mine\nmodel = \"m\"\n\n[mcp_servers.other]\ncommand = \"x\" # keep\n";
        let after = merge(before, &entry, false).unwrap();
        assert!(after.starts_with(before), "{after}");
        let table: toml::Table = toml::from_str(&after).unwrap();
        let ours = &table["mcp_servers"]["link-run"];
        assert_eq!(ours["command"].as_str(), Some("/b/lnk-link-run"));
        assert_eq!(ours["tool_timeout_sec"].as_integer(), Some(300));
        assert_eq!(
            ours["default_tools_approval_mode"].as_str(),
            Some("approve")
        );
        let parsed: Vec<String> = ours["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned())
            .collect();
        assert_eq!(parsed, args);
        assert!(matches!(
            merge(&after, &entry, false),
            Err(EditError::Exists(_))
        ));
        assert_eq!(merge(&after, &entry, true).unwrap(), after);
        let fresh = merge("", &entry, false).unwrap();
        assert!(fresh.starts_with("[mcp_servers.link-run]\n"), "{fresh}");
    }
}
