//! A script's interpreter, from its `#!` line: a path (`#!/usr/bin/python3`), or a name that
//! `env` looks up on `PATH` (`#!/usr/bin/env node`, `#!/usr/bin/env -S node --flag`).

use std::io::Read;
use std::path::{Path, PathBuf};

/// How much of a file is read for its `#!` line (the kernel reads 256 bytes).
const HEAD: u64 = 256;

/// What a script's `#!` line runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Interpreter {
    /// An interpreter named by its path.
    Path(PathBuf),
    /// A name `env` looks up on `PATH`.
    Name(String),
}

/// The interpreter of `file`, when it is a script.
pub fn interpreter(file: &Path) -> Option<Interpreter> {
    let mut head = Vec::new();
    std::fs::File::open(file)
        .ok()?
        .take(HEAD)
        .read_to_end(&mut head)
        .ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let program = Path::new(words.next()?);
    if program.file_name().is_none_or(|name| name != "env") {
        return Some(Interpreter::Path(program.to_path_buf()));
    }
    // `env [-S] [-i] [NAME=VALUE]... name [args]`: the first word that is neither.
    for word in words {
        if word.starts_with('-') || word.contains('=') {
            continue;
        }
        return Some(if word.contains('/') {
            Interpreter::Path(PathBuf::from(word))
        } else {
            Interpreter::Name(word.to_owned())
        });
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn of(text: &str) -> Option<Interpreter> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("script");
        std::fs::write(&file, text).unwrap();
        interpreter(&file)
    }

    #[test]
    fn a_path_or_a_name_through_env() {
        assert_eq!(
            of("#!/usr/bin/python3 -u\nprint()\n"),
            Some(Interpreter::Path(PathBuf::from("/usr/bin/python3")))
        );
        assert_eq!(
            of("#! /bin/sh\n"),
            Some(Interpreter::Path(PathBuf::from("/bin/sh")))
        );
        assert_eq!(
            of("#!/usr/bin/env node\n"),
            Some(Interpreter::Name("node".into()))
        );
        assert_eq!(
            of("#!/usr/bin/env -S A=1 node --flag\n"),
            Some(Interpreter::Name("node".into()))
        );
        assert_eq!(of("\x7fELF..."), None);
        assert_eq!(of("#!/usr/bin/env\n"), None);
    }
}
