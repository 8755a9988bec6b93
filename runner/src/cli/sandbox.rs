//! The sandbox after `--`, with its program resolved once to an absolute path.

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::refusal::{Refusal, refuse};

/// The sandbox with its program resolved, once, to an absolute path (see
/// [`resolve_sandbox_program`]): calls, records and the gate all run that path.
pub(super) fn sandbox_with_absolute_program(
    sandbox: &[OsString],
) -> Result<Vec<OsString>, Refusal> {
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
pub(super) fn resolve_sandbox_program(program: &std::ffi::OsStr) -> Result<PathBuf, Refusal> {
    resolve_in(program, &std::env::var_os("PATH").unwrap_or_default())
}

/// [`resolve_sandbox_program`], with `search` as `PATH`.
fn resolve_in(program: &std::ffi::OsStr, search: &std::ffi::OsStr) -> Result<PathBuf, Refusal> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::refusal::tests::refusal;
    use std::ffi::OsStr;

    #[test]
    fn a_bare_name_is_found_in_absolute_folders_of_path_only() {
        let search = OsStr::new(".:relative::/nonexistent:/usr/bin:/bin");
        let env = resolve_in(OsStr::new("env"), search).map_err(|e| e.to_string());
        assert!(
            env.as_ref()
                .is_ok_and(|p| p.is_absolute() && p.ends_with("env")),
            "{env:?}"
        );
        let err = refusal(resolve_in(OsStr::new("env"), OsStr::new(".:relative:")));
        assert!(
            err.starts_with(
                "the sandbox program `env` is not an executable file in an absolute folder of PATH"
            ),
            "{err}"
        );
    }

    #[test]
    fn a_path_is_made_absolute_and_must_be_executable() {
        let found =
            resolve_in(OsStr::new("/usr/bin/env"), OsStr::new("")).map_err(|e| e.to_string());
        assert_eq!(found, Ok(PathBuf::from("/usr/bin/env")));
        let dir = tempfile::tempdir().map_err(|e| e.to_string());
        let plain = dir
            .as_ref()
            .map(|d| d.path().join("plain"))
            .unwrap_or_default();
        assert!(std::fs::write(&plain, b"").is_ok(), "{plain:?}");
        let err = refusal(resolve_in(plain.as_os_str(), OsStr::new("/usr/bin")));
        assert_eq!(
            err,
            format!(
                "the sandbox program `{}` is not an executable file",
                plain.display()
            )
        );
        let err = refusal(resolve_in(
            OsStr::new("./no-such-sandbox"),
            OsStr::new("/usr/bin"),
        ));
        assert_eq!(
            err,
            "the sandbox program `./no-such-sandbox` is not an executable file"
        );
    }

    #[test]
    fn a_trailing_separator_is_dropped_and_nothing_else_is_refused() {
        let words = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        let sandbox = sandbox_with_absolute_program(&words(&["/usr/bin/env", "-i", "--"]))
            .map_err(|e| e.to_string());
        assert_eq!(sandbox, Ok(words(&["/usr/bin/env", "-i"])));
        let err = refusal(sandbox_with_absolute_program(&words(&["--"])));
        assert!(err.starts_with("a sandbox is required after `--`"), "{err}");
    }
}
