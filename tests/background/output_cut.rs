//! A running run's output file and its folder, cut by the agent's own programs as people cut a
//! log: `background/` removed whole (an `rm -rf`, a `git clean -fdx`) or `<id>.out` emptied
//! (`: > background/<id>.out`) while the run writes past its cap. The run goes on to its own
//! end, and its output after the cut is read as before.
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use lnk_tests::bins::write;
use lnk_tests::procs::{sigkill, wait_no_supervisor};
use lnk_tests::results::{is_error, structured, text};
use lnk_tests::runs::{Bg, Flags};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{read, start, wait_ended};

both_sandboxes!(
    background_removed_while_the_run_writes_is_made_again,
    an_output_file_emptied_while_the_run_writes_loses_nothing_after,
    a_supervisor_killed_within_a_rotation_leaves_the_output_readable,
);

/// A run that writes 1,000 bytes, waits a second, then writes 20,000 bytes every 20 ms, 150
/// times (3 MB through a 64 KiB cap: many rotations), then `END`; `cut` is done to the files
/// folder in that second, before the first rotation (the file the start made is the one cut).
fn run_cut_while_writing(sandbox: Sandbox, cut: impl FnOnce(&Path, &str)) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        output: "64KiB",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let script = "\"$1\" 1 1000 78; \"$2\" 1; i=0; while [ $i -lt 150 ]; do \"$1\" 1 20000 78; \
                  \"$2\" 0.02; i=$((i+1)); done; echo END";
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", script, "sh", write(), "/usr/bin/sleep"]}),
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let result = read(&mut serve, json!({"id": id, "limit": 16}));
        assert!(Instant::now() < deadline, "no output: {result}");
        if is_error(&result) {
            // A read that met a rotation is asked to try again.
            assert!(text(&result).contains("try again"), "{result}");
            continue;
        }
        let value = structured(&result);
        if value["next_offset"].as_u64().is_some_and(|n| n >= 1000) {
            assert_eq!(value["dropped_bytes"], 0, "{value}");
            break;
        }
        assert_eq!(value["state"], "running", "{value}");
        std::thread::sleep(Duration::from_millis(20));
    }
    cut(&bg.setup.files, &id);
    let run = wait_ended(&mut serve, &id, Duration::from_secs(60));
    assert_eq!(run["state"], "exited", "{run}");
    assert_eq!(run["exit_code"], 0, "{run}");
    let tail = read(&mut serve, json!({"id": id, "limit": 64}));
    assert!(text(&tail).contains("END"), "{tail}");
    wait_no_supervisor(&id, Duration::from_secs(10));
}

fn background_removed_while_the_run_writes_is_made_again(sandbox: Sandbox) {
    run_cut_while_writing(sandbox, |files, _id| {
        std::fs::remove_dir_all(files.join("background")).unwrap();
    });
}

fn an_output_file_emptied_while_the_run_writes_loses_nothing_after(sandbox: Sandbox) {
    run_cut_while_writing(sandbox, |files, id| {
        let out = files.join("background").join(format!("{id}.out"));
        std::fs::OpenOptions::new()
            .write(true)
            .open(out)
            .unwrap()
            .set_len(0)
            .unwrap();
    });
}

/// A supervisor SIGKILLed while its run writes as fast as it can through a 4 KiB cap (so most
/// of its time is rotations): after a sweep, the file the record names is `<id>.out`, and the
/// output reads. The kill lands between a rotation's record and its rename in some tries
/// only; each try checks the same.
fn a_supervisor_killed_within_a_rotation_leaves_the_output_readable(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let flags = Flags {
        output: "4KiB",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let mut within = 0;
    for _ in 0..5 {
        let id = start(
            &mut serve,
            json!({"program": "sh", "args": ["-c", "while :; do \"$1\" 1 100000 61; done", "sh", write()]}),
        );
        let record = bg.wait_record(&id, ANSWER, |r| r["supervisor"]["pid"].is_i64());
        std::thread::sleep(Duration::from_millis(300));
        sigkill(i32::try_from(record["supervisor"]["pid"].as_i64().unwrap()).unwrap());
        wait_no_supervisor(&id, Duration::from_secs(10));
        let out = bg.setup.files.join("background").join(format!("{id}.out"));
        let named = |bg: &Bg| bg.record(&id).unwrap()["output"]["file"]["ino"].as_u64();
        if named(&bg) != Some(std::fs::metadata(&out).unwrap().ino()) {
            within += 1;
        }
        crate::contained::sweep(&bg);
        assert_eq!(named(&bg), Some(std::fs::metadata(&out).unwrap().ino()));
        let result = read(&mut serve, json!({"id": id, "limit": 64}));
        assert!(!is_error(&result), "{result}");
        assert!(text(&result).contains("aaaa"), "{result}");
        if within > 0 {
            break;
        }
    }
    eprintln!("tries that killed within a rotation: {within}");
}
