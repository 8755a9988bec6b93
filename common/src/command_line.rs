//! The one command line a call or a run executes:
//! `<sandbox>... -- [/usr/bin/env NAME=VALUE...] <program path> <args>...`.
//!
//! `serve` builds it for each call and `lnk-link-supervise gate` for each run (from the
//! record's [`crate::record::Launch`]); both build it here, so a call and a run of the same
//! program under the same flags execute the same words.

use std::ffi::{OsStr, OsString};

/// The program put before the program when variables are given (the sandbox clears the
/// environment): `<sandbox> -- /usr/bin/env NAME=VALUE... <program path> <args>`.
pub const ENV_PROGRAM: &str = "/usr/bin/env";

/// The command line that runs `program` with `args` under `sandbox`, with `vars` set.
///
/// The `--` that ends the sandbox's own options is always added (a `--` that ended the
/// sandbox on `serve`'s command line was taken off when the flags were checked).
pub fn sandboxed<'a>(
    sandbox: &[impl AsRef<OsStr>],
    vars: impl IntoIterator<Item = (&'a str, &'a str)>,
    program: &OsStr,
    args: &[impl AsRef<OsStr>],
) -> Vec<OsString> {
    let mut argv: Vec<OsString> = sandbox.iter().map(|w| w.as_ref().to_owned()).collect();
    argv.push("--".into());
    let mut vars = vars.into_iter().peekable();
    if vars.peek().is_some() {
        argv.push(ENV_PROGRAM.into());
        argv.extend(vars.map(|(name, value)| format!("{name}={value}").into()));
    }
    argv.push(program.to_owned());
    argv.extend(args.iter().map(|a| a.as_ref().to_owned()));
    argv
}

/// The words [`sandboxed`] put after the sandbox, read back: the `NAME=VALUE` words given to
/// [`ENV_PROGRAM`] and the program's own words (its absolute path first), or `None` when they
/// do not start with [`ENV_PROGRAM`] (no variables) or are not what [`sandboxed`] makes. What
/// `env` would do with them can then be done without its `exec`: a warm sandbox's stub sets
/// the variables itself and runs the program.
pub fn split_env(words: &[OsString]) -> Option<(&[OsString], &[OsString])> {
    let (first, rest) = words.split_first()?;
    if first != ENV_PROGRAM {
        return None;
    }
    let at = rest
        .iter()
        .position(|word| !word.as_encoded_bytes().contains(&b'='))?;
    let (assignments, program) = rest.split_at(at);
    let valid = assignments
        .iter()
        .all(|word| word.as_encoded_bytes().first().is_some_and(|b| *b != b'='));
    let absolute = program
        .first()
        .is_some_and(|path| path.as_encoded_bytes().first() == Some(&b'/'));
    (valid && absolute).then_some((assignments, program))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_ARGS: [&str; 0] = [];

    #[test]
    fn adds_the_separator() {
        let argv = sandboxed(&["sb"], [], OsStr::new("/bin/echo"), &["hi"]);
        assert_eq!(argv, ["sb", "--", "/bin/echo", "hi"]);
    }

    #[test]
    fn the_variables_and_the_program_are_read_back() {
        let words = sandboxed(
            &["sb"],
            [("A", "b=c"), ("PATH", "/usr/bin")],
            OsStr::new("/bin/echo"),
            &["x=y"],
        );
        let after: Vec<OsString> = words[2..].to_vec();
        let (vars, program) = split_env(&after).unwrap_or_default();
        assert_eq!(vars, ["A=b=c", "PATH=/usr/bin"]);
        assert_eq!(program, ["/bin/echo", "x=y"]);
        let plain: Vec<OsString> = vec!["/bin/echo".into(), "hi".into()];
        assert_eq!(split_env(&plain), None);
        let relative: Vec<OsString> = vec![ENV_PROGRAM.into(), "A=b".into(), "echo".into()];
        assert_eq!(split_env(&relative), None);
        let no_program: Vec<OsString> = vec![ENV_PROGRAM.into(), "A=b".into()];
        assert_eq!(split_env(&no_program), None);
    }

    #[test]
    fn passes_vars_through_env() {
        let argv = sandboxed(
            &["sb", "--x"],
            [("DISPLAY", ":1"), ("A", "b c")],
            OsStr::new("/bin/true"),
            &NO_ARGS,
        );
        let expected = [
            "sb",
            "--x",
            "--",
            "/usr/bin/env",
            "DISPLAY=:1",
            "A=b c",
            "/bin/true",
        ];
        assert_eq!(argv, expected);
    }
}
