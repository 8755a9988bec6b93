//! Warm sandboxes: serve starts the next calls' sandboxes ahead, each with a stub of
//! Link Run's waiting inside, and a call `exec`s its program there. What must hold: a call
//! runs in a sandbox started ahead (and not with `LNK_COLD_START=1`); two calls share nothing
//! (`/tmp`, processes, namespaces); the program has descriptors 0–2 only and nothing of the
//! stub's executable; its environment is exactly the `--var`s; a files folder replaced after
//! the spares started is never used by them; serve SIGKILLed with spares waiting leaves
//! nothing; a stub killed from outside is replaced and the next call works; and a program the
//! sandbox cannot execute is answered as a cold start answers it; a working folder that became
//! a link after the call arrived is refused by the stub, and the call answered as not run.
use std::time::Duration;

use serde_json::json;

use lnk_tests::bins::link_run;
use lnk_tests::procs::wait_dead;
use lnk_tests::results::ran;
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::serve::cold_starts;
use lnk_tests::setup::Setup;
use lnk_tests::stubs::{GONE, assert_all_die, descendants, file_id, stdout_of, stubs, wait_stubs};

both_sandboxes!(
    a_call_runs_in_a_sandbox_started_ahead,
    the_program_has_stdio_only_and_not_the_stubs_executable,
    the_environment_is_exactly_the_vars,
    a_replaced_files_folder_is_never_used_by_a_spare,
    serve_killed_with_spares_waiting_leaves_nothing,
    a_stub_killed_from_outside_is_replaced,
    a_working_folder_changed_after_the_call_arrived_is_not_entered,
);

/// The program is the stub's process: under the pass-through prefix (no PID namespace) the
/// pid a call's shell sees is one of the stubs that waited before it; with cold starts, none.
fn a_call_runs_in_a_sandbox_started_ahead(sandbox: Sandbox) {
    if sandbox != Sandbox::Passthrough {
        // Inside bubblewrap's PID namespace the pid says nothing; the other tests hold there.
        return;
    }
    let setup = Setup::new(sandbox);
    // One spare: the one seen waiting is the one the call takes (with more, a spare still
    // being made when they are listed may be ready, and taken, by the time the call comes).
    let mut serve = setup.serve().env("LNK_SPARES", "1").start();
    let waiting = wait_stubs(serve.pid(), 1, &[]);
    let result = serve.call(json!({"program": "sh", "args": ["-c", "echo $$"]}));
    let pid: i32 = stdout_of(&result).trim().parse().unwrap();
    assert!(waiting.contains(&pid), "{pid} is not a stub of {waiting:?}");

    cold_starts(|| {
        let mut serve = setup.serve().start();
        // Cold: no stub ever waits.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(stubs(serve.pid()), Vec::<i32>::new());
        let result = serve.call(json!({"program": "sh", "args": ["-c", "echo $$"]}));
        stdout_of(&result);
    });
}

/// Descriptors 0, 1 and 2 only (the shell's own, before it opens anything), and no process
/// the program can see has the runner's executable as its program or open: under bubblewrap
/// that is every process of the sandbox; under the pass-through prefix, serve itself is in
/// sight, so only the program's own.
fn the_program_has_stdio_only_and_not_the_stubs_executable(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    wait_stubs(serve.pid(), 1, &[]);
    let script = match sandbox {
        Sandbox::Passthrough => "ls /proc/$$/fd; echo --; stat -L -c '%d:%i %n' /proc/$$/exe",
        _ => {
            "ls /proc/$$/fd; echo --; \
             for f in /proc/[0-9]*/exe /proc/[0-9]*/fd/*; do stat -L -c '%d:%i %n' $f; done \
             2>/dev/null; true"
        }
    };
    for _ in 0..2 {
        let result = serve.call(json!({"program": "sh", "args": ["-c", script]}));
        let out = stdout_of(&result);
        let (fds, files) = out.split_once("--\n").unwrap();
        assert_eq!(fds, "0\n1\n2\n", "{out}");
        let runner = file_id(&link_run());
        assert!(
            !files
                .lines()
                .any(|line| line.starts_with(&format!("{runner} "))),
            "the runner's executable is reachable: {out}"
        );
        assert!(files.lines().count() >= 1, "{out}");
    }
}

/// Exactly the `--var`s, warm as cold (bubblewrap adds `PWD`, the call's folder, to both).
fn the_environment_is_exactly_the_vars(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    std::fs::create_dir(setup.files.join("sub")).unwrap();
    let environment = || {
        let mut serve = setup
            .serve()
            .var("A=1")
            .var("B=two words")
            .env("LNK_TEST_SECRET", "serve's own")
            .start();
        let mut seen = Vec::new();
        for dir in [".", "sub"] {
            let result = serve.call(json!({"program": "env", "dir": dir}));
            let mut lines: Vec<String> = stdout_of(&result).lines().map(str::to_owned).collect();
            lines.sort();
            let pwd = lines
                .iter()
                .position(|line| line.starts_with("PWD="))
                .map(|at| lines.remove(at));
            assert_eq!(lines, ["A=1", "B=two words"], "{result}");
            if let Some(pwd) = &pwd {
                let folder = match dir {
                    "." => setup.files.clone(),
                    _ => setup.files.join(dir),
                };
                assert_eq!(*pwd, format!("PWD={}", path_str(&folder)), "{result}");
            }
            seen.push(pwd);
        }
        seen
    };
    let warm = environment();
    assert_eq!(warm, cold_starts(environment));
}

/// The files folder is replaced (renamed away, a new one made at its path) after the spares
/// started with the old one: every call after it runs in the new folder.
fn a_replaced_files_folder_is_never_used_by_a_spare(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    std::fs::write(setup.files.join("which"), "old\n").unwrap();
    let mut serve = setup.serve().start();
    wait_stubs(serve.pid(), 4, &[]);
    let old = setup.path("files.old");
    std::fs::rename(&setup.files, &old).unwrap();
    std::fs::create_dir(&setup.files).unwrap();
    std::fs::write(setup.files.join("which"), "new\n").unwrap();
    // More calls than spares: those started before and after the replacement.
    for _ in 0..6 {
        let result = serve.call(json!({"program": "cat", "args": ["which"]}));
        assert_eq!(stdout_of(&result), "new\n", "{result}");
    }
}

/// Every process below serve (its spares, their warm sandboxes and stubs) dies with serve's
/// SIGKILL.
fn serve_killed_with_spares_waiting_leaves_nothing(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    wait_stubs(serve.pid(), 4, &[]);
    let below = descendants(serve.pid());
    assert!(below.len() >= 8, "spares and their sandboxes: {below:?}");
    serve.kill();
    assert_all_die(below);
}

/// Every stub waiting is SIGKILLed from outside: each is replaced (by its spare), and the
/// next calls run.
fn a_stub_killed_from_outside_is_replaced(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let first = wait_stubs(serve.pid(), 4, &[]);
    for pid in &first {
        let pid = rustix::process::Pid::from_raw(*pid).unwrap();
        rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    }
    for pid in &first {
        assert!(wait_dead(*pid, GONE), "the stub {pid} did not die");
    }
    let replaced = wait_stubs(serve.pid(), 4, &first);
    for _ in 0..2 {
        let result = serve.call(json!({"program": "echo", "args": ["still"]}));
        assert_eq!(stdout_of(&result), "still\n", "{result}");
    }
    if sandbox == Sandbox::Passthrough {
        let result = serve.call(json!({"program": "sh", "args": ["-c", "echo $$"]}));
        let pid: i32 = stdout_of(&result).trim().parse().unwrap();
        assert!(replaced.contains(&pid), "{pid} is not a replacement stub");
    }
    assert!(replaced.iter().all(|pid| *pid > 0 && !first.contains(pid)));
}

/// A program the sandbox cannot execute (its folder is not shown inside bubblewrap): the stub
/// fails, and the call is answered exactly as a cold start answers it.
#[test]
fn a_program_the_sandbox_cannot_execute_is_answered_as_cold() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let setup = Setup::new(Sandbox::Bwrap);
    let hidden = setup.path("hidden");
    std::fs::create_dir(&hidden).unwrap();
    std::fs::copy("/bin/true", hidden.join("hidden-true")).unwrap();
    let answer = || {
        let mut serve = setup
            .serve()
            .programs_path(&path_str(&hidden))
            .programs(&["hidden-true"])
            .start();
        let result = serve.call(json!({"program": "hidden-true"}));
        let value = ran(&result);
        (
            value["exit_code"].clone(),
            value["stderr"].clone(),
            result["isError"].clone(),
        )
    };
    let warm = answer();
    let cold = cold_starts(answer);
    assert_eq!(warm, cold);
    assert_ne!(warm.0, json!(0), "{warm:?}");
}

/// Two calls in a row under the recommended line: every namespace the sandbox makes is a new
/// one for each call, and the second sees nothing of the first's `/tmp`.
#[test]
fn two_calls_in_a_row_share_no_namespace_and_no_tmp() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let setup = Setup::new(Sandbox::Bwrap);
    let mut serve = setup.serve().start();
    wait_stubs(serve.pid(), 2, &[]);
    let kinds = ["cgroup", "ipc", "mnt", "net", "pid", "user", "uts"];
    let script = format!(
        "for k in {}; do echo $k $(readlink /proc/self/ns/$k); done; \
         if [ -e /tmp/left-by-a-call ]; then echo seen; else echo fresh; fi; \
         touch /tmp/left-by-a-call; ls /proc | grep -c '^[0-9]'",
        kinds.join(" ")
    );
    let mut seen = Vec::new();
    for _ in 0..2 {
        let result = serve.call(json!({"program": "sh", "args": ["-c", &script]}));
        let out = stdout_of(&result);
        let lines: Vec<&str> = out.lines().collect();
        // The first call's file in /tmp did not reach the second. (/tmp may hold mount
        // points of the bind mounts under it, such as a files folder under /tmp.)
        assert_eq!(lines.len(), kinds.len() + 2, "{out}");
        assert_eq!(lines[kinds.len()], "fresh", "{out}");
        let processes: usize = lines[kinds.len() + 1].parse().unwrap();
        // bwrap's pid 1, the shell, ls and grep: nothing of another call.
        assert!(processes <= 4, "{out}");
        seen.push(
            lines[..kinds.len()]
                .iter()
                .map(|l| (*l).to_owned())
                .collect::<Vec<_>>(),
        );
    }
    for (i, kind) in kinds.iter().enumerate() {
        let outside = std::fs::read_link(format!("/proc/self/ns/{kind}")).unwrap();
        let outside = format!("{kind} {}", outside.display());
        if seen[0][i] != outside {
            assert_ne!(seen[0][i], seen[1][i], "both calls had {}", seen[0][i]);
        }
    }
    // The pid, mount, network and IPC namespaces at least are the sandbox's own.
    for kind in ["mnt", "net", "pid", "ipc"] {
        let i = kinds.iter().position(|k| *k == kind).unwrap();
        let outside = std::fs::read_link(format!("/proc/self/ns/{kind}")).unwrap();
        assert_ne!(seen[0][i], format!("{kind} {}", outside.display()));
    }
}

/// Without a PID namespace, a call's program sees the stubs that wait for later calls: it may
/// not trace them or open their descriptors (they are not dumpable while they wait).
#[test]
fn a_program_cannot_reach_a_waiting_stub_without_a_pid_namespace() {
    if !Sandbox::BwrapSharedPid.usable() {
        return;
    }
    let setup = Setup::new(Sandbox::BwrapSharedPid);
    let mut serve = setup.serve().start();
    let waiting = wait_stubs(serve.pid(), 4, &[]);
    let script = waiting
        .iter()
        .map(|pid| {
            format!(
                "readlink /proc/{pid}/fd/0 /proc/{pid}/fd/4 >/dev/null 2>&1 && echo reached {pid}; \
                 cat /proc/{pid}/environ >/dev/null 2>&1 && echo read {pid}; \
                 test -e /proc/{pid} && echo saw {pid};"
            )
        })
        .collect::<String>();
    let result = serve.call(json!({"program": "sh", "args": ["-c", script]}));
    let out = stdout_of(&result);
    // The one the call itself took is its own program now; the others wait for later calls.
    let others: Vec<&i32> = waiting
        .iter()
        .filter(|pid| out.contains(&format!("saw {pid}")))
        .filter(|pid| !out.contains(&format!("read {pid}")) || stubs(serve.pid()).contains(pid))
        .collect();
    assert!(others.len() >= 3, "the stubs are in sight: {out}");
    for pid in others {
        assert!(!out.contains(&format!("reached {pid}")), "{out}");
        assert!(!out.contains(&format!("read {pid}")), "{out}");
    }
}

/// A call whose `dir` is checked when it arrives, then replaced by a link to `/` before its
/// spare hands it to the stub (the call's reaper held there, `LNK_HOLD=call-reaper`, and let
/// go with a SIGCHLD): the stub, entering the folder inside the sandbox without following
/// links, refuses it, and the call is answered as not run, never run in `/` (bubblewrap
/// falls back to `/` when it cannot enter a folder by path) nor in the folder moved away.
fn a_working_folder_changed_after_the_call_arrived_is_not_entered(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    std::fs::create_dir(setup.files.join("sub")).unwrap();
    let hold = setup.path("held");
    let hook = format!("call-reaper={}", hold.display());
    let mut serve = setup
        .serve()
        .start_env(&[("LNK_HOLD", std::ffi::OsStr::new(&hook))]);
    wait_stubs(serve.pid(), 1, &[]);
    let id = serve.send_call(
        json!({"program": "sh", "args": ["-c", "pwd -P; touch here"], "dir": "sub"}),
        None,
    );
    let reaper = lnk_tests::containment::wait_pid_file(&hold, Duration::from_secs(10));
    std::fs::rename(setup.files.join("sub"), setup.files.join("away")).unwrap();
    std::os::unix::fs::symlink("/", setup.files.join("sub")).unwrap();
    let reaper = rustix::process::Pid::from_raw(reaper).unwrap();
    rustix::process::kill_process(reaper, rustix::process::Signal::CHILD).unwrap();
    let result = serve.call_result(id, Duration::from_secs(10));
    assert_eq!(result["isError"], true, "{result}");
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("`sub` changed while the call started") && text.contains("Nothing ran"),
        "{text}"
    );
    assert!(!setup.files.join("away/here").exists());
    assert!(!setup.files.join("here").exists());
}
