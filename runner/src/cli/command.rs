//! The subcommands of `lnk-link-run`, and what a command line asks for.

use std::ffi::OsString;

use clap::{Parser, Subcommand};

use super::args::ServeArgs;
use super::config::{ConfigArgs, ConfigRequest};
use super::refusal::{Refusal, refuse};
use crate::config::Config;

/// `lnk-link-run`: Link Run's MCP server over stdio.
#[derive(Debug, Parser)]
#[command(name = "lnk-link-run", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP over stdio: run each call's program in the sandbox given after `--`.
    Serve(Box<ServeArgs>),
    /// Check the sandbox as `serve` does at start, with the same arguments, and report each
    /// check: exit 0 when `serve` would start, 1 when it would refuse.
    Check(Box<ServeArgs>),
    /// Print (or, with --write, merge into the host's file) a host's configuration entry for
    /// `serve` with these arguments, its paths made absolute and its sandbox checked first
    /// (with no sandbox after `--`: the recommended bubblewrap line, with --files bound).
    Config(Box<ConfigArgs>),
    /// Run by the sandbox check inside the sandbox: tries what a hostile program would.
    #[command(name = "sandbox-probe", hide = true)]
    SandboxProbe,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Invocation {
    /// `serve`, checked; `sandbox_check` is false with `--no-sandbox-check`.
    Serve {
        /// The checked flags.
        config: Box<Config>,
        /// Whether to run the sandbox check at start.
        sandbox_check: bool,
    },
    /// `check`, with serve's flags checked; `skipped` when they hold `--no-sandbox-check`.
    Check {
        /// The checked flags.
        config: Box<Config>,
        /// Whether `--no-sandbox-check` is among them.
        skipped: bool,
    },
    /// `check` with no sandbox after `--`: the recommended line for this machine, built from
    /// serve's arguments as given (each flag and its value as two words), as `config` builds it.
    CheckRecommended(Vec<OsString>),
    /// `config`: a host's entry for serve with these arguments.
    Config(Box<ConfigRequest>),
    /// The sandbox check's probe, inside the sandbox.
    SandboxProbe,
}

impl Cli {
    /// Parses the command line. Help and version print and exit here; any other clap error
    /// becomes a one-line [`Refusal`].
    pub fn parse_args() -> Result<Invocation, Refusal> {
        Cli::parse_from_args(std::env::args_os())
    }

    /// [`Cli::parse_args`] of `args` (the program's name first).
    pub(super) fn parse_from_args(
        args: impl IntoIterator<Item = OsString>,
    ) -> Result<Invocation, Refusal> {
        let args: Vec<OsString> = args.into_iter().collect();
        let cli = match Cli::try_parse_from(&args) {
            Ok(cli) => cli,
            Err(err) => match err.kind() {
                clap::error::ErrorKind::DisplayHelp
                | clap::error::ErrorKind::DisplayVersion
                | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => err.exit(),
                _ => return refuse(one_line(&err.to_string())),
            },
        };
        match cli.command {
            Command::Serve(args) => {
                let sandbox_check = !args.no_sandbox_check;
                args.check().map(|c| Invocation::Serve {
                    config: Box::new(c),
                    sandbox_check,
                })
            }
            Command::Check(check) if check.sandbox.is_empty() => {
                // The words after `check` (it has no flag of its own), read as `config` reads
                // serve's.
                let at = args.len().min(2);
                super::config::serve_words(&args[at..], false).map(Invocation::CheckRecommended)
            }
            Command::Check(args) => {
                let skipped = args.no_sandbox_check;
                args.check().map(|c| Invocation::Check {
                    config: Box::new(c),
                    skipped,
                })
            }
            Command::Config(config) => {
                // The words after `config` (the subcommand comes right after the program's
                // name: there are no options before it): serve's arguments as given.
                let at = args.len().min(2);
                config
                    .request(&args[at..])
                    .map(|request| Invocation::Config(Box::new(request)))
            }
            Command::SandboxProbe => Ok(Invocation::SandboxProbe),
        }
    }
}

/// serve's command line (`serve` first) checked exactly as `lnk-link-run serve` checks it:
/// the configuration, and whether `--no-sandbox-check` is among the flags.
pub fn check_serve_line(argv: &[OsString]) -> Result<(Config, bool), Refusal> {
    let program = std::iter::once(OsString::from("lnk-link-run"));
    match Cli::parse_from_args(program.chain(argv.iter().cloned()))? {
        Invocation::Serve {
            config,
            sandbox_check,
        } => Ok((*config, !sandbox_check)),
        _ => refuse("config: the entry's arguments do not start `serve`"),
    }
}

/// Folds clap's several-line message into one line: what is wrong, without the usage.
fn one_line(message: &str) -> String {
    let mut out = String::new();
    for line in message.lines() {
        let line = line.trim();
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        if line.is_empty() {
            continue;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(line);
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// What `lnk-link-run <args>` asks for.
    pub(in crate::cli) fn parse(args: &[&str]) -> Result<Invocation, String> {
        let argv = std::iter::once("lnk-link-run").chain(args.iter().copied());
        Cli::parse_from_args(argv.map(OsString::from)).map_err(|e| e.to_string())
    }

    /// `serve`'s required flags over `files`, then `extra`, then `-- /usr/bin/env`.
    pub(in crate::cli) fn serve_line(files: &std::path::Path, extra: &[&str]) -> Vec<String> {
        let mut args: Vec<String> = ["serve", "--files", &files.to_string_lossy()]
            .into_iter()
            .chain(["--programs-path", "/usr/bin:/bin", "--timeout", "30s"])
            .chain(["--output", "64KiB", "--program", "echo"])
            .map(str::to_owned)
            .collect();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args.extend(["--".to_owned(), "/usr/bin/env".to_owned()]);
        args
    }

    fn words(args: &[String]) -> Vec<&str> {
        args.iter().map(String::as_str).collect()
    }

    #[test]
    fn serve_is_checked_into_a_config() {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().canonicalize().unwrap();
        let extra = ["--program", "sh", "--program", "echo", "--var", "A=b"];
        let line = serve_line(&dir.path().join("."), &extra);
        let Ok(Invocation::Serve {
            config,
            sandbox_check,
        }) = parse(&words(&line))
        else {
            panic!("{:?}", parse(&words(&line)));
        };
        assert!(sandbox_check);
        assert_eq!(config.files, files);
        assert_eq!(config.programs, ["echo", "sh"], "in order, without repeats");
        assert_eq!(config.vars, [("A".to_owned(), "b".to_owned())]);
        assert_eq!(config.timeout, std::time::Duration::from_secs(30));
        assert_eq!(config.output, 65536);
        assert_eq!(config.sandbox, [OsString::from("/usr/bin/env")]);
        assert!(config.background.is_none());
    }

    #[test]
    fn check_and_the_probe_are_their_own_invocations() {
        let dir = tempfile::tempdir().unwrap();
        let mut line = serve_line(dir.path(), &["--no-sandbox-check"]);
        line[0] = "check".to_owned();
        let parsed = parse(&words(&line));
        assert!(
            matches!(parsed, Ok(Invocation::Check { skipped: true, .. })),
            "{parsed:?}"
        );
        let parsed = parse(&["sandbox-probe"]);
        assert!(matches!(parsed, Ok(Invocation::SandboxProbe)), "{parsed:?}");
    }

    #[test]
    fn a_refusal_of_clap_is_one_line_without_the_usage() {
        let dir = tempfile::tempdir().unwrap();
        let line = serve_line(dir.path(), &["--bogus", "1"]);
        let err = parse(&words(&line)).unwrap_err();
        assert!(
            err.starts_with("unexpected argument '--bogus' found"),
            "{err}"
        );
        assert!(!err.contains('\n') && !err.contains("Usage"), "{err}");
        let err = parse(
            &serve_line(dir.path(), &["--background-timeout", "0s"])
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .unwrap_err();
        assert!(
            err.contains("`0s` is zero; give a duration above zero"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_flag_says_what_it_is_for() {
        let err = parse(&["serve", "--", "/usr/bin/env"]).unwrap_err();
        assert!(
            err.starts_with(
                "--files is required: the folder the calls work in (or --files-from roots"
            ),
            "{err}"
        );
        let err = parse(&["serve"]).unwrap_err();
        assert!(err.starts_with("a sandbox is required after `--`"), "{err}");
    }
}
