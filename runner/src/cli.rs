//! The command line of `lnk-link-run`, and its checks, into a [`Config`].
//!
//! Every refusal to start is one line on stderr and a non-zero exit, and nothing is written
//! before all checks have passed.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use std::os::unix::ffi::OsStrExt;

use clap::{Parser, Subcommand};

use crate::config::{Background, Config, WayIn};

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
    /// The sandbox check's probe, inside the sandbox.
    SandboxProbe,
}

/// The flags of `serve`. Every one is optional here so that a missing one gets a message of its
/// own in [`ServeArgs::check`]; none has a built-in value.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// The files folder: calls work inside it and cannot leave it.
    #[arg(long, value_name = "FOLDER")]
    files: Option<PathBuf>,
    /// Folders (`:`-separated) where the allowed programs are looked up, in order.
    #[arg(long, value_name = "PATH")]
    programs_path: Option<OsString>,
    /// A call's time limit (e.g. `30s`); at it the call's whole process group is killed.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Output kept per call: each of stdout and stderr keeps its first and last half of this.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    output: Option<u64>,
    /// A program the agent may run (a bare name, repeatable).
    #[arg(long = "program", value_name = "NAME")]
    programs: Vec<String>,
    /// An environment variable passed to every program through `/usr/bin/env` (repeatable).
    #[arg(long = "var", value_name = "NAME=VALUE", value_parser = parse_var)]
    vars: Vec<(String, String)>,
    /// The state folder for background runs (outside `--files`).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// How many background runs may run at once.
    #[arg(long, value_name = "N")]
    background: Option<u32>,
    /// A background run's time limit.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    background_timeout: Option<Duration>,
    /// The cap of a background run's output file.
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    background_output: Option<u64>,
    /// How long an ended background run's record and output are kept.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    background_keep: Option<Duration>,
    /// Calls whose `link.local/hops` is at or above this may not start background runs.
    #[arg(long, value_name = "N")]
    hops: Option<u32>,
    /// The bridge's Unix socket that background runs tell when they end.
    #[arg(long, value_name = "SOCKET")]
    way_in: Option<PathBuf>,
    /// The agent id whose key signs what background runs tell.
    #[arg(long = "as", value_name = "AGENT")]
    agent: Option<String>,
    /// The keyring folder holding `<agent>.key` (default: Link's keyring).
    #[arg(long, value_name = "DIR")]
    keyring: Option<PathBuf>,
    /// Skip the sandbox check at start (for a sandbox that cannot run the probe, or a
    /// pass-through prefix on purpose); serve then logs a warning.
    #[arg(long)]
    no_sandbox_check: bool,
    /// The sandbox prefix: each call runs `<sandbox> -- <program> <args>`.
    #[arg(last = true, value_name = "SANDBOX")]
    sandbox: Vec<OsString>,
}

/// A refusal to start: one line for stderr.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refusal(String);

fn refuse<T>(message: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal(message.into()))
}

impl Cli {
    /// Parses the command line. Help and version print and exit here; any other clap error
    /// becomes a one-line [`Refusal`].
    pub fn parse_args() -> Result<Invocation, Refusal> {
        let cli = match Cli::try_parse() {
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
            Command::Check(args) => {
                let skipped = args.no_sandbox_check;
                args.check().map(|c| Invocation::Check {
                    config: Box::new(c),
                    skipped,
                })
            }
            Command::SandboxProbe => Ok(Invocation::SandboxProbe),
        }
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

fn parse_duration(text: &str) -> Result<Duration, String> {
    let duration = humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration like 500ms, 30s, 2m or 1h ({e})"))?;
    if duration.is_zero() {
        return Err(format!("`{text}` is zero; give a duration above zero"));
    }
    Ok(duration)
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    let bytes = parse_size::parse_size(text)
        .map_err(|e| format!("`{text}` is not a size like 65536, 64KiB or 1MiB ({e})"))?;
    if bytes == 0 {
        return Err(format!("`{text}` is zero; give a size above zero"));
    }
    Ok(bytes)
}

fn parse_var(text: &str) -> Result<(String, String), String> {
    let Some((name, value)) = text.split_once('=') else {
        return Err(format!("`{text}` is not NAME=VALUE"));
    };
    let mut chars = name.chars();
    let well_formed = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed {
        return Err(format!(
            "`{name}` is not a variable name (letters, digits and _, not starting with a digit)"
        ));
    }
    if value.contains('\0') {
        return Err(format!("the value of {name} holds a NUL byte"));
    }
    Ok((name.to_owned(), value.to_owned()))
}

fn required<T>(value: Option<T>, flag: &str, what: &str) -> Result<T, Refusal> {
    match value {
        Some(v) => Ok(v),
        None => refuse(format!("{flag} is required: {what}")),
    }
}

impl ServeArgs {
    fn check(self) -> Result<Config, Refusal> {
        if self.sandbox.is_empty() {
            return refuse(
                "a sandbox is required after `--` (for instance the README's recommended line, \
                 `-- /usr/bin/bwrap --ro-bind /usr /usr ... --bind <files> <files> \
                 --unshare-all --cap-drop ALL --die-with-parent --clearenv`); lnk-link-run \
                 never runs programs without one",
            );
        }
        let files = required(
            self.files.clone(),
            "--files",
            "the folder the calls work in",
        )?;
        must_be_absolute(&files, "--files")?;
        let files = canonical_folder(&files, "--files")?;
        let programs_path = required(
            self.programs_path.clone(),
            "--programs-path",
            "the folders where the allowed programs are found",
        )?;
        if !programs_path
            .as_encoded_bytes()
            .split(|b| *b == b':')
            .any(|folder| folder.first() == Some(&b'/'))
        {
            return refuse(
                "--programs-path has no absolute folder: give the folders where programs are \
                 found, like /usr/bin:/bin",
            );
        }
        let timeout = required(self.timeout, "--timeout", "a call's time limit, e.g. 30s")?;
        let output = required(
            self.output,
            "--output",
            "the output kept per call, e.g. 64KiB",
        )?;
        if output < 2 {
            return refuse("--output must be at least 2 bytes (half for the head, half the tail)");
        }
        if self.programs.is_empty() {
            return refuse("at least one --program is required: the programs the agent may run");
        }
        let mut programs: Vec<String> = Vec::new();
        for name in &self.programs {
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return refuse(format!(
                    "--program `{name}` is not a bare program name (no `/`)"
                ));
            }
            if !programs.contains(name) {
                programs.push(name.clone());
            }
        }
        let background = self.check_background(&files)?;
        let sandbox = sandbox_with_absolute_program(&self.sandbox)?;
        Ok(Config {
            files,
            programs_path,
            timeout,
            output,
            programs,
            vars: self.vars,
            background,
            sandbox,
        })
    }

    fn check_background(&self, files: &Path) -> Result<Option<Background>, Refusal> {
        let Some(state) = &self.state else {
            let stray = [
                (self.background.is_some(), "--background"),
                (self.background_timeout.is_some(), "--background-timeout"),
                (self.background_output.is_some(), "--background-output"),
                (self.background_keep.is_some(), "--background-keep"),
                (self.hops.is_some(), "--hops"),
                (self.way_in.is_some(), "--way-in"),
                (self.agent.is_some(), "--as"),
                (self.keyring.is_some(), "--keyring"),
            ];
            if let Some((_, flag)) = stray.iter().find(|(given, _)| *given) {
                return refuse(format!("{flag} needs --state: it is about background runs"));
            }
            return Ok(None);
        };
        let what = "with --state, background runs need it";
        let max_running = required(self.background, "--background", what)?;
        if max_running == 0 {
            return refuse("--background must be at least 1");
        }
        let timeout = required(self.background_timeout, "--background-timeout", what)?;
        let output = required(self.background_output, "--background-output", what)?;
        if output < 2 {
            return refuse("--background-output must be at least 2 bytes");
        }
        let keep = required(self.background_keep, "--background-keep", what)?;
        let hops = required(self.hops, "--hops", what)?;
        must_be_absolute(state, "--state")?;
        let state = absolute_state(state)?;
        if state.starts_with(files) {
            return refuse(format!(
                "--state {} lies inside --files {}: the sandboxed programs could write it",
                state.display(),
                files.display()
            ));
        }
        let way_in = match (&self.way_in, &self.agent) {
            (None, None) => {
                if self.keyring.is_some() {
                    return refuse("--keyring needs --way-in and --as: it signs what runs tell");
                }
                None
            }
            (Some(_), None) => return refuse("--way-in needs --as <agent id>: whose key signs"),
            (None, Some(_)) => return refuse("--as needs --way-in <socket>: where runs tell"),
            (Some(socket), Some(agent)) => {
                must_be_absolute(socket, "--way-in")?;
                let Ok(agent) = lnk_common::AgentId::parse(agent) else {
                    return refuse(format!(
                        "--as `{agent}` is not an agent id ([A-Za-z0-9][A-Za-z0-9._-]{{0,63}})"
                    ));
                };
                let keyring = match &self.keyring {
                    Some(dir) => {
                        must_be_absolute(dir, "--keyring")?;
                        dir.clone()
                    }
                    None => default_keyring()?,
                };
                // Runs tell from their supervisor, and later sweeps from wherever they are
                // started: the record holds absolute paths.
                let keyring = absolute(&keyring, "--keyring")?;
                if keyring.starts_with(files)
                    || keyring.canonicalize().is_ok_and(|k| k.starts_with(files))
                {
                    return refuse(format!(
                        "the keyring {} lies inside --files {}: sandboxed programs could \
                         read or replace the agent's key",
                        keyring.display(),
                        files.display()
                    ));
                }
                Some(WayIn {
                    socket: absolute(socket, "--way-in")?,
                    agent,
                    keyring,
                })
            }
        };
        let supervise = find_supervise()?;
        Ok(Some(Background {
            supervise,
            state,
            max_running,
            timeout,
            output,
            keep,
            hops,
            way_in,
        }))
    }
}

/// The sandbox with its program resolved, once, to an absolute path (see
/// [`resolve_sandbox_program`]): calls, records and the gate all run that path.
fn sandbox_with_absolute_program(sandbox: &[OsString]) -> Result<Vec<OsString>, Refusal> {
    let mut sandbox = sandbox.to_vec();
    // `-- bwrap ... --clearenv --` and `-- bwrap ... --clearenv` mean the same: each call
    // adds the `--` that ends the sandbox's options.
    if sandbox.last().is_some_and(|last| last == "--") {
        sandbox.pop();
    }
    if sandbox.is_empty() {
        return refuse(
            "a sandbox is required after `--`; lnk-link-run never runs programs without one",
        );
    }
    sandbox[0] = resolve_sandbox_program(&sandbox[0])?.into_os_string();
    Ok(sandbox)
}

/// The sandbox's program as an absolute path to an executable file, found now, so that a
/// typo is a refusal to start rather than an error at every call.
///
/// A bare name is looked up in the **absolute** folders of `PATH` only. Calls start in the
/// agent's folder, and serve itself is often started in it: a `.` or empty entry of `PATH`
/// would find the agent's own `./bwrap` there. A path with a `/` is made absolute against the
/// folder serve starts in, since calls run in other folders.
pub fn resolve_sandbox_program(program: &std::ffi::OsStr) -> Result<PathBuf, Refusal> {
    let path = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        let absolute = match std::path::absolute(path) {
            Ok(absolute) => absolute,
            Err(e) => return refuse(format!("the sandbox program {}: {e}", path.display())),
        };
        if !crate::program::is_executable_file(&absolute) {
            return refuse(format!(
                "the sandbox program `{}` is not an executable file",
                path.display()
            ));
        }
        return Ok(absolute);
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    let found = search
        .as_encoded_bytes()
        .split(|b| *b == b':')
        .map(|folder| Path::new(std::ffi::OsStr::from_bytes(folder)))
        .filter(|folder| folder.is_absolute())
        .map(|folder| folder.join(path))
        .find(|candidate| crate::program::is_executable_file(candidate));
    match found {
        Some(found) => Ok(found),
        None => refuse(format!(
            "the sandbox program `{}` is not an executable file in an absolute folder of PATH \
             (`.`, empty and relative entries are not searched); give its absolute path, \
             like /usr/bin/bwrap",
            path.display()
        )),
    }
}

/// Paths a host passes must be absolute: hosts start serve without a shell, so nothing expands
/// `~`, and a relative path would land in whatever folder the host happened to start in.
fn must_be_absolute(path: &Path, flag: &str) -> Result<(), Refusal> {
    if path.is_absolute() {
        return Ok(());
    }
    let why = if path.as_os_str().as_encoded_bytes().first() == Some(&b'~') {
        "starts with `~`"
    } else {
        "is relative"
    };
    refuse(format!(
        "{flag} {} {why}: MCP hosts pass arguments without a shell, so `~` is not expanded and \
         a relative path would land in whatever folder the host starts in; give an absolute \
         path, like /home/me/work",
        path.display()
    ))
}

fn canonical_folder(path: &Path, flag: &str) -> Result<PathBuf, Refusal> {
    let canonical = match path.canonicalize() {
        Ok(p) => p,
        Err(e) => return refuse(format!("{flag} {}: {e}", path.display())),
    };
    if !canonical.is_dir() {
        return refuse(format!("{flag} {} is not a folder", path.display()));
    }
    Ok(canonical)
}

/// The state folder as an absolute path with its existing part resolved, so that a state folder
/// that does not exist yet can still be compared with `--files`.
fn absolute_state(state: &Path) -> Result<PathBuf, Refusal> {
    let absolute = match std::path::absolute(state) {
        Ok(p) => p,
        Err(e) => return refuse(format!("--state {}: {e}", state.display())),
    };
    let mut existing = absolute.as_path();
    let mut rest: Vec<&std::ffi::OsStr> = Vec::new();
    loop {
        if let Ok(canonical) = existing.canonicalize() {
            if !canonical.is_dir() {
                return refuse(format!("--state {} is not a folder", state.display()));
            }
            let mut out = canonical;
            for part in rest.iter().rev() {
                if *part == ".." {
                    return refuse(format!("--state {} holds `..`", state.display()));
                }
                out.push(part);
            }
            return Ok(out);
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => return refuse(format!("--state {}: no such folder", state.display())),
        }
    }
}

fn absolute(path: &Path, flag: &str) -> Result<PathBuf, Refusal> {
    std::path::absolute(path).or_else(|e| refuse(format!("{flag} {}: {e}", path.display())))
}

/// `lnk-link-supervise`: `$LNK_SUPERVISE`, else next to this executable.
fn find_supervise() -> Result<PathBuf, Refusal> {
    let path = match std::env::var_os("LNK_SUPERVISE").filter(|v| !v.is_empty()) {
        Some(path) => absolute(Path::new(&path), "LNK_SUPERVISE")?,
        None => match std::env::current_exe() {
            Ok(exe) => exe.with_file_name(lnk_common::commands::SUPERVISOR),
            Err(e) => {
                return refuse(format!(
                    "cannot find this executable to find lnk-link-supervise beside it: {e}"
                ));
            }
        },
    };
    if !crate::program::is_executable_file(&path) {
        return refuse(format!(
            "background runs need lnk-link-supervise, and {} is not an executable file \
             (install it beside lnk-link-run or set LNK_SUPERVISE)",
            path.display()
        ));
    }
    Ok(path)
}

/// Link's keyring: `$LNK_KEYRING`, else `$XDG_CONFIG_HOME/lnk/keyring`, else
/// `~/.config/lnk/keyring`. A relative `$XDG_CONFIG_HOME` is ignored, as the XDG base
/// directory rules say; a relative `$LNK_KEYRING` or `$HOME` is refused like a relative flag.
fn default_keyring() -> Result<PathBuf, Refusal> {
    let non_empty = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = non_empty("LNK_KEYRING") {
        let dir = PathBuf::from(dir);
        must_be_absolute(&dir, "LNK_KEYRING")?;
        return Ok(dir);
    }
    if let Some(dir) = non_empty("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
    {
        return Ok(dir.join("lnk/keyring"));
    }
    if let Some(home) = non_empty("HOME") {
        let home = PathBuf::from(home);
        must_be_absolute(&home, "HOME")?;
        return Ok(home.join(".config/lnk/keyring"));
    }
    refuse("--keyring is not given and neither LNK_KEYRING, XDG_CONFIG_HOME nor HOME is set")
}
