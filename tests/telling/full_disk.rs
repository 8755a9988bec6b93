//! A full state folder loses nothing and says so: the refusal of a `start` and the
//! supervisor's log name "No space left on device"; a run's end that cannot be recorded is
//! tried again by its supervisor, and kept (in space its lock file reserved) for a sweep when
//! the supervisor is gone, so the run is recorded as it ended — never `lost`, never `running`
//! after its supervisor is gone; `list` and `read` agree on its bytes.
//!
//! A full files folder loses no run either: output that cannot be written is
//! counted and said, and goes on once there is room.
//!
//! The full folder is a small tmpfs the test mounts (as root, as in CI); elsewhere the tests
//! fail, or with `LNK_ALLOW_SKIP=1` say they are skipped.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::disk::Tell;
use lnk_tests::procs::{poll, sigkill, wait_no_supervisor, wait_supervisor};
use lnk_tests::results::{is_error, text};
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::Sandbox;
use lnk_tests::serve::ANSWER;
use lnk_tests::skip::skip;
use lnk_tests::tools::{listed, meta, read_ok, start, tool};

/// A tmpfs mounted on a folder, unmounted when dropped.
struct Tmpfs {
    at: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` on `at` (made here); `None` where that cannot be done (the test
    /// fails, or is skipped with `LNK_ALLOW_SKIP=1`).
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        if !rustix::process::geteuid().is_root() {
            skip("mounting a small tmpfs needs root");
            return None;
        }
        std::fs::create_dir_all(at).unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={size},mode=0700"))
            .arg("tmpfs")
            .arg(at)
            .output()
            .unwrap_or_else(|err| panic!("running mount: {err}"));
        if !out.status.success() {
            skip(&format!(
                "cannot mount a tmpfs here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            return None;
        }
        Some(Tmpfs { at: at.to_owned() })
    }

    /// Fills it up with one file, which is returned.
    fn fill(&self) -> PathBuf {
        let filler = self.at.join("filler");
        let mut file = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 4096];
        while file.write_all(&block).is_ok() {}
        let _ = file.sync_all();
        filler
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

/// A run that waits for `go` in the files folder, then writes `done\n` and exits 0.
fn waiting_run() -> Value {
    json!({"program": "sh", "args": ["-c", "while [ ! -e go ]; do sleep 0.05; done; echo done"]})
}

/// Waits until the supervisor's log of `id` names the full disk.
fn wait_log_says_full(t: &Tell, id: &str) -> String {
    let log = t.state().join(format!("{id}.log"));
    let mut seen = String::new();
    let said = poll(ANSWER, || {
        seen = std::fs::read_to_string(&log).unwrap_or_default();
        seen.contains("No space left on device")
    });
    assert!(
        said,
        "the supervisor's log does not name the full disk: {seen:?}"
    );
    seen
}

/// `tasks/get` of run `id` (a 2026-07-28 request that declares the Tasks extension, which a
/// handshake session may send too): the task.
fn task(serve: &mut lnk_tests::serve::Serve, id: &str) -> Value {
    let request = serve.fresh_id();
    let mut meta = lnk_tests::results::modern_meta();
    meta["io.modelcontextprotocol/clientCapabilities"] =
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    serve.send(
        &json!({"jsonrpc": "2.0", "id": request, "method": "tasks/get",
                       "params": {"taskId": id, "_meta": meta}}),
    );
    lnk_tests::results::ok(&serve.response(&json!(request), ANSWER))
}

/// `list`, `read` and the run's task show the same bytes of `id`: `done\n`.
fn list_and_read_agree(serve: &mut lnk_tests::serve::Serve, id: &str) {
    let run = listed(serve, id);
    let (bytes, value) = read_ok(serve, json!({"id": id}));
    assert_eq!(bytes, "done\n", "{value}");
    assert_eq!(
        run["output_bytes"], value["output_bytes"],
        "{run} vs {value}"
    );
    assert_eq!(run["output_bytes"], 5, "{run}");
    let task = task(serve, id);
    assert_eq!(task["status"], "completed", "{task}");
    let ended = &task["result"]["structuredContent"];
    assert_eq!(ended["output_bytes"], 5, "{task}");
    assert_eq!(ended["output"], "done\n", "{task}");
    assert_eq!(ended["state"], run["state"], "{task}");
}

#[test]
fn a_full_state_folder_refuses_starts_saying_so_and_loses_no_end() {
    let t = Tell::new(Sandbox::Passthrough);
    let Some(tmpfs) = Tmpfs::mount(t.state(), "1m") else {
        return;
    };
    let mut serve = t.bg.serve(&Flags::default()).start();
    let id = start(&mut serve, waiting_run());
    t.bg.group(&id);
    let filler = tmpfs.fill();

    let refused = tool(&mut serve, "start", waiting_run(), Some(meta(None)));
    assert!(is_error(&refused), "a start on a full disk: {refused}");
    assert!(
        text(&refused).contains("No space left on device"),
        "the refusal does not say why: {}",
        text(&refused)
    );

    std::fs::write(t.bg.setup.files.join("go"), b"").unwrap();
    wait_log_says_full(&t, &id);
    assert_eq!(t.bg.record(&id).unwrap()["status"]["state"], "running");
    // Space comes back: the supervisor, still trying, records the end.
    std::fs::remove_file(&filler).unwrap();
    let record = t.bg.wait_record(&id, Duration::from_secs(20), |r| {
        r["status"]["state"] != "running"
    });
    assert_eq!(record["status"]["state"], "exited", "{record}");
    assert_eq!(record["status"]["exit"]["code"], 0, "{record}");
    assert_eq!(record["output"]["written_bytes"], 5, "{record}");
    wait_no_supervisor(&id, ANSWER);
    list_and_read_agree(&mut serve, &id);
}

#[test]
fn a_supervisor_gone_on_a_full_disk_leaves_its_end_to_the_sweep() {
    let t = Tell::new(Sandbox::Passthrough);
    let Some(tmpfs) = Tmpfs::mount(t.state(), "1m") else {
        return;
    };
    let mut serve = t.bg.serve(&Flags::default()).start();
    let id = start(&mut serve, waiting_run());
    t.bg.group(&id);
    let supervisor = wait_supervisor(&id, ANSWER);
    let filler = tmpfs.fill();
    std::fs::write(t.bg.setup.files.join("go"), b"").unwrap();
    wait_log_says_full(&t, &id);
    // The supervisor dies while it still cannot write the record.
    sigkill(supervisor.pid);
    wait_no_supervisor(&id, ANSWER);
    // Only a zombie has surely let go of the run's lock (the command line goes first).
    assert!(lnk_tests::procs::wait_dead(supervisor.pid, ANSWER));

    // The disk is still full: nothing can be written, but `list` shows the end that was
    // kept, not a run that nothing supervises.
    let run = listed(&mut serve, &id);
    assert_eq!(run["state"], "exited", "{run}");
    assert_eq!(run["exit_code"], 0, "{run}");
    // And so does its task.
    let task = task(&mut serve, &id);
    assert_eq!(task["status"], "completed", "{task}");
    assert_eq!(
        task["result"]["structuredContent"]["exit_code"], 0,
        "{task}"
    );
    // The sweeps that `list` and the task's poll started (they could not write) end first:
    // the sweep below must be the only one holding the run's lock.
    let state = t.state().to_string_lossy().into_owned();
    let ended = poll(ANSWER, || {
        lnk_tests::procs::with_marker(&state)
            .iter()
            .all(|p| !p.argv.iter().any(|a| a == "sweep"))
    });
    assert!(ended, "the sweeps serve started did not end");

    std::fs::remove_file(&filler).unwrap();
    t.sweep();
    let record = t.bg.record(&id).unwrap();
    assert_eq!(record["status"]["state"], "exited", "not lost: {record}");
    assert_eq!(record["output"]["written_bytes"], 5, "{record}");
    list_and_read_agree(&mut serve, &id);
    // The end is in the record now: the room kept for it in the lock, and the log's, go back.
    use std::os::unix::fs::MetadataExt;
    let lock = std::fs::metadata(t.state().join(format!("{id}.lock"))).unwrap();
    assert_eq!(
        (lock.len(), lock.blocks()),
        (0, 0),
        "the lock keeps its room"
    );
    let log = std::fs::metadata(t.state().join(format!("{id}.log"))).unwrap();
    assert!(
        log.blocks() * 512 <= log.len().next_multiple_of(4096),
        "the log keeps {} blocks for {} bytes",
        log.blocks(),
        log.len()
    );
}

/// A run whose output finds the files folder full (32 KiB of room for 40,000 bytes) is not
/// `lost`: it runs on, the log says why once, and `list`, `read`, the record and the file agree
/// on every count, the bytes that could not be written included. Once there is room its output
/// goes on, in a new file that begins by saying how many bytes could not be written.
#[test]
fn a_full_files_folder_loses_no_run_and_the_counts_agree() {
    const WRITTEN: u64 = 40_000;
    let t = Tell::new(Sandbox::Passthrough);
    let Some(tmpfs) = Tmpfs::mount(&t.bg.setup.files, "1m") else {
        return;
    };
    let filler = tmpfs.fill();
    let full = std::fs::metadata(&filler).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(full - 32 * 1024)
        .unwrap();
    let mut serve = t.bg.serve(&Flags::default()).start();
    let script =
        format!("yes | head -c {WRITTEN}; while [ ! -e go ]; do sleep 0.05; done; echo after");
    let id = start(&mut serve, json!({"program": "sh", "args": ["-c", script]}));
    let supervisor = wait_supervisor(&id, ANSWER);

    // The record gets the count of what could not be written, and the run goes on.
    let record = t.bg.wait_record(&id, ANSWER, |r| {
        r["output"]["written_bytes"] == WRITTEN || r["status"]["state"] != "running"
    });
    assert_eq!(record["status"]["state"], "running", "{record}");
    assert!(
        lnk_tests::procs::alive(supervisor.pid),
        "the supervisor is gone"
    );
    let log = std::fs::read_to_string(t.state().join(format!("{id}.log"))).unwrap_or_default();
    assert_eq!(
        log.matches("the files folder is full").count(),
        1,
        "the log says it once: {log}"
    );
    let output = &record["output"];
    let in_file = std::fs::metadata(t.bg.output_path(&id)).unwrap().len();
    let unwritten = output["unwritten_bytes"].as_u64().unwrap_or(0);
    assert!(unwritten > 0, "{record}");
    assert_eq!(
        output["dropped_bytes"].as_u64().unwrap() + in_file + unwritten,
        WRITTEN,
        "the file and the record disagree: {record}, {in_file} bytes in the file"
    );
    let run = listed(&mut serve, &id);
    let (_, value) = read_ok(&mut serve, json!({"id": &id}));
    for (what, shown) in [("list", &run), ("read", &value)] {
        assert_eq!(shown["output_bytes"], WRITTEN, "{what}: {shown}");
        assert_eq!(
            shown["dropped_bytes"], output["dropped_bytes"],
            "{what}: {shown}"
        );
    }

    // Room again: the output goes on in a new file, which says what was lost.
    std::fs::remove_file(&filler).unwrap();
    std::fs::write(t.bg.setup.files.join("go"), b"").unwrap();
    let record = t.bg.wait_record(&id, Duration::from_secs(20), |r| {
        r["status"]["state"] != "running"
    });
    assert_eq!(record["status"]["state"], "exited", "not lost: {record}");
    let (text, value) = read_ok(&mut serve, json!({"id": &id}));
    let said =
        format!("the files folder is full: {unwritten} bytes of output could not be written\n");
    assert!(text.ends_with(&format!("{said}after\n")), "{text:?}");
    let output = &record["output"];
    let in_file = std::fs::metadata(t.bg.output_path(&id)).unwrap().len();
    let written = output["written_bytes"].as_u64().unwrap();
    assert_eq!(output["dropped_bytes"], WRITTEN, "{record}");
    assert_eq!(
        output["dropped_bytes"].as_u64().unwrap() + in_file,
        written,
        "{record}"
    );
    let run = listed(&mut serve, &id);
    for (what, shown) in [("list", &run), ("read", &value)] {
        assert_eq!(shown["output_bytes"], written, "{what}: {shown}");
        assert_eq!(shown["dropped_bytes"], WRITTEN, "{what}: {shown}");
    }
    wait_no_supervisor(&id, ANSWER);
    drop(serve);
}

/// A supervisor that cannot store its run's end for a whole minute (the state folder stays
/// full) gives up and exits, leaving the end kept in the lock file: `list` shows that end, and
/// the first sweep once there is room records it — the run as it ended, not `lost`.
#[test]
fn a_supervisor_that_gives_up_on_a_full_state_folder_leaves_its_end_to_the_next_sweep() {
    let t = Tell::new(Sandbox::Passthrough);
    let Some(tmpfs) = Tmpfs::mount(t.state(), "1m") else {
        return;
    };
    let mut serve = t.bg.serve(&Flags::default()).start();
    let id = start(&mut serve, waiting_run());
    t.bg.group(&id);
    let filler = tmpfs.fill();
    std::fs::write(t.bg.setup.files.join("go"), b"").unwrap();
    wait_log_says_full(&t, &id);
    // It tries every second for a minute, then exits by itself.
    wait_no_supervisor(&id, Duration::from_secs(90));
    assert_eq!(t.bg.record(&id).unwrap()["status"]["state"], "running");
    let run = listed(&mut serve, &id);
    assert_eq!(run["state"], "exited", "{run}");

    std::fs::remove_file(&filler).unwrap();
    t.sweep();
    let record = t.bg.record(&id).unwrap();
    assert_eq!(record["status"]["state"], "exited", "not lost: {record}");
    assert_eq!(record["output"]["written_bytes"], 5, "{record}");
    list_and_read_agree(&mut serve, &id);
}

/// Room that comes back while the run is quiet is found without new output: the new file, with
/// its line about what could not be written, begins within the supervisor's longest wait.
#[test]
fn room_that_comes_back_while_a_run_is_quiet_is_found() {
    let t = Tell::new(Sandbox::Passthrough);
    let Some(tmpfs) = Tmpfs::mount(&t.bg.setup.files, "1m") else {
        return;
    };
    let filler = tmpfs.fill();
    let mut serve = t.bg.serve(&Flags::default()).start();
    let script = "echo lost; while [ ! -e go ]; do sleep 0.05; done";
    let id = start(&mut serve, json!({"program": "sh", "args": ["-c", script]}));
    let record =
        t.bg.wait_record(&id, ANSWER, |r| r["output"]["written_bytes"] == 5);
    assert_eq!(record["output"]["unwritten_bytes"], 5, "{record}");
    std::fs::remove_file(&filler).unwrap();
    let record = t.bg.wait_record(&id, Duration::from_secs(15), |r| {
        r["output"]["dropped_bytes"] == 5
    });
    assert_eq!(record["status"]["state"], "running", "{record}");
    let (text, _) = read_ok(&mut serve, json!({"id": &id}));
    assert_eq!(
        text,
        "lnk-link-supervise: the files folder is full: 5 bytes of output could not be written\n"
    );
    std::fs::write(t.bg.setup.files.join("go"), b"").unwrap();
    wait_no_supervisor(&id, ANSWER);
}

/// What an agent reads of a run whose output found the files folder full, `room` bytes free:
/// `list`, `read` and the run's task say how many bytes could not be written and why, and
/// `read` never points at offsets that hold nothing.
fn unwritten_output_is_said(room: u64) {
    const WRITTEN: u64 = 1_000_000;
    let t = Tell::new(Sandbox::Passthrough);
    let Some(tmpfs) = Tmpfs::mount(&t.bg.setup.files, "2m") else {
        return;
    };
    let filler = tmpfs.fill();
    let full = std::fs::metadata(&filler).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&filler)
        .unwrap()
        .set_len(full - room)
        .unwrap();
    let mut serve = t.bg.serve(&Flags::default()).start();
    let script = format!("yes | head -c {WRITTEN}");
    let id = start(&mut serve, json!({"program": "sh", "args": ["-c", script]}));
    let record =
        t.bg.wait_record(&id, ANSWER, |r| r["status"]["state"] != "running");
    wait_no_supervisor(&id, ANSWER);
    let in_file = std::fs::metadata(t.bg.output_path(&id)).unwrap().len();
    assert_eq!(in_file, room, "{record}");
    let unwritten = WRITTEN - room;
    assert_eq!(record["output"]["unwritten_bytes"], unwritten, "{record}");

    // list: the run, its counts, and why, in the value and in the text.
    let page = tool(&mut serve, "list", json!({}), None);
    let run = lnk_tests::results::structured(&page)["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .cloned()
        .unwrap_or_else(|| panic!("{id} is not listed: {page}"));
    assert_eq!(run["output_bytes"], WRITTEN, "{run}");
    assert_eq!(run["unwritten_bytes"], unwritten, "{run}");
    let why = run["unwritten_why"].as_str().unwrap_or_default();
    assert!(
        why.contains("files folder was full") && why.contains("No space left on device"),
        "{run}"
    );
    let said = format!("{unwritten} bytes of output could not be written: {why}");
    assert!(text(&page).contains(&said), "{}", text(&page));

    // read, from the end: the last bytes the file holds, then on past what was never written.
    let (shown, value) = read_ok(&mut serve, json!({"id": &id}));
    assert_eq!(value["next_offset"], WRITTEN, "{value}");
    assert_eq!(value["output_bytes"], WRITTEN, "{value}");
    assert_eq!(value["unwritten_bytes"], unwritten, "{value}");
    assert_eq!(value["unwritten_why"], why, "{value}");
    let bytes = value["text"].as_str().unwrap().len() as u64;
    assert_eq!(bytes, room.min(64 * 1024), "{value}");
    assert_eq!(value["offset"], room - bytes, "{value}");
    assert_eq!(value["skipped"], unwritten, "{value}");
    assert!(
        shown.contains(&format!(
            "{unwritten} bytes of output, offsets {room} to {WRITTEN}, could not be written"
        )),
        "{shown:?}"
    );
    // read, at an offset that was never written: nothing to point at there, so on to the end.
    let (_, value) = read_ok(
        &mut serve,
        json!({"id": &id, "offset": room + 10, "limit": 100}),
    );
    assert_eq!(value["text"], "", "{value}");
    assert_eq!(value["next_offset"], WRITTEN, "{value}");
    assert_eq!(value["skipped"], unwritten - 10, "{value}");
    // read, from the start: what is there, and no further than it while there is more.
    if room > 100 {
        let (_, value) = read_ok(&mut serve, json!({"id": &id, "offset": 0, "limit": 100}));
        assert_eq!(value["next_offset"], 100, "{value}");
        assert_eq!(value["skipped"], 0, "{value}");
    }

    // The task: its text and its value say it too.
    let task = task(&mut serve, &id);
    assert_eq!(task["status"], "completed", "{task}");
    let ended = &task["result"]["structuredContent"];
    assert_eq!(ended["unwritten_bytes"], unwritten, "{task}");
    assert_eq!(ended["unwritten_why"], why, "{task}");
    let told = task["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(told.contains(&said), "{told}");
    drop(serve);
}

#[test]
fn output_written_to_a_full_files_folder_is_said_unwritten() {
    unwritten_output_is_said(0);
}

#[test]
fn output_beyond_the_room_left_is_said_unwritten() {
    unwritten_output_is_said(32 * 1024);
}
