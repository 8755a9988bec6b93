//! Where calls run under `--files-from roots`: in the client's first root, asked once (the
//! handshake's `roots/list`, or the 2026-07-28 `input_required` answer), with a call made
//! before the answer waiting for it; further roots are not reachable under the sandbox; a
//! client without roots (or with none to give) gets the folder serve was started in.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use lnk_tests::results::{is_error, ok, structured};
use lnk_tests::roots::{
    answer, file_uri, initialize_with_roots, modern_call, modern_tool, roots_result,
};
use lnk_tests::sandbox::{Sandbox, both_sandboxes_warm_and_cold, path_str};
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::setup::Setup;

lnk_tests::sandbox::both_sandboxes!(warm_sandboxes_are_started_for_the_chosen_folder_only);

both_sandboxes_warm_and_cold!(
    a_handshake_client_s_first_root_is_where_calls_run,
    a_modern_client_gives_its_roots_in_the_retry_of_its_first_call,
    a_client_without_roots_gets_the_folder_serve_started_in,
    a_client_that_has_no_roots_to_give_gets_the_folder_serve_started_in,
);

/// A folder of the test's own, beside `files/`, canonical.
fn folder(setup: &Setup, name: &str) -> PathBuf {
    let path = setup.path(name);
    std::fs::create_dir_all(&path).unwrap();
    path.canonicalize().unwrap()
}

/// `pwd`'s output, from a `command` result that ran.
fn pwd_of(result: &Value) -> String {
    assert!(!is_error(result), "the call was refused: {result}");
    let value = structured(result);
    assert_eq!(value["exit_code"], 0, "{result}");
    value["stdout"].as_str().unwrap().trim_end().to_owned()
}

/// `command` with `arguments`, run and answered.
fn command(serve: &mut Serve, arguments: Value) -> Value {
    serve.call(arguments)
}

fn a_handshake_client_s_first_root_is_where_calls_run(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    // serve starts elsewhere, and the client's second root is elsewhere too: neither is used.
    let elsewhere = folder(&setup, "elsewhere");
    let mut serve = setup
        .serve()
        .files_from_roots()
        .current_dir(&elsewhere)
        .spawn();
    let asked = initialize_with_roots(&mut serve, "2025-11-25");
    assert_eq!(asked["method"], "roots/list", "{asked}");
    // A call made before the answer waits for it, and runs in the root.
    let early = serve.send_call(json!({"program": "pwd"}), None);
    std::thread::sleep(std::time::Duration::from_millis(100));
    let first = file_uri(&setup.files);
    let second = file_uri(&elsewhere);
    answer(&mut serve, &asked, roots_result(&[&first, &second]));
    let result = serve.call_result(early, ANSWER);
    assert_eq!(pwd_of(&result), path_str(&setup.files));
    // What a program writes lands in the root.
    let made = command(
        &mut serve,
        json!({"program": "touch", "args": ["made-in-the-root"]}),
    );
    assert!(!is_error(&made), "{made}");
    assert!(setup.files.join("made-in-the-root").is_file());
    assert!(!elsewhere.join("made-in-the-root").exists());
    // `dir` is inside the root, and nothing above it is reachable by `dir`.
    std::fs::create_dir(setup.files.join("sub")).unwrap();
    let sub = command(&mut serve, json!({"program": "pwd", "dir": "sub"}));
    assert_eq!(pwd_of(&sub), path_str(&setup.files.join("sub")));
    let up = command(&mut serve, json!({"program": "pwd", "dir": ".."}));
    assert!(is_error(&up), "{up}");
    if sandbox != Sandbox::Passthrough {
        // Further roots are not bound: the sandbox does not show them, let alone let programs
        // write there.
        let target = elsewhere.join("written-from-the-sandbox");
        let tried = command(
            &mut serve,
            json!({"program": "touch", "args": [path_str(&target)]}),
        );
        assert_ne!(structured(&tried)["exit_code"], 0, "{tried}");
        assert!(!target.exists(), "a further root was writable");
    }
    // The roots were asked once.
    let asks = serve
        .inbox()
        .iter()
        .filter(|m| m["method"] == "roots/list")
        .count();
    assert_eq!(asks, 1);
    serve.check_stdout();
}

fn a_modern_client_gives_its_roots_in_the_retry_of_its_first_call(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let elsewhere = folder(&setup, "elsewhere");
    let mut serve = setup
        .serve()
        .files_from_roots()
        .era(Era::Modern)
        .current_dir(&elsewhere)
        .spawn();
    let root = file_uri(&setup.files);
    let result = modern_tool(&mut serve, "command", json!({"program": "pwd"}), &[&root]);
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(pwd_of(&result), path_str(&setup.files));
    // Later calls need no roots: the project is chosen.
    let again = ok(&modern_call(
        &mut serve,
        "command",
        json!({"program": "pwd"}),
        json!({}),
    ));
    assert_eq!(again["resultType"], "complete", "{again}");
    assert_eq!(pwd_of(&again), path_str(&setup.files));
    // The same roots in a later retry change nothing.
    let retried = ok(&modern_call(
        &mut serve,
        "command",
        json!({"program": "pwd"}),
        json!({"inputResponses": {"roots": roots_result(&[&root])}}),
    ));
    assert_eq!(pwd_of(&retried), path_str(&setup.files));
    // Roots that are no answer to the question are the request's error.
    let bad = modern_call(
        &mut serve,
        "command",
        json!({"program": "pwd"}),
        json!({"inputResponses": {"roots": {"roots": "nope"}}}),
    );
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
}

/// Starts a serve with `--files-from roots` in `dir`, in `era`, the session opened without
/// roots.
fn started_in(setup: &Setup, dir: &Path, era: Era) -> Serve {
    setup
        .serve()
        .files_from_roots()
        .era(era)
        .current_dir(dir)
        .start()
}

fn a_client_without_roots_gets_the_folder_serve_started_in(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    for era in [
        Era::Legacy("2025-11-25"),
        Era::Legacy("2025-06-18"),
        Era::Modern,
    ] {
        let mut serve = started_in(&setup, &setup.files, era);
        let result = command(&mut serve, json!({"program": "pwd"}));
        assert_eq!(pwd_of(&result), path_str(&setup.files), "{era:?}");
        let asked = serve.inbox().iter().any(|m| m["method"] == "roots/list");
        assert!(!asked, "a client without roots is not asked them ({era:?})");
        serve.check_stdout();
    }
}

fn a_client_that_has_no_roots_to_give_gets_the_folder_serve_started_in(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    // No roots in the answer, or an error for one: the folder serve was started in.
    for reply in [
        json!({"result": {"roots": []}}),
        json!({"error": {"code": -32601, "message": "no roots here"}}),
    ] {
        let mut serve = setup
            .serve()
            .files_from_roots()
            .current_dir(&setup.files)
            .spawn();
        let asked = initialize_with_roots(&mut serve, "2025-06-18");
        let mut message = json!({"jsonrpc": "2.0", "id": asked["id"]});
        for (key, value) in reply.as_object().unwrap() {
            message[key] = value.clone();
        }
        serve.send(&message);
        let result = command(&mut serve, json!({"program": "pwd"}));
        assert_eq!(pwd_of(&result), path_str(&setup.files), "{reply}");
    }
    // A modern client that declares roots and gives none.
    let mut serve = setup
        .serve()
        .files_from_roots()
        .era(Era::Modern)
        .current_dir(&setup.files)
        .spawn();
    let result = modern_tool(&mut serve, "command", json!({"program": "pwd"}), &[]);
    assert_eq!(pwd_of(&result), path_str(&setup.files));
}

/// The words of process `pid`'s command line.
fn argv_of(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|bytes| {
            bytes
                .split(|b| *b == 0)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// No spare waits before the project is chosen; once it is, calls run in sandboxes started
/// ahead for its folder (under the pass-through prefix: the call's pid is a stub that waited;
/// under bubblewrap: the spares' sandboxes bind the root, and no `{files}` is left unfilled).
fn warm_sandboxes_are_started_for_the_chosen_folder_only(sandbox: Sandbox) {
    use lnk_tests::stubs::{descendants, stdout_of, stubs, wait_stubs};
    let setup = Setup::new(sandbox);
    let elsewhere = folder(&setup, "elsewhere");
    let mut serve = setup
        .serve()
        .files_from_roots()
        .current_dir(&elsewhere)
        .spawn();
    let asked = initialize_with_roots(&mut serve, "2025-11-25");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        stubs(serve.pid()),
        Vec::<i32>::new(),
        "a spare before the root"
    );
    answer(&mut serve, &asked, roots_result(&[&file_uri(&setup.files)]));
    let waiting = wait_stubs(serve.pid(), 1, &[]);
    let files = path_str(&setup.files);
    if sandbox == Sandbox::Passthrough {
        let result = serve.call(json!({"program": "sh", "args": ["-c", "echo $$"]}));
        let pid: i32 = stdout_of(&result).trim().parse().unwrap();
        assert!(waiting.contains(&pid), "{pid} is not a stub of {waiting:?}");
        return;
    }
    // A spare's processes are read as they are: one may be between its fork and its exec (no
    // command line yet), so they are read again until a sandbox's line is seen.
    let binds_root = |lines: &[Vec<String>]| {
        lines.iter().any(|argv| {
            argv.windows(3)
                .any(|w| w[0] == "--bind" && w[1] == files && w[2] == files)
        })
    };
    let mut lines: Vec<Vec<String>> = Vec::new();
    let seen = lnk_tests::procs::poll(ANSWER, || {
        lines = descendants(serve.pid()).into_iter().map(argv_of).collect();
        binds_root(&lines)
    });
    assert!(seen, "no spare's sandbox binds {files}: {lines:?}");
    let unfilled = lines
        .iter()
        .any(|argv| argv.iter().any(|w| w.contains("{files}")));
    assert!(!unfilled, "a sandbox with {{files}} unfilled: {lines:?}");
    let elsewhere = path_str(&elsewhere);
    assert!(
        !lines.iter().any(|argv| argv.contains(&elsewhere)),
        "a spare of the folder serve started in: {lines:?}"
    );
    let result = serve.call(json!({"program": "pwd"}));
    assert_eq!(pwd_of(&result), files);
}
