#![allow(clippy::unwrap_used)]
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::config::FilesFrom;

fn template(files_from: FilesFrom) -> Config {
    Config {
        files_from,
        programs_path: "/usr/bin".into(),
        timeout: Duration::from_secs(1),
        ..crate::testing::config("/nonexistent/started-in", &["/usr/bin/env"])
    }
}

fn writer() -> Writer {
    // Nothing below is written: no test here takes a path that asks the client (handshake).
    Writer::start().unwrap().0
}

#[test]
fn a_fixed_project_is_ready_from_the_start() {
    let projects = Projects::fixed(template(FilesFrom::Flag)).unwrap();
    let control = CallControl::new().unwrap();
    assert!(matches!(
        projects.before_call(&Era::Modern, true, None, &writer()),
        Before::Run
    ));
    let project = projects.wait(&control).unwrap();
    assert_eq!(project.files, Path::new("/nonexistent/started-in"));
    assert!(projects.ready().is_some());
}

#[test]
fn a_modern_client_that_declares_roots_is_asked_them_in_the_answer() {
    let projects = Projects::from_roots(template(FilesFrom::Roots), Making::default()).unwrap();
    let Before::InputRequired(question) = projects.before_call(&Era::Modern, true, None, &writer())
    else {
        panic!("the roots are asked first");
    };
    assert_eq!(
        question,
        json!({"resultType": "input_required",
               "inputRequests": {"roots": {"method": "roots/list"}}})
    );
    assert!(projects.ready().is_none());
    // Asked again as long as no answer came.
    assert!(matches!(
        projects.before_call(&Era::Modern, true, None, &writer()),
        Before::InputRequired(_)
    ));
    // An answer that is not one is the request's error, and changes nothing.
    for bad in [
        json!({}),
        json!({"roots": {"roots": "x"}}),
        json!({"roots": {"roots": [{}]}}),
    ] {
        assert!(
            matches!(
                projects.before_call(&Era::Modern, true, Some(&bad), &writer()),
                Before::Malformed(_)
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        projects.before_call(&Era::Modern, true, None, &writer()),
        Before::InputRequired(_)
    ));
}

#[test]
fn a_refused_first_root_refuses_every_call_saying_why() {
    for (uri, why) in [
        ("https://example.org/x", "is not a file:// URI"),
        ("file:///", "is the whole file system"),
    ] {
        let projects = Projects::from_roots(template(FilesFrom::Roots), Making::default()).unwrap();
        let answer = json!({"roots": {"roots": [{"uri": uri}]}});
        assert!(matches!(
            projects.before_call(&Era::Modern, true, Some(&answer), &writer()),
            Before::Run
        ));
        let control = CallControl::new().unwrap();
        let err = projects.wait(&control).unwrap_err();
        assert!(
            err.contains(why) && err.ends_with(client_root::WHAT_TO_DO),
            "{err}"
        );
        // And the next call, asked nothing more, is refused the same way.
        assert!(matches!(
            projects.before_call(&Era::Modern, true, None, &writer()),
            Before::Run
        ));
        assert_eq!(projects.wait(&control).unwrap_err(), err);
    }
}

#[test]
fn a_cancelled_call_stops_waiting() {
    let projects = Projects::from_roots(template(FilesFrom::Roots), Making::default()).unwrap();
    lock(&projects.state).phase = Phase::Making;
    let control = CallControl::new().unwrap();
    control.cancel();
    assert_eq!(
        projects.wait(&control).unwrap_err(),
        "the call was cancelled"
    );
}

#[test]
fn one_folder_under_two_names_is_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().canonicalize().unwrap();
    std::os::unix::fs::symlink(&real, real.join("link")).unwrap();
    assert!(same_folder(&real, &real.join("link")));
    assert!(same_folder(
        Path::new("/missing/a"),
        Path::new("/missing/a")
    ));
    assert!(!same_folder(&real, Path::new("/")));
}
