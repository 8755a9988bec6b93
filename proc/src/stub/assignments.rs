//! What `/usr/bin/env NAME=VALUE… <program> <args>` does, done by the stub itself: a call's
//! command line puts `/usr/bin/env` and the `--var`s (and, with `--net-allow`, the proxy's
//! variables) before the program, and the stub, about to `exec` anyway, sets them and `exec`s
//! the program at once, which saves a whole `exec` of `env` (most of what `--net-allow` would
//! add to a call). The program gets the same words, the same environment: each assignment in
//! order, a later one of a name replacing an earlier one and the sandbox's own. Anything `env`
//! would treat otherwise (an option, an assignment without a name, a program found on `PATH`)
//! is left to `env` itself.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use lnk_common::command_line::ENV_PROGRAM;

/// Names and values to set, in order.
pub(super) type Assignments<'a> = Vec<(&'a OsStr, &'a OsStr)>;

/// `argv` as `env` would run it: the assignments, and the program's words; `None` when `argv`
/// is not `/usr/bin/env` with assignments then an absolute program.
pub(super) fn split(argv: &[OsString]) -> Option<(Assignments<'_>, &[OsString])> {
    let (first, rest) = argv.split_first()?;
    if first != ENV_PROGRAM {
        return None;
    }
    let mut assignments = Vec::new();
    for (at, word) in rest.iter().enumerate() {
        let bytes = word.as_bytes();
        match bytes.iter().position(|b| *b == b'=') {
            Some(0) => return None,
            Some(eq) => assignments.push((
                OsStr::from_bytes(&bytes[..eq]),
                OsStr::from_bytes(&bytes[eq + 1..]),
            )),
            None if bytes.first() == Some(&b'/') => return Some((assignments, &rest[at..])),
            None => return None,
        }
    }
    None
}

/// `env` with the `assignments` made, in order.
pub(super) fn apply(env: &mut Vec<(OsString, OsString)>, assignments: &[(&OsStr, &OsStr)]) {
    for (name, value) in assignments {
        match env.iter_mut().find(|(given, _)| given == name) {
            Some(pair) => pair.1 = (*value).to_owned(),
            None => env.push(((*name).to_owned(), (*value).to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn words(w: &[&str]) -> Vec<OsString> {
        w.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_assignments_and_the_program_are_what_env_would_take() {
        let argv = words(&[
            "/usr/bin/env",
            "A=1",
            "B=x=y",
            "A=2",
            "/bin/echo",
            "C=3",
            "hi",
        ]);
        let (assignments, program) = split(&argv).unwrap();
        assert_eq!(program, &words(&["/bin/echo", "C=3", "hi"])[..]);
        let mut env = vec![("PWD".into(), "/w".into()), ("A".into(), "0".into())];
        apply(&mut env, &assignments);
        assert_eq!(
            env,
            [
                ("PWD".into(), "/w".into()),
                ("A".into(), "2".into()),
                ("B".into(), "x=y".into())
            ]
        );
    }

    #[test]
    fn what_env_would_treat_otherwise_is_left_to_env() {
        for argv in [
            &["/bin/echo", "A=1"][..],
            &["/usr/bin/env", "A=1"],
            &["/usr/bin/env", "=1", "/bin/true"],
            &["/usr/bin/env", "-i", "/bin/true"],
            &["/usr/bin/env", "A=1", "true"],
            &["env", "A=1", "/bin/true"],
        ] {
            assert!(split(&words(argv)).is_none(), "{argv:?}");
        }
        let bare = words(&["/usr/bin/env", "/bin/true"]);
        let (none, program) = split(&bare).unwrap();
        assert!(none.is_empty());
        assert_eq!(program, &words(&["/bin/true"])[..]);
    }
}
