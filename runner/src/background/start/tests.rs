//! The start's own tests: what a run records, who needs a conversation, and that a start
//! failing at any step leaves nothing behind.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::config::WayIn;

fn files_folder() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary folder: {e}"));
    let canonical = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
    (dir, canonical)
}

fn config(files: PathBuf) -> Config {
    Config {
        files,
        programs: vec!["sleep".into()],
        ..crate::testing::config("", &["/usr/bin/bwrap", "--unshare-all"])
    }
}

fn background(way_in: Option<WayIn>) -> Background {
    Background {
        state: PathBuf::from("/nonexistent/state"),
        given_state: PathBuf::from("/nonexistent/state"),
        max_running: 2,
        timeout: Duration::from_secs(60),
        output: 1024,
        keep: Duration::from_secs(3600),
        hops: 3,
        way_in,
        supervise: PathBuf::from("/nonexistent/lnk-link-supervise"),
    }
}

fn way_in() -> WayIn {
    WayIn {
        socket: PathBuf::from("/run/lnk/way-in.sock"),
        agent: lnk_common::AgentId::parse("ada").unwrap_or_else(|e| panic!("{e}")),
        keyring: PathBuf::from("/home/ada/.config/lnk/keyring"),
    }
}

fn map(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn a_start_records_what_the_run_will_be() {
    let (_dir, files) = files_folder();
    let config = config(files.clone());
    let meta = map(json!({META_THREAD: "th-1", META_HOPS: 2}));
    let launch = prepare(
        &config,
        &background(Some(way_in())),
        &map(json!({"program": "sleep", "args": ["5"]})),
        Some(&meta),
        false,
    )
    .unwrap_or_else(|answer| panic!("{}", answer.text));
    assert_eq!(launch.files, files);
    assert_eq!(launch.sandbox, ["/usr/bin/bwrap", "--unshare-all"]);
    assert_eq!(launch.program.name, "sleep");
    assert_eq!(launch.program.args, ["5"]);
    assert_eq!(launch.program.cwd, files);
    assert_eq!(launch.thread, "th-1");
    assert_eq!(launch.hops, 2);
    assert_eq!(launch.limits.timeout_ms, 60_000);
    assert_eq!(launch.limits.output_cap_bytes, 1024);
    let tell_to = launch
        .tell_to
        .unwrap_or_else(|| panic!("a way in was given"));
    assert_eq!(tell_to.agent.as_str(), "ada");
}

#[test]
fn without_a_way_in_a_start_needs_no_conversation() {
    let (_dir, files) = files_folder();
    let launch = prepare(
        &config(files),
        &background(None),
        &map(json!({"program": "sleep", "args": ["5"]})),
        None,
        false,
    )
    .unwrap_or_else(|answer| panic!("{}", answer.text));
    assert_eq!(launch.thread, "");
    assert!(launch.tell_to.is_none());
}

#[test]
fn with_a_way_in_a_start_without_a_conversation_is_refused() {
    let (_dir, files) = files_folder();
    let config = config(files);
    for meta in [None, Some(map(json!({META_THREAD: ""})))] {
        let refused = prepare(
            &config,
            &background(Some(way_in())),
            &map(json!({"program": "sleep"})),
            meta.as_ref(),
            false,
        )
        .err()
        .unwrap_or_else(|| panic!("a way in needs a conversation"));
        assert!(
            refused.is_error && refused.text.contains(META_THREAD),
            "{}",
            refused.text
        );
    }
}

#[test]
fn a_start_followed_as_a_task_needs_no_conversation_and_tells_no_one_without_one() {
    let (_dir, files) = files_folder();
    let config = config(files);
    let arguments = map(json!({"program": "sleep"}));
    let launch = prepare(&config, &background(Some(way_in())), &arguments, None, true)
        .unwrap_or_else(|answer| panic!("{}", answer.text));
    assert_eq!(launch.thread, "");
    assert!(launch.tell_to.is_none(), "no conversation, no one to tell");
    // With a conversation it is told as well.
    let meta = map(json!({META_THREAD: "th-1"}));
    let launch = prepare(
        &config,
        &background(Some(way_in())),
        &arguments,
        Some(&meta),
        true,
    )
    .unwrap_or_else(|answer| panic!("{}", answer.text));
    assert_eq!(launch.thread, "th-1");
    assert!(launch.tell_to.is_some());
}

/// Every file under `dir`, as paths relative to it (folders left out).
fn files_under(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut folders = vec![dir.to_path_buf()];
    while let Some(folder) = folders.pop() {
        let entries = std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{e}"));
        for entry in entries {
            let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
            if path.is_dir() {
                folders.push(path);
            } else if let Ok(relative) = path.strip_prefix(dir) {
                found.push(relative.display().to_string());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_start_that_fails_at_any_step_leaves_nothing_behind() {
    for step in [
        MakeStep::Lock,
        MakeStep::Output,
        MakeStep::Index,
        MakeStep::Record,
    ]
    .map(StartStep::Made)
    {
        let (_dir, files) = files_folder();
        let state_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut settings = background(None);
        settings.state = state_dir.path().join("state");
        let state = StateDir::new(&settings.state);
        state.create().unwrap_or_else(|e| panic!("{e}"));
        lnk_common::index::init(&state).unwrap_or_else(|e| panic!("{e}"));
        let before = files_under(&settings.state);
        let launch = prepare(
            &config(files.clone()),
            &settings,
            &map(json!({"program": "sleep", "args": ["5"]})),
            None,
            false,
        )
        .unwrap_or_else(|answer| panic!("{}", answer.text));
        let refused = launch_run_failing(&settings, launch, |at| {
            if at == step {
                Err(std::io::Error::other(format!("{at:?} failed on purpose")))
            } else {
                Ok(())
            }
        })
        .err()
        .unwrap_or_else(|| panic!("the start failed at {step:?}"));
        assert!(refused.is_error, "{}", refused.text);
        assert!(refused.text.contains("on purpose"), "{}", refused.text);
        let left: Vec<String> = files_under(&settings.state)
            .into_iter()
            // The folder's own furniture (start.lock, the slots) is no run's.
            .filter(|name| !before.contains(name))
            .filter(|name| name != "start.lock" && !name.starts_with("slots/"))
            .collect();
        assert_eq!(left, Vec::<String>::new(), "failing at {step:?} left these");
        let background = files.join("background");
        if background.exists() {
            assert_eq!(files_under(&background), Vec::<String>::new(), "{step:?}");
        }
    }
}

#[test]
fn a_supervisor_that_cannot_start_leaves_the_run_recorded_lost() {
    let (_dir, files) = files_folder();
    let state_dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut settings = background(None);
    settings.state = state_dir.path().join("state");
    let state = StateDir::new(&settings.state);
    state.create().unwrap_or_else(|e| panic!("{e}"));
    lnk_common::index::init(&state).unwrap_or_else(|e| panic!("{e}"));
    let launch = prepare(
        &config(files),
        &settings,
        &map(json!({"program": "sleep"})),
        None,
        false,
    )
    .unwrap_or_else(|answer| panic!("{}", answer.text));
    let refused = launch_run(&settings, launch)
        .err()
        .unwrap_or_else(|| panic!("{} cannot start", settings.supervise.display()));
    assert!(refused.text.contains("starting"), "{}", refused.text);
    let records: Vec<String> = files_under(&settings.state)
        .into_iter()
        .filter(|name| name.ends_with(".json"))
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    let id = records[0].trim_end_matches(".json");
    let record = Record::load(&state, &RunId::parse(id).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(record.status.state().as_str(), "lost");
}

#[test]
fn too_many_hops_bad_stdin_and_bad_meta_are_refused() {
    let (_dir, files) = files_folder();
    let config = config(files);
    let cases = [
        (json!({"program": "sleep"}), json!({META_HOPS: 3}), "hops"),
        (
            json!({"program": "sleep", "input": "x".repeat(64 * 1024 + 1)}),
            json!({}),
            "input",
        ),
        (json!({"program": "sleep", "cols": 100}), json!({}), "tty"),
        (
            json!({"program": "sleep", "interactive": 1}),
            json!({}),
            "interactive",
        ),
        (
            json!({"program": "sleep"}),
            json!({META_HOPS: -1}),
            META_HOPS,
        ),
        (
            json!({"program": "sleep"}),
            json!({META_THREAD: 7}),
            META_THREAD,
        ),
        (json!({"program": "cat"}), json!({}), "sleep"),
    ];
    for (arguments, meta, says) in cases {
        let refused = prepare(
            &config,
            &background(None),
            &map(arguments),
            Some(&map(meta)),
            false,
        )
        .err()
        .unwrap_or_else(|| panic!("refused"));
        assert!(refused.text.contains(says), "{}", refused.text);
    }
}
