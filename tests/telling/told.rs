//! Telling a run's end through the way in: told exactly once with a valid signature and the
//! right `from`, `thread`, `hops` and run; a way in that is down at the end is told by the next
//! sweep that finds it up; an `error` answer stays told and is not retried. And `keygen`.
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::disk::{CLI, Tell, supervise_cli};
use crate::wayin::{AGENT, Answer, Told, keygen};
use lnk_tests::procs::poll;
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::serve::ANSWER;
use lnk_tests::setup::Setup;
use lnk_tests::tools::{THREAD, is_rfc3339, listed, meta, start, started, tool};

both_sandboxes!(
    a_run_is_told_once,
    a_way_in_down_at_the_end_is_told_by_the_next_sweep,
    an_error_answer_stays_told,
    a_way_in_that_never_answers_is_retried,
    a_way_in_that_drips_or_never_accepts_cannot_hold_a_supervisor,
    with_a_way_in_a_start_needs_a_conversation,
);

/// The one message about run `id`, checked: valid, from the run, about the run.
pub fn the_message_about(got: &[Told], id: &str) -> Value {
    let about: Vec<&Told> = got
        .iter()
        .filter(|t| t.body["from"] == format!("run:{id}"))
        .collect();
    assert_eq!(about.len(), 1, "one message about {id}: {got:#?}");
    let told = about[0];
    told.assert_valid();
    assert_eq!(told.agent, AGENT, "{:?}", told.request);
    assert_eq!(told.body["run"]["id"], id, "{}", told.body);
    told.body.clone()
}

fn a_run_is_told_once(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let way = t.way_in(Answer::Result);
    let mut serve = t.serve(&Flags::default()).start();
    let args = json!(["-c", "printf 'hello\\n'; exit 3"]);
    // The call is one hop deep; the message carries two.
    let result = tool(
        &mut serve,
        "start",
        json!({"program": "sh", "args": args}),
        Some(meta(Some(1))),
    );
    let id = started(&result);
    way.wait_for(1, ANSWER);
    let record = t.wait_done(&id);
    let got = way.received();
    assert_eq!(got.len(), 1, "exactly one message: {got:#?}");
    let body = the_message_about(&got, &id);

    assert_eq!(body["from"], format!("run:{id}"), "{body}");
    assert_eq!(body["thread"], THREAD, "{body}");
    assert_eq!(body["hops"], 2, "hops is the call's plus one: {body}");
    assert!(is_rfc3339(&body["at"]), "{body}");
    let text = body["text"].as_str().unwrap_or_default();
    assert!(
        text.contains(&id) && !text.contains('\n'),
        "one line naming the run: {text:?}"
    );
    let run = &body["run"];
    assert_eq!(run["program"], "sh", "{run}");
    assert_eq!(run["args"], args, "{run}");
    assert_eq!(run["dir"], ".", "{run}");
    assert_eq!(run["state"], "exited", "{run}");
    assert_eq!(run["exit_code"], 3, "{run}");
    assert_eq!(run["signal"], Value::Null, "{run}");
    assert_eq!(run["output_bytes"], 6, "{run}");
    assert_eq!(run["dropped_bytes"], 0, "{run}");
    assert!(is_rfc3339(&run["started_at"]), "{run}");
    assert!(is_rfc3339(&run["ended_at"]), "{run}");

    // On disk and in `list`: told, after one try; `list` shows the run the message carried.
    assert_eq!(record["telling"]["told"], true, "{record}");
    assert_eq!(record["telling"]["attempts"], 1, "{record}");
    let listed = listed(&mut serve, &id);
    assert_eq!(listed["told"], true, "{listed}");
    for key in listed.as_object().unwrap().keys().filter(|k| *k != "told") {
        assert_eq!(
            listed[key], run[key],
            "`{key}` as list shows it: {listed} vs {run}"
        );
    }

    // A second sweep sends nothing more.
    t.sweep();
    assert_eq!(way.received().len(), 1, "{:#?}", way.received());
    assert_eq!(t.bg.record(&id).unwrap()["telling"], record["telling"]);
}

fn a_way_in_down_at_the_end_is_told_by_the_next_sweep(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let mut serve = t.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "exit 0"]}),
    );
    // Nothing listens: no socket at all.
    let record = t.wait_done(&id);
    assert_eq!(record["status"]["state"], "exited", "{record}");
    assert_eq!(record["telling"]["told"], false, "{record}");
    assert_eq!(record["telling"]["attempts"], 1, "{record}");

    // A socket that refuses: bound once, no one listening any more.
    drop(UnixListener::bind(&t.socket).unwrap());
    t.sweep();
    let record = t.bg.record(&id).unwrap();
    assert_eq!(record["telling"]["told"], false, "refused: {record}");
    assert_eq!(record["telling"]["attempts"], 2, "{record}");
    std::fs::remove_file(&t.socket).unwrap();

    // The way in comes up: the next sweep tells, once.
    let way = t.way_in(Answer::Result);
    t.sweep();
    let got = way.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    let body = the_message_about(&got, &id);
    assert_eq!(body["run"]["state"], "exited", "{body}");
    assert_eq!(body["thread"], THREAD, "{body}");
    assert_eq!(body["hops"], 1, "{body}");
    let record = t.bg.record(&id).unwrap();
    assert_eq!(record["telling"]["told"], true, "{record}");
    assert_eq!(record["telling"]["attempts"], 3, "{record}");

    t.sweep();
    assert_eq!(way.received().len(), 1, "told once: {:#?}", way.received());
}

fn an_error_answer_stays_told(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let way = t.way_in(Answer::Error);
    let mut serve = t.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "exit 0"]}),
    );
    let record = t.wait_done(&id);
    let got = way.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    the_message_about(&got, &id);
    assert_eq!(
        record["telling"]["told"], true,
        "an error answer stays told: {record}"
    );
    assert_eq!(record["telling"]["attempts"], 1, "{record}");
    // The error is logged, in the supervisor's log.
    let log_path = t.state().join(format!("{id}.log"));
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let logged = poll(ANSWER, || {
        log().contains("the stand-in way in refuses this message")
    });
    assert!(logged, "the error answer is not logged: {}", log());

    // No retry follows.
    t.sweep();
    assert_eq!(way.received().len(), 1, "{:#?}", way.received());
    let again = t.bg.record(&id).unwrap();
    assert_eq!(again["telling"], record["telling"], "{again}");
}

fn a_way_in_that_never_answers_is_retried(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let silent = t.way_in(Answer::Silent);
    let mut serve = t.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "exit 0"]}),
    );
    silent.wait_for(1, ANSWER);
    let asked = Instant::now();
    // The supervisor gives up after its 10 s, untold.
    let record = t.wait_done(&id);
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(20),
        "the supervisor waited {waited:?} for an answer"
    );
    assert_eq!(record["telling"]["told"], false, "timed out: {record}");
    assert_eq!(record["telling"]["attempts"], 1, "{record}");
    drop(silent);

    let way = t.way_in(Answer::Result);
    t.sweep();
    let got = way.received();
    assert_eq!(got.len(), 1, "{got:#?}");
    the_message_about(&got, &id);
    assert_eq!(t.bg.record(&id).unwrap()["telling"]["told"], true);
    t.sweep();
    assert_eq!(way.received().len(), 1, "{:#?}", way.received());
}

/// The stand-in is no rubber stamp: it accepts a message signed with the agent's key and
/// refuses one signed with another key, or whose body was changed after signing.
#[test]
fn the_stand_in_verifies_signatures() {
    use base64::Engine;
    use ed25519_dalek::{Signer, SigningKey};
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;

    let setup = Setup::new(Sandbox::Passthrough);
    let keyring = setup.path("keyring");
    keygen(&keyring, AGENT);
    let way = crate::wayin::WayIn::start(&setup.path("way-in.sock"), &keyring, Answer::Result);
    let seed = std::fs::read_to_string(keyring.join(format!("{AGENT}.key"))).unwrap();
    let ours = SigningKey::from_bytes(&crate::wayin::decode_hex32(seed.trim()).unwrap());
    let theirs = SigningKey::from_bytes(&[7u8; 32]);
    let body = json!({"from": "run:abcdefghijkl", "thread": THREAD, "hops": 1}).to_string();
    let send = |key: &SigningKey, signed: &str, sent: &str| {
        let signature = base64::engine::general_purpose::STANDARD
            .encode(key.sign(signed.as_bytes()).to_bytes());
        let line = json!({"jsonrpc": "2.0", "id": 1, "method": "tell",
            "params": {"agent": AGENT, "body": sent, "signature": signature}});
        let mut stream = UnixStream::connect(setup.path("way-in.sock")).unwrap();
        stream.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut answer = String::new();
        BufReader::new(stream).read_line(&mut answer).unwrap();
        serde_json::from_str::<Value>(&answer).unwrap()
    };
    assert_eq!(send(&ours, &body, &body)["result"], json!({}));
    send(&theirs, &body, &body);
    let changed = body.replace("\"hops\":1", "\"hops\":9");
    assert_ne!(changed, body);
    send(&ours, &body, &changed);
    let got = way.received();
    assert_eq!(got.len(), 3, "{got:#?}");
    got[0].assert_valid();
    for bad in &got[1..] {
        let problem = bad.problem.as_deref().unwrap_or_default();
        assert!(problem.contains("does not verify"), "{bad:#?}");
    }
}

/// `keygen` writes `<agent>.key` (0600) and `<agent>.pub`, and never overwrites them.
#[test]
fn keygen_writes_a_pair_and_never_overwrites() {
    let setup = Setup::new(Sandbox::Passthrough);
    let keyring = setup.path("keyring");
    keygen(&keyring, "ada");
    let key = keyring.join("ada.key");
    let public = keyring.join("ada.pub");
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the key's mode is {mode:o}");
    let before = (
        std::fs::read(&key).unwrap(),
        std::fs::read(&public).unwrap(),
    );

    let ring = path_str(&keyring);
    let out = supervise_cli(&["keygen", "--keyring", &ring, "--as", "ada"], CLI);
    assert!(!out.status.success(), "keygen overwrote a key: {out:?}");
    assert!(
        out.stderr.contains("ada.key") && out.stderr.contains("exists"),
        "{}",
        out.stderr
    );
    let after = (
        std::fs::read(&key).unwrap(),
        std::fs::read(&public).unwrap(),
    );
    assert_eq!(before, after, "the key pair changed");

    // Only the public key there: still refused.
    std::fs::remove_file(&key).unwrap();
    let out = supervise_cli(&["keygen", "--keyring", &ring, "--as", "ada"], CLI);
    assert!(
        !out.status.success(),
        "keygen overwrote a public key: {out:?}"
    );
    assert!(!key.exists(), "a key was written beside an old public key");

    // Not an agent id: refused, nothing written.
    let out = supervise_cli(&["keygen", "--keyring", &ring, "--as", "../x"], CLI);
    assert!(!out.status.success(), "{out:?}");
    assert!(!setup.path("x.key").exists() && !keyring.join("../x.key").exists());
}

/// The 10 s limit is for the whole exchange: a way in that answers one byte every second, or
/// one that never accepts the connection (its queue full), cannot keep a supervisor — and so
/// the run's place under `--background` — beyond it.
fn a_way_in_that_drips_or_never_accepts_cannot_hold_a_supervisor(sandbox: Sandbox) {
    use std::io::{Read, Write};
    let t = Tell::new(sandbox);
    // First a way in that accepts, reads the line, then drips a long answer.
    let listener = UnixListener::bind(&t.socket).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let dripping = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let mut byte = [0u8; 1];
            while conn.read(&mut byte).is_ok_and(|n| n == 1) && byte[0] != b'\n' {}
            let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
            for b in answer.iter().chain(b"\n") {
                if stop.load(std::sync::atomic::Ordering::SeqCst)
                    || conn.write_all(std::slice::from_ref(b)).is_err()
                {
                    return;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    let mut serve = t.serve(&Flags::default()).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "exit 0"]}),
    );
    let asked = Instant::now();
    let record = t.wait_done(&id);
    lnk_tests::procs::wait_no_supervisor(&id, Duration::from_secs(20));
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(16),
        "the supervisor stayed {waited:?}"
    );
    assert_eq!(
        record["telling"]["told"], false,
        "a partial answer is no answer: {record}"
    );
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    dripping.join().unwrap();
    std::fs::remove_file(&t.socket).unwrap();

    // Then one that never accepts: a backlog of none, taken by a connection of the test's.
    let fd = rustix::net::socket(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::STREAM,
        None,
    )
    .unwrap();
    let address = rustix::net::SocketAddrUnix::new(&t.socket).unwrap();
    rustix::net::bind(&fd, &address).unwrap();
    rustix::net::listen(&fd, 0).unwrap();
    let mut fillers = Vec::new();
    for _ in 0..4 {
        let filler = rustix::net::socket_with(
            rustix::net::AddressFamily::UNIX,
            rustix::net::SocketType::STREAM,
            rustix::net::SocketFlags::NONBLOCK,
            None,
        )
        .unwrap();
        if rustix::net::connect(&filler, &address).is_ok() {
            fillers.push(filler);
        }
    }
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "exit 0"]}),
    );
    let asked = Instant::now();
    let record = t.wait_done(&id);
    lnk_tests::procs::wait_no_supervisor(&id, Duration::from_secs(20));
    let waited = asked.elapsed();
    assert!(
        waited < Duration::from_secs(16),
        "the supervisor stayed {waited:?}"
    );
    assert_eq!(record["telling"]["told"], false, "{record}");
    drop(fillers);
    drop(fd);
}

/// With a way in, a run's end is told to the call's conversation: a start without one is
/// refused (and runs nothing), as with an empty one.
fn with_a_way_in_a_start_needs_a_conversation(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let _way = t.way_in(Answer::Result);
    let mut serve = t.serve(&Flags::default()).start();
    let arguments = json!({"program": "sh", "args": ["-c", "exit 0"]});
    for meta in [
        None,
        Some(json!({})),
        Some(json!({"link.local/thread": ""})),
        Some(json!({"link.local/hops": 0})),
    ] {
        let result = tool(&mut serve, "start", arguments.clone(), meta.clone());
        assert_eq!(result["isError"], true, "{meta:?}: {result}");
        let why = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(why.contains("link.local/thread"), "{meta:?}: {why}");
    }
    assert!(
        t.bg.record_ids().is_empty(),
        "a refused start wrote a record"
    );
    // With one, it starts.
    started(&tool(&mut serve, "start", arguments, Some(meta(None))));
}
