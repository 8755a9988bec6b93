//! A state folder that is not the user's alone, and what is planted in one, is never believed:
//! a folder of another user's, or one others may write, is refused by `serve`,
//! `sweep`, `stop --state` and `remove --state`; a record or a lock of another user's is set
//! aside as damaged — nothing is killed, signed or told for it; `<id>.stop` is never followed
//! through a link; a way in served by another user is never told; and whatever holds
//! `start.lock` (as a run that could reach it would) cannot keep `stop --state` or `remove
//! --state` from finishing.
//!
//! Each test first sets up the attack as it worked before. Those that need another user run
//! it as `nobody` through `setpriv` (the tests run as root in CI) and, run as anyone else, fail,
//! or with `LNK_ALLOW_SKIP=1` say they are skipped.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::disk::{CLI, Decoy, Tell, boot_id, exists, names, now_ms, supervise_cli};
use crate::wayin::{AGENT, Answer};
use lnk_tests::bins::link_run;
use lnk_tests::procs::{poll, stays_alive, wait_no_supervisor};
use lnk_tests::procs::{wait_for_role, wait_gone};
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::{Sandbox, path_str};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::{procs_args, start, stop, stopped_run};

/// `nobody`'s uid and gid.
const NOBODY: u32 = 65534;

/// Whether this process may act as another user; when not, the test fails, or is skipped with
/// `LNK_ALLOW_SKIP=1`.
fn can_be_nobody(test: &str) -> bool {
    if rustix::process::geteuid().is_root() {
        return true;
    }
    lnk_tests::skip::skip(&format!(
        "{test} needs root, to run the other user as nobody"
    ));
    false
}

/// `setpriv` running `program` as `nobody`, with no groups.
fn as_nobody(program: &Path) -> Command {
    let mut command = Command::new("setpriv");
    command
        .arg(format!("--reuid={NOBODY}"))
        .arg(format!("--regid={NOBODY}"))
        .arg("--clear-groups")
        .arg("--")
        .arg(program);
    command
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(uid))
        .unwrap_or_else(|err| panic!("chown {path:?}: {err}"));
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .unwrap_or_else(|err| panic!("chmod {path:?}: {err}"));
}

/// Runs `serve` with `argv` and checks that it refuses to start: non-zero, one line on stderr
/// that names `mention`, nothing on stdout.
fn serve_refuses(argv: &[std::ffi::OsString], mention: &str) {
    let out = Command::new(link_run())
        .args(argv)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|err| panic!("running lnk-link-run: {err}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "serve started: {stderr}");
    assert!(out.stdout.is_empty(), "{:?}", out.stdout);
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.contains(mention), "{mention:?} not in {stderr:?}");
}

/// `sweep`, `stop --state` and `remove --state` each refuse the folder, naming `mention`,
/// and leave it as it was.
fn the_cli_refuses(t: &Tell, mention: &str) {
    let state = path_str(t.state());
    let before = names(t.state());
    for args in [
        vec!["sweep", state.as_str()],
        vec!["stop", "--state", state.as_str()],
        vec!["remove", "--state", state.as_str()],
    ] {
        let out = supervise_cli(&args, CLI);
        assert!(!out.status.success(), "{args:?} went on: {}", out.stderr);
        assert!(
            out.stderr.contains(mention),
            "{args:?}: {mention:?} not in {}",
            out.stderr
        );
        assert_eq!(names(t.state()), before, "{args:?} changed the folder");
    }
}

#[test]
fn a_state_folder_of_another_user_or_open_to_others_is_refused_everywhere() {
    let t = Tell::new(Sandbox::Passthrough);
    std::fs::create_dir(t.state()).unwrap();
    // What the other user planted: a record the sweep would otherwise believe.
    let planted = t.state().join("aaaaaaaaaaaaaaaaaaaa.json");
    std::fs::write(&planted, b"{}").unwrap();
    let argv = t.bg.serve(&Flags::default()).argv();

    if can_be_nobody("the other user's folder") {
        chown(t.state(), NOBODY);
        chmod(t.state(), 0o700);
        serve_refuses(&argv, &format!("belongs to uid {NOBODY}"));
        the_cli_refuses(&t, &format!("belongs to uid {NOBODY}"));
        chown(t.state(), rustix::process::geteuid().as_raw());
    }

    // The user's own folder, but anyone may write it.
    chmod(t.state(), 0o777);
    serve_refuses(&argv, "chmod 700");
    the_cli_refuses(&t, "chmod 700");
    chmod(t.state(), 0o1733);
    serve_refuses(&argv, "chmod 700");

    // Made private, it is used (the planted file is damaged, not fatal): the sweep sets the
    // planted record aside as `<id>.damaged`.
    chmod(t.state(), 0o700);
    let stderr = t.sweep();
    assert!(
        !planted.exists(),
        "the planted record is still a record: {:?} {stderr}",
        names(t.state())
    );
    let damaged = t.state().join("aaaaaaaaaaaaaaaaaaaa.damaged");
    assert_eq!(
        std::fs::read(&damaged).ok(),
        Some(b"{}".to_vec()),
        "the planted record was not set aside: {:?} {stderr}",
        names(t.state())
    );
}

/// A record shaped like a real one: `status` as given, the decoy's group, told nothing yet,
/// telling the test's way in.
fn planted_record(t: &Tell, id: &str, status: Value, decoy: &Decoy) -> Value {
    let fixture = include_str!("../../common/tests/data/record-v1-running.json");
    let mut record: Value = serde_json::from_str(fixture).unwrap();
    let now = now_ms();
    record["id"] = json!(id);
    record["boot_id"] = json!(boot_id());
    record["started_at_ms"] = json!(now - 60_000);
    record["launch"]["files"] = json!(path_str(&t.bg.setup.files));
    record["launch"]["program"]["cwd"] = json!(path_str(&t.bg.setup.files));
    record["launch"]["tell_to"] = json!({
        "way_in": path_str(&t.socket), "agent": AGENT, "keyring": path_str(&t.keyring),
    });
    record["group"] =
        json!({"pgid": decoy.pid, "leader_pid": decoy.pid, "leader_start_time": decoy.start_time});
    record["status"] = status;
    record
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

#[test]
fn a_planted_record_or_lock_is_set_aside_and_never_believed() {
    if !can_be_nobody("planted records") {
        return;
    }
    let t = Tell::new(Sandbox::Passthrough);
    let way = t.way_in(Answer::Result);
    std::fs::create_dir(t.state()).unwrap();
    chmod(t.state(), 0o700);
    let decoy = Decoy::start(&t.bg.marker());
    let ended = json!({"state": "exited", "ended_at_ms": now_ms() - 1000, "exit": {"code": 0}});
    // A "running" record whose group is someone else's (the sweep would record it lost and
    // kill the group), and an ended, untold one (the sweep would sign and tell it): both of
    // another user's. And a record of the user's whose lock is another user's.
    let runs = [
        (
            "plantedrunning000001",
            json!({"state": "running"}),
            true,
            false,
        ),
        ("plantedended00000001", ended.clone(), true, false),
        ("plantedlock000000001", ended, false, true),
    ];
    for (id, status, foreign_record, foreign_lock) in &runs {
        let record_path = t.bg.record_path(id);
        write_json(
            &record_path,
            &planted_record(&t, id, status.clone(), &decoy),
        );
        let lock = t.state().join(format!("{id}.lock"));
        std::fs::write(&lock, b"").unwrap();
        if *foreign_record {
            chown(&record_path, NOBODY);
        }
        if *foreign_lock {
            chown(&lock, NOBODY);
        }
    }

    let stderr = t.sweep();
    assert!(decoy.alive(), "the sweep killed a planted group: {stderr}");
    assert!(
        way.received().is_empty(),
        "a planted record was told: {:#?}",
        way.received()
    );
    for (id, ..) in &runs {
        assert!(
            !t.bg.record_path(id).exists(),
            "{id} is still a record: {stderr}"
        );
        assert!(
            t.state().join(format!("{id}.damaged")).exists(),
            "{id} was not set aside: {:?} {stderr}",
            names(t.state())
        );
    }
    assert!(stderr.contains(&format!("uid {NOBODY}")), "{stderr}");
    // And the next sweep has nothing more to say about them.
    t.sweep();
    assert!(decoy.alive());
    assert!(way.received().is_empty());
}

#[test]
fn a_stop_request_is_never_a_link() {
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.bg.serve(&Flags::default()).start();
    let mark = t.bg.marker();
    let id = start(&mut serve, procs_args("linger", &mark, 120));
    let linger = wait_for_role(&mark, "linger", ANSWER);
    // `<id>.stop` made a link to a file outside: creating "the stop request" would create
    // that file, and a link was taken for a request.
    let target = t.bg.setup.path("written-through-the-link");
    std::os::unix::fs::symlink(&target, t.state().join(format!("{id}.stop"))).unwrap();
    stays_alive(
        linger.pid,
        Duration::from_millis(1500),
        "a run whose stop is a link",
    );
    assert_eq!(t.bg.record(&id).unwrap()["status"]["state"], "running");

    let run = stopped_run(&stop(&mut serve, &id));
    assert_eq!(run["state"], "stopped", "{run}");
    assert!(
        !exists(&target),
        "the stop went through the link to {target:?}"
    );
    let stop_file = t.state().join(format!("{id}.stop"));
    assert!(
        std::fs::symlink_metadata(&stop_file).is_ok_and(|m| m.is_file()),
        "the link was not replaced by a request of the user's"
    );
    wait_gone(&mark, ANSWER);
    wait_no_supervisor(&id, ANSWER);
}

#[test]
fn a_way_in_served_by_another_user_is_not_told() {
    if !can_be_nobody("the squatted way in") {
        return;
    }
    let t = Tell::new(Sandbox::Passthrough);
    // A folder everyone may write, where another user got to the socket's name first.
    chmod(t.bg.setup.root.path(), 0o755);
    let shared = t.bg.setup.path("shared");
    std::fs::create_dir(&shared).unwrap();
    chmod(&shared, 0o1777);
    let socket = shared.join("way-in.sock");
    let got = shared.join("got.log");
    let mut squatter = Squatter(
        as_nobody(Path::new(env!("CARGO_BIN_EXE_lnk-test-listen")))
            .arg(&socket)
            .arg(&got)
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    );
    assert!(
        poll(ANSWER, || socket.exists()),
        "the squatter never listened"
    );

    let (socket_flag, keyring) = (path_str(&socket), path_str(&t.keyring));
    let mut serve =
        t.bg.serve(&Flags::default())
            .flags(&[
                "--way-in",
                &socket_flag,
                "--as",
                AGENT,
                "--keyring",
                &keyring,
            ])
            .start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "echo secret"]}),
    );
    let record = t.wait_done(&id);
    assert_eq!(record["telling"]["told"], false, "{record}");
    assert_eq!(record["telling"]["attempts"], 1, "{record}");
    // A sweep does not tell it either.
    t.sweep();
    let seen = std::fs::read_to_string(&got).unwrap_or_default();
    assert!(seen.is_empty(), "the other user's way in got: {seen}");
    let log = std::fs::read_to_string(t.state().join(format!("{id}.log"))).unwrap();
    assert!(log.contains(&format!("uid {NOBODY}")), "{log}");
    squatter.0.kill().unwrap();
}

/// The other user's listener, killed however the test ends.
struct Squatter(Child);

impl Drop for Squatter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A process holding `start.lock` as a run that could reach it would: `flock` on it, then
/// sleeping. Killed and reaped when dropped.
struct Holder(Child);

impl Holder {
    fn start(lock: &Path) -> Holder {
        let child = Command::new("flock")
            .arg("--exclusive")
            .arg(lock)
            .args(["sleep", "120"])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let held = poll(ANSWER, || {
            Command::new("flock")
                .args(["--nonblock", "--shared"])
                .arg(lock)
                .arg("true")
                .status()
                .is_ok_and(|s| !s.success())
        });
        assert!(held, "the holder never took {lock:?}");
        Holder(child)
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn stop_and_remove_state_finish_whatever_holds_start_lock() {
    for verb in ["stop", "remove"] {
        let t = Tell::new(Sandbox::Passthrough);
        let mut serve = t.bg.serve(&Flags::default()).start();
        let mark = t.bg.marker();
        let id = start(&mut serve, procs_args("linger", &mark, 120));
        wait_for_role(&mark, "linger", ANSWER);
        let mut holder = Holder::start(&t.state().join("start.lock"));

        let out = supervise_cli(&[verb, "--state", &path_str(t.state())], CLI);
        assert!(
            out.status.success(),
            "{verb} --state failed: {}",
            out.stderr
        );
        let ended = holder.0.try_wait().unwrap();
        assert!(ended.is_some(), "the holder of start.lock still runs");
        wait_gone(&mark, ANSWER);
        wait_no_supervisor(&id, ANSWER);
        if verb == "remove" {
            assert!(!exists(t.state()), "{:?}", names(t.state()));
        } else {
            assert_eq!(t.bg.record(&id).unwrap()["status"]["state"], "stopped");
        }
    }
}

/// A supervisor that refuses its state folder (made open to others after `serve` started)
/// says why in the run's log, which `start` opened for it: nothing is run, and a person
/// reading `<id>.log` learns the cause and the fix.
#[test]
fn a_supervisor_that_refuses_its_folder_says_why_in_the_runs_log() {
    let t = Tell::new(Sandbox::Passthrough);
    let mut serve = t.bg.serve(&Flags::default()).start();
    // One run first, so that the folder is made (and checked by serve) before it opens up.
    let first = start(&mut serve, json!({"program": "sh", "args": ["-c", "true"]}));
    t.wait_done(&first);
    chmod(t.state(), 0o770);
    let marker = t.bg.marker();
    let id = start(&mut serve, procs_args("linger", &marker, 60));
    let log = t.state().join(format!("{id}.log"));
    let mut seen = String::new();
    let said = poll(ANSWER, || {
        seen = std::fs::read_to_string(&log).unwrap_or_default();
        seen.contains("chmod 700")
    });
    chmod(t.state(), 0o700);
    assert!(said, "the run's log does not say why: {seen:?}");
    wait_no_supervisor(&id, ANSWER);
    assert!(
        lnk_tests::procs::with_marker(&marker).is_empty(),
        "the run ran from a refused folder"
    );
}
