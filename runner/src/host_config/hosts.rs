//! Each host's entry for Link Run, where the host reads it, and the host's own settings that
//! Link Run needs: as the README's "Plugging it into an MCP host" shows them.
//!
//! | host | scope (default first) | file | with it |
//! |---|---|---|---|
//! | Claude Code | user | `~/.claude.json` | `~/.claude/settings.json`: `permissions.allow` |
//! | | project | `<files>/.mcp.json` | `<files>/.claude/settings.local.json`: `permissions.allow` |
//! | Codex CLI | user | `$CODEX_HOME/config.toml` or `~/.codex/config.toml` | `default_tools_approval_mode`, `tool_timeout_sec` in the table |
//! | Gemini CLI | user | `~/.gemini/settings.json` | `timeout`, `trust`; `~/.gemini/trustedFolders.json` |
//! | | project | `<files>/.gemini/settings.json` | `timeout`; `~/.gemini/trustedFolders.json` |
//! | Claude Desktop | user | `$XDG_CONFIG_HOME/Claude/claude_desktop_config.json` | — |
//! | VS Code | user | `$XDG_CONFIG_HOME/Code/User/mcp.json` | `type: stdio` |
//! | | project | `<files>/.vscode/mcp.json` | the same |
//!
//! A project-scope file lies in the files folder, where the agent's programs write: nothing
//! there approves a server up front (no `enabledMcpjsonServers`, no `trust`), so that a server
//! a program could plant there is never started without the person saying yes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::codex_toml::CodexEntry;
use super::render::Json;
use crate::cli::{Host, Scope};

/// The server's name in every host's file.
pub const SERVER: &str = "link-run";

/// The least a host waits for a tool call: five minutes, as the README's entries set.
const HOST_TIMEOUT_FLOOR: Duration = Duration::from_secs(300);
/// How much longer than `--timeout` a host waits, so that serve answers first.
const HOST_TIMEOUT_MARGIN: Duration = Duration::from_secs(60);
/// Claude Desktop gives up on a tool call after about this long, whatever the entry says.
const CLAUDE_DESKTOP_GIVES_UP: Duration = Duration::from_secs(60);

/// What every host's entry is made of.
pub struct Entry {
    /// The absolute path of this `lnk-link-run`.
    pub command: String,
    /// serve's arguments, `serve` first.
    pub args: Vec<String>,
    /// The files folder, absolute.
    pub files: PathBuf,
    /// serve's `--timeout`.
    pub timeout: Duration,
    /// The person's home.
    pub home: PathBuf,
}

impl Entry {
    /// How long the host waits for a tool call: at least five minutes, and a minute above
    /// `--timeout`, in whole seconds.
    pub fn host_timeout(&self) -> Duration {
        let above = Duration::from_secs(self.timeout.as_secs() + 1) + HOST_TIMEOUT_MARGIN;
        let above = if self.timeout.subsec_nanos() == 0 {
            above - Duration::from_secs(1)
        } else {
            above
        };
        above.max(HOST_TIMEOUT_FLOOR)
    }

    fn host_timeout_ms(&self) -> u64 {
        u64::try_from(self.host_timeout().as_millis()).unwrap_or(u64::MAX)
    }

    /// `command` and `args`, then `more`.
    fn server(&self, more: Vec<(&str, Json)>) -> Json {
        let mut members = vec![
            ("command".to_owned(), Json::Str(self.command.clone())),
            ("args".to_owned(), Json::Args(self.args.clone())),
        ];
        members.extend(more.into_iter().map(|(k, v)| (k.to_owned(), v)));
        Json::Obj(members)
    }

    /// A `$XDG_CONFIG_HOME` folder, or `~/.config`.
    fn config_home(&self) -> PathBuf {
        std::env::var_os("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .filter(|dir| dir.is_absolute())
            .unwrap_or_else(|| self.home.join(".config"))
    }
}

/// One change to a file.
pub enum Edit {
    /// Sets `path`.`key` in a JSON file; an existing member is replaced only with `--force`,
    /// unless it already holds this value and `same_is_fine`.
    JsonSet {
        /// The objects above the member.
        path: Vec<&'static str>,
        /// The member.
        key: String,
        /// Its value.
        value: Json,
        /// Whether a member that holds this value already is fine (a setting, not an entry).
        same_is_fine: bool,
    },
    /// Adds `item` to the array `path`.`key` of a JSON file unless it is there.
    JsonAdd {
        /// The objects above the array.
        path: Vec<&'static str>,
        /// The array.
        key: &'static str,
        /// The string to add.
        item: String,
    },
    /// Codex's `[mcp_servers.link-run]`.
    Codex {
        /// The command line.
        command: String,
        /// serve's arguments.
        args: Vec<String>,
        /// `tool_timeout_sec`.
        tool_timeout_sec: u64,
    },
}

/// A file of the host's and what goes into it.
pub struct FilePlan {
    /// Where it is.
    pub path: PathBuf,
    /// What it is for, for a person.
    pub what: String,
    /// The changes.
    pub edits: Vec<Edit>,
}

/// Everything `config` says and does for one host.
pub struct HostPlan {
    /// The files, the entry's own first.
    pub files: Vec<FilePlan>,
    /// What a person should know: where it goes, the host's own one-line command, limits.
    pub notes: Vec<String>,
    /// What to do once written.
    pub next: String,
}

/// `words` as one line a shell splits back into them.
fn shell_line(words: &[String]) -> String {
    words
        .iter()
        .map(|w| shlex::try_quote(w).map_or_else(|_| w.clone(), |q| q.into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The plan for `host` in `scope` (or the host's default).
pub fn plan(host: Host, scope: Option<Scope>, entry: &Entry) -> Result<HostPlan, String> {
    let only_user = |name: &str| match scope {
        Some(Scope::Project) => Err(format!(
            "{name} has no project scope that Link Run writes: leave out --scope or give \
             --scope user"
        )),
        _ => Ok(()),
    };
    let files = entry.files.display().to_string();
    let timeout_ms = entry.host_timeout_ms();
    Ok(match host {
        Host::ClaudeCode => claude_code(scope.unwrap_or(Scope::User), entry),
        Host::Codex => {
            only_user("Codex CLI")?;
            let folder = std::env::var_os("CODEX_HOME")
                .map(PathBuf::from)
                .filter(|dir| dir.is_absolute())
                .unwrap_or_else(|| entry.home.join(".codex"));
            let mut line = vec!["codex", "mcp", "add", SERVER, "--", &entry.command]
                .into_iter()
                .map(str::to_owned)
                .collect::<Vec<_>>();
            line.extend(entry.args.iter().cloned());
            HostPlan {
                files: vec![FilePlan {
                    path: folder.join("config.toml"),
                    what: "Codex CLI's configuration".into(),
                    edits: vec![Edit::Codex {
                        command: entry.command.clone(),
                        args: entry.args.clone(),
                        tool_timeout_sec: entry.host_timeout().as_secs(),
                    }],
                }],
                notes: vec![format!(
                    "Or from the command line (it has no flag for `default_tools_approval_mode` \
                     and `tool_timeout_sec`: add them to the table it writes):\n{}",
                    shell_line(&line)
                )],
                next: format!("start `codex` in {files}"),
            }
        }
        Host::Gemini => {
            let scope = scope.unwrap_or(Scope::User);
            let settings = match scope {
                Scope::User => entry.home.join(".gemini/settings.json"),
                Scope::Project => entry.files.join(".gemini/settings.json"),
            };
            // Trusting the server (its tools run without asking) only where no program of the
            // agent's can plant one of the same name.
            let mut settings_more = vec![("timeout", Json::Num(timeout_ms))];
            if scope == Scope::User {
                settings_more.push(("trust", Json::Bool(true)));
            }
            let server = entry.server(settings_more);
            let scope_word = if scope == Scope::User {
                "user"
            } else {
                "project"
            };
            let mut line: Vec<String> = ["gemini", "mcp", "add", "--scope", scope_word]
                .into_iter()
                .map(str::to_owned)
                .collect();
            line.extend(["--timeout".to_owned(), timeout_ms.to_string()]);
            if scope == Scope::User {
                line.push("--trust".to_owned());
            }
            line.extend([SERVER.to_owned(), entry.command.clone(), "--".to_owned()]);
            line.extend(entry.args.iter().cloned());
            HostPlan {
                files: vec![
                    FilePlan {
                        path: settings,
                        what: "Gemini CLI's settings".into(),
                        edits: vec![server_edit(&["mcpServers"], server)],
                    },
                    FilePlan {
                        path: entry.home.join(".gemini/trustedFolders.json"),
                        what: format!(
                            "Gemini CLI's trusted folders: it works only in {files} once trusted"
                        ),
                        edits: vec![Edit::JsonSet {
                            path: vec![],
                            key: files.clone(),
                            value: Json::Str("TRUST_FOLDER".into()),
                            same_is_fine: true,
                        }],
                    },
                ],
                notes: vec![format!(
                    "Or from the command line (mind the `--` after the binary: without it \
                     `gemini mcp add` takes serve's flags for its own):\n{}",
                    shell_line(&line)
                )],
                next: format!("start `gemini` in {files}"),
            }
        }
        Host::ClaudeDesktop => {
            only_user("Claude Desktop")?;
            let mut notes = Vec::new();
            if entry.timeout >= CLAUDE_DESKTOP_GIVES_UP {
                notes.push(format!(
                    "Claude Desktop gives up on a tool call after about 60 s whatever the entry \
                     says, and --timeout is {}: give --timeout 50s so that the agent gets the \
                     output rather than an error",
                    humantime::format_duration(entry.timeout)
                ));
            }
            HostPlan {
                files: vec![FilePlan {
                    path: entry
                        .config_home()
                        .join("Claude/claude_desktop_config.json"),
                    what: "Claude Desktop's configuration".into(),
                    edits: vec![server_edit(&["mcpServers"], entry.server(vec![]))],
                }],
                notes,
                next: "restart Claude Desktop".into(),
            }
        }
        Host::Vscode => {
            let scope = scope.unwrap_or(Scope::User);
            let path = match scope {
                Scope::Project => entry.files.join(".vscode/mcp.json"),
                Scope::User => entry.config_home().join("Code/User/mcp.json"),
            };
            let mut server = vec![("type".to_owned(), Json::Str("stdio".into()))];
            if let Json::Obj(members) = entry.server(vec![]) {
                server.extend(members);
            }
            let mut added = vec![("name".to_owned(), Json::Str(SERVER.into()))];
            added.extend(server.iter().cloned());
            let line = [
                "code".to_owned(),
                "--add-mcp".to_owned(),
                Json::Obj(added).compact(),
            ];
            HostPlan {
                files: vec![FilePlan {
                    path,
                    what: "VS Code's MCP servers".into(),
                    edits: vec![server_edit(&["servers"], Json::Obj(server))],
                }],
                notes: vec![format!(
                    "Or from the command line, into your profile's mcp.json:\n{}",
                    shell_line(&line)
                )],
                next: format!("open {files} in VS Code and start `{SERVER}` from its mcp.json"),
            }
        }
    })
}

/// The server's entry under `path`, refused when there is one of the same name.
fn server_edit(path: &[&'static str], value: Json) -> Edit {
    Edit::JsonSet {
        path: path.to_vec(),
        key: SERVER.to_owned(),
        value,
        same_is_fine: false,
    }
}

fn claude_code(scope: Scope, entry: &Entry) -> HostPlan {
    let server = entry.server(vec![("timeout", Json::Num(entry.host_timeout_ms()))]);
    let files = entry.files.display().to_string();
    let allow = format!("mcp__{SERVER}");
    let scope_word = if scope == Scope::User {
        "user"
    } else {
        "project"
    };
    let line = [
        "claude".to_owned(),
        "mcp".to_owned(),
        "add-json".to_owned(),
        "--scope".to_owned(),
        scope_word.to_owned(),
        SERVER.to_owned(),
        server.compact(),
    ];
    // No `enabledMcpjsonServers` in the project: Claude Code asks once whether to use the
    // project's server, so that one a program put in `.mcp.json` never starts unasked.
    let (entry_file, settings_file) = match scope {
        Scope::Project => (
            entry.files.join(".mcp.json"),
            entry.files.join(".claude/settings.local.json"),
        ),
        Scope::User => (
            entry.home.join(".claude.json"),
            entry.home.join(".claude/settings.json"),
        ),
    };
    let settings = vec![Edit::JsonAdd {
        path: vec!["permissions"],
        key: "allow",
        item: allow,
    }];
    let in_folder = if scope == Scope::Project {
        format!(", in {files}")
    } else {
        String::new()
    };
    let mut notes = vec![format!(
        "Or from the command line{in_folder} (the settings above still go in by hand):\n{}",
        shell_line(&line)
    )];
    if scope == Scope::Project {
        notes.push(
            "Claude Code asks, the first time it starts in the folder, whether to use the \
             project's link-run server: say yes (nothing in the folder says it for you, so that \
             a server the agent's programs could put there is never started unasked)"
                .to_owned(),
        );
    }
    HostPlan {
        files: vec![
            FilePlan {
                path: entry_file,
                what: format!("Claude Code's MCP servers, {scope_word} scope"),
                edits: vec![server_edit(&["mcpServers"], server)],
            },
            FilePlan {
                path: settings_file,
                what: "Claude Code's settings: the server's tools allowed up front".into(),
                edits: settings,
            },
        ],
        notes,
        next: format!("start `claude` in {files}"),
    }
}

/// `path` for a person: `~/…` when it is in `home`.
pub fn shown(path: &Path, home: &Path) -> String {
    match path.strip_prefix(home) {
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => path.display().to_string(),
    }
}

/// Codex's entry from its edit.
pub fn codex_entry<'a>(command: &'a str, args: &'a [String], seconds: u64) -> CodexEntry<'a> {
    CodexEntry {
        name: SERVER,
        command,
        args,
        tool_timeout_sec: seconds,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(timeout: Duration) -> Entry {
        Entry {
            command: "/b/lnk-link-run".into(),
            args: vec!["serve".into()],
            files: PathBuf::from("/w"),
            timeout,
            home: PathBuf::from("/h"),
        }
    }

    #[test]
    fn the_host_waits_at_least_five_minutes_and_a_minute_above_the_timeout() {
        let secs = |t: u64| entry(Duration::from_secs(t)).host_timeout().as_secs();
        assert_eq!(secs(240), 300);
        assert_eq!(secs(30), 300);
        assert_eq!(secs(600), 660);
        assert_eq!(
            entry(Duration::from_millis(600_500))
                .host_timeout()
                .as_secs(),
            661
        );
    }

    #[test]
    fn codex_and_claude_desktop_have_no_project_scope() {
        let e = entry(Duration::from_secs(50));
        assert!(plan(Host::Codex, Some(Scope::Project), &e).is_err());
        assert!(plan(Host::ClaudeDesktop, Some(Scope::Project), &e).is_err());
        let p = plan(Host::ClaudeCode, None, &e).map_err(|e| e.to_string());
        assert!(p.is_ok_and(|p| p.files[0].path == Path::new("/h/.claude.json")));
    }

    #[test]
    fn nothing_in_the_files_folder_approves_a_server() {
        let e = entry(Duration::from_secs(50));
        for host in [Host::ClaudeCode, Host::Gemini, Host::Vscode] {
            let plan = plan(host, Some(Scope::Project), &e).unwrap_or_else(|e| panic!("{e}"));
            for file in plan.files.iter().filter(|f| f.path.starts_with("/w")) {
                for edit in &file.edits {
                    match edit {
                        Edit::JsonAdd { key, .. } => assert_ne!(*key, "enabledMcpjsonServers"),
                        Edit::JsonSet { value, .. } => {
                            assert!(
                                !value.compact().contains("\"trust\""),
                                "{}",
                                value.compact()
                            )
                        }
                        Edit::Codex { .. } => {}
                    }
                }
            }
        }
    }
}
