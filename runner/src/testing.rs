//! What the runner's unit tests share.

use std::ffi::OsString;

/// A command line's words, from text.
pub fn words(w: &[&str]) -> Vec<OsString> {
    w.iter().map(OsString::from).collect()
}

/// A configuration as `serve` would check it, for the files folder `files` and the sandbox
/// line `sandbox`: one program (`true`) on `/usr/bin:/bin`, 7 s, 64 bytes of output, nothing
/// else. A test sets what it needs otherwise (`Config { …, ..config(…) }`).
pub fn config(files: &str, sandbox: &[&str]) -> crate::config::Config {
    crate::config::Config {
        files: files.into(),
        files_from: crate::config::FilesFrom::Flag,
        programs_path: "/usr/bin:/bin".into(),
        timeout: std::time::Duration::from_secs(7),
        output: 64,
        programs: vec!["true".into()],
        vars: Vec::new(),
        background: None,
        net: None,
        sandbox: words(sandbox),
        caches: Default::default(),
    }
}
