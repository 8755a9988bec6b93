//! The `started` names in their tenths, walked in order across them (stopping and going on
//! again, as `list`'s pages do), a version-1 folder read as it is and upgraded.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::ops::ControlFlow;

use crate::record::{Launch, Limits, Program};
use crate::time::UnixMs;

/// A minute's start (a multiple of 60,000 ms).
const MINUTE: u64 = 1_800_000_000_000;

struct Folder {
    _dir: tempfile::TempDir,
    state: StateDir,
}

fn folder() -> Folder {
    let dir = tempfile::tempdir().unwrap();
    let state = StateDir::new(dir.path().join("state"));
    state.create().unwrap();
    crate::index::init(&state).unwrap();
    Folder { _dir: dir, state }
}

fn run(id: &str, started_at_ms: u64) -> Record {
    let launch = Launch {
        files: "/w".into(),
        sandbox: vec!["bwrap".into()],
        program: Program {
            name: "true".into(),
            args: vec![],
            dir: ".".into(),
            path: "/bin/true".into(),
            cwd: "/w".into(),
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
        RunId::parse(id).unwrap(),
        "boot".into(),
        UnixMs(started_at_ms),
        launch,
    )
}

/// `n` runs stored and filed as a start files them, started 7 ms apart from `first` on; their
/// ids, oldest first.
fn started_runs(state: &StateDir, first: u64, n: usize, filed: impl Fn(&Record)) -> Vec<String> {
    (0..n)
        .map(|i| {
            let record = run(&format!("run{i:09}"), first + 7 * i as u64);
            record
                .store_with(state, crate::write::Durability::Atomic)
                .unwrap();
            filed(&record);
            record.id.as_str().to_owned()
        })
        .collect()
}

/// The walk in pages of `limit`, each going on from just after the last run the one before
/// handed out, as `list`'s pages do; the ids, newest first, each once (a run named in both
/// trees is handed twice).
fn every_page(state: &StateDir, limit: usize) -> Vec<String> {
    let mut shown = Vec::new();
    let mut seen: HashSet<RunId> = HashSet::new();
    let mut before: Option<(u64, RunId)> = None;
    loop {
        let mut page: Vec<(u64, RunId)> = Vec::new();
        crate::index::each_started(state, before.as_ref().map(|(ms, _)| *ms), &mut |ms, id| {
            let older = before
                .as_ref()
                .is_none_or(|(b_ms, b_id)| (ms, id.as_str()) < (*b_ms, b_id.as_str()));
            if older && seen.insert(id.clone()) {
                page.push((ms, id));
            }
            if page.len() >= limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
        shown.extend(page.iter().map(|(_, id)| id.as_str().to_owned()));
        match page.pop() {
            Some(last) if page.len() + 1 >= limit => before = Some(last),
            _ => break,
        }
    }
    shown
}

#[test]
fn a_started_name_lies_in_the_tenth_of_its_second() {
    let record = run("abcdefghijkl", MINUTE + 59_999);
    let state = StateDir::new("/s");
    assert_eq!(
        path(&state, &record),
        Path::new("/s/index/start-times/0030000000/599/1800000059999-abcdefghijkl")
    );
    let record = run("abcdefghijkl", MINUTE + 100);
    assert!(path(&state, &record).ends_with("0030000000/001/1800000000100-abcdefghijkl"));
}

#[test]
fn pages_go_through_the_tenths_in_order() {
    let f = folder();
    // 400 runs 7 ms apart: 29 tenths of one minute, across two minutes' edge.
    let ids = started_runs(&f.state, MINUTE - 1_400, 400, |r| {
        crate::index::started(&f.state, r).unwrap()
    });
    let tenths = names_in(&f.state.path().join("index/start-times/0030000000"))
        .unwrap()
        .len();
    assert!(tenths > 10, "{tenths}");
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    for limit in [1, 7, 20, 200] {
        assert_eq!(
            every_page(&f.state, limit),
            newest_first,
            "pages of {limit}"
        );
    }
}

#[test]
fn a_version_1_folder_is_read_as_it_is_then_upgraded() {
    let f = folder();
    // As version 1 filed them: straight in the minute's folder (and `running/` beside).
    let flat = started_runs(&f.state, MINUTE + 1_000, 300, |r| {
        let name = path_v1(&f.state, r);
        make_dirs(name.parent().unwrap()).unwrap();
        fs::write(&name, b"").unwrap();
    });
    // A minute that holds both: a start of this version beside them.
    let late = run("latelatelatelate", MINUTE + 50_000);
    late.store_with(&f.state, crate::write::Durability::Atomic)
        .unwrap();
    crate::index::started(&f.state, &late).unwrap();
    fs::write(f.state.path().join("index/version"), "1\n").unwrap();
    let mut expected: Vec<String> = vec![late.id.as_str().to_owned()];
    expected.extend(flat.iter().rev().cloned());
    assert!(crate::index::needs_upgrade(&f.state));
    assert_eq!(every_page(&f.state, 20), expected, "read as it is");

    // A run removed before the upgrade loses its name wherever it was filed.
    let gone = run(&flat[0], MINUTE + 1_000);
    let folder_left = forget(&f.state, &gone).unwrap();
    assert!(
        folder_left.ends_with("started/0030000000"),
        "{folder_left:?}"
    );
    expected.pop();

    assert_eq!(crate::index::upgrade(&f.state).unwrap(), 299);
    assert!(!crate::index::needs_upgrade(&f.state));
    let old_tree = f.state.path().join("index/started");
    assert!(!old_tree.exists(), "{:?}", names_in(&old_tree));
    assert_eq!(every_page(&f.state, 20), expected, "read upgraded");
    assert_eq!(all_ids(&f.state).unwrap().len(), expected.len());

    // Removed after the upgrade: from its tenth, and the tenth's folder goes once empty.
    let newest = run(&flat[299], MINUTE + 1_000 + 7 * 299);
    let tenth = forget(&f.state, &newest).unwrap();
    assert!(tenth.ends_with("0030000000/030"), "{tenth:?}");
    remove_folder_if_empty(&tenth);
    assert!(tenth.exists(), "a tenth that still names runs stays");
}

#[test]
fn a_run_named_in_both_places_is_shown_once() {
    let f = folder();
    let ids = started_runs(&f.state, MINUTE + 5_000, 3, |r| {
        crate::index::started(&f.state, r).unwrap();
        let name = path_v1(&f.state, r);
        make_dirs(name.parent().unwrap()).unwrap();
        fs::write(&name, b"").unwrap();
    });
    let newest_first: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(every_page(&f.state, 20), newest_first);
    assert_eq!(every_page(&f.state, 1), newest_first);
}

#[test]
fn the_last_run_of_a_minute_takes_its_folders_with_it() {
    let f = folder();
    let ids = started_runs(&f.state, MINUTE + 30_000, 1, |r| {
        crate::index::started(&f.state, r).unwrap()
    });
    let record = run(&ids[0], MINUTE + 30_000);
    let tenth = forget(&f.state, &record).unwrap();
    remove_folder_if_empty(&tenth);
    let started = f.state.path().join("index/start-times");
    assert!(names_in(&started).unwrap().is_empty(), "{started:?}");
}
