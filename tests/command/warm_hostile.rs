//! A hostile program against warm sandboxes: a call's program tries to reach the
//! sandboxes waiting for later calls (their stubs, their pipes, their channels), to stall or
//! delay a later call through its stub, to run a later call's program outside its call, and to
//! be given something a cold start would not give it (signal dispositions, limits, session).
//! Every test here is the attack and what must hold against it. Under the pass-through prefix
//! the program runs as the same user as serve, with every capability when that is root: only
//! what holds there regardless is asserted there.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lnk_tests::containment::{argv_of, every_sandbox};
use lnk_tests::results::ran;
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::{ANSWER, cold_starts};
use lnk_tests::setup::Setup;
use lnk_tests::stubs::{
    assert_all_die, descendants, pid_words, spare_reapers, stdout_of, stop_script, stubs,
    wait_stubs,
};

lnk_tests::every_sandbox_warm_and_cold!(stopped_waiting_processes_die_with_serve);

every_sandbox!(stopped_warm_sandboxes_are_woken_for_their_call);

every_sandbox!(
    stopped_stubs_neither_stall_a_later_call_nor_run_it_late,
    a_program_cannot_write_into_a_later_calls_pipes_or_channel,
    signals_limits_and_session_are_a_cold_starts,
    awkward_dirs_and_words_are_answered_as_cold,
    serve_killed_while_a_call_waits_on_a_stopped_stub_runs_nothing,
);

/// Whether `pid` is stopped (state `T`).
fn stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let after = stat.rsplit_once(") ")?.1.to_owned();
            after.split(' ').next().map(|s| s == "T" || s == "t")
        })
        .unwrap_or(false)
}

/// The processes below `serve` that wait for a later call: the stubs when calls start warm,
/// the spare reapers (`reap --spare`) when they start cold.
fn waiting_for_later_calls(serve: i32) -> Vec<i32> {
    let stubs = stubs(serve);
    if !stubs.is_empty() {
        return stubs;
    }
    spare_reapers(serve)
}

/// What became of the calls after the attack: each round's structured value, and whether a
/// program of an answered call ran once the stopped processes were let go.
struct AfterStop {
    rounds: Vec<Value>,
    ran_late: bool,
}

/// A call's program SIGSTOPs every process waiting for a later call (it sees them without a
/// PID namespace; under bubblewrap's own the kill finds nothing), then six calls run `echo
/// ran; touch late` with a 2 s timeout; then everything stopped is let go (SIGCONT) and
/// whether `late` appears is seen. serve's SIGKILL must leave nothing, stopped or not.
fn stop_the_waiting_then_call(sandbox: Sandbox, cold: bool) -> AfterStop {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("2s").start();
    if cold {
        std::thread::sleep(Duration::from_millis(300));
    } else {
        wait_stubs(serve.pid(), 4, &[]);
    }
    let waiting = waiting_for_later_calls(serve.pid());
    assert!(waiting.len() >= 4, "{waiting:?}");
    let list = pid_words(&waiting);
    let script = format!(
        "for p in {list}; do [ $p = $$ ] || kill -STOP $p 2>/dev/null && echo stopped $p; done; true"
    );
    let result = serve.call(json!({"program": "sh", "args": ["-c", &script]}));
    eprintln!("attack: {}", stdout_of(&result).replace('\n', " "));
    let late = setup.files.join("late");
    let mut rounds = Vec::new();
    for round in 0..6 {
        let started = Instant::now();
        let id = serve.send_call(
            json!({"program": "sh", "args": ["-c", "echo ran; touch late"]}),
            None,
        );
        let result = serve.call_result(id, Duration::from_secs(15));
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(8),
            "round {round}: answered after {took:?}"
        );
        let value = result
            .get("structuredContent")
            .cloned()
            .unwrap_or_else(|| json!({"refused": result["content"][0]["text"]}));
        eprintln!("round {round}: {value}");
        rounds.push(value);
        let _ = std::fs::remove_file(&late);
    }
    let below = descendants(serve.pid());
    let still: Vec<i32> = below.iter().copied().filter(|p| stopped(*p)).collect();
    for pid in &still {
        let pid = rustix::process::Pid::from_raw(*pid).unwrap();
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::CONT);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let ran_late = late.exists();
    serve.kill();
    assert_all_die(below);
    AfterStop { rounds, ran_late }
}

/// Held: stopped stubs never stall a later call past its timeout, never run a call's program
/// after its answer, and never outlive serve. A call handed to a stopped stub (only a sandbox
/// without a PID namespace lets a program stop one) is answered within the hand-off's limit as
/// not run, never as a timeout of a program that did not start; the stub is killed, and once
/// the stopped ones are used up the calls run again.
fn stopped_stubs_neither_stall_a_later_call_nor_run_it_late(sandbox: Sandbox) {
    let after = stop_the_waiting_then_call(sandbox, false);
    assert!(!after.ran_late, "a call's program ran after its answer");
    for (round, value) in after.rounds.iter().enumerate() {
        let text = value["refused"].as_str().unwrap_or("");
        assert!(
            value["stdout"] == "ran\n" || text.contains("did not confirm the program's start"),
            "round {round}: neither ran nor told it was not run: {value}"
        );
        assert_ne!(value["timed_out"], true, "round {round}: {value}");
    }
    assert_eq!(
        after.rounds.last().unwrap()["stdout"],
        "ran\n",
        "{:?}",
        after.rounds
    );
}

/// A call's program SIGSTOPs every process waiting for a later call, the spare reapers and
/// their stubs (it sees them without a PID namespace), then serve is SIGKILLed: every one of
/// them dies with it as it is, stopped. (A stopped process keeps a SIGTERM pending for ever,
/// so a waiting spare and stub have SIGKILL at their parent's death.)
fn stopped_waiting_processes_die_with_serve(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    if lnk_tests::serve::is_cold() {
        std::thread::sleep(Duration::from_millis(300));
    } else {
        wait_stubs(serve.pid(), 4, &[]);
    }
    let mut waiting = spare_reapers(serve.pid());
    waiting.extend(stubs(serve.pid()));
    assert!(waiting.len() >= 4, "{waiting:?}");
    let script = stop_script(&waiting);
    stdout_of(&serve.call(json!({"program": "sh", "args": ["-c", &script]})));
    std::thread::sleep(Duration::from_millis(200));
    let below = descendants(serve.pid());
    let stopped_count = below.iter().filter(|pid| stopped(**pid)).count();
    eprintln!(
        "{stopped_count} of {} processes below serve stopped",
        below.len()
    );
    if sandbox != Sandbox::Bwrap {
        // The spare that took the attacking call itself is no longer waiting.
        assert!(
            stopped_count >= 3,
            "the attack stopped too little: {below:?}"
        );
    }
    serve.kill();
    assert_all_die(below);
}

/// The rounds whose program did not run (its `echo ran` missing).
fn not_run(after: &AfterStop) -> Vec<&Value> {
    after
        .rounds
        .iter()
        .filter(|v| v["stdout"] != "ran\n")
        .collect()
}

/// Held: under the recommended line (a PID namespace of its own) a call's program sees no
/// stub to stop, and every later call runs.
#[test]
fn under_the_recommended_line_no_stub_can_be_stopped() {
    if !Sandbox::Bwrap.usable() {
        return;
    }
    let after = stop_the_waiting_then_call(Sandbox::Bwrap, false);
    assert!(not_run(&after).is_empty(), "{:?}", after.rounds);
}

/// A call's program tries every way into the processes below serve (spares, sandboxes, stubs)
/// through `/proc`: writing into their stdout, stderr and stdin (a later call's pipes, which a
/// spare and its stub hold before the call) and into the stub's channel (fd 4: a spec written
/// there would run a program of the attacker's choosing in a later call). Under a sandbox none
/// may be opened, and the later calls' output is their own. (Under the pass-through prefix as
/// root nothing stops it, warm or cold: only the sandboxes are asserted.)
fn a_program_cannot_write_into_a_later_calls_pipes_or_channel(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    wait_stubs(serve.pid(), 4, &[]);
    let below = descendants(serve.pid());
    let list = pid_words(&below);
    let script = format!(
        "for p in {list}; do [ $p = $$ ] && continue; for f in 0 1 2 4; do \
           (printf 'INJECTED\\n' >/proc/$p/fd/$f) 2>/dev/null && echo wrote $p $f; \
           (cat /proc/$p/fd/$f </dev/null >/dev/null & ) 2>/dev/null; \
         done; done; true"
    );
    let result = serve.call(json!({"program": "sh", "args": ["-c", &script]}));
    let out = stdout_of(&result);
    eprintln!("attack ({} processes): {out}", below.len());
    if sandbox == Sandbox::Passthrough {
        return;
    }
    assert!(
        !out.contains("wrote"),
        "a program reached another process's pipes: {out}"
    );
    for _ in 0..5 {
        let result = serve.call(json!({"program": "sh", "args": ["-c", "echo mine"]}));
        let value = ran(&result);
        assert_eq!(value["stdout"], "mine\n", "{result}");
        assert_eq!(value["stderr"], "", "{result}");
    }
}

/// What the program is given besides its environment, warm as cold: signal dispositions and
/// mask, capabilities, no-new-privileges, seccomp, umask, resource limits, and whether it
/// leads its process group and session.
fn signals_limits_and_session_are_a_cold_starts(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    // Each file is read by a program of the shell's own (`cat`, `grep`), which has what the
    // shell had at the fork; the shell's own status, read while it forks, is a moment's.
    let script = "grep -E '^(Sig(Blk|Ign)|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|Umask):' \
                  /proc/self/status; cat /proc/self/limits; \
                  set -- $(sed 's/.*) //' /proc/self/stat); \
                  [ $3 = $$ ] && echo in the shells group; [ $4 = $$ ] && echo in the shells session; \
                  [ -t 0 ] && echo stdin is a tty; ls -l /proc/self/fd/0 | sed 's/.*-> //;s/:.*//'; \
                  cat /proc/self/oom_score_adj";
    let seen = || {
        let mut serve = setup.serve().start();
        let mut runs = Vec::new();
        for stdin in [None, Some("x")] {
            let mut args = json!({"program": "sh", "args": ["-c", script]});
            if let Some(input) = stdin {
                args["input"] = json!(input);
            }
            runs.push(stdout_of(&serve.call(args)));
        }
        runs
    };
    let warm = seen();
    let cold = cold_starts(seen);
    assert_eq!(warm, cold);
}

/// A call's program swaps a subfolder back and forth for 8 s (renamed away, a link to `/` in
/// its place, a link to another folder of the files, then the folder back) while other calls
/// run `pwd -P` in `dir: "sub"` one after another for 7 s. Returns where each call ran (the
/// files folder shown as `<files>`) with how many times, and the answers of those that ran
/// outside the files folder.
fn swap_the_folder_under_calls(sandbox: Sandbox) -> (BTreeMap<String, usize>, Vec<Value>) {
    let setup = Setup::new(sandbox);
    std::fs::create_dir(setup.files.join("sub")).unwrap();
    std::fs::create_dir(setup.files.join("other")).unwrap();
    let mut serve = setup.serve().timeout("20s").start();
    std::thread::sleep(Duration::from_millis(300));
    let swapper = "end=$(( $(date +%s) + 8 )); while [ $(date +%s) -lt $end ]; do \
                   mv sub held 2>/dev/null; ln -s / sub 2>/dev/null; rm -f sub; \
                   ln -s other sub 2>/dev/null; rm -f sub; mv held sub 2>/dev/null; done; \
                   rm -f sub; [ -d held ] && mv held sub; true";
    let id = serve.send_call(json!({"program": "sh", "args": ["-c", swapper]}), None);
    let files = path_str(&setup.files);
    let deadline = Instant::now() + Duration::from_secs(7);
    let mut ran_in = BTreeMap::<String, usize>::new();
    let mut outside = Vec::new();
    while Instant::now() < deadline {
        let result = serve.call(json!({"program": "pwd", "args": ["-P"], "dir": "sub"}));
        let value = result.get("structuredContent").cloned().unwrap_or_default();
        let key = if value["exit_code"] == 0 {
            let at = value["stdout"].as_str().unwrap_or("").trim().to_owned();
            if at != files && !at.starts_with(&format!("{files}/")) {
                outside.push(result.clone());
            }
            at.replace(&files, "<files>")
        } else {
            "refused or failed".to_owned()
        };
        *ran_in.entry(key).or_default() += 1;
    }
    eprintln!("{sandbox:?}: ran in {ran_in:?}");
    let _ = serve.call_result(id, ANSWER);
    (ran_in, outside)
}

/// Held under the pass-through prefix, where the call's folder is the reaper's descriptor.
#[test]
fn a_working_folder_swapped_under_the_calls_stays_inside_the_files() {
    let (_, outside) = swap_the_folder_under_calls(Sandbox::Passthrough);
    assert!(
        outside.is_empty(),
        "calls ran outside the files folder: {outside:?}"
    );
    let (_, outside) = cold_starts(|| swap_the_folder_under_calls(Sandbox::Passthrough));
    assert!(
        outside.is_empty(),
        "cold calls ran outside the files folder: {outside:?}"
    );
}

/// Finding (a call runs in `/` of its sandbox, not its `dir`), under bubblewrap, the
/// recommended line included. Reproduction: files folder F with F/sub and F/other; one call
/// runs, for 8 s, `while …; do mv sub held; ln -s / sub; rm -f sub; ln -s other sub; rm -f sub;
/// mv held sub; done`; meanwhile calls `{"program":"pwd","args":["-P"],"dir":"sub"}` one after
/// another: some answer `exited with code 0` with stdout `/`. A program told to work in
/// `sub` (say, `rm -rf *`) works in the sandbox's root, where the files folder is bound.
/// Cold calls do the same (the cold half below): bubblewrap enters the caller's folder again
/// by path inside the sandbox (`chdir` of the `getcwd` it was started in, following links)
/// and, when that fails (the folder renamed away meanwhile), starts the program in `/`
/// without a word (`cd` into a removed folder, then `env -i bwrap … -- /bin/pwd` prints `/`).
/// A warm call whose stub refuses the swapped folder (it follows no link) goes cold, and so
/// meets the same. The sandbox line has no `--chdir`, which would make bubblewrap fail instead.
/// The cold half of the finding above: the same attack on cold calls.
/// Awkward `dir`s and words, warm as cold, word for word: `..` in and out of the files
/// folder, `.`s and slashes, links inside the files folder (to a folder inside, to `/`, to a
/// folder outside), an absolute path, and NUL bytes in `dir` and in an argument (the spare's spec and the stub's separate their fields with NULs: a NUL that got
/// through would add words, or options, of the caller's choosing).
fn awkward_dirs_and_words_are_answered_as_cold(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let files = &setup.files;
    std::fs::create_dir_all(files.join("sub/deeper")).unwrap();
    std::os::unix::fs::symlink("sub", files.join("to-sub")).unwrap();
    std::os::unix::fs::symlink("/", files.join("to-root")).unwrap();
    let outside = setup.path("outside");
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, files.join("to-outside")).unwrap();
    let calls = [
        json!({"program": "pwd", "args": ["-P"], "dir": "sub/.."}),
        json!({"program": "pwd", "args": ["-P"], "dir": "sub/deeper/../deeper"}),
        json!({"program": "pwd", "args": ["-P"], "dir": ".."}),
        json!({"program": "pwd", "args": ["-P"], "dir": "./sub//deeper/"}),
        json!({"program": "pwd", "args": ["-P"], "dir": "to-sub"}),
        json!({"program": "pwd", "args": ["-P"], "dir": "to-sub/deeper"}),
        json!({"program": "pwd", "args": ["-P"], "dir": "to-root"}),
        json!({"program": "pwd", "args": ["-P"], "dir": "to-outside"}),
        json!({"program": "pwd", "args": ["-P"], "dir": path_str(files)}),
        json!({"program": "pwd", "args": ["-P"], "dir": "sub\u{0}--warm-only"}),
        json!({"program": "echo", "args": ["a\u{0}b"]}),
        json!({"program": "echo", "args": ["a", "--", "--warm-only"]}),
    ];
    let answers = || {
        let mut serve = setup.serve().start();
        let answers: Vec<Value> = calls
            .iter()
            .map(|call| {
                let mut result = serve.call(call.clone());
                if let Some(value) = result.get_mut("structuredContent") {
                    value["elapsed_ms"] = json!(0);
                }
                if let Some(text) = result["content"][0]["text"].as_str() {
                    let text = text
                        .split_whitespace()
                        .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
                        .collect::<Vec<_>>()
                        .join(" ");
                    result["content"][0]["text"] = json!(text);
                }
                result
            })
            .collect();
        answers
    };
    let warm = answers();
    let cold = cold_starts(answers);
    for (i, (w, c)) in warm.iter().zip(&cold).enumerate() {
        assert_eq!(w, c, "call {i}: {:?}", calls.get(i));
    }
    for (i, answer) in warm.iter().enumerate() {
        eprintln!("{i}: {answer}");
        let out = answer["structuredContent"]["stdout"].as_str().unwrap_or("");
        assert!(
            out.is_empty() || out.starts_with(&path_str(files)) || !out.starts_with('/'),
            "call {i} ran outside the files folder: {answer}"
        );
    }
}

/// serve is SIGKILLed while a call waits on a stub a hostile program stopped (the call's spec
/// is in the stub's channel): nothing below serve outlives it, and once everything is let go
/// (SIGCONT) the call's program never runs.
fn serve_killed_while_a_call_waits_on_a_stopped_stub_runs_nothing(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("20s").start();
    let waiting = wait_stubs(serve.pid(), 4, &[]);
    let script = stop_script(&waiting);
    stdout_of(&serve.call(json!({"program": "sh", "args": ["-c", &script]})));
    serve.send_call(json!({"program": "sh", "args": ["-c", "touch late"]}), None);
    std::thread::sleep(Duration::from_millis(500));
    let below = descendants(serve.pid());
    // Under a PID namespace of the sandbox's own no stub was stopped, and the call ran.
    let ran_in_time = setup.files.join("late").exists();
    serve.kill();
    // A stopped process dies of SIGKILL as it is: the reapers' kill reaches the stopped stubs
    // without a SIGCONT (one sent now could let a stub run its call before its reaper's kill,
    // which is a race of the test's making, not a call outliving serve).
    assert_all_die(below);
    std::thread::sleep(Duration::from_millis(500));
    if !ran_in_time {
        assert!(
            !setup.files.join("late").exists(),
            "the call's program ran after serve's end"
        );
    }
}

/// A call's program stops the sandbox processes that wait for later calls (bubblewrap's, or
/// the stubs under the pass-through prefix; it sees them without a PID namespace): a later
/// call that takes one wakes it, and is answered as soon as its program ends, never at its
/// timeout.
fn stopped_warm_sandboxes_are_woken_for_their_call(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("20s").start();
    let waiting = wait_stubs(serve.pid(), 4, &[]);
    let sandboxes: Vec<i32> = descendants(serve.pid())
        .into_iter()
        .filter(|pid| !argv_of(*pid).iter().any(|arg| arg == "--spare"))
        .filter(|pid| !waiting.contains(pid) || sandbox == Sandbox::Passthrough)
        .collect();
    let list = pid_words(&sandboxes);
    // Not its own call's sandbox: its ancestors are skipped.
    let script = format!(
        "mine=' '; a=$$; while [ \"$a\" -gt 1 ]; do mine=\"$mine$a \"; \
         a=$(sed 's/.*) //' /proc/$a/stat | cut -d' ' -f2); done; \
         for p in {list}; do case \"$mine\" in *\" $p \"*) ;; *) kill -STOP $p 2>/dev/null;; \
         esac; done; true"
    );
    stdout_of(&serve.call(json!({"program": "sh", "args": ["-c", &script]})));
    for round in 0..4 {
        let started = Instant::now();
        let id = serve.send_call(json!({"program": "echo", "args": ["hi"]}), None);
        let result = serve.call_result(id, Duration::from_secs(30));
        let took = started.elapsed();
        assert!(
            took < Duration::from_secs(5),
            "round {round}: {took:?}: {result}"
        );
        let text = result["content"][0]["text"].as_str().unwrap_or("");
        assert!(
            result["structuredContent"]["stdout"] == "hi\n"
                || text.contains("did not confirm the program's start"),
            "round {round}: {result}"
        );
        assert_ne!(result["structuredContent"]["timed_out"], true, "{result}");
    }
}
