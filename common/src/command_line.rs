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
