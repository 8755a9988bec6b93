//! A stand-in for the bridge's way in: a Unix stream socket in the test's folder, served by a
//! thread of its own. For each connection it reads one JSON-RPC line, checks the `tell`
//! request's shape, verifies its signature against `<keyring>/<agent>.pub` with
//! `VerifyingKey::verify_strict`, records what it got (valid or not), and answers one line: a
//! `result`, or an `error` in [`Answer::Error`] mode. Dropping it stops the thread and removes
//! the socket. Also: key pairs made with `lnk-link-supervise keygen`.
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use base64::Engine;
use ed25519_dalek::{Signature, VerifyingKey};
use serde_json::{Value, json};

use crate::disk::supervise_cli;
use lnk_tests::procs::poll;
use lnk_tests::sandbox::path_str;

/// The agent the tests' serves tell as (`--as`).
pub const AGENT: &str = "agent-tests.1";

/// The longest a stand-in serves: far longer than any test, short enough that a forgotten one
/// cannot keep a thread forever.
const LIFETIME: Duration = Duration::from_secs(300);
/// How long one connection may take to send its line (the supervisor's own limit is 10 s).
const PER_CONNECTION: Duration = Duration::from_secs(10);
/// The longest request line read.
const MAX_LINE: u64 = 1024 * 1024;

/// How the stand-in answers a `tell`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// `{"jsonrpc":"2.0","id":1,"result":{}}`: told.
    Result,
    /// A JSON-RPC `error` answer: the bridge refuses the message.
    Error,
    /// No answer at all: the line is read, then the connection is held until the teller
    /// closes it (its time is up) or [`PER_CONNECTION`] and a little more have passed.
    Silent,
}

/// One request the stand-in got.
#[derive(Clone, Debug)]
pub struct Told {
    /// The whole request line, parsed (`Null` when it was not JSON).
    pub request: Value,
    /// `params.agent`.
    pub agent: String,
    /// `params.body`, parsed (`Null` when it was not JSON).
    pub body: Value,
    /// Whether the request had the protocol's shape and its signature verified; why not.
    pub problem: Option<String>,
}

impl Told {
    /// Fails unless the request had the protocol's shape and a valid signature.
    pub fn assert_valid(&self) {
        assert!(
            self.problem.is_none(),
            "the way in got a bad message ({:?}): {}",
            self.problem,
            self.request
        );
    }
}

/// A running stand-in way in.
pub struct WayIn {
    path: PathBuf,
    got: Arc<Mutex<Vec<Told>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl WayIn {
    /// Listens on `path` (which must not exist), verifying against the `.pub` files of
    /// `keyring`.
    pub fn start(path: &Path, keyring: &Path, answer: Answer) -> WayIn {
        let listener = UnixListener::bind(path)
            .unwrap_or_else(|err| panic!("binding the stand-in way in at {path:?}: {err}"));
        listener
            .set_nonblocking(true)
            .unwrap_or_else(|err| panic!("making the way in non-blocking: {err}"));
        let got = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (got, stop, keyring) = (Arc::clone(&got), Arc::clone(&stop), keyring.to_owned());
            std::thread::spawn(move || serve(&listener, &keyring, answer, &got, &stop))
        };
        WayIn {
            path: path.to_owned(),
            got,
            stop,
            thread: Some(thread),
        }
    }

    /// Everything received so far, in order.
    pub fn received(&self) -> Vec<Told> {
        self.got.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until at least `n` requests came, and returns all of them.
    pub fn wait_for(&self, n: usize, within: Duration) -> Vec<Told> {
        let arrived = poll(within, || self.received().len() >= n);
        let got = self.received();
        assert!(
            arrived,
            "the way in got {} messages within {within:?}, not {n}: {got:#?}",
            got.len()
        );
        got
    }
}

impl Drop for WayIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The stand-in's loop: one connection at a time, until stopped or [`LIFETIME`] is over.
fn serve(
    listener: &UnixListener,
    keyring: &Path,
    answer: Answer,
    got: &Mutex<Vec<Told>>,
    stop: &AtomicBool,
) {
    let end = Instant::now() + LIFETIME;
    while !stop.load(Ordering::Relaxed) && Instant::now() < end {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Some(told) = handle(&stream, keyring) {
                    // Recorded before the answer goes out: once the teller has its answer, the
                    // test sees the message.
                    got.lock().unwrap_or_else(|e| e.into_inner()).push(told);
                    if answer == Answer::Silent {
                        hold(&stream);
                    } else {
                        let _ = reply(&stream, answer);
                    }
                }
            }
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => panic!("the stand-in way in cannot accept: {err}"),
        }
    }
}

/// Reads one line from a connection and judges it; `None` when the teller sent nothing.
fn handle(stream: &UnixStream, keyring: &Path) -> Option<Told> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(PER_CONNECTION)).ok()?;
    stream.set_write_timeout(Some(PER_CONNECTION)).ok()?;
    let mut line = String::new();
    match BufReader::new(stream.take(MAX_LINE)).read_line(&mut line) {
        Ok(0) | Err(_) => return None,
        Ok(_) => {}
    }
    Some(judge(&line, keyring))
}

/// Parses and checks a request line.
fn judge(line: &str, keyring: &Path) -> Told {
    let request: Value = serde_json::from_str(line).unwrap_or(Value::Null);
    let params = &request["params"];
    let agent = params["agent"].as_str().unwrap_or_default().to_owned();
    let body_text = params["body"].as_str().unwrap_or_default();
    let body: Value = serde_json::from_str(body_text).unwrap_or(Value::Null);
    let problem = if !line.ends_with('\n') {
        Some("the line does not end with a newline".to_owned())
    } else if request.is_null() {
        Some("the line is not JSON".to_owned())
    } else if request["jsonrpc"] != "2.0" || request["id"] != 1 || request["method"] != "tell" {
        Some("not a JSON-RPC `tell` request with id 1".to_owned())
    } else if body.is_null() {
        Some("params.body is not a JSON text".to_owned())
    } else {
        let signature = params["signature"].as_str().unwrap_or_default();
        verify(keyring, &agent, body_text, signature).err()
    };
    Told {
        request,
        agent,
        body,
        problem,
    }
}

/// Verifies `signature` (standard padded base64) of `body` with `<keyring>/<agent>.pub`.
pub fn verify(keyring: &Path, agent: &str, body: &str, signature: &str) -> Result<(), String> {
    let agent_ok = !agent.is_empty()
        && agent.len() <= 64
        && agent
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        && !agent.starts_with(['.', '_', '-']);
    if !agent_ok {
        return Err(format!("{agent:?} is not an agent id"));
    }
    let pub_path = keyring.join(format!("{agent}.pub"));
    let text = std::fs::read_to_string(&pub_path).map_err(|e| format!("{pub_path:?}: {e}"))?;
    let public = decode_hex32(text.trim()).ok_or_else(|| format!("{pub_path:?} is not 64 hex"))?;
    let key = VerifyingKey::from_bytes(&public).map_err(|e| format!("public key: {e}"))?;
    let raw = base64::engine::general_purpose::STANDARD
        .decode(signature)
        .map_err(|e| format!("signature is not standard padded base64: {e}"))?;
    let signature = Signature::from_slice(&raw).map_err(|e| format!("signature: {e}"))?;
    key.verify_strict(body.as_bytes(), &signature)
        .map_err(|e| format!("the signature does not verify: {e}"))
}

/// Holds a connection without answering until the other side closes it (bounded).
fn hold(mut stream: &UnixStream) {
    let _ = stream.set_read_timeout(Some(PER_CONNECTION + Duration::from_secs(5)));
    let mut buf = [0u8; 256];
    while let Ok(1..) = stream.read(&mut buf) {}
}

/// Answers one line.
fn reply(mut stream: &UnixStream, answer: Answer) -> std::io::Result<()> {
    let line = match answer {
        Answer::Result => json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        Answer::Silent => return Ok(()),
        Answer::Error => json!({
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32000, "message": "the stand-in way in refuses this message"},
        }),
    };
    stream.write_all(format!("{line}\n").as_bytes())?;
    stream.flush()
}

/// 64 hex characters into 32 bytes.
pub fn decode_hex32(text: &str) -> Option<[u8; 32]> {
    let mut out = [0u8; 32];
    hex::decode_to_slice(text, &mut out).ok()?;
    Some(out)
}

/// Makes a key pair for `agent` in `keyring` with `lnk-link-supervise keygen`, checking it.
pub fn keygen(keyring: &Path, agent: &str) {
    let out = supervise_cli(
        &["keygen", "--keyring", &path_str(keyring), "--as", agent],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "keygen failed: {}", out.stderr);
    let key = std::fs::read_to_string(keyring.join(format!("{agent}.key"))).unwrap();
    let public = std::fs::read_to_string(keyring.join(format!("{agent}.pub"))).unwrap();
    assert!(decode_hex32(key.trim()).is_some(), "the key is 64 hex");
    assert!(
        decode_hex32(public.trim()).is_some(),
        "the public key is 64 hex"
    );
}
