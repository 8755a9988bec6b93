//! Calls as agents and scripts make them: back to back, and in bursts of calls sent at once.
//! What must hold: 200 consecutive calls and 20 bursts of 8 are all answered, each with its
//! own output; no spare is left behind when serve ends (its stdin closed, SIGTERM, SIGKILL),
//! however many the pool grew to; no call waits for a spare being started for another (shown
//! by what the sandbox being started sees: it is held, and every call is answered meanwhile,
//! without it); and a protected path a call planted is protected in the very next call, as
//! fast as calls come.
//!
//! Run: `cargo test -p lnk-tests --test calls` (it needs `lnk-link-run` built in the same
//! target folder: `cargo test` from the root, or `cargo build -p lnk-link-run` first).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use lnk_tests::procs::{alive, wait_dead};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::serve::{ANSWER, Serve};
use lnk_tests::setup::Setup;
use lnk_tests::stubs::{GONE, assert_all_die, descendants, stdout_of, stubs, wait_stubs};

both_sandboxes!(
    two_hundred_consecutive_calls_and_twenty_bursts_of_eight_are_answered_right,
    no_spare_is_left_behind_however_serve_ends,
);

/// 200 calls, each sent as soon as the previous answer is read, then 20 bursts of 8 sent at
/// once: every call answered, with its own output.
fn two_hundred_consecutive_calls_and_twenty_bursts_of_eight_are_answered_right(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    for i in 0..200 {
        let said = format!("call {i}");
        let result = serve.call(json!({"program": "echo", "args": [said]}));
        assert_eq!(stdout_of(&result), format!("{said}\n"), "{result}");
    }
    for burst in 0..20 {
        let sent: HashMap<i64, String> = (0..8)
            .map(|k| {
                let said = format!("burst {burst} call {k}");
                let id = serve.send_call(json!({"program": "echo", "args": [said]}), None);
                (id, said)
            })
            .collect();
        for (id, said) in sent {
            let result = serve.call_result(id, ANSWER);
            assert_eq!(stdout_of(&result), format!("{said}\n"), "{result}");
        }
    }
}

/// A burst of 8 grows the pool to 8 spares; serve then ends each way, and every process below
/// it (its spares, their sandboxes and stubs) is gone.
fn no_spare_is_left_behind_however_serve_ends(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    for how in ["stdin closed", "SIGTERM", "SIGKILL"] {
        let mut serve = setup.serve().start();
        // Eight calls surely in flight at once: each waits for `go`, made once all eight run.
        let _ = std::fs::remove_file(setup.files.join("go"));
        let ids: Vec<i64> = (0..8)
            .map(|k| {
                let wait = format!("touch started-{k}; while [ ! -e go ]; do sleep 0.01; done");
                serve.send_call(json!({"program": "sh", "args": ["-c", wait]}), None)
            })
            .collect();
        let deadline = Instant::now() + ANSWER;
        while (0..8).any(|k| !setup.files.join(format!("started-{k}")).exists()) {
            assert!(
                Instant::now() < deadline,
                "{how}: the eight calls did not all start"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::write(setup.files.join("go"), "").unwrap();
        for id in ids {
            stdout_of(&serve.call_result(id, ANSWER));
        }
        for k in 0..8 {
            std::fs::remove_file(setup.files.join(format!("started-{k}"))).unwrap();
        }
        wait_stubs(serve.pid(), 8, &[]);
        let below = descendants(serve.pid());
        assert!(
            below.len() >= 16,
            "{how}: 8 spares and their sandboxes: {below:?}"
        );
        match how {
            "stdin closed" => {
                serve.close_stdin();
                assert!(serve.wait_exit(GONE).success(), "{how}");
            }
            "SIGTERM" => {
                serve.signal(rustix::process::Signal::TERM);
                assert!(serve.wait_exit(GONE).success(), "{how}");
            }
            _ => serve.kill(),
        }
        // Ended by its client, serve disposes of its spares, each ending as asked: none is
        // killed (by its thread's end) and then reported as a call's reaper killed.
        if how != "SIGKILL" {
            let stderr = serve.stderr_to_end(GONE);
            assert!(
                !stderr.contains("reaper was killed"),
                "{how}: a spare was killed at serve's end: {stderr}"
            );
        }
        assert_all_die(below);
    }
}

/// The sandbox of these tests: it runs its arguments as they are (as the pass-through prefix
/// does), but while `hold` exists a warm sandbox (the one a spare starts ahead of its call,
/// whose program is the stub) writes its pid to `held` and waits there, before the stub runs.
fn holding_sandbox(hold: &Path, held: &Path) -> Vec<String> {
    let script = format!(
        "shift; case \"$*\" in *warm-stub) if [ -e '{hold}' ]; then echo $$ >> '{held}'; \
         while [ -e '{hold}' ]; do /bin/sleep 0.01; done; fi;; esac; exec \"$@\"",
        hold = path_str(hold),
        held = path_str(held),
    );
    vec!["/bin/sh".into(), "-c".into(), script, "sh".into()]
}

/// The pids in the file `held`, once it holds `count` of them.
fn wait_held(held: &Path, count: usize) -> Vec<i32> {
    let deadline = Instant::now() + ANSWER;
    loop {
        let pids: Vec<i32> = std::fs::read_to_string(held)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| line.trim().parse().ok())
            .collect();
        if pids.len() >= count {
            return pids;
        }
        assert!(Instant::now() < deadline, "no sandbox was held: {pids:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `sh -c 'echo $$'` as a call: the pid its program had (under this sandbox, a warm call's is
/// its stub's, which `exec`ed it).
fn pid_of_call(serve: &mut Serve) -> i32 {
    let result = serve.call(json!({"program": "sh", "args": ["-c", "echo $$"]}));
    stdout_of(&result).trim().parse().unwrap()
}

/// One spare (`LNK_SPARES=1`), ready; then the sandboxes started ahead are held before their
/// stub runs. The first call takes the ready spare, and the one started to replace it is held.
/// The calls after it, back to back and eight at once, are all answered while that sandbox is
/// still held, still waiting there: none of them took it or waited for it. Once released, it
/// is the one the next call runs in.
#[test]
fn no_call_waits_for_a_spare_being_started() {
    let setup = Setup::new(Sandbox::Passthrough);
    let hold = setup.path("hold");
    let held = setup.path("held");
    let mut serve = setup
        .serve()
        .sandbox(holding_sandbox(&hold, &held))
        .env("LNK_SPARES", "1")
        .start();
    let first = wait_stubs(serve.pid(), 1, &[]);
    std::fs::write(&hold, "").unwrap();
    // The first call runs in the spare that was ready: its stub.
    assert_eq!(vec![pid_of_call(&mut serve)], first);
    let [starting] = wait_held(&held, 1)[..] else {
        panic!("one sandbox held");
    };
    for _ in 0..10 {
        let pid = pid_of_call(&mut serve);
        assert_ne!(pid, starting, "a call ran in the sandbox being started");
    }
    let ids: Vec<i64> = (0..8)
        .map(|_| serve.send_call(json!({"program": "echo", "args": ["at once"]}), None))
        .collect();
    for id in ids {
        assert_eq!(stdout_of(&serve.call_result(id, ANSWER)), "at once\n");
    }
    // Every call was answered; the sandbox being started is still held where it was, not
    // taken, not waited for and thrown away.
    assert!(alive(starting), "the sandbox being started was thrown away");
    assert_eq!(
        wait_held(&held, 1),
        [starting],
        "another was started meanwhile"
    );
    assert!(stubs(serve.pid()).is_empty(), "no stub is ready while held");
    // Released, it becomes the spare (once its stub said it is ready), and a call runs in
    // it: calls made before that start cold, and leave it be.
    std::fs::remove_file(&hold).unwrap();
    wait_stubs(serve.pid(), 1, &[]);
    let deadline = Instant::now() + ANSWER;
    while pid_of_call(&mut serve) != starting {
        assert!(
            Instant::now() < deadline,
            "the released spare was never used"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    serve.close_stdin();
    assert!(serve.wait_exit(GONE).success());
    assert!(wait_dead(starting, GONE));
}

/// A repository planted by one call, at each level the search looks at, is protected in the
/// very next call (sent as soon as the answer is read), warm and cold: its `config` and its
/// `hooks` are read-only there, and nothing the next call tries reaches them.
#[test]
fn a_repository_planted_by_a_call_is_protected_in_the_very_next_call() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    for cold in [false, true] {
        let setup = Setup::new(Sandbox::Bwrap);
        let builder = setup.serve();
        let mut serve = if cold {
            builder.start_env(&[("LNK_COLD_START", "1".as_ref())])
        } else {
            builder.start()
        };
        // Calls back to back first, so that what was found is kept (and a spare is ready).
        for _ in 0..3 {
            stdout_of(&serve.call(json!({"program": "true"})));
        }
        for repo in ["one", "a/two", "a/b/three"] {
            let plant =
                format!("mkdir -p {repo}/.git && echo 'ref: refs/heads/main' > {repo}/.git/HEAD");
            stdout_of(&serve.call(json!({"program": "sh", "args": ["-c", plant]})));
            let attack = format!(
                "echo evil > {repo}/.git/config; mkdir -p {repo}/.git/hooks; \
                 echo evil > {repo}/.git/hooks/pre-commit; \
                 rm -rf {repo}/.git/hooks {repo}/.git/config; \
                 mv {repo}/.git {repo}/.git-moved; true"
            );
            let next = serve.call(json!({"program": "sh", "args": ["-c", attack]}));
            stdout_of(&next);
            let git = setup.files.join(repo).join(".git");
            assert!(git.is_dir(), "cold {cold}: {repo}/.git moved: {next}");
            let config = std::fs::read_to_string(git.join("config")).unwrap();
            assert!(
                !config.contains("evil"),
                "cold {cold}: {repo}/.git/config: {next}"
            );
            assert!(
                !git.join("hooks/pre-commit").exists(),
                "cold {cold}: {repo}/.git/hooks/pre-commit planted: {next}"
            );
        }
        serve.close_stdin();
        assert!(serve.wait_exit(GONE).success());
    }
}
