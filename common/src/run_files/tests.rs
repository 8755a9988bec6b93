//! A run made then removed, or made in part, leaves nothing behind; no process is started.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;

use super::*;
use crate::id::RunId;
use crate::record::{Launch, Limits, Program};
use crate::safe_open::FilesDir;
use crate::status::Status;
use crate::time::UnixMs;

struct Folders {
    _dir: tempfile::TempDir,
    state: StateDir,
    output_dir: BackgroundDir,
}

fn folders() -> Folders {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path().join("state"));
    assert!(state.create().unwrap());
    index::init(&state).unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    let output_dir = FilesDir::open(&files)
        .unwrap()
        .ensure_background_dir()
        .unwrap();
    Folders {
        _dir: dir,
        state,
        output_dir,
    }
}

fn record(files: &Path) -> Record {
    let launch = Launch {
        files: files.to_owned(),
        sandbox: vec!["bwrap".into()],
        program: Program {
            name: "sleep".into(),
            args: vec!["5".into()],
            dir: ".".into(),
            path: "/usr/bin/sleep".into(),
            cwd: files.to_owned(),
        },
        vars: Default::default(),
        limits: Limits {
            timeout_ms: 60_000,
            output_cap_bytes: 65_536,
            keep_ms: 3_600_000,
        },
        thread: String::new(),
        hops: 0,
        tell_to: None,
        stdin: Default::default(),
        caches: Vec::new(),
        net_allow: Vec::new(),
    };
    Record::new(
        RunId::generate().unwrap(),
        "boot".into(),
        UnixMs::now(),
        launch,
    )
}

/// Every file and folder under `root`, by path relative to it.
fn tree(root: &Path) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            found.insert(path.strip_prefix(root).unwrap().display().to_string());
            if path.is_dir() && !path.is_symlink() {
                stack.push(path);
            }
        }
    }
    found
}

#[test]
fn a_run_made_then_removed_leaves_nothing() {
    let f = folders();
    let before = (tree(f.state.path()), tree(f.output_dir.path()));
    let mut record = record(f.output_dir.path().parent().unwrap());
    let made = make(&f.state, &f.output_dir, &mut record).unwrap();
    made.keep();
    // What a start leaves: the record, the lock, the output file named by its identity.
    let stored = Record::load(&f.state, &record.id).unwrap();
    assert_eq!(stored.output.file, record.output.file);
    assert!(record.output.file.is_some());
    assert!(f.state.lock(&record.id).is_file());
    assert!(
        f.output_dir
            .path()
            .join(format!("{}.out", record.id))
            .is_file()
    );
    assert!(index::running_ids(&f.state).unwrap().contains(&record.id));

    // The run ends and is filed, as its supervisor does, with a stop request and a log.
    let lock = match lock::try_lock_existing(&f.state, &record.id).unwrap() {
        lock::LockState::Free(lock) => lock,
        other => panic!("the lock is held: {other:?}"),
    };
    let mut ended = stored;
    ended.status = Status::Lost {
        ended_at_ms: UnixMs::now(),
        exit: None,
    };
    ended.store(&f.state).unwrap();
    index::ended(&f.state, &ended).unwrap();
    crate::stop::request(&f.state, &ended.id).unwrap();
    std::fs::write(f.state.log(&ended.id), b"a log line\n").unwrap();
    // And a watch of it, ended.
    let watch = crate::watch::WatchId::generate(&ended.id).unwrap();
    crate::watch::WatchSpec {
        version: crate::watch::VERSION,
        id: watch.clone(),
        until: None,
        regex: false,
        from: 0,
        created_at_ms: UnixMs::now(),
        deadline_ms: UnixMs::now(),
    }
    .create(&f.state)
    .unwrap();
    assert!(watch.dir(&f.state).is_dir());

    let minute = remove(
        &f.state,
        &ended,
        lock,
        Some(&f.output_dir),
        &Found::default(),
    )
    .unwrap();
    if let Some(minute) = minute {
        let _ = std::fs::remove_dir(minute);
    }
    let after = (tree(f.state.path()), tree(f.output_dir.path()));
    // The index's kind folders (and the watches') may stay; nothing of the run does.
    let leftover: Vec<&String> = after
        .0
        .difference(&before.0)
        .filter(|p| p.contains(ended.id.as_str()))
        .collect();
    assert!(
        leftover.is_empty(),
        "left in the state folder: {leftover:?}"
    );
    assert_eq!(after.1, before.1, "the output folder");
    assert!(
        Record::load(&f.state, &ended.id)
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn a_run_made_in_part_is_unmade() {
    for failing in [
        MakeStep::Lock,
        MakeStep::Output,
        MakeStep::Index,
        MakeStep::Record,
    ] {
        let f = folders();
        let before = (tree(f.state.path()), tree(f.output_dir.path()));
        let mut record = record(f.output_dir.path().parent().unwrap());
        let err = make_failing(&f.state, &f.output_dir, &mut record, |step| {
            if step == failing {
                Err(io::Error::other("injected"))
            } else {
                Ok(())
            }
        })
        .unwrap_err();
        assert_eq!(err.step, failing);
        assert_eq!(err.to_string(), failing.doing());
        let after = (tree(f.state.path()), tree(f.output_dir.path()));
        let new: Vec<&String> = after.0.difference(&before.0).collect();
        // Index folders made on the way (a `started` minute) may stay, empty.
        assert!(
            new.iter().all(|p| !p.contains(record.id.as_str())),
            "{failing:?}: left {new:?}"
        );
        assert_eq!(after.1, before.1, "{failing:?}: the output folder");
    }
}

#[test]
fn a_lock_handed_over_is_the_supervisors() {
    let f = folders();
    let mut record = record(f.output_dir.path().parent().unwrap());
    let mut made = make(&f.state, &f.output_dir, &mut record).unwrap();
    let lock = made.hand_over_lock().unwrap();
    assert!(made.hand_over_lock().is_err(), "a lock is handed over once");
    // Unmade after the hand-over: the record, names and output go; the lock file stays, held.
    drop(made);
    assert!(
        Record::load(&f.state, &record.id)
            .unwrap_err()
            .is_not_found()
    );
    assert!(f.state.lock(&record.id).is_file());
    assert!(matches!(
        lock::try_lock_existing(&f.state, &record.id).unwrap(),
        lock::LockState::Held
    ));
    drop(lock);
}
