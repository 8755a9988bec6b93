//! A bad keyring — the key missing, readable by others (0644), a symbolic link, or not 64 hex
//! characters — gives a clear error naming the key file and what is wrong in the supervisor's
//! log (`<state>/<id>.log`, its stderr), never the secret; the run's end is still recorded, and
//! the way in receives nothing.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::json;

use crate::disk::Tell;
use crate::wayin::{AGENT, Answer, WayIn, keygen};
use lnk_tests::procs::poll;
use lnk_tests::runs::Flags;
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::ANSWER;
use lnk_tests::tools::start;

both_sandboxes!(
    a_missing_key_is_a_clear_error,
    a_key_readable_by_others_is_a_clear_error,
    a_key_that_is_a_link_is_a_clear_error,
    a_key_that_is_not_hex_is_a_clear_error,
);

/// Not a key, though it looks like one: 64 characters, some not hex.
const NOT_HEX: &str = "0123456789abcdefghijklmnopqrstuv0123456789abcdefghijklmnopqrstuv";

/// Starts a run that tells through `keyring`, as it was set up, and checks: its end is
/// recorded, the way in got nothing, and the supervisor's log names the key file and says each
/// of `what`; `secret` (the key file's text) appears nowhere in it, nor on serve's stderr.
fn run_with_bad_keyring(t: &Tell, keyring: &Path, what: &[&str], secret: Option<&str>) {
    let way = WayIn::start(&t.socket, keyring, Answer::Result);
    let mut serve = t.serve_with(&Flags::default(), AGENT, keyring).start();
    let id = start(
        &mut serve,
        json!({"program": "sh", "args": ["-c", "exit 0"]}),
    );
    let record = t.wait_done(&id);
    assert_eq!(record["status"]["state"], "exited", "{record}");
    assert_eq!(record["status"]["exit"], json!({"code": 0}), "{record}");
    assert!(way.received().is_empty(), "{:#?}", way.received());

    let key_file = keyring.join(format!("{AGENT}.key"));
    let key_file = key_file.to_str().unwrap();
    let log_path = t.state().join(format!("{id}.log"));
    let log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    let said = poll(ANSWER, || {
        log()
            .lines()
            .any(|line| line.contains(key_file) && what.iter().all(|w| line.contains(w)))
    });
    let logged = log();
    assert!(
        said,
        "no line names {key_file} and says {what:?}; the supervisor's log:\n{logged}"
    );
    if let Some(secret) = secret {
        let secret = secret.trim();
        for text in [logged, serve.stderr()] {
            assert!(!text.contains(secret), "the secret reached a log:\n{text}");
        }
    }
}

/// A keyring folder of the test's own, with the public key the stand-in verifies against.
fn bad_keyring(t: &Tell) -> std::path::PathBuf {
    let keyring = t.bg.setup.path("bad-keyring");
    keygen(&keyring, AGENT);
    keyring
}

fn a_missing_key_is_a_clear_error(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let keyring = bad_keyring(&t);
    std::fs::remove_file(keyring.join(format!("{AGENT}.key"))).unwrap();
    run_with_bad_keyring(&t, &keyring, &["No such file"], None);
}

fn a_key_readable_by_others_is_a_clear_error(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let keyring = bad_keyring(&t);
    let key = keyring.join(format!("{AGENT}.key"));
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let secret = std::fs::read_to_string(&key).unwrap();
    run_with_bad_keyring(&t, &keyring, &["0644", "0600"], Some(&secret));
}

fn a_key_that_is_a_link_is_a_clear_error(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let keyring = bad_keyring(&t);
    let key = keyring.join(format!("{AGENT}.key"));
    // The real key, 0600, elsewhere; the keyring's key file a link to it.
    let elsewhere = t.bg.setup.path("elsewhere.key");
    std::fs::rename(&key, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &key).unwrap();
    let secret = std::fs::read_to_string(&elsewhere).unwrap();
    run_with_bad_keyring(&t, &keyring, &["symbolic link"], Some(&secret));
}

fn a_key_that_is_not_hex_is_a_clear_error(sandbox: Sandbox) {
    let t = Tell::new(sandbox);
    let keyring = bad_keyring(&t);
    let key = keyring.join(format!("{AGENT}.key"));
    std::fs::write(&key, format!("{NOT_HEX}\n")).unwrap();
    let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "still 0600: only the content is wrong");
    run_with_bad_keyring(&t, &keyring, &["64 hex"], Some(NOT_HEX));
}
