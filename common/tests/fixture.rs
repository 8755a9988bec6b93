//! Records checked in as files must keep parsing, with the same meaning, in every later build.
//!
//! `tests/data/record-v1*.json` were written by hand from the format described in the crate
//! docs. If a test here fails, the format drifted: bump the record's version instead, and add a
//! fixture for the new one beside these.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use lnk_common::record::{
    FileId, Group, Limits, Program, SandboxGroup, Supervisor, TellTo, Telling,
};
use lnk_common::{AgentId, Exit, ProcessId, Record, RunId, State, StateDir, Status, UnixMs};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn load_fixture(name: &str, id: &str) -> Record {
    // Load it the way the binaries do: from a state folder, by id.
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let id = RunId::parse(id).unwrap();
    std::fs::copy(data(name), state.record(&id)).unwrap();
    Record::load(&state, &id).unwrap()
}

#[test]
fn ended_told_record_v1() {
    let r = load_fixture("record-v1.json", "k3v9x2m7q8w4n5p6r1t0");
    assert_eq!(r.version, 1);
    assert_eq!(r.id.as_str(), "k3v9x2m7q8w4n5p6r1t0");
    assert_eq!(r.boot_id, "6b0c2a52-3f1e-4d8a-9c7b-5e4f3a2b1c0d");
    assert_eq!(r.started_at_ms, UnixMs(1_714_564_800_000));

    let l = &r.launch;
    assert_eq!(l.files, Path::new("/home/ada/work"));
    assert_eq!(
        l.sandbox,
        [
            "bwrap",
            "--die-with-parent",
            "--bind",
            "/home/ada/work",
            "/home/ada/work"
        ]
    );
    assert_eq!(
        l.program,
        Program {
            name: "cargo".into(),
            args: vec!["test".into(), "--quiet".into()],
            dir: "crates/app".into(),
            path: "/usr/bin/cargo".into(),
            cwd: "/home/ada/work/crates/app".into(),
        }
    );
    assert_eq!(l.vars.iter().collect::<Vec<_>>(), [("DISPLAY", ":0")]);
    assert_eq!(
        l.limits,
        Limits {
            timeout_ms: 3_600_000,
            output_cap_bytes: 1_048_576,
            keep_ms: 86_400_000,
        }
    );
    assert_eq!(l.limits.timeout().as_secs(), 3600);
    assert_eq!(l.thread, "th-42");
    assert_eq!(l.hops, 1);
    assert_eq!(
        l.tell_to,
        Some(TellTo {
            way_in: "/run/user/1000/lnk/way-in.sock".into(),
            agent: AgentId::parse("ada").unwrap(),
            keyring: "/home/ada/.config/lnk/keyring".into(),
        })
    );

    assert_eq!(
        r.group,
        Some(Group {
            pgid: ProcessId::new(41234).unwrap(),
            leader_pid: ProcessId::new(41234).unwrap(),
            leader_start_time: 9_876_543,
        })
    );
    assert_eq!(
        r.status,
        Status::Exited {
            ended_at_ms: UnixMs(1_714_564_805_250),
            exit: Exit::Code(0),
        }
    );
    assert_eq!(r.output.written_bytes, 3_145_728);
    assert_eq!(r.output.dropped_bytes, 2_097_152);
    assert_eq!(
        r.output.file,
        Some(FileId {
            dev: 2049,
            ino: 1_311_768
        })
    );
    assert_eq!(
        r.telling,
        Telling {
            told: true,
            attempts: 1,
            last_attempt_at_ms: Some(UnixMs(1_714_564_805_300)),
        }
    );
    assert!(r.unknown.is_empty());
    // Written before gates forked the sandbox: no session or sandbox group, no failure.
    assert_eq!(r.sandbox, None);
    assert_eq!(r.failure, None);

    let s = r.summary();
    assert_eq!(s.state, State::Exited);
    assert_eq!(s.exit_code, Some(0));
    assert_eq!(s.started_at, "2024-05-01T12:00:00.000Z");
    assert_eq!(s.ended_at.as_deref(), Some("2024-05-01T12:00:05.250Z"));
}

#[test]
fn running_record_v1_with_nulls() {
    let r = load_fixture("record-v1-running.json", "a0b1c2d3e4f5g6h7i8j9");
    assert_eq!(r.status, Status::Running);
    assert_eq!(r.status.ended_at(), None);
    assert_eq!(r.group, None);
    assert_eq!(r.launch.tell_to, None);
    assert!(r.launch.vars.is_empty());
    assert_eq!(r.output.file, None);
    assert_eq!(r.telling, Telling::default());
    assert_eq!(r.launch.argv(), ["bwrap", "--", "/usr/bin/sleep", "600"]);
}

#[test]
fn a_gates_record_v1_names_the_session_and_the_sandbox_group() {
    let r = load_fixture("record-v1-gate.json", "b7c8d9e0f1g2h3i4j5k6");
    let gate = ProcessId::new(52310).unwrap();
    assert_eq!(r.group.map(|g| g.leader_pid), Some(gate));
    assert_eq!(
        r.sandbox,
        Some(SandboxGroup {
            session: gate,
            pgid: Some(ProcessId::new(52316).unwrap()),
            output_pipe: None,
        })
    );
    assert_eq!(
        r.failure.as_deref(),
        Some("the sandbox could not be executed: No such file or directory (os error 2)")
    );
    assert_eq!(r.summary().state, State::Lost);
}

#[test]
fn a_running_record_v1_names_its_supervisor() {
    let r = load_fixture("record-v1-supervisor.json", "c1d2e3f4g5h6i7j8k9l0");
    assert_eq!(r.status, Status::Running);
    assert_eq!(
        r.supervisor,
        Some(Supervisor {
            pid: ProcessId::new(61302).unwrap(),
            start_time: 2_345_670,
        })
    );
    // Records of older supervisors name none (they watched their lock file instead).
    for (name, id) in [
        ("record-v1.json", "k3v9x2m7q8w4n5p6r1t0"),
        ("record-v1-gate.json", "b7c8d9e0f1g2h3i4j5k6"),
    ] {
        assert_eq!(load_fixture(name, id).supervisor, None, "{name}");
    }
}

#[test]
fn fixtures_survive_a_rewrite_unchanged_in_meaning() {
    for name in [
        "record-v1.json",
        "record-v1-running.json",
        "record-v1-gate.json",
        "record-v1-supervisor.json",
    ] {
        let bytes = std::fs::read(data(name)).unwrap();
        let r = Record::from_json(&bytes, &data(name)).unwrap();
        let original: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        let rewritten: serde_json::Value = serde_json::from_slice(&r.to_json().unwrap()).unwrap();
        assert_eq!(rewritten, original, "{name}");
    }
}

/// The JSON example in the crate docs is the fixture: the documentation cannot drift either.
#[test]
fn the_documented_example_is_the_fixture() {
    let lib =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let docs: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .map(|l| format!("{l}\n"))
        .collect();
    let start = docs.find("```json\n").unwrap() + "```json\n".len();
    let end = start + docs[start..].find("```").unwrap();
    let documented: serde_json::Value = serde_json::from_str(&docs[start..end]).unwrap();
    let fixture: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("record-v1.json")).unwrap()).unwrap();
    assert_eq!(documented, fixture);
}

/// A record written by a newer build, with fields this one does not know at every level: this
/// build reads it, and rewriting it (as an older supervisor rewrites a newer `start`'s record)
/// keeps every one of them where it was — except a running status's own, once it has ended.
#[test]
fn fields_a_newer_build_wrote_survive_a_rewrite_at_every_level() {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path());
    let id = RunId::parse("n3wer0000000000000000").unwrap();
    std::fs::copy(data("record-v1-newer.json"), state.record(&id)).unwrap();
    let mut record = Record::load(&state, &id).unwrap();
    assert_eq!(record.launch.program.name, "cargo");
    assert_eq!(record.output.written_bytes, 10);

    // Rewritten as it is, and again after a change of what this build knows.
    record.output.written_bytes = 20;
    std::fs::create_dir_all(state.temp_dir().unwrap()).unwrap();
    record.store(&state).unwrap();
    let written: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.record(&id)).unwrap()).unwrap();
    let original: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data("record-v1-newer.json")).unwrap()).unwrap();
    for pointer in [
        "/future_top_level_field",
        "/launch/future_launch_field",
        "/launch/program/future_program_field",
        "/launch/limits/future_limit",
        "/group/future_group_field",
        "/status/future_running_field",
        "/output/future_output_field",
        "/telling/future_telling_field",
    ] {
        assert_eq!(
            written.pointer(pointer),
            original.pointer(pointer),
            "{pointer} kept: {written:#}"
        );
    }
    assert_eq!(written["output"]["written_bytes"], 20, "{written:#}");

    // Read again, ended and rewritten: what a newer build knew of the running state does not
    // carry over to the end; everything else still does.
    let mut again = Record::load(&state, &id).unwrap();
    again.status = Status::Exited {
        ended_at_ms: UnixMs(1_714_564_805_250),
        exit: Exit::Code(0),
    };
    again.store(&state).unwrap();
    let ended: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.record(&id)).unwrap()).unwrap();
    assert_eq!(ended["status"]["state"], "exited", "{ended:#}");
    assert!(
        ended.pointer("/status/future_running_field").is_none(),
        "{ended:#}"
    );
    assert_eq!(
        ended.pointer("/launch/program/future_program_field"),
        original.pointer("/launch/program/future_program_field")
    );
    assert_eq!(
        ended["future_top_level_field"],
        original["future_top_level_field"]
    );
}

/// A run started with `input` on a terminal of its own: `launch.stdin` is read, and
/// a record without it (every older one) means an empty stdin that ends at once. A build from
/// before the field keeps it as an unknown field of `launch` and writes it back, so such a
/// record also survives an older `list`, `stop` or sweep.
#[test]
fn interactive_record_v1() {
    use lnk_common::stdin::{Mode, Stdin, TermSize};
    let r = load_fixture("record-v1-interactive.json", "q7w8e9r0t1y2u3i4o5p6");
    assert_eq!(
        r.launch.stdin,
        Stdin {
            input_bytes: 12,
            mode: Mode::Tty(TermSize {
                cols: 120,
                rows: 40
            }),
        }
    );
    assert!(r.launch.stdin.stays_open());
    assert!(r.nested_unknown.is_empty(), "every field is known");
    let again = Record::from_json(&r.to_json().unwrap(), Path::new("again.json")).unwrap();
    assert_eq!(again.launch.stdin, r.launch.stdin, "written back as read");
    let older = load_fixture("record-v1-running.json", "a0b1c2d3e4f5g6h7i8j9");
    assert!(older.launch.stdin.is_default() && !older.launch.stdin.stays_open());
    let written = String::from_utf8(older.to_json().unwrap()).unwrap();
    assert!(
        !written.contains("stdin"),
        "an empty stdin is not written: {written}"
    );
}

#[test]
fn network_record_v1() {
    use lnk_common::network::{Network, Refused};
    let r = load_fixture("record-v1-network.json", "n3t4w5o6r7k8a9l0l1o2");
    assert_eq!(
        r.launch.net_allow,
        ["registry.example", "*.cdn.example:8443", "[::1]:4873"]
    );
    assert_eq!(
        r.network,
        Some(Network {
            connections: 3,
            bytes_in: 1_048_576,
            bytes_out: 2048,
            refused: vec![Refused {
                host: "telemetry.example".into(),
                port: 443,
                count: 2,
                why: "not on the allow-list".into(),
            }],
        })
    );
    assert!(r.nested_unknown.is_empty(), "every field is known");
    let again = Record::from_json(&r.to_json().unwrap(), Path::new("again.json")).unwrap();
    assert_eq!(again, r, "written back as read");
    // A run without a proxy writes neither field, and older records read as runs without one.
    let older = load_fixture("record-v1-running.json", "a0b1c2d3e4f5g6h7i8j9");
    assert!(older.launch.net_allow.is_empty() && older.network.is_none());
    let written = String::from_utf8(older.to_json().unwrap()).unwrap();
    assert!(
        !written.contains("net_allow") && !written.contains("\"network\""),
        "{written}"
    );
}
