//! The tests' pass-through sandbox prefix: `lnk-test-passthrough -- <program> <args>` becomes
//! `<program> <args>`, the same process (exec), so the tests can run Link Run "without a sandbox".
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).peekable();
    if args.peek().is_some_and(|a| a == "--") {
        args.next();
    }
    let Some(program) = args.next() else {
        eprintln!("lnk-test-passthrough: nothing to run");
        return ExitCode::from(127);
    };
    let err = Command::new(&program).args(args).exec();
    eprintln!(
        "lnk-test-passthrough: cannot run {}: {err}",
        program.to_string_lossy()
    );
    ExitCode::from(127)
}
