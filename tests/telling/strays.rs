//! Records that no index names (issue 19, item 4): a damaged `<id>.json` and a valid one written
//! into the state folder outside the index. The next sweep moves the first aside and indexes
//! the second, which `list` then shows; a sweep finds them only when the folder changed since
//! its last look (its modification time), so a sweep with nothing changed does not read the
//! folder.
use std::time::SystemTime;

use serde_json::json;

use crate::disk::{Tell, exists, names, now_ms};
use crate::runs::{Flags, list};
use crate::sandbox::Sandbox;

const DAMAGED: &str = "straydamaged00000001";
const LATER: &str = "straydamaged00000002";
const VALID: &str = "strayvalid0000000001";

/// The modification time of `path`.
fn mtime(path: &std::path::Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

/// Sets the state folder's modification time to `to`, as if nothing had changed since.
fn set_folder_time(t: &Tell, to: SystemTime) {
    std::fs::File::open(t.state())
        .unwrap()
        .set_modified(to)
        .unwrap();
}

#[test]
fn a_sweep_moves_aside_a_damaged_record_no_index_names_and_indexes_a_valid_one() {
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.bg.serve(&Flags::default()).start();
    let (real, template) = t.ended_run(&mut serve, "echo real");
    t.sweep();

    std::fs::write(t.bg.record_path(DAMAGED), b"{\"version\": 1, \"id\": ").unwrap();
    let mut valid = template.clone();
    valid["id"] = json!(VALID);
    valid["started_at_ms"] = json!(now_ms() - 1000);
    valid["status"]["ended_at_ms"] = json!(now_ms() - 500);
    valid["launch"]["tell_to"] = serde_json::Value::Null;
    valid["output"]["file"] = serde_json::Value::Null;
    std::fs::write(
        t.bg.record_path(VALID),
        serde_json::to_vec_pretty(&valid).unwrap(),
    )
    .unwrap();

    let stderr = t.sweep();
    let state = t.state();
    assert!(
        !exists(&t.bg.record_path(DAMAGED)) && exists(&state.join(format!("{DAMAGED}.damaged"))),
        "the damaged record was not moved aside: {:?}\n{stderr}",
        names(state)
    );
    let ids: Vec<String> = list(&mut serve)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        ids.contains(&VALID.to_owned()) && ids.contains(&real),
        "list does not show the record no index named: {ids:?}\n{stderr}"
    );
    assert_eq!(
        t.bg.record(VALID).unwrap()["status"]["state"],
        "exited",
        "the valid record is kept as it was"
    );

    // Nothing changed since the last look (the folder's time is the one the look noted): the
    // next sweep does not read the folder, so a record planted behind its back stays unseen.
    t.sweep();
    let looked = mtime(&state.join("index/looked"));
    std::fs::write(t.bg.record_path(LATER), b"not json").unwrap();
    set_folder_time(&t, looked);
    t.sweep();
    assert!(
        exists(&t.bg.record_path(LATER)),
        "a sweep read the folder though its time had not changed"
    );
    // Once the folder changes, the next sweep looks and finds it.
    set_folder_time(&t, SystemTime::now());
    let stderr = t.sweep();
    assert!(
        !exists(&t.bg.record_path(LATER)) && exists(&state.join(format!("{LATER}.damaged"))),
        "{:?}\n{stderr}",
        names(state)
    );
    drop(serve);
}
