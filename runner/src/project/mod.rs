//! The project a `serve` works in: its files folder, and with `--state` the state folder of its
//! runs. With `--files` it is fixed at start. With `--files-from roots` it is chosen once per
//! serve, from the client:
//!
//! - **Handshake era** (`initialize`): a client that declares the `roots` capability is asked
//!   `roots/list` once, after `notifications/initialized` (or at its first tool call, should
//!   that come first); the answer is matched to the request by its id. Calls that arrive
//!   before the answer wait for it, up to [`ROOTS_WAIT`] from the question; past that they are
//!   refused, saying so (a late answer still chooses the project, for later calls).
//! - **2026-07-28**: a server may not send requests; the first `tools/call` whose request
//!   declares `roots` (in its client capabilities) is answered with an `InputRequiredResult`
//!   that asks `roots/list`, and the client's retry carries the roots (`inputResponses`).
//! - A client that declares no roots (or answers an error or no roots) gets the folder serve
//!   was started in, where hosts start a stdio server.
//!
//! The folder chosen — the first root alone; further roots are neither bound nor used — is
//! checked ([`client_root::check_folder`]), its state folder made under the one given
//! ([`lnk_common::projects`]), the sandbox checked against it, and warm spares started for it,
//! before any call runs there ([`make`]). A folder refused on the way is not left for
//! another: every call answers `isError` with why and what to do, and serve keeps serving.
//!
//! `notifications/roots/list_changed` asks again (in the 2026-07-28 era: at the next call
//! that declares roots). The same first root changes nothing (Claude Code's `/add-dir` adds
//! further roots); another first root is refused until serve restarts: every later call
//! answers `isError` saying so, so nothing runs in a folder the client has left.

pub mod client_root;
mod make;
mod stand_in;

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd};
use serde_json::{Value, json};

pub use make::{Making, sandbox_checked};
pub use stand_in::stand_in;

use crate::call::CallControl;
use crate::config::Config;
use crate::mcp::protocol::{self, Era};
use crate::mcp::stdout::Writer;
use crate::sync::lock;

/// How long calls wait for the client's answer to `roots/list` before they are refused.
pub const ROOTS_WAIT: Duration = Duration::from_secs(10);
/// The key of the roots question in an `InputRequiredResult`'s `inputRequests`.
pub const ROOTS_KEY: &str = "roots";

/// The project of one `serve`, chosen once.
pub struct Projects {
    /// serve's configuration; with `--files-from roots`, each project's is made from it.
    template: Config,
    making: Making,
    state: Mutex<State>,
    /// Readable once the project is chosen or refused: what waiting calls poll.
    settled: OwnedFd,
}

/// Where the choice stands.
enum Phase {
    /// Nothing asked or given yet.
    Unknown,
    /// `roots/list` was sent with this id at this time (handshake era).
    Asking { id: Value, since: Instant },
    /// A folder was given; its project is being made.
    Making,
    /// Calls run in this project.
    Ready(Arc<Config>),
    /// Every call answers this.
    Refused(String),
}

struct State {
    phase: Phase,
    /// Whether the handshake's client declared roots; `None` before any `initialize`.
    handshake_roots: Option<bool>,
    /// The folder given (as given, before it is made canonical), once one is.
    chosen: Option<PathBuf>,
    /// A `roots/list` asked again after `notifications/roots/list_changed`: its id.
    recheck: Option<Value>,
    /// Ask again at the next 2026-07-28 call that declares roots.
    recheck_modern: bool,
    /// Why the project is refused once it is made: its first root changed meanwhile.
    changed: Option<String>,
    /// `roots/list` questions sent, for their ids.
    asked: u64,
}

/// What a `tools/call` does before it runs.
#[derive(Debug)]
pub enum Before {
    /// It runs (and waits for the project in its thread: [`Projects::wait`]).
    Run,
    /// It is answered with this `InputRequiredResult`, which asks for the client's roots.
    InputRequired(Value),
    /// Its `inputResponses` are not an answer to the roots question (-32602).
    Malformed(String),
}

/// What a client answered about its roots.
enum Given {
    /// Its first root's URI.
    Root(String),
    /// No roots, or an error: the folder serve was started in.
    None,
}

impl Projects {
    /// The project of a `serve --files`: the configuration itself, from the start.
    pub fn fixed(config: Config) -> Result<Arc<Projects>, std::io::Error> {
        let projects = Projects::new(config.clone(), Making::default())?;
        lock(&projects.state).phase = Phase::Ready(Arc::new(config));
        projects.settle();
        Ok(projects)
    }

    /// The project of a `serve --files-from roots`, chosen once the client is known.
    pub fn from_roots(template: Config, making: Making) -> Result<Arc<Projects>, std::io::Error> {
        Projects::new(template, making)
    }

    fn new(template: Config, making: Making) -> Result<Arc<Projects>, std::io::Error> {
        Ok(Arc::new(Projects {
            template,
            making,
            state: Mutex::new(State {
                phase: Phase::Unknown,
                handshake_roots: None,
                chosen: None,
                recheck: None,
                recheck_modern: false,
                changed: None,
                asked: 0,
            }),
            settled: eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?,
        }))
    }

    /// serve's configuration, the same for every project but for its folders.
    pub fn template(&self) -> &Config {
        &self.template
    }

    /// The project, when it is ready.
    pub fn ready(&self) -> Option<Arc<Config>> {
        match &lock(&self.state).phase {
            Phase::Ready(config) => Some(Arc::clone(config)),
            _ => None,
        }
    }

    /// `initialize`, whose `capabilities` say whether the client answers `roots/list`.
    pub fn initialize(&self, capabilities: Option<&Value>) {
        let declared = capabilities
            .and_then(|c| c.get("roots"))
            .is_some_and(Value::is_object);
        lock(&self.state).handshake_roots = Some(declared);
    }

    /// `notifications/initialized`: a client that declared roots is asked them now.
    pub fn initialized(self: &Arc<Self>, writer: &Writer) {
        let mut state = lock(&self.state);
        if matches!(state.phase, Phase::Unknown) && self.roots_chosen() {
            if state.handshake_roots == Some(true) {
                self.ask(&mut state, writer);
            } else {
                self.choose(&mut state, Ok(Given::None));
            }
        }
    }

    /// `notifications/roots/list_changed`: the roots are asked again, to see whether the first
    /// one is still the project's.
    pub fn list_changed(&self, writer: &Writer) {
        let mut state = lock(&self.state);
        if !self.roots_chosen() || matches!(state.phase, Phase::Unknown | Phase::Asking { .. }) {
            return;
        }
        if state.handshake_roots == Some(true) {
            state.asked += 1;
            let id = json!(format!("lnk-link-run/roots/{}", state.asked));
            state.recheck = Some(id.clone());
            writer.send(&roots_request(&id));
        } else {
            state.recheck_modern = true;
        }
    }

    /// A response from the client: the answer to a `roots/list` of ours, if its id is one.
    pub fn response(self: &Arc<Self>, id: &Value, outcome: Result<&Value, &Value>) {
        let mut state = lock(&self.state);
        let given = || match outcome {
            Ok(result) => {
                client_root::first_root(result).map(|uri| uri.map_or(Given::None, Given::Root))
            }
            Err(error) => {
                tracing::info!(
                    error = %protocol::cut_short(&error.to_string()),
                    "the client answered roots/list with an error; the folder serve was \
                     started in is the project's"
                );
                Ok(Given::None)
            }
        };
        if matches!(&state.phase, Phase::Asking { id: asked, .. } if asked == id) {
            self.choose(&mut state, given());
        } else if state.recheck.as_ref() == Some(id) {
            state.recheck = None;
            self.compare(&mut state, given());
        } else {
            tracing::debug!(id = %protocol::cut_short(&id.to_string()), "a response to no request of ours");
        }
    }

    /// Before a `tools/call` of `era` runs, which `declares_roots` (in its client capabilities)
    /// and carries `input_responses` (its `inputResponses`; both 2026-07-28 only): the roots it
    /// brings are taken, the client is asked them if the project is not known yet, or the
    /// folder serve was started in is chosen.
    pub fn before_call(
        self: &Arc<Self>,
        era: &Era,
        declares_roots: bool,
        input_responses: Option<&Value>,
        writer: &Writer,
    ) -> Before {
        if !self.roots_chosen() {
            return Before::Run;
        }
        let modern = *era == Era::Modern;
        let mut state = lock(&self.state);
        if modern && let Some(responses) = input_responses {
            let Some(answer) = responses.get(ROOTS_KEY) else {
                return Before::Malformed(format!(
                    "`inputResponses` has no `{ROOTS_KEY}`: the answer to the roots/list this \
                     server asked for"
                ));
            };
            let given = match client_root::first_root(answer) {
                Ok(uri) => uri.map_or(Given::None, Given::Root),
                Err(why) => return Before::Malformed(why),
            };
            match state.phase {
                Phase::Unknown | Phase::Asking { .. } => self.choose(&mut state, Ok(given)),
                _ => {
                    state.recheck_modern = false;
                    self.compare(&mut state, Ok(given));
                }
            }
            return Before::Run;
        }
        match state.phase {
            Phase::Unknown if modern && declares_roots => Before::InputRequired(roots_question()),
            Phase::Unknown if !modern && state.handshake_roots == Some(true) => {
                self.ask(&mut state, writer);
                Before::Run
            }
            Phase::Unknown => {
                self.choose(&mut state, Ok(Given::None));
                Before::Run
            }
            Phase::Ready(_) | Phase::Refused(_) if state.recheck_modern && declares_roots => {
                Before::InputRequired(roots_question())
            }
            _ => Before::Run,
        }
    }

    /// The project a call runs in, once it is known: waits (in the call's thread) while it is
    /// being asked or made, up to [`ROOTS_WAIT`] from the question, and while the call is not
    /// cancelled. `Err`: the line the call is refused with.
    pub fn wait(&self, control: &CallControl) -> Result<Arc<Config>, String> {
        loop {
            let wake_at = match &lock(&self.state).phase {
                Phase::Ready(config) => return Ok(Arc::clone(config)),
                Phase::Refused(why) => return Err(why.clone()),
                Phase::Asking { since, .. } => {
                    let until = *since + ROOTS_WAIT;
                    if Instant::now() >= until {
                        return Err(format!(
                            "the client did not answer roots/list within {} s, so this server \
                             does not know which project's folder to work in, and guesses none; \
                             try again (an answer that comes later is taken), or restart the \
                             server",
                            ROOTS_WAIT.as_secs()
                        ));
                    }
                    Some(until)
                }
                Phase::Making => None,
                Phase::Unknown => {
                    return Err("this server has not chosen its project (a bug: the call \
                                came before any question)"
                        .to_owned());
                }
            };
            if control.is_cancelled() {
                return Err("the call was cancelled".to_owned());
            }
            let mut fds = [
                PollFd::new(&self.settled, PollFlags::IN),
                PollFd::from_borrowed_fd(control.wake_fd(), PollFlags::IN),
            ];
            match lnk_proc::poll_until(&mut fds, wake_at) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(err) => return Err(format!("waiting for the project: {err}")),
            }
        }
    }

    /// Whether the project is the client's (`--files-from roots`).
    fn roots_chosen(&self) -> bool {
        self.template.files_from == crate::config::FilesFrom::Roots
    }

    /// Sends `roots/list` (handshake era) and waits for the answer.
    fn ask(&self, state: &mut State, writer: &Writer) {
        state.asked += 1;
        let id = json!(format!("lnk-link-run/roots/{}", state.asked));
        state.phase = Phase::Asking {
            id: id.clone(),
            since: Instant::now(),
        };
        writer.send(&roots_request(&id));
    }

    /// The project is chosen from what the client gave (or why it is refused), and made on a
    /// thread of its own, so that serve reads on meanwhile.
    fn choose(self: &Arc<Self>, state: &mut State, given: Result<Given, String>) {
        let folder = given.and_then(|given| match given {
            Given::Root(uri) => Ok((client_root::uri_path(&uri)?, "the client's first root")),
            Given::None => self
                .started_in()
                .map(|dir| (dir, "the folder serve was started in")),
        });
        let (folder, what) = match folder {
            Ok(found) => found,
            Err(why) => {
                self.refuse(state, format!("{why}; {}", client_root::WHAT_TO_DO));
                return;
            }
        };
        state.chosen = Some(folder.clone());
        state.phase = Phase::Making;
        let projects = Arc::clone(self);
        let made = move || {
            let made = make::make(&projects.template, projects.making, &folder, what);
            let mut state = lock(&projects.state);
            state.phase = match made {
                Ok(config) => {
                    tracing::info!(files = %config.files.display(), "the project's folder ({what})");
                    Phase::Ready(Arc::new(config))
                }
                Err(why) => {
                    tracing::warn!("{why}");
                    Phase::Refused(why)
                }
            };
            // A first root that changed while the project was made is refused now.
            if let Some(changed) = state.changed.take() {
                projects.refuse(&mut state, changed);
            }
            projects.settle();
        };
        let spawned = std::thread::Builder::new()
            .name("project".into())
            .spawn(made);
        if let Err(err) = spawned {
            self.refuse(
                state,
                format!(
                    "no thread to make the project on: {}",
                    lnk_common::Causes(&err)
                ),
            );
        }
    }

    /// Compares a later answer with the folder chosen: another first root is refused until
    /// serve restarts.
    fn compare(&self, state: &mut State, given: Result<Given, String>) {
        let now = match given {
            Ok(Given::Root(uri)) => client_root::uri_path(&uri).map_err(|_| uri),
            Ok(Given::None) => self.started_in().map_err(|_| "no roots".to_owned()),
            Err(why) => {
                tracing::warn!("{why}; the project stays as it is");
                return;
            }
        };
        let Some(chosen) = state.chosen.clone() else {
            return;
        };
        let same = now.as_ref().is_ok_and(|now| same_folder(now, &chosen));
        if same || matches!(state.phase, Phase::Refused(_)) {
            return;
        }
        let now = match now {
            Ok(path) => path.display().to_string(),
            Err(shown) => shown,
        };
        let why = format!(
            "the client's first root changed from {} to {now} after this server chose its \
                 project; Link Run serves one project per server, and runs nothing in a folder \
                 the client has left: restart the server to work in the new folder (Claude \
                 Code: /mcp, then reconnect link-run)",
            chosen.display()
        );
        if matches!(state.phase, Phase::Making) {
            state.changed = Some(why);
        } else {
            self.refuse(state, why);
        }
    }

    fn refuse(&self, state: &mut State, why: String) {
        tracing::warn!("{why}");
        state.phase = Phase::Refused(why);
        self.settle();
    }

    /// The folder serve was started in, as `cli` resolved it.
    fn started_in(&self) -> Result<PathBuf, String> {
        if self.template.files.as_os_str().is_empty() {
            return Err("the folder serve was started in cannot be found".to_owned());
        }
        Ok(self.template.files.clone())
    }

    fn settle(&self) {
        // A full counter (impossible here) only means it is readable already.
        let _ = rustix::io::write(self.settled.as_fd(), &1u64.to_ne_bytes());
    }
}

/// Whether two paths name one folder.
fn same_folder(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
}

/// The `roots/list` request with `id`.
fn roots_request(id: &Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "roots/list"})
}

/// The `InputRequiredResult` that asks for the client's roots (2026-07-28).
fn roots_question() -> Value {
    json!({
        "resultType": "input_required",
        "inputRequests": {ROOTS_KEY: {"method": "roots/list"}},
    })
}

#[cfg(test)]
mod tests;
