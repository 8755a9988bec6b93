//! Unit tests of the record: round trips, versions, checks, and the sweep's decisions.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;

use super::*;
use std::fs;

use crate::layout::StateDir;
use crate::status::Exit;
use crate::write::Durability;

fn launch(tell: bool) -> Launch {
    Launch {
        files: "/w".into(),
        sandbox: vec!["bwrap".into(), "--die-with-parent".into()],
        program: Program {
            name: "cargo".into(),
            args: vec!["test".into(), "--".into(), "--nocapture".into()],
            dir: ".".into(),
            path: "/usr/bin/cargo".into(),
            cwd: "/w".into(),
        },
        vars: [("DISPLAY".to_owned(), ":0".to_owned())]
            .into_iter()
            .collect(),
        limits: Limits {
            timeout_ms: 60_000,
            output_cap_bytes: 65_536,
            keep_ms: 3_600_000,
        },
        thread: "th-1".into(),
        hops: 2,
        tell_to: tell.then(|| TellTo {
            way_in: "/run/way-in.sock".into(),
            agent: AgentId::parse("ada").unwrap(),
            keyring: "/k".into(),
        }),
        stdin: Default::default(),
        caches: Vec::new(),
        net_allow: Vec::new(),
    }
}

fn record(tell: bool) -> Record {
    Record::new(
        RunId::parse("abcdefghijkl0123").unwrap(),
        "boot-1".into(),
        UnixMs(1_000_000),
        launch(tell),
    )
}

fn ended(mut r: Record, at: u64) -> Record {
    r.status = Status::Exited {
        ended_at_ms: UnixMs(at),
        exit: Exit::Code(0),
    };
    r
}

#[test]
fn new_record_is_running_and_untold() {
    let r = record(true);
    assert_eq!(r.version, RECORD_VERSION);
    assert_eq!(r.status, Status::Running);
    assert_eq!(r.group, None);
    assert_eq!(r.output, Output::default());
    assert!(!r.telling.told);
}

#[test]
fn round_trips_through_the_state_folder() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let mut r = record(true);
    r.store(&state).unwrap();
    assert_eq!(Record::load(&state, &r.id).unwrap(), r);

    r.group = Some(Group {
        pgid: ProcessId::new(4321).unwrap(),
        leader_pid: ProcessId::new(4321).unwrap(),
        leader_start_time: 99,
    });
    r.status = Status::TimedOut {
        ended_at_ms: UnixMs(2_000_000),
        exit: Some(Exit::Signal(9)),
    };
    r.output = Output {
        written_bytes: 10,
        dropped_bytes: 4,
        file: Some(FileId { dev: 1, ino: 2 }),
        unwritten_bytes: 0,
        no_room: None,
    };
    r.telling = Telling {
        told: true,
        attempts: 3,
        last_attempt_at_ms: Some(UnixMs(2_000_001)),
    };
    r.store_with(&state, Durability::Atomic).unwrap();
    assert_eq!(Record::load(&state, &r.id).unwrap(), r);
    let text = fs::read_to_string(state.record(&r.id)).unwrap();
    assert!(text.ends_with("}\n"), "{text}");
}

#[test]
fn json_field_names_are_the_documented_ones() {
    let value = serde_json::to_value(record(false)).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    assert_eq!(
        keys,
        [
            "boot_id",
            "group",
            "id",
            "launch",
            "output",
            "started_at_ms",
            "status",
            "telling",
            "version"
        ]
    );
    assert_eq!(value["launch"]["tell_to"], serde_json::Value::Null);
    assert_eq!(value["status"], json!({"state": "running"}));
    assert_eq!(value["launch"]["vars"], json!({"DISPLAY": ":0"}));
    assert_eq!(value["launch"]["limits"]["output_cap_bytes"], json!(65_536));
}

#[test]
fn a_run_s_cache_folders_are_kept_and_absent_when_there_are_none() {
    let mut r = record(false);
    let value = serde_json::to_value(&r).unwrap();
    assert!(value["launch"].get("caches").is_none(), "{value}");
    r.launch.caches = vec!["/home/me/.cargo/registry".into(), "/home/me/.npm".into()];
    let value = serde_json::to_value(&r).unwrap();
    assert_eq!(
        value["launch"]["caches"],
        json!(["/home/me/.cargo/registry", "/home/me/.npm"])
    );
    let back: Record = serde_json::from_value(value).unwrap();
    assert_eq!(back, r);
}

#[test]
fn unknown_fields_survive_a_rewrite() {
    let mut value = serde_json::to_value(record(false)).unwrap();
    value["added_by_a_newer_build"] = json!({"x": [1, 2]});
    let bytes = serde_json::to_vec(&value).unwrap();
    let r = Record::from_json(&bytes, Path::new("r.json")).unwrap();
    assert_eq!(r.unknown["added_by_a_newer_build"], json!({"x": [1, 2]}));
    let again: serde_json::Value = serde_json::from_slice(&r.to_json().unwrap()).unwrap();
    assert_eq!(again, value);
}

#[test]
fn other_versions_are_refused_by_version() {
    for version in [0, 2, 99] {
        let mut value = serde_json::to_value(record(false)).unwrap();
        value["version"] = json!(version);
        // Even with fields this build would not understand.
        value["status"] = json!({"state": "hibernating"});
        let bytes = serde_json::to_vec(&value).unwrap();
        match Record::from_json(&bytes, Path::new("x.json")) {
            Err(Error::RecordVersion {
                found, supported, ..
            }) => {
                assert_eq!(found, version);
                assert_eq!(supported, 1);
            }
            other => panic!("version {version}: {other:?}"),
        }
    }
    let message = Record::from_json(br#"{"version": 2}"#, Path::new("/s/x.json"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        message,
        "record /s/x.json has format version 2; this build reads and writes version 1 only"
    );
}

#[test]
fn a_record_without_version_or_not_json_is_a_parse_error() {
    for bytes in [&b"{}"[..], b"", b"not json", b"[1]", br#"{"version": "1"}"#] {
        let err = Record::from_json(bytes, Path::new("x.json")).unwrap_err();
        assert!(matches!(err, Error::RecordParse { .. }), "{err:?}");
    }
}

#[test]
fn a_group_its_leader_does_not_lead_is_refused() {
    let mut value = serde_json::to_value(ended(record(true), 5)).unwrap();
    value["group"] = json!({"pgid": 777, "leader_pid": 4321, "leader_start_time": 0});
    let bytes = serde_json::to_vec(&value).unwrap();
    let err = Record::from_json(&bytes, Path::new("x.json")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::RecordInvalid {
                problem: RecordProblem::GroupNotLed {
                    pgid: 777,
                    leader: 4321
                },
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_session_its_gate_does_not_lead_is_refused() {
    let mut value = serde_json::to_value(ended(record(true), 5)).unwrap();
    value["group"] = json!({"pgid": 4321, "leader_pid": 4321, "leader_start_time": 0});
    value["sandbox"] = json!({"session": 4321, "pgid": 4330});
    let bytes = serde_json::to_vec(&value).unwrap();
    let fine = Record::from_json(&bytes, Path::new("x.json")).unwrap();
    assert_eq!(fine.sandbox.map(|s| s.session.get()), Some(4321));
    for (group, session, leader) in [
        (
            json!({"pgid": 4321, "leader_pid": 4321, "leader_start_time": 0}),
            777,
            Some(4321),
        ),
        (json!(null), 4321, None),
    ] {
        value["group"] = group;
        value["sandbox"] = json!({"session": session, "pgid": null});
        let bytes = serde_json::to_vec(&value).unwrap();
        let err = Record::from_json(&bytes, Path::new("x.json")).unwrap_err();
        assert!(
            matches!(
                err,
                Error::RecordInvalid {
                    problem: RecordProblem::SessionNotLed { session: s, leader: l },
                    ..
                } if s == session && l == leader
            ),
            "{err:?}"
        );
    }
}

#[test]
fn records_without_the_gates_fields_leave_them_out_when_rewritten() {
    let r = ended(record(true), 5);
    assert_eq!((r.sandbox, &r.failure), (None, &None));
    let value: serde_json::Value = serde_json::from_slice(&r.to_json().unwrap()).unwrap();
    assert!(
        value.get("sandbox").is_none() && value.get("failure").is_none(),
        "{value}"
    );
}

#[test]
fn damaged_fields_are_refused() {
    let good = serde_json::to_value(ended(record(true), 5)).unwrap();
    let cases: [(&str, serde_json::Value); 6] = [
        ("/id", json!("../../etc")),
        (
            "/group",
            json!({"pgid": 1, "leader_pid": 1, "leader_start_time": 0}),
        ),
        (
            "/group",
            json!({"pgid": -7, "leader_pid": 7, "leader_start_time": 0}),
        ),
        ("/status", json!({"state": "exited", "ended_at_ms": 5})),
        ("/launch/tell_to/agent", json!("../x")),
        ("/output/written_bytes", json!(-1)),
    ];
    for (pointer, bad) in cases {
        let mut value = good.clone();
        *value.pointer_mut(pointer).unwrap() = bad.clone();
        let bytes = serde_json::to_vec(&value).unwrap();
        let err = Record::from_json(&bytes, Path::new("x.json")).unwrap_err();
        assert!(
            matches!(err, Error::RecordParse { .. }),
            "{pointer}={bad}: {err:?}"
        );
    }
}

#[test]
fn inconsistent_records_are_refused() {
    let mut r = record(false);
    r.output.dropped_bytes = 5;
    let bytes = serde_json::to_vec(&r).unwrap();
    let err = Record::from_json(&bytes, Path::new("x.json")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::RecordInvalid {
                problem: RecordProblem::DroppedOverWritten { .. },
                ..
            }
        ),
        "{err:?}"
    );
    // ...and never written.
    let dir = tempfile::tempdir().unwrap();
    assert!(r.store(&StateDir::new(dir.path())).is_err());
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);

    let mut r = record(false);
    r.boot_id = " ".into();
    assert!(matches!(
        r.to_json(),
        Err(Error::RecordInvalid {
            problem: RecordProblem::EmptyBootId,
            ..
        })
    ));
}

#[test]
fn a_record_under_another_name_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let r = record(false);
    let other = RunId::parse("zzzzzzzzzzzz").unwrap();
    fs::write(state.record(&other), r.to_json().unwrap()).unwrap();
    let err = Record::load(&state, &other).unwrap_err();
    assert!(
        matches!(
            err,
            Error::RecordInvalid {
                problem: RecordProblem::IdMismatch { .. },
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_missing_record_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let err = Record::load(&StateDir::new(dir.path()), &record(false).id).unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
}

#[test]
fn argv_puts_env_before_the_program_only_with_vars() {
    let mut l = launch(false);
    assert_eq!(
        l.argv(),
        [
            "bwrap",
            "--die-with-parent",
            "--",
            "/usr/bin/env",
            "DISPLAY=:0",
            "/usr/bin/cargo",
            "test",
            "--",
            "--nocapture"
        ]
    );
    l.vars = Vars::new();
    assert_eq!(
        l.argv(),
        [
            "bwrap",
            "--die-with-parent",
            "--",
            "/usr/bin/cargo",
            "test",
            "--",
            "--nocapture"
        ]
    );
}

#[test]
fn tell_due_only_within_the_window() {
    let end = 10_000_000;
    let window = u64::try_from(TELL_WINDOW.as_millis()).unwrap();
    assert!(!record(true).tell_due(UnixMs(end)), "running");
    let r = ended(record(true), end);
    assert!(r.tell_due(UnixMs(end)));
    assert!(r.tell_due(UnixMs(end + window)));
    assert!(!r.tell_due(UnixMs(end + window + 1)));
    let mut told = r.clone();
    told.telling.told = true;
    assert!(!told.tell_due(UnixMs(end)));
    assert!(
        !ended(record(false), end).tell_due(UnixMs(end)),
        "no way in"
    );
}

#[test]
fn removable_after_keep_once_telling_is_done() {
    let end = 10_000_000;
    let keep = 3_600_000; // longer than the tell window
    let window = u64::try_from(TELL_WINDOW.as_millis()).unwrap();
    assert!(!record(false).removable(UnixMs(u64::MAX)), "running");

    let no_way_in = ended(record(false), end);
    assert!(!no_way_in.removable(UnixMs(end + keep)));
    assert!(no_way_in.removable(UnixMs(end + keep + 1)));

    let mut told = ended(record(true), end);
    told.telling.told = true;
    assert!(told.removable(UnixMs(end + keep + 1)));

    let mut untold_short_keep = ended(record(true), end);
    untold_short_keep.launch.limits.keep_ms = 1000;
    assert!(
        !untold_short_keep.removable(UnixMs(end + 2000)),
        "still to tell"
    );
    assert!(
        untold_short_keep.removable(UnixMs(end + window + 1)),
        "gave up telling"
    );
}

#[test]
fn summary_is_what_list_shows() {
    let mut r = ended(record(true), 1_714_564_805_250);
    r.started_at_ms = UnixMs(1_714_564_800_000);
    r.output.written_bytes = 7;
    r.telling.told = true;
    let value = serde_json::to_value(r.summary()).unwrap();
    assert_eq!(
        value,
        json!({
            "id": "abcdefghijkl0123",
            "program": "cargo",
            "args": ["test", "--", "--nocapture"],
            "dir": ".",
            "state": "exited",
            "exit_code": 0,
            "signal": null,
            "started_at": "2024-05-01T12:00:00.000Z",
            "ended_at": "2024-05-01T12:00:05.250Z",
            "output_bytes": 7,
            "dropped_bytes": 0,
            "told": true
        })
    );
    assert_eq!(record(false).summary().ended_at, None);
}

#[test]
fn debug_does_not_show_variable_values() {
    let debug = format!("{:?}", record(false));
    assert!(debug.contains("DISPLAY"));
    assert!(!debug.contains(":0\""), "{debug}");
}
