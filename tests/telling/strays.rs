//! Records that no index names: a damaged `<id>.json` and a valid one written
//! into the state folder outside the index. The next sweep that looks moves the first aside and
//! indexes the second, which `list` then shows. A routine sweep (`--routine`, as `serve` starts
//! them) looks only when the folder changed since its last look (its modification time) and
//! that look is ten minutes old (`index/looked`'s access time, which the test sets back), so a
//! routine sweep with nothing changed, or soon after a look, does not read the folder. A sweep a
//! person or a bridge runs (`sweep <state>`) looks every time.
use std::time::SystemTime;

use serde_json::json;

use crate::disk::{Tell, exists, names, now_ms};
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::Sandbox;
use lnk_tests::tools::list;

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

/// Makes the last look eleven minutes old.
fn age_last_look(t: &Tell) {
    let looked = t.state().join("index/looked");
    let long_ago = SystemTime::now() - std::time::Duration::from_secs(11 * 60);
    std::fs::File::options()
        .write(true)
        .open(looked)
        .unwrap()
        .set_times(std::fs::FileTimes::new().set_accessed(long_ago))
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

    age_last_look(&t);
    let stderr = t.routine_sweep();
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

    // Planted soon after a look: the next sweep does not read the folder though it changed.
    std::fs::write(t.bg.record_path(LATER), b"not json").unwrap();
    t.routine_sweep();
    assert!(
        exists(&t.bg.record_path(LATER)),
        "a routine sweep read the folder again within ten minutes of a look"
    );
    // Nothing changed since the last look (the folder's time is the one the look noted): no
    // look, however old the last one.
    let looked = mtime(&state.join("index/looked"));
    set_folder_time(&t, looked);
    age_last_look(&t);
    t.routine_sweep();
    assert!(
        exists(&t.bg.record_path(LATER)),
        "a routine sweep read the folder though its time had not changed"
    );
    set_folder_time(&t, SystemTime::now());
    // Changed, and the last look ten minutes old: the next sweep looks and finds it.
    std::thread::sleep(std::time::Duration::from_millis(150));
    age_last_look(&t);
    let stderr = t.routine_sweep();
    assert!(
        !exists(&t.bg.record_path(LATER)) && exists(&state.join(format!("{LATER}.damaged"))),
        "{:?}\n{stderr}",
        names(state)
    );
    drop(serve);
}

/// A sweep run by hand (as the bridge runs one at its start) right after `serve`'s own sweep
/// looked at the folder: it looks again, and moves aside the damaged record that no index
/// names, saying so; a routine sweep at that moment does not look.
#[test]
fn a_sweep_asked_for_by_hand_looks_at_everything_right_after_serves() {
    let t = Tell::new(Sandbox::Passthrough);
    let serve = t.bg.serve(&Flags::default()).start();
    // serve's first sweep has looked at the folder (serve made it, so a look was due).
    let looked = t.state().join("index/looked");
    assert!(
        lnk_tests::procs::poll(lnk_tests::serve::ANSWER, || exists(&looked)),
        "serve's first sweep made no look: {:?}",
        names(t.state())
    );
    let damaged = "aaaaaaaaaaaaaaaa";
    std::fs::write(t.bg.record_path(damaged), b"{ this is not a record").unwrap();
    t.routine_sweep();
    assert!(
        exists(&t.bg.record_path(damaged)),
        "a routine sweep looked again within ten minutes of serve's look"
    );

    let stderr = t.sweep();
    let state = t.state();
    assert!(
        !exists(&t.bg.record_path(damaged)) && exists(&state.join(format!("{damaged}.damaged"))),
        "the sweep by hand left the damaged record in place: {:?}\n{stderr}",
        names(state)
    );
    assert!(
        stderr.contains(damaged) && stderr.contains("damaged"),
        "the sweep by hand did not say so: {stderr}"
    );
    drop(serve);
}
