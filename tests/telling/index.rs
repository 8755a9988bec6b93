//! The state folder's index: a folder made before it — version-1 records, as today's
//! format writes them — is still read, swept, indexed once and removed; in an indexed folder a
//! sweep looks only at what is due, however many runs the folder keeps.

use serde_json::{Value, json};

use crate::disk::{CLI, Tell, exists, names, now_ms, supervise_cli};
use lnk_tests::results::{structured, text};
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::skip::skip;
use lnk_tests::tools::{list, start, tool};

const HOUR: u64 = 3_600_000;

/// The checked-in version-1 record `name`, made a run of this test's folders.
fn fixture(t: &Tell, name: &str, id: &str) -> Value {
    let text = match name {
        "record-v1.json" => include_str!("../../common/tests/data/record-v1.json"),
        _ => include_str!("../../common/tests/data/record-v1-running.json"),
    };
    let mut record: Value = serde_json::from_str(text).unwrap();
    let files = path_str(&t.bg.setup.files);
    record["id"] = json!(id);
    record["launch"]["files"] = json!(files);
    record["launch"]["program"]["dir"] = json!(".");
    record["launch"]["program"]["cwd"] = json!(files);
    record["launch"]["tell_to"] = Value::Null;
    record["group"] = Value::Null;
    record
}

/// The test's state folder, made as Link Run makes one (0700) but with nothing in it: no index.
fn make_state_folder(t: &Tell) {
    std::fs::create_dir(t.state()).unwrap();
    std::fs::set_permissions(
        t.state(),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
}

fn plant(t: &Tell, record: &Value) {
    let id = record["id"].as_str().unwrap();
    std::fs::write(
        t.bg.record_path(id),
        serde_json::to_vec_pretty(record).unwrap(),
    )
    .unwrap();
    std::fs::write(t.state().join(format!("{id}.lock")), b"").unwrap();
}

#[test]
fn a_folder_of_version_1_records_is_swept_indexed_read_and_removed() {
    let t = Tell::new(Sandbox::Passthrough);
    make_state_folder(&t);
    let now = now_ms();
    // Ended two days ago with a keep of a day: due. Ended a minute ago: kept. Running, but
    // nothing holds its lock: lost.
    let mut old = fixture(&t, "record-v1.json", "v1oldoldoldoldoldold");
    old["started_at_ms"] = json!(now - 48 * HOUR - 5000);
    old["status"]["ended_at_ms"] = json!(now - 48 * HOUR);
    let mut young = fixture(&t, "record-v1.json", "v1youngyoungyoungyou");
    young["started_at_ms"] = json!(now - 65_000);
    young["status"]["ended_at_ms"] = json!(now - 60_000);
    let mut gone = fixture(&t, "record-v1-running.json", "v1runningrunningrunn");
    gone["started_at_ms"] = json!(now - 30_000);
    for record in [&old, &young, &gone] {
        plant(&t, record);
    }
    let background = t.bg.setup.files.join("background");
    std::fs::create_dir(&background).unwrap();
    std::fs::write(background.join("v1oldoldoldoldoldold.out"), b"old\n").unwrap();

    // Not indexed yet: the sweep reads the whole folder, then indexes it.
    assert!(!t.state().join("index/version").exists());
    t.sweep();
    assert!(
        t.state().join("index/version").is_file(),
        "{:?}",
        names(t.state())
    );
    assert!(
        t.bg.record("v1oldoldoldoldoldold").is_none(),
        "the due run stays"
    );
    assert!(!exists(&background.join("v1oldoldoldoldoldold.out")));
    assert_eq!(
        t.bg.record("v1youngyoungyoungyou").unwrap()["status"]["state"],
        "exited"
    );
    assert_eq!(
        t.bg.record("v1runningrunningrunn").unwrap()["status"]["state"],
        "lost"
    );

    // Read through the index now, newest first.
    let mut serve = t.bg.serve(&Flags::default()).start();
    let runs = list(&mut serve);
    let ids: Vec<&str> = runs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        ["v1runningrunningrunn", "v1youngyoungyoungyou"],
        "{runs:#?}"
    );
    // A run started now joins them, on top.
    let new = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo new"]}),
    );
    t.wait_done(&new);
    let runs = list(&mut serve);
    assert_eq!(runs.len(), 3, "{runs:#?}");
    assert_eq!(runs[0]["id"], new, "{runs:#?}");
    drop(serve);

    let out = supervise_cli(&["remove", "--state", &path_str(t.state())], CLI);
    assert!(
        out.status.success(),
        "remove --state failed: {}",
        out.stderr
    );
    assert!(!exists(t.state()), "{:?}", names(t.state()));
}

/// Ended runs of another user's, filed in the index as due in an hour: a sweep that looked at
/// them would set each aside as damaged.
#[test]
fn a_sweep_looks_only_at_what_is_due() {
    if !rustix::process::geteuid().is_root() {
        skip("planting records of another user needs root");
        return;
    }
    const KEPT: usize = 500;
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.bg.serve(&Flags::default()).start();
    let (real, template) = t.ended_run(&mut serve, "echo real");
    let planted = plant_ended(&t, &template, KEPT, "notdue", 1000);
    for id in &planted {
        std::os::unix::fs::chown(t.bg.record_path(id), Some(65534), Some(65534)).unwrap();
    }
    let stderr = t.sweep();
    let damaged: Vec<String> = names(t.state())
        .into_iter()
        .filter(|n| n.ends_with(".damaged"))
        .collect();
    assert!(
        damaged.is_empty(),
        "the sweep looked at {} runs that were not due: {stderr}",
        damaged.len()
    );
    // Not one of them was touched: each is still there, as it was planted.
    let gone: Vec<&String> = planted
        .iter()
        .filter(|id| !t.bg.record_path(id).is_file())
        .collect();
    assert!(gone.is_empty(), "the sweep moved {gone:?}: {stderr}");
    assert!(t.bg.record(&real).is_some());
}

/// A page reads at most `PAGE_SCAN` (1,000) records: a filter that admits few runs among
/// many does not make one page cost the whole folder. The page ends there with `next`, and
/// following `next` finds what lies beyond.
#[test]
fn a_filtered_page_reads_a_bounded_number_of_records_and_goes_on() {
    const EXITED: usize = 1_250;
    let t = Tell::new(Sandbox::Passthrough);
    make_state_folder(&t);
    let now = now_ms();
    // The stopped run is the oldest; 1,250 exited runs are newer. All young: nothing is due.
    let mut stopped = fixture(&t, "record-v1.json", "stoppedstoppedstoppe");
    stopped["started_at_ms"] = json!(now - 600_000);
    stopped["status"] = json!({"state": "stopped", "ended_at_ms": now - 590_000, "exit": null});
    plant(&t, &stopped);
    for i in 0..EXITED {
        let mut exited = fixture(&t, "record-v1.json", &format!("exited{i:014}"));
        exited["started_at_ms"] = json!(now - 500_000 + i as u64 * 100);
        exited["status"]["ended_at_ms"] = json!(now - 400_000 + i as u64 * 100);
        plant(&t, &exited);
    }
    // The sweep indexes the folder.
    t.sweep();
    assert!(t.state().join("index/version").is_file());

    let mut serve = t.bg.serve(&Flags::default()).start();
    let first = tool(&mut serve, "list", json!({"state": "stopped"}), None);
    let page = structured(&first);
    assert_eq!(page["runs"], json!([]), "{first}");
    let next = page["next"]
        .as_str()
        .unwrap_or_else(|| panic!("a page that stopped reading says where to go on: {first}"));
    assert!(
        text(&first).contains("no matching runs among the 1000 newest looked at"),
        "{first}"
    );
    let second = tool(
        &mut serve,
        "list",
        json!({"state": "stopped", "before": next}),
        None,
    );
    let page = structured(&second);
    let ids: Vec<&str> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["stoppedstoppedstoppe"], "{second}");
    assert!(page["next"].is_null(), "{second}");
    // Unfiltered pages are not affected: they end at their limit.
    let all = list(&mut serve);
    assert_eq!(all.len(), EXITED + 1);
}

/// The names under `index/<kind>/` (one level of minute folders for `started` and `due`) that
/// end with `id`.
fn index_names_of(t: &Tell, kind: &str, id: &str) -> Vec<std::path::PathBuf> {
    fn walk(folder: &std::path::Path, id: &str, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(folder).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, id, found);
            } else if entry.file_name().to_string_lossy().ends_with(id) {
                found.push(path);
            }
        }
    }
    let mut found = Vec::new();
    walk(&t.state().join("index").join(kind), id, &mut found);
    found
}

/// An ended run's index names are hard links of its lock; once its end is stored it holds no
/// disk block but its record's and its output's (the room kept for a full disk in the lock and
/// the log is given back, an empty log goes). Then runs due by the hundred are removed by one
/// sweep, by several threads at once, whole: records, locks, outputs, index names, and the
/// minute folders left empty.
#[test]
fn an_ended_run_holds_only_its_record_and_output_and_due_runs_go_whole() {
    use std::os::unix::fs::MetadataExt;
    const DUE: usize = 200;
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.bg.serve(&Flags::default()).start();
    let (real, template) = t.ended_run(&mut serve, "echo real");
    drop(serve);
    let lock = std::fs::metadata(t.state().join(format!("{real}.lock"))).unwrap();
    assert_eq!(lock.blocks(), 0, "the lock keeps its reserved room");
    assert!(
        !exists(&t.state().join(format!("{real}.log"))),
        "the empty log stays: {:?}",
        names(t.state())
    );
    let started = index_names_of(&t, "start-times", &real);
    let due = index_names_of(&t, "due", &real);
    assert_eq!((started.len(), due.len()), (1, 1), "{started:?} {due:?}");
    for name in started.iter().chain(&due) {
        assert_eq!(
            std::fs::metadata(name).unwrap().ino(),
            lock.ino(),
            "{} is not a link of the lock",
            name.display()
        );
    }

    let ids = plant_ended(&t, &template, DUE, "due", 2 * HOUR);
    let index = t.state().join("index");
    let background = t.bg.setup.files.join("background");
    let stderr = t.sweep();
    let left = names_starting(t.state(), "due");
    assert!(
        left.is_empty(),
        "left in the state folder: {left:?}; {stderr}"
    );
    let outputs = names_starting(&background, "due");
    assert!(outputs.is_empty(), "outputs left: {outputs:?}");
    for id in &ids {
        assert!(
            index_names_of(&t, "started", id).is_empty()
                && index_names_of(&t, "start-times", id).is_empty()
                && index_names_of(&t, "due", id).is_empty(),
            "the index still names {id}"
        );
    }
    // Only the real run's minute folders are left.
    for kind in ["start-times", "due"] {
        let minutes = names(&index.join(kind));
        assert_eq!(minutes.len(), 1, "{kind}: {minutes:?}");
    }
    // The planted runs were filed the way version 1 did: their minutes went with them.
    assert!(names(&index.join("started")).is_empty());
    assert!(t.bg.record(&real).is_some(), "the young run went too");
}

/// The names in `dir` that start with `prefix`.
fn names_starting(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    names(dir)
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// Plants `n` runs made from `template`, ended `ended_ago_ms` ago, kept an hour, told (due
/// once ended more than an hour ago), each with its output file and its index names (links of
/// its lock, as Link Run makes them), each started a minute before the next. Their ids,
/// `<prefix>…`.
fn plant_ended(
    t: &Tell,
    template: &Value,
    n: usize,
    prefix: &str,
    ended_ago_ms: u64,
) -> Vec<String> {
    let now = now_ms();
    let index = t.state().join("index");
    let background = t.bg.setup.files.join("background");
    let minute = |ms: u64| format!("{:010}", ms / 60_000);
    let mut ids = Vec::new();
    for i in 0..n {
        let id = format!("{prefix}{i:0width$}", width = 20 - prefix.len());
        let ended = now - ended_ago_ms;
        let started = ended - 5000 - (i as u64) * 60_000;
        let mut record = template.clone();
        record["id"] = json!(id);
        record["started_at_ms"] = json!(started);
        record["status"]["ended_at_ms"] = json!(ended);
        record["launch"]["limits"]["keep_ms"] = json!(HOUR);
        record["launch"]["tell_to"] = Value::Null;
        record["output"]["file"] = Value::Null;
        plant(t, &record);
        let lock = t.state().join(format!("{id}.lock"));
        for name in [
            index
                .join("started")
                .join(minute(started))
                .join(format!("{started:013}-{id}")),
            index.join("due").join(minute(ended + HOUR)).join(&id),
        ] {
            std::fs::create_dir_all(name.parent().unwrap()).unwrap();
            std::fs::hard_link(&lock, &name).unwrap();
        }
        std::fs::write(background.join(format!("{id}.out")), b"output\n").unwrap();
        ids.push(id);
    }
    ids
}

/// A sweep whose user may make no more threads (its `RLIMIT_NPROC` reached, as a background
/// program of the user's can bring about) still removes every due run, in its one thread.
#[test]
fn a_sweep_that_can_make_no_thread_still_removes_what_is_due() {
    if !rustix::process::geteuid().is_root() {
        skip("limiting another user's processes needs root");
        return;
    }
    // A uid of its own, so that no other test's processes count against its limit of one.
    const UID: u32 = 65531;
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.bg.serve(&Flags::default()).start();
    let (_, template) = t.ended_run(&mut serve, "echo real");
    drop(serve);
    let ids = plant_ended(&t, &template, 100, "nothread", 2 * HOUR);
    let chown = std::process::Command::new("chown")
        .args(["-R", &format!("{UID}:{UID}")])
        .arg(t.state())
        .arg(&t.bg.setup.files)
        .status()
        .unwrap();
    assert!(chown.success());
    let out = std::process::Command::new("prlimit")
        .arg("--nproc=1")
        .arg("--")
        .arg("setpriv")
        .arg(format!("--reuid={UID}"))
        .arg(format!("--regid={UID}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(lnk_tests::bins::link_supervise())
        .arg("sweep")
        .arg(t.state())
        .env("RUST_LOG", "info")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the sweep failed: {stderr}");
    assert!(
        stderr.contains("one remover fewer"),
        "no thread was refused, so nothing was shown: {stderr}"
    );
    let left = names_starting(t.state(), "nothread");
    assert!(left.is_empty(), "left: {left:?}; {stderr}");
    for id in &ids {
        assert!(!exists(
            &t.bg
                .setup
                .files
                .join("background")
                .join(format!("{id}.out"))
        ));
    }
}

/// A run's name by start time lies in the tenth of a second of its minute (`index/version` 2),
/// so a `list` page reads the runs of a tenth, not of a whole minute. A folder of the index's
/// version 1 (names straight in the minute, under `started/`) is read as it is, and its first
/// sweep moves its names into their tenths and writes version 2.
#[test]
fn the_index_files_runs_by_the_tenth_and_a_version_1_index_is_upgraded() {
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.bg.serve(&Flags::default()).start();
    let (real, record) = t.ended_run(&mut serve, "echo real");
    let index = t.state().join("index");
    let version = || std::fs::read_to_string(index.join("version")).unwrap();
    assert_eq!(version(), "2\n");
    let ms = record["started_at_ms"].as_u64().unwrap();
    let minute = format!("{:010}", ms / 60_000);
    let name = format!("{ms:013}-{real}");
    let tenth = index
        .join("start-times")
        .join(&minute)
        .join(format!("{:03}", ms % 60_000 / 100))
        .join(&name);
    assert!(
        exists(&tenth),
        "{real} is not filed in its tenth: {:?} {:?}",
        index_names_of(&t, "start-times", &real),
        index_names_of(&t, "started", &real)
    );

    // Made version 1: the name straight in its minute, under `started/`.
    let flat = index.join("started").join(&minute).join(&name);
    std::fs::create_dir_all(flat.parent().unwrap()).unwrap();
    std::fs::rename(&tenth, &flat).unwrap();
    std::fs::remove_dir_all(index.join("start-times")).unwrap();
    std::fs::write(index.join("version"), b"1\n").unwrap();
    let ids: Vec<String> = list(&mut serve)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, vec![real.clone()], "a version-1 index is read");

    let stderr = t.sweep();
    assert_eq!(version(), "2\n", "{stderr}");
    assert!(
        exists(&tenth),
        "{:?}",
        index_names_of(&t, "start-times", &real)
    );
    assert!(!exists(&index.join("started")), "version 1's tree stays");
    let ids: Vec<String> = list(&mut serve)
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, vec![real], "the upgraded index is read");
    drop(serve);
}
