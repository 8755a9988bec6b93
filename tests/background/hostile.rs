//! A hostile files folder: the agent's programs can write anything there, so `background` may
//! be a symbolic link out of it before the first start, and `background/<id>.out` may be
//! replaced by a link to an outside file or by a FIFO while the run runs or after it ended. None
//! of that makes the runner or the supervisor write, read or truncate anything outside, or hang.
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{CWD, FileType, Mode, mknodat};
use serde_json::json;

use lnk_tests::bins::{procs, write};
use lnk_tests::procs::wait_gone;
use lnk_tests::procs::{poll, supervisors, wait_no_supervisor};
use lnk_tests::results::{is_error, text};
use lnk_tests::runs::{Bg, Flags, snapshot};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{
    PROMPT, list_within, listed, meta, read, start, started, stop, stopped_run, tool_within,
    wait_ended,
};

both_sandboxes!(
    background_folder_linked_outside,
    output_linked_outside_while_running,
    output_linked_outside_after_the_end,
    output_made_a_fifo_while_running,
    output_made_a_fifo_after_the_end,
    background_folder_linked_outside_while_running,
    a_record_with_counts_at_their_limit_is_still_answered,
);

/// An outside folder holding a file the tests must find untouched.
struct Outside {
    dir: PathBuf,
    secret: PathBuf,
    content: String,
}

impl Outside {
    fn new(bg: &Bg) -> Outside {
        let dir = bg.setup.path("outside");
        std::fs::create_dir(&dir).unwrap();
        let secret = dir.join("secret");
        let content = format!("OUTSIDE-SECRET {}\n", bg.marker());
        std::fs::write(&secret, &content).unwrap();
        Outside {
            dir,
            secret,
            content,
        }
    }

    /// Fails unless the folder holds only the secret, unchanged.
    fn untouched(&self) {
        let seen = snapshot(&self.dir);
        assert_eq!(
            seen.keys().collect::<Vec<_>>(),
            ["secret"],
            "something was written outside: {seen:#?}"
        );
        let now = std::fs::read_to_string(&self.secret).unwrap();
        assert_eq!(now, self.content, "the outside file changed");
    }
}

fn background_folder_linked_outside(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let outside = Outside::new(&bg);
    symlink(&outside.dir, bg.setup.files.join("background")).unwrap();
    let mut serve = bg.serve(&Flags::default()).start();
    let mark = bg.marker();
    let script = "printf 'escaped %s\\n' \"$1\"; exec \"$2\" linger \"$1\" 2";
    let result = tool_within(
        &mut serve,
        "start",
        json!({"program": "sh", "args": ["-c", script, "sh", mark, procs()]}),
        Some(meta(None)),
        PROMPT,
    );
    if is_error(&result) {
        assert!(!text(&result).trim().is_empty(), "says why: {result}");
    } else {
        // Accepted: the output must go nowhere outside, and nothing may hang.
        let id = started(&result);
        wait_no_supervisor(&id, Duration::from_secs(30));
        wait_gone(&mark, Duration::from_secs(10));
        let run = listed(&mut serve, &id);
        assert_ne!(run["state"], "running", "the supervisor is gone: {run}");
        let read = read(&mut serve, json!({"id": id}));
        assert!(!text(&read).contains("escaped"), "{read}");
        assert!(!text(&read).contains("OUTSIDE-SECRET"), "{read}");
    }
    outside.untouched();
    // The server keeps serving.
    list_within(&mut serve, PROMPT);
}

/// What replaces the output file.
#[derive(Clone, Copy, Debug)]
enum Swap {
    /// A symbolic link to the outside file.
    Link,
    /// A FIFO no one writes.
    Fifo,
    /// The whole `background` folder moved aside, and a link to the outside folder put there.
    Folder,
}

fn swap(out: &Path, how: Swap, outside: &Outside) {
    if let Swap::Folder = how {
        let background = out.parent().unwrap();
        std::fs::rename(background, background.with_file_name("moved")).unwrap();
        symlink(&outside.dir, background).unwrap();
        return;
    }
    std::fs::remove_file(out).unwrap_or_else(|err| panic!("removing {out:?}: {err}"));
    match how {
        Swap::Folder => unreachable!("handled above"),
        Swap::Link => symlink(&outside.secret, out).unwrap(),
        Swap::Fifo => mknodat(CWD, out, FileType::Fifo, Mode::from_raw_mode(0o644), 0)
            .unwrap_or_else(|err| panic!("mkfifo {out:?}: {err}")),
    }
}

/// Reads the run every way, each answered promptly (the helper fails after [`PROMPT`]), and
/// never with the outside file's bytes.
fn read_safely(serve: &mut lnk_tests::serve::Serve, id: &str, outside: &Outside) {
    for args in [
        json!({"id": id}),
        json!({"id": id, "offset": 0}),
        json!({"id": id, "offset": 5, "limit": 100}),
    ] {
        let result = read(serve, args.clone());
        assert!(
            !text(&result).contains("OUTSIDE-SECRET"),
            "read {args} followed the link: {result}"
        );
    }
    list_within(serve, PROMPT);
    outside.untouched();
}

fn output_swapped_while_running(sandbox: Sandbox, how: Swap) {
    let bg = Bg::new(sandbox);
    let outside = Outside::new(&bg);
    // A small cap, so the supervisor keeps rotating after the swap.
    let flags = Flags {
        output: "16KiB",
        ..Flags::default()
    };
    let mut serve = bg.serve(&flags).start();
    let mark = bg.marker();
    let script = format!(
        "while :; do \"$1\" 1 2000 {}; \"$3\" 0.01; done",
        hex::encode(b"x")
    );
    let id = started(&tool_within(
        &mut serve,
        "start",
        json!({"program": "sh", "args": ["-c", script, "sh", write(), mark, "/usr/bin/sleep"]}),
        Some(meta(None)),
        PROMPT,
    ));
    let out = bg.output_path(&id);
    let mut seen = 0;
    let writing = poll(ANSWER, || {
        seen = std::fs::symlink_metadata(&out).map_or(0, |m| m.len());
        seen > 0
    });
    assert!(writing, "no output in {out:?}");

    swap(&out, how, &outside);
    read_safely(&mut serve, &id, &outside);
    // The supervisor goes on writing and rotating past the swap, then still answers a stop.
    let dropped = |bg: &Bg| {
        bg.record(&id)
            .and_then(|r| r["output"]["dropped_bytes"].as_u64())
            .unwrap_or(0)
    };
    let before = dropped(&bg);
    let went_on = poll(Duration::from_secs(10), || dropped(&bg) > before + 32768);
    read_safely(&mut serve, &id, &outside);
    let run = stopped_run(&stop(&mut serve, &id));
    assert_eq!(run["state"], "stopped", "{run}");
    wait_no_supervisor(&id, Duration::from_secs(10));
    wait_gone(&mark, Duration::from_secs(10));
    read_safely(&mut serve, &id, &outside);
    outside.untouched();
    assert!(
        went_on,
        "the supervisor stopped rotating after the output file was swapped for a {how:?}"
    );
}

fn output_swapped_after_the_end(sandbox: Sandbox, how: Swap) {
    let bg = Bg::new(sandbox);
    let outside = Outside::new(&bg);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = started(&tool_within(
        &mut serve,
        "start",
        json!({"program": "lnk-test-write", "args": ["1", "3000", hex::encode(b"x")]}),
        Some(meta(None)),
        PROMPT,
    ));
    let run = wait_ended(&mut serve, &id, ANSWER);
    assert_eq!(run["state"], "exited", "{run}");
    wait_no_supervisor(&id, Duration::from_secs(10));

    swap(&bg.output_path(&id), how, &outside);
    read_safely(&mut serve, &id, &outside);
    // Stopping the ended run answers promptly, and touches nothing.
    let run = stopped_run(&stop(&mut serve, &id));
    assert_eq!(run["state"], "exited", "{run}");
    assert!(supervisors(&id).is_empty());
    outside.untouched();
}

fn output_linked_outside_while_running(sandbox: Sandbox) {
    output_swapped_while_running(sandbox, Swap::Link);
}

fn output_linked_outside_after_the_end(sandbox: Sandbox) {
    output_swapped_after_the_end(sandbox, Swap::Link);
}

fn output_made_a_fifo_while_running(sandbox: Sandbox) {
    output_swapped_while_running(sandbox, Swap::Fifo);
}

fn output_made_a_fifo_after_the_end(sandbox: Sandbox) {
    output_swapped_after_the_end(sandbox, Swap::Fifo);
}

fn background_folder_linked_outside_while_running(sandbox: Sandbox) {
    output_swapped_while_running(sandbox, Swap::Folder);
}

/// A record whose counts were edited to their limit (u64::MAX) must not make `read`, `list`
/// or `stop` fail inside serve: each still answers, and serve keeps serving.
fn a_record_with_counts_at_their_limit_is_still_answered(sandbox: Sandbox) {
    let bg = Bg::new(sandbox);
    let mut serve = bg.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo some output"]}),
    );
    wait_ended(&mut serve, &id, ANSWER);
    wait_no_supervisor(&id, Duration::from_secs(10));
    let path = bg.record_path(&id);
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    record["output"]["written_bytes"] = json!(u64::MAX);
    record["output"]["dropped_bytes"] = json!(u64::MAX);
    let temp = path.with_extension("edit");
    std::fs::write(&temp, serde_json::to_vec(&record).unwrap()).unwrap();
    std::fs::rename(&temp, &path).unwrap();

    for offset in [None, Some(0), Some(u64::MAX)] {
        let mut arguments = json!({"id": id});
        if let Some(offset) = offset {
            arguments["offset"] = json!(offset);
        }
        // An answer, whatever it says: no panic, no silence.
        tool_within(&mut serve, "read", arguments, None, ANSWER);
    }
    list_within(&mut serve, ANSWER);
    tool_within(&mut serve, "stop", json!({"id": id}), None, ANSWER);
}
