//! `lnk-link-run config <host> [--write] [--scope project|user] [--force] <serve's arguments>`:
//! its flags as clap reads them, and serve's arguments as the person gave them, in their order,
//! for [`crate::host_config`] to make absolute and check exactly as serve will.

use std::ffi::OsString;

use super::args::ServeArgs;
use super::refusal::{Refusal, refuse};

/// The hosts `config` writes an entry for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    /// Claude Code: `.mcp.json` (project) or `~/.claude.json` (user), and its settings.
    ClaudeCode,
    /// Codex CLI: `~/.codex/config.toml`.
    Codex,
    /// Gemini CLI: `~/.gemini/settings.json` (user) or `.gemini/settings.json` (project).
    Gemini,
    /// Claude Desktop: `claude_desktop_config.json`.
    ClaudeDesktop,
    /// VS Code: `.vscode/mcp.json` (project) or the profile's `mcp.json` (user).
    Vscode,
}

/// Where the entry goes: the project's folder or the user's home.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scope {
    /// In the project (the `--files` folder).
    Project,
    /// In the user's own configuration, for every folder.
    User,
}

/// The flags of `config`, then serve's own.
#[derive(Debug, clap::Args)]
pub(super) struct ConfigArgs {
    /// The host: claude-code, codex, gemini, claude-desktop or vscode.
    #[arg(value_enum)]
    pub(super) host: Host,
    /// Merge the entry into the host's configuration file (a backup is left beside it).
    #[arg(long)]
    pub(super) write: bool,
    /// Which of the host's files: the project's (the default for claude-code and vscode) or the
    /// user's (the default for gemini, the only one for codex and claude-desktop).
    #[arg(long, value_enum)]
    pub(super) scope: Option<Scope>,
    /// With --write, replace an entry named `link-run` that is already there; with --read,
    /// show a path of the never-list anyway (with a warning).
    #[arg(long)]
    pub(super) force: bool,
    /// A path the recommended line shows read-only, at its own place (repeatable); one of
    /// the never-list (keys, tokens, histories, …) only with --force.
    #[arg(long = "read", value_name = "PATH")]
    pub(super) reads: Vec<std::path::PathBuf>,
    /// serve's arguments.
    #[command(flatten)]
    pub(super) serve: ServeArgs,
}

/// What `config` was asked.
#[derive(Debug)]
pub struct ConfigRequest {
    /// The host.
    pub host: Host,
    /// Whether to write the host's file.
    pub write: bool,
    /// The scope asked for, if any.
    pub scope: Option<Scope>,
    /// Whether an entry of the same name may be replaced, and a `--read` of the never-list
    /// shown.
    pub force: bool,
    /// `--read` paths, as given.
    pub reads: Vec<std::path::PathBuf>,
    /// serve's arguments as given (without `serve`, `config`'s own flags and the host), each
    /// flag and its value as two words, the sandbox after `--`.
    pub serve_args: Vec<OsString>,
}

/// `config`'s own flags that take no value, and those that take one.
const OWN_SWITCHES: [&str; 2] = ["--write", "--force"];
const OWN_VALUED: [&str; 2] = ["--scope", "--read"];
/// serve's one flag without a value.
const SERVE_SWITCH: &str = "--no-sandbox-check";

impl ConfigArgs {
    /// The request, with serve's arguments taken from `raw` (the words after `config`), which
    /// clap has already accepted.
    pub(super) fn request(self, raw: &[OsString]) -> Result<ConfigRequest, Refusal> {
        let serve_args = serve_words(raw, true)?;
        Ok(ConfigRequest {
            host: self.host,
            write: self.write,
            scope: self.scope,
            force: self.force,
            reads: self.reads,
            serve_args,
        })
    }
}

/// serve's arguments among `raw` (the words after the subcommand, which clap has accepted), in
/// their order, each flag and its value as two words, the sandbox after `--`; with `own`,
/// `config`'s own flags and the host are left out.
pub(super) fn serve_words(raw: &[OsString], own: bool) -> Result<Vec<OsString>, Refusal> {
    let mut serve_args = Vec::new();
    let mut words = raw.iter();
    while let Some(word) = words.next() {
        if word == "--" {
            serve_args.push(word.clone());
            serve_args.extend(words.by_ref().cloned());
            break;
        }
        let Some(text) = word.to_str() else {
            // clap took it, so it is a value it read as the host; hosts are ASCII.
            return refuse(format!(
                "`{}` is not a flag of serve",
                word.to_string_lossy()
            ));
        };
        let own_flag = OWN_SWITCHES.contains(&text)
            || OWN_VALUED
                .iter()
                .any(|flag| text.starts_with(&format!("{flag}=")));
        if own && own_flag {
            continue;
        }
        if own && OWN_VALUED.contains(&text) {
            words.next();
            continue;
        }
        if text == SERVE_SWITCH {
            serve_args.push(word.clone());
            continue;
        }
        if let Some(flag) = text.strip_prefix("--") {
            match flag.split_once('=') {
                Some((name, value)) => {
                    serve_args.push(OsString::from(format!("--{name}")));
                    serve_args.push(OsString::from(value));
                }
                None => {
                    serve_args.push(word.clone());
                    if let Some(value) = words.next() {
                        serve_args.push(value.clone());
                    }
                }
            }
            continue;
        }
        // The one word that is not a flag nor a flag's value: config's host.
    }
    Ok(serve_args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::command::tests::parse;

    #[test]
    fn config_s_own_flags_and_the_host_are_taken_out_and_serve_s_kept_in_order() {
        let parsed = parse(&[
            "config",
            "--force",
            "gemini",
            "--files=~/w",
            "--write",
            "--timeout",
            "4m",
            "--no-sandbox-check",
            "--scope=user",
            "--read",
            "~/.config/tool",
            "--read=/etc/x",
            "--",
            "bwrap",
            "--write",
        ]);
        let Ok(crate::cli::Invocation::Config(request)) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(request.host, Host::Gemini);
        assert!(request.write && request.force);
        assert_eq!(request.scope, Some(Scope::User));
        assert_eq!(
            request.reads,
            [
                std::path::PathBuf::from("~/.config/tool"),
                std::path::PathBuf::from("/etc/x")
            ]
        );
        let words: Vec<OsString> = [
            "--files",
            "~/w",
            "--timeout",
            "4m",
            "--no-sandbox-check",
            "--",
            "bwrap",
            "--write",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        assert_eq!(request.serve_args, words);
        let parsed = parse(&["config", "--scope", "project", "vscode", "--output", "1KiB"]);
        let Ok(crate::cli::Invocation::Config(request)) = parsed else {
            panic!("{parsed:?}");
        };
        assert_eq!(request.scope, Some(Scope::Project));
        assert_eq!(
            request.serve_args,
            [OsString::from("--output"), "1KiB".into()]
        );
    }

    #[test]
    fn an_unknown_host_or_a_bad_value_is_refused_by_clap() {
        assert!(parse(&["config", "emacs"]).is_err());
        let err = parse(&["config", "codex", "--timeout", "soon"]).map(|_| ());
        assert!(err.is_err_and(|e| e.contains("soon")));
    }
}
