//! Roots a project may not be: `/`, the home, a file, a relative or non-`file` URI, a folder
//! that holds the state folder, one that does not exist. Each is refused call by call, with why
//! and what to do, while serve keeps serving; nothing is made there. A client that does not
//! answer `roots/list` has its calls refused after the wait, and its late answer is taken. A
//! first root that changes (`notifications/roots/list_changed`) is refused until restart; the
//! same first root with more roots changes nothing.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use lnk_tests::results::{is_error, ok, structured, text};
use lnk_tests::roots::{
    answer, file_uri, initialize_with_roots, modern_call, modern_tool, roots_request, roots_result,
};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, both_sandboxes_warm_and_cold, path_str};
use lnk_tests::serve::{ANSWER, Era, Serve};

both_sandboxes_warm_and_cold!(roots_that_may_not_be_a_project_are_refused_call_by_call);
both_sandboxes!(a_first_root_that_changes_is_refused_until_restart);

mod a_client_that_never_answers {
    #[test]
    fn has_its_calls_refused_after_the_wait_and_its_late_answer_taken() {
        super::a_client_that_never_answers(lnk_tests::sandbox::Sandbox::Passthrough);
    }
}

/// What every refusal of a project folder says to do.
const WHAT_TO_DO: &str = "give serve --files <folder> in place of --files-from roots";

/// Asserts that `result` is a refusal whose text says `why` and what to do.
fn refused(result: &Value, why: &str) -> String {
    assert!(is_error(result), "not refused: {result}");
    let said = text(result);
    assert!(said.contains(why), "{said:?} does not say {why:?}");
    assert!(
        said.contains(WHAT_TO_DO),
        "{said:?} does not say what to do"
    );
    said
}

fn roots_that_may_not_be_a_project_are_refused_call_by_call(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let root = bg.setup.root.path().canonicalize().unwrap();
    // The home lies apart, so that the folder holding the state folder does not hold it.
    let home_dir = tempfile::Builder::new()
        .prefix("home-")
        .tempdir_in(lnk_tests::bins::target_tmp())
        .unwrap();
    let home = home_dir.path().canonicalize().unwrap();
    let file = bg.setup.files.join("notes.txt");
    std::fs::write(&file, b"a file\n").unwrap();
    let cases: [(String, &str); 8] = [
        ("file:///".to_owned(), "is the whole file system"),
        (file_uri(&home), "is your home folder"),
        (file_uri(&file), "is not a folder"),
        ("work/app".to_owned(), "is not a URI"),
        ("file:work/app".to_owned(), "is not an absolute file:// URI"),
        ("ftp://127.0.0.1/srv/app".to_owned(), "is not a file:// URI"),
        (file_uri(&root), "holds the state folder"),
        (file_uri(&root.join("missing")), "cannot be used"),
    ];
    let flags = Flags::default();
    for (uri, why) in &cases {
        let mut serve = bg
            .serve(&flags)
            .files_from_roots()
            .era(Era::Modern)
            .current_dir(&bg.setup.files)
            .env("HOME", &home)
            .spawn();
        let first = modern_tool(&mut serve, "command", json!({"program": "pwd"}), &[uri]);
        let said = refused(&first, why);
        // Every later call is refused the same way, whatever its tool; serve keeps serving.
        let again = ok(&modern_call(
            &mut serve,
            "start",
            json!({"program": "true"}),
            json!({}),
        ));
        assert_eq!(refused(&again, why), said);
        let tools = ok(&serve.request("tools/list", json!({})));
        assert!(tools["tools"].as_array().is_some_and(|t| !t.is_empty()));
        serve.check_stdout();
    }
    // A handshake client's refused root, the same way.
    let mut serve = bg
        .serve(&flags)
        .files_from_roots()
        .current_dir(&bg.setup.files)
        .spawn();
    let asked = initialize_with_roots(&mut serve, "2025-11-25");
    answer(&mut serve, &asked, roots_result(&["file:///"]));
    refused(
        &serve.call(json!({"program": "pwd"})),
        "is the whole file system",
    );
    // Nothing was made in any refused folder, and no project's state folder either.
    assert!(!home.join("background").exists());
    assert!(!root.join("background").exists());
    let projects = bg.state.join("projects");
    let made: Vec<_> = std::fs::read_dir(&projects)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        made.is_empty(),
        "state folders made for refused roots: {made:?}"
    );
}

fn a_client_that_never_answers(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg
        .serve(&Flags::default())
        .files_from_roots()
        .current_dir(&bg.setup.files)
        .spawn();
    let asked = initialize_with_roots(&mut serve, "2025-11-25");
    let began = Instant::now();
    let call = serve.send_call(json!({"program": "pwd"}), None);
    // serve reads on meanwhile: a ping is answered at once.
    std::thread::sleep(Duration::from_millis(200));
    let ping = serve.result("ping", json!({}));
    assert_eq!(ping, json!({}));
    assert!(began.elapsed() < Duration::from_secs(5), "the ping waited");
    let result = serve.call_result(call, ANSWER);
    assert!(is_error(&result), "{result}");
    assert!(
        text(&result).contains("did not answer roots/list within 10 s"),
        "{result}"
    );
    assert!(
        began.elapsed() >= Duration::from_secs(9),
        "refused before the wait"
    );
    // The answer, late, chooses the project for later calls.
    let other = bg.setup.path("late");
    std::fs::create_dir(&other).unwrap();
    let other = other.canonicalize().unwrap();
    answer(&mut serve, &asked, roots_result(&[&file_uri(&other)]));
    let result = serve.call(json!({"program": "pwd"}));
    assert!(!is_error(&result), "{result}");
    assert_eq!(
        structured(&result)["stdout"],
        format!("{}\n", path_str(&other))
    );
}

/// A folder of the test's own, canonical.
fn made(bg: &Bg, name: &str) -> std::path::PathBuf {
    let path = bg.setup.path(name);
    std::fs::create_dir_all(&path).unwrap();
    path.canonicalize().unwrap()
}

/// `pwd` in the session's project.
fn pwd(serve: &mut Serve) -> Value {
    serve.call(json!({"program": "pwd"}))
}

fn list_changed(serve: &mut Serve) {
    serve.send(&json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}));
}

fn a_first_root_that_changes_is_refused_until_restart(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let a = bg.setup.files.clone();
    let b = made(&bg, "b");
    let added = made(&bg, "added");
    // The handshake era: the client says its roots changed, and is asked again.
    let mut serve = bg
        .serve(&Flags::default())
        .files_from_roots()
        .current_dir(&b)
        .spawn();
    let asked = initialize_with_roots(&mut serve, "2025-11-25");
    answer(&mut serve, &asked, roots_result(&[&file_uri(&a)]));
    assert_eq!(
        structured(&pwd(&mut serve))["stdout"],
        format!("{}\n", path_str(&a))
    );
    // A root added after the first (Claude Code's /add-dir) changes nothing.
    list_changed(&mut serve);
    let again = roots_request(&mut serve, 1);
    assert_ne!(
        again["id"], asked["id"],
        "a new question has an id of its own"
    );
    answer(
        &mut serve,
        &again,
        roots_result(&[&file_uri(&a), &file_uri(&added)]),
    );
    assert_eq!(
        structured(&pwd(&mut serve))["stdout"],
        format!("{}\n", path_str(&a))
    );
    // Another first root: every later call is refused, saying so.
    list_changed(&mut serve);
    let third = roots_request(&mut serve, 2);
    answer(&mut serve, &third, roots_result(&[&file_uri(&b)]));
    let changed = |serve: &mut Serve| {
        let deadline = Instant::now() + ANSWER;
        loop {
            let result = pwd(serve);
            if is_error(&result) {
                return text(&result);
            }
            assert!(
                Instant::now() < deadline,
                "the change was never taken: {result}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let said = changed(&mut serve);
    assert!(
        said.contains("first root changed from")
            && said.contains(&path_str(&a))
            && said.contains(&path_str(&b))
            && said.contains("restart the server"),
        "{said}"
    );
    drop(serve);
    // The 2026-07-28 era: the next call that declares roots asks them again.
    let mut serve = bg
        .serve(&Flags::default())
        .files_from_roots()
        .era(Era::Modern)
        .current_dir(&b)
        .spawn();
    let result = modern_tool(
        &mut serve,
        "command",
        json!({"program": "pwd"}),
        &[&file_uri(&a)],
    );
    assert_eq!(structured(&result)["stdout"], format!("{}\n", path_str(&a)));
    list_changed(&mut serve);
    let result = modern_tool(
        &mut serve,
        "command",
        json!({"program": "pwd"}),
        &[&file_uri(&b)],
    );
    let said = text(&result);
    assert!(
        is_error(&result) && said.contains("first root changed from"),
        "{said}"
    );
    // A restart (a new serve) works in the new folder.
    drop(serve);
    let mut serve = bg
        .serve(&Flags::default())
        .files_from_roots()
        .era(Era::Modern)
        .current_dir(Path::new("/"))
        .spawn();
    let result = modern_tool(
        &mut serve,
        "command",
        json!({"program": "pwd"}),
        &[&file_uri(&b)],
    );
    assert_eq!(structured(&result)["stdout"], format!("{}\n", path_str(&b)));
}
