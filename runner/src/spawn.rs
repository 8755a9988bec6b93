//! Starting a call's sandbox: its argv, a process group of its own, and death with the server.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use rustix::process::{Signal, getpid, getppid, set_parent_process_death_signal};

/// The argv of a call: `<sandbox> -- [/usr/bin/env NAME=VALUE...] <program> <args>`.
///
/// The `--` that ends the sandbox's own options is always added; a `--` that ended the
/// sandbox on the command line was taken off when the flags were checked.
pub fn call_argv(
    sandbox: &[OsString],
    vars: &[(String, String)],
    program: &Path,
    args: &[String],
) -> Vec<OsString> {
    let mut argv: Vec<OsString> = sandbox.to_vec();
    argv.push("--".into());
    if !vars.is_empty() {
        argv.push("/usr/bin/env".into());
        argv.extend(
            vars.iter()
                .map(|(name, value)| format!("{name}={value}").into()),
        );
    }
    argv.push(program.as_os_str().to_owned());
    argv.extend(args.iter().map(OsString::from));
    argv
}

/// Starts `argv` in `cwd` with an empty environment, as the leader of a new process group, with
/// piped stdout and stderr,
/// stdin piped when `with_input` (else empty), and `SIGKILL` on the death of the calling
/// thread. The caller must keep this thread alive until the child is reaped: the parent-death
/// signal fires when the *thread* that spawned the child exits.
pub fn spawn(argv: &[OsString], cwd: BorrowedFd<'_>, with_input: bool) -> io::Result<Child> {
    let Some((program, args)) = argv.split_first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty argv"));
    };
    let mut command = Command::new(program);
    command
        .args(args)
        // Nothing of serve's environment (API tokens, HOME, LNK_*) reaches the sandbox: its own
        // process is visible inside (bwrap is pid 1 there), and its `--clearenv` clears only the
        // program's. Variables reach programs through `--var` alone.
        .env_clear()
        .stdin(if with_input {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    in_folder_dying_with_parent(&mut command, cwd);
    command.spawn()
}

/// Starts the child in the folder `cwd` is a handle on (`fchdir`, no path resolved again),
/// and arranges `SIGKILL` for it when the thread that spawns it dies.
#[allow(unsafe_code)]
fn in_folder_dying_with_parent(command: &mut Command, cwd: BorrowedFd<'_>) {
    let parent = getpid();
    let cwd = cwd.as_raw_fd();
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed. It makes three system calls (fchdir, prctl and
    // getppid) and builds an `io::Error` from a raw errno, which does not allocate; it takes
    // no lock and touches no memory shared with other threads. `cwd` is a descriptor the
    // caller keeps open until `spawn` returns, so it is open in the child (close-on-exec
    // closes it only at the exec).
    unsafe {
        command.pre_exec(move || {
            rustix::process::fchdir(BorrowedFd::borrow_raw(cwd))?;
            set_parent_process_death_signal(Some(Signal::KILL))?;
            // The parent may have died between fork and prctl: then no signal would come.
            if getppid() != Some(parent) {
                return Err(io::Error::from_raw_os_error(
                    rustix::io::Errno::SRCH.raw_os_error(),
                ));
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_the_separator() {
        let program = Path::new("/bin/echo");
        let args = vec!["hi".to_owned()];
        let plain = call_argv(&["sb".into()], &[], program, &args);
        assert_eq!(plain, ["sb", "--", "/bin/echo", "hi"].map(OsString::from));
    }

    #[test]
    fn passes_vars_through_env() {
        let vars = vec![("DISPLAY".to_owned(), ":1".to_owned())];
        let argv = call_argv(&["sb".into()], &vars, Path::new("/bin/true"), &[]);
        let expected = ["sb", "--", "/usr/bin/env", "DISPLAY=:1", "/bin/true"];
        assert_eq!(argv, expected.map(OsString::from));
    }
}
