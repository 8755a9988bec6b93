//! `lnk-link-run config <host> [--write] [--scope project|user] [--force] <serve's arguments>`:
//! a host's configuration entry for Link Run, for a person setting a host up.
//!
//! It runs in the person's shell, so it makes `--files`, `--state`, `--keyring` and `--way-in`
//! absolute (`~` and relative paths, which serve itself refuses, since a host passes arguments
//! without a shell); takes the sandbox given after `--` or, with none, the README's recommended
//! bubblewrap line with `--files` bound; checks the command line exactly as serve will, the
//! sandbox check included, and refuses what serve would refuse; then prints the host's entry
//! (stdout: the host's file as it would be made, in the host's own format; stderr: where it
//! goes, the host's settings in other files, the host's own one-line command), or with `--write`
//! merges it into the host's files, keeping everything else and a backup of each.
//!
//! The entry goes in the person's own files by default (user scope): out of the agent's
//! programs' reach. A host's file in the files folder (project scope) is written only where the
//! sandbox holds it read-only (the line holds `{protected}`, and the file is one of the
//! protected paths), approves no server up front, and is reached without following links
//! ([`file_write::InFiles`]).
//!
//! Its parts: [`serve_args`] makes serve's command line (with [`caches`], this machine's caches); [`hosts`] knows each host's files and
//! settings; [`render`] writes the entries; [`json_edit`] and [`codex_toml`] merge them into
//! what is there; [`file_write`] replaces a file safely.

mod caches;
mod codex_toml;
mod file_write;
mod hosts;
mod json_edit;
mod machine;
mod never;
mod recommended;
mod render;
mod serve_args;
mod toolchains;

use std::ffi::OsString;
use std::io::Write as _;
use std::process::ExitCode;

use crate::cli::ConfigRequest;
use hosts::{Edit, FilePlan, HostPlan};
use json_edit::{EditError, JsonDoc};
pub use recommended::report as check_recommended;

/// Runs `config`: exit 0 when the entry was printed or written, else one line on stderr and
/// [`crate::exit_code::REFUSED`], with nothing written.
pub fn run(request: &ConfigRequest) -> Result<ExitCode, String> {
    let home = serve_args::home()?;
    let made = recommended::make(&request.serve_args, &home, &request.reads, request.force)?;
    let (line, config, skipped) = (made.line, made.config, made.skipped);
    // The flags as made above, then the sandbox as serve will run it: its program resolved to
    // an absolute path (`serve_line` always puts in the `--`).
    let separator = line
        .argv
        .iter()
        .position(|w| w == "--")
        .unwrap_or(line.argv.len());
    let words: Vec<OsString> = line.argv[..separator]
        .iter()
        .cloned()
        .chain(std::iter::once(OsString::from("--")))
        .chain(config.sandbox.iter().cloned())
        .collect();
    let args = words
        .into_iter()
        .map(|w| {
            w.into_string().map_err(|w| {
                format!(
                    "`{}` is not UTF-8, and the hosts' files are text",
                    w.to_string_lossy()
                )
            })
        })
        .collect::<Result<Vec<String>, String>>()?;
    let mut warnings = made
        .machine
        .as_ref()
        .map(|part| part.warnings.clone())
        .unwrap_or_default();
    if skipped {
        warnings.push(
            "--no-sandbox-check is given: the sandbox was not checked, and serve will not check \
             it either"
                .to_owned(),
        );
        warnings.extend(config.caches.warning());
    }
    // With --files-from roots, a folder stands for the projects (`crate::project::stand_in`).
    let stand_in = crate::project::stand_in(&config)?;
    if !skipped {
        let (found, _) = crate::check::before_serving(&stand_in.config, false)
            .map_err(|refusal| format!("serve would refuse to start: {refusal}"))?;
        warnings.extend(found);
    }
    let config = &stand_in.config;
    let command = std::env::current_exe()
        .map_err(|err| {
            format!(
                "cannot find this lnk-link-run's own path: {}",
                lnk_common::Causes(&err)
            )
        })?
        .into_os_string()
        .into_string()
        .map_err(|p| format!("{} is not UTF-8", p.to_string_lossy()))?;
    let entry = hosts::Entry {
        command,
        args,
        files: config.files.clone(),
        timeout: config.timeout,
        home: home.clone(),
    };
    let mut plan = hosts::plan(request.host, request.scope, &entry)?;
    let roots = stand_in.note.is_some();
    if let Some(made) = stand_in.made()
        && plan.files.iter().any(|f| f.path.starts_with(made))
    {
        return Err(format!(
            "with --files-from roots, a project-scope entry goes into the project this runs in, \
             and {} may not be a project's folder: run it in the project's folder, or give \
             --scope user (one entry for every project)",
            std::env::current_dir().unwrap_or_default().display()
        ));
    }
    // A host's file in the files folder can be changed by the agent's programs, and the host
    // starts whatever it then says: only one the sandbox holds read-only will do.
    for file in &plan.files {
        if let Ok(rel) = file.path.strip_prefix(&config.files) {
            protected_in_files(config, rel, &file.path)?;
        }
    }
    if roots {
        plan.next.push_str(
            " (with --files-from roots, each session works in the folder the host was started \
             in: start it in any project's folder)",
        );
    }
    let mut err = String::new();
    for warning in &warnings {
        err.push_str(&format!("warning: {warning}\n"));
    }
    if let Some(note) = &stand_in.note {
        err.push_str(&format!("{note}\n"));
    }
    if let Some(part) = &made.machine {
        err.push_str(if roots {
            "The sandbox is the recommended bubblewrap line, with {files} bound (serve fills in \
             each session's project folder), and for this machine:\n"
        } else {
            "The sandbox is the recommended bubblewrap line, with --files bound, and for this \
             machine:\n"
        });
        for note in &part.notes {
            err.push_str(&format!("  {note}\n"));
        }
    }
    let mut out = String::new();
    if request.write {
        let texts = merged(&plan, request.force, &home, &config.files)?;
        for (file, text) in plan.files.iter().zip(texts) {
            let written = match file.path.strip_prefix(&config.files) {
                Ok(rel) => file_write::InFiles {
                    files: &config.files,
                    rel,
                }
                .replace(&text)?,
                Err(_) => file_write::replace(&file.path, &text)?,
            };
            out.push_str(&format!("wrote {} ({})", written.path.display(), file.what));
            match written.backup {
                Some(backup) => out.push_str(&format!("; as it was: {}\n", backup.display())),
                None => out.push('\n'),
            }
        }
        out.push_str(&format!("Next: {}.\n", plan.next));
    } else {
        out = fresh(&plan.files[0])?;
        err.push_str(&notes(&plan, &home)?);
    }
    speak(&out, &err)
}

/// What goes to stderr beside the printed entry.
fn notes(plan: &HostPlan, home: &std::path::Path) -> Result<String, String> {
    let mut text = format!(
        "The entry above goes in {} ({}); `--write` merges it in, keeping the rest and a backup.\n",
        plan.files[0].path.display(),
        plan.files[0].what
    );
    for file in &plan.files[1..] {
        text.push_str(&format!(
            "\n{} ({}), merged with what is there:\n{}",
            hosts::shown(&file.path, home),
            file.what,
            fresh(file)?
        ));
    }
    for note in &plan.notes {
        text.push_str(&format!("\n{note}\n"));
    }
    text.push_str(&format!("\nThen {}.\n", plan.next));
    Ok(text)
}

/// The file as `config` would make it where there is none.
fn fresh(file: &FilePlan) -> Result<String, String> {
    apply(file, "", false).map_err(|err| describe(file, err))
}

/// Refuses a host's file in the files folder (`path`, `rel` to it) that the sandbox does not
/// hold read-only: the line must hold `{protected}`, and the file be one of its paths.
fn protected_in_files(
    config: &crate::config::Config,
    rel: &std::path::Path,
    path: &std::path::Path,
) -> Result<(), String> {
    use crate::sandbox_line::protected::{PROTECTED, names::TOP};
    let top = rel.components().next().map(|c| c.as_os_str());
    let named = top.is_some_and(|top| TOP.iter().any(|name| top == name.name));
    if !named {
        return Err(format!(
            "{} lies in the files folder, where the agent's programs write, and is none of the \
             protected paths the sandbox holds read-only: a program could change what the host \
             starts next time; give --files a folder that does not hold the host's own files, \
             or another --scope; nothing was written",
            path.display()
        ));
    }
    if !crate::sandbox_line::holds_protected(&config.sandbox) {
        return Err(format!(
            "--scope project puts the entry in {}, in the files folder, and this sandbox line \
             lets the agent's programs change it (it does not hold `{PROTECTED}`, which makes \
             the protected paths read-only): a program could change what the host starts next \
             time. Leave out --scope (the entry then goes in your own settings), or put \
             `{PROTECTED}` right after the files folder's bind, as the recommended line does; \
             nothing was written",
            path.display()
        ));
    }
    Ok(())
}

/// Every file's new text, or the refusal: nothing is written unless every file can be. A file
/// in the files folder (`files`) is read without following links.
fn merged(
    plan: &HostPlan,
    force: bool,
    home: &std::path::Path,
    files: &std::path::Path,
) -> Result<Vec<String>, String> {
    let mut texts = Vec::new();
    for file in &plan.files {
        let before = match file.path.strip_prefix(files) {
            Ok(rel) => file_write::InFiles { files, rel }.read()?,
            Err(_) => file_write::read(&file.path)?,
        }
        .unwrap_or_default();
        let after = apply(file, &before, force).map_err(|err| match err {
            EditError::Exists(what) => format!(
                "{} already has `{what}`; give --force to replace it (a backup is kept), or \
                 remove it; nothing was written",
                hosts::shown(&file.path, home)
            ),
            other => describe(file, other),
        })?;
        texts.push(after);
    }
    Ok(texts)
}

fn describe(file: &FilePlan, err: EditError) -> String {
    match err {
        EditError::Exists(what) => format!("{} already has `{what}`", file.path.display()),
        EditError::Malformed(why) => format!(
            "cannot merge into {}: {why}; merge the entry by hand (run without --write to see \
             it); nothing was written",
            file.path.display()
        ),
    }
}

/// `text` with the file's edits made.
fn apply(file: &FilePlan, text: &str, force: bool) -> Result<String, EditError> {
    if let [
        Edit::Codex {
            command,
            args,
            tool_timeout_sec,
        },
    ] = file.edits.as_slice()
    {
        let entry = hosts::codex_entry(command, args, *tool_timeout_sec);
        return codex_toml::merge(text, &entry, force);
    }
    let mut doc = JsonDoc::new(text)?;
    for edit in &file.edits {
        match edit {
            Edit::JsonSet {
                path,
                key,
                value,
                same_is_fine,
            } => doc.set(path, key, value, force, *same_is_fine)?,
            Edit::JsonAdd { path, key, item } => doc.add_to_array(path, key, item)?,
            Edit::Codex { .. } => {
                return Err(EditError::Malformed(
                    "a TOML entry among JSON edits".to_owned(),
                ));
            }
        }
    }
    let mut after = doc.text().to_owned();
    // A new file ends with a newline; an existing one keeps its end as it was.
    if text.trim().is_empty() && !after.ends_with('\n') {
        after.push('\n');
    }
    Ok(after)
}

/// Writes `out` to stdout and `err` to stderr.
fn speak(out: &str, err: &str) -> Result<ExitCode, String> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(out.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("cannot write to stdout: {}", lnk_common::Causes(&e)))?;
    // The notes are for a person; a closed stderr loses nothing the host needs.
    let _ = std::io::stderr().lock().write_all(err.as_bytes());
    Ok(ExitCode::SUCCESS)
}
