//! The allow-list: a program is a bare name from `--program`, found as an executable regular
//! file in the folders of `--programs-path`, in order.

use crate::mcp::protocol::cut_short;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Why a program may not be run.
#[derive(Debug, thiserror::Error)]
pub enum ProgramRefusal {
    /// The name is not on the allow-list.
    #[error("`{name}` is not a program this server may run; allowed: {allowed}")]
    NotAllowed {
        /// The name asked for.
        name: String,
        /// The allowed names, comma-separated.
        allowed: String,
    },
    /// The name is allowed but no folder of `--programs-path` has it.
    #[error(
        "`{name}` is allowed but was not found as an executable file on the programs path; \
         allowed: {allowed}"
    )]
    NotFound {
        /// The name asked for.
        name: String,
        /// The allowed names, comma-separated.
        allowed: String,
    },
}

/// Finds `name` for a call: it must be one of `allowed` and found on `programs_path`.
pub fn resolve(
    name: &str,
    allowed: &[String],
    programs_path: &OsStr,
) -> Result<PathBuf, ProgramRefusal> {
    let listing = || allowed.join(", ");
    if !allowed.iter().any(|a| a == name) {
        return Err(ProgramRefusal::NotAllowed {
            name: cut_short(name),
            allowed: listing(),
        });
    }
    find_on_path(name, programs_path).ok_or_else(|| ProgramRefusal::NotFound {
        name: cut_short(name),
        allowed: listing(),
    })
}

/// The first `<folder>/<name>` that is an executable regular file (following links), looking
/// only in absolute folders of `programs_path`.
pub fn find_on_path(name: &str, programs_path: &OsStr) -> Option<PathBuf> {
    programs_path
        .as_bytes()
        .split(|b| *b == b':')
        .map(|folder| Path::new(OsStr::from_bytes(folder)))
        .filter(|folder| folder.is_absolute())
        .map(|folder| folder.join(name))
        .find(|candidate| is_executable_file(candidate))
}

/// Each of `programs` found on `programs_path`, or why serve refuses to start: an allowed
/// program that is not there fails every call. The refusal names the folders looked in and,
/// where it is found on `user_path` (the person's own `PATH`), where.
pub fn all_found(
    programs: &[String],
    programs_path: &OsStr,
    user_path: Option<&OsStr>,
) -> Result<(), String> {
    for name in programs {
        if find_on_path(name, programs_path).is_some() {
            continue;
        }
        let folders: Vec<String> = programs_path
            .as_bytes()
            .split(|b| *b == b':')
            .map(|folder| Path::new(OsStr::from_bytes(folder)))
            .filter(|folder| folder.is_absolute())
            .map(|folder| folder.display().to_string())
            .collect();
        let elsewhere = user_path
            .and_then(|path| find_on_path(name, path))
            .map_or_else(
                || {
                    "it is not on your PATH either; install it, or add the folder that holds \
                     it to --programs-path"
                        .to_owned()
                },
                |found| {
                    let folder = found.parent().unwrap_or(Path::new("/"));
                    format!(
                        "on your PATH it is {}: add {} to --programs-path",
                        found.display(),
                        folder.display()
                    )
                },
            );
        return Err(format!(
            "--program `{name}` is not an executable file in any folder of --programs-path \
             (looked in {}), so every call of it would fail; {elsewhere}",
            folders.join(", ")
        ));
    }
    Ok(())
}

/// Whether `path` is an executable regular file (links followed).
pub fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_an_allowed_program_in_path_order() {
        let allowed = vec!["sh".to_owned()];
        let found = resolve(
            "sh",
            &allowed,
            OsStr::new("/nonexistent:relative:/bin:/usr/bin"),
        );
        assert_eq!(found.ok(), Some(PathBuf::from("/bin/sh")));
    }

    #[test]
    fn refuses_what_is_not_allowed_and_lists_what_is() {
        let allowed = vec!["sh".to_owned(), "ls".to_owned()];
        let err = resolve("rm", &allowed, OsStr::new("/bin")).err();
        let message = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(message.contains("allowed: sh, ls"), "{message}");
    }

    #[test]
    fn a_program_not_on_the_programs_path_is_refused_saying_where_it_is() {
        let programs = vec!["sh".to_owned(), "env".to_owned()];
        assert_eq!(
            all_found(&programs, OsStr::new("/bin:/usr/bin"), None),
            Ok(())
        );
        let err = all_found(
            &programs,
            OsStr::new("rel:/nonexistent"),
            Some(OsStr::new("/usr/bin")),
        )
        .err()
        .unwrap_or_default();
        assert_eq!(
            err,
            "--program `sh` is not an executable file in any folder of --programs-path \
             (looked in /nonexistent), so every call of it would fail; on your PATH it is \
             /usr/bin/sh: add /usr/bin to --programs-path"
        );
        let programs = vec!["no-such-program-here".to_owned()];
        let err = all_found(&programs, OsStr::new("/bin"), Some(OsStr::new("/usr/bin")))
            .err()
            .unwrap_or_default();
        assert!(err.ends_with("it is not on your PATH either; install it, or add the folder that holds it to --programs-path"), "{err}");
    }

    #[test]
    fn refuses_an_allowed_program_that_is_nowhere() {
        let allowed = vec!["no-such-program-here".to_owned()];
        let err = resolve(
            "no-such-program-here",
            &allowed,
            OsStr::new("/bin:/usr/bin"),
        );
        assert!(matches!(err, Err(ProgramRefusal::NotFound { .. })));
    }
}
