//! A world for the sandbox check and the hostile payloads: a test folder with the files folder,
//! a state folder that holds a `start.lock` and a record, a keyring with the agent's key, and
//! a way in that listens, all outside `--files`, as a real agent's would be. It can be made
//! for `nobody` (uid 65534), with everything owned by that user and the folders above it
//! open to it, to run serve as an ordinary user while the tests run as root.
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::bins::link_run;
use crate::bins::link_supervise;
use crate::runs::{Bg, Flags};
use crate::sandbox::{Sandbox, bwrap_line, path_str};
use crate::setup::ServeBuilder;

/// The agent whose key the keyring holds.
pub const AGENT: &str = "agent-1";

/// `nobody`.
pub const NOBODY: u32 = 65534;

/// Whether this process runs as root (as the tests do in CI).
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The users a test runs serve as: root, and `nobody` when the tests can become it.
pub fn users() -> Vec<Option<u32>> {
    if running_as_root() {
        vec![None, Some(NOBODY)]
    } else {
        eprintln!("note: not root, so serve runs only as this user (no `nobody` half)");
        vec![None]
    }
}

/// The test's folder and its agent's things. (The bridge is dropped first, while its socket
/// is still there to wake it.)
pub struct World {
    _bridge: Option<Bridge>,
    /// The folder, `files/` and `state/`.
    pub bg: Bg,
    /// The keyring folder, holding `agent-1.key` and `.pub`.
    pub keyring: PathBuf,
    /// The way in: a Unix socket a stand-in bridge listens on, answering every tell.
    pub way_in: PathBuf,
    /// The user serve runs as (`None`: this process's).
    pub user: Option<u32>,
}

impl World {
    /// A world with every folder made (`fresh`: with no keyring and no state folder yet, as
    /// on a new machine).
    pub fn new(user: Option<u32>, fresh: bool) -> World {
        let bg = Bg::new(Sandbox::Bwrap);
        let root = bg.setup.root.path().to_path_buf();
        let keyring = root.join("config/lnk/keyring");
        let bridge_dir = root.join("bridge");
        std::fs::create_dir(&bridge_dir).unwrap_or_else(|e| panic!("{bridge_dir:?}: {e}"));
        let way_in = bridge_dir.join("way-in.sock");
        let bridge = (!fresh).then(|| Bridge::listen(&way_in));
        if !fresh {
            std::fs::create_dir_all(&keyring).unwrap_or_else(|e| panic!("{keyring:?}: {e}"));
            std::fs::set_permissions(&keyring, std::fs::Permissions::from_mode(0o700))
                .unwrap_or_else(|e| panic!("{keyring:?}: {e}"));
            let out = Command::new(link_supervise())
                .args(["keygen", "--keyring", &path_str(&keyring), "--as", AGENT])
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("starting keygen: {e}"));
            assert!(out.status.success(), "keygen: {out:?}");
            let state = &bg.state;
            std::fs::create_dir(state).unwrap_or_else(|e| panic!("{state:?}: {e}"));
            std::fs::set_permissions(state, std::fs::Permissions::from_mode(0o700))
                .unwrap_or_else(|e| panic!("{state:?}: {e}"));
            for (name, text) in [("start.lock", ""), ("abcdefghijkl0123.json", "{}")] {
                std::fs::write(state.join(name), text)
                    .unwrap_or_else(|e| panic!("{state:?}/{name}: {e}"));
            }
        }
        if let Some(uid) = user {
            // Everything of the world is the user's, and the folders above it let it pass.
            std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("{root:?}: {e}"));
            chown_all(&root, uid);
        }
        World {
            bg,
            keyring,
            way_in,
            _bridge: bridge,
            user,
        }
    }

    /// The test's folder.
    pub fn root(&self) -> &Path {
        self.bg.setup.root.path()
    }

    /// The files folder.
    pub fn files(&self) -> &Path {
        &self.bg.setup.files
    }

    /// `serve` with the state folder, the way in, the agent and the keyring, as the world's
    /// user, under `sandbox`.
    pub fn serve(&self, sandbox: Vec<String>) -> ServeBuilder<'_> {
        let keyring = path_str(&self.keyring);
        let way_in = path_str(&self.way_in);
        let mut builder = self
            .bg
            .serve(&Flags::default())
            .flags(&["--way-in", &way_in, "--as", AGENT, "--keyring", &keyring])
            .sandbox(sandbox);
        if let Some(uid) = self.user {
            builder = builder.run_as(uid);
        }
        builder
    }

    /// The README's recommended line for this world's files folder (nothing added).
    pub fn recommended(&self) -> Vec<String> {
        crate::readme::recommended_sandbox(self.files(), &[])
    }

    /// The tests' bubblewrap line (the recommended one, with the helpers visible), with `edit`
    /// applied to its elements.
    pub fn line_with(&self, edit: impl FnOnce(&mut Vec<String>)) -> Vec<String> {
        let mut line = bwrap_line(self.files(), &[crate::bins::helpers_dir()]);
        edit(&mut line);
        line
    }

    /// Runs `lnk-link-run <subcommand>` with the flags of `builder` (as the world's user, in
    /// the test's folder), to its end.
    pub fn run(&self, subcommand: &str, builder: &ServeBuilder<'_>) -> Output {
        let mut argv = builder.argv();
        argv[0] = OsString::from(subcommand);
        let mut command = Command::new(link_run());
        if let Some(uid) = self.user {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(uid);
        }
        let mut child = command
            .args(&argv)
            .envs(builder.envs().iter().map(|(k, v)| (k, v)))
            .current_dir(self.root())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting `lnk-link-run {subcommand}`: {e}"));
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while child
            .try_wait()
            .unwrap_or_else(|e| panic!("waiting for `lnk-link-run {subcommand}`: {e}"))
            .is_none()
        {
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("`lnk-link-run {subcommand}` did not end within 60 s: {argv:?}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("reading `lnk-link-run {subcommand}`'s output: {e}"))
    }
}

/// Gives `path` and everything below it to `uid` (and the group of the same number).
pub fn chown_all(path: &Path, uid: u32) {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid))
        .unwrap_or_else(|e| panic!("{path:?}: {e}"));
    if path.is_dir() && !path.is_symlink() {
        let entries = std::fs::read_dir(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        for entry in entries {
            chown_all(
                &entry.unwrap_or_else(|e| panic!("{path:?}: {e}")).path(),
                uid,
            );
        }
    }
}

/// A stand-in bridge: answers every line on its socket with a `result`, until dropped.
pub struct Bridge {
    path: PathBuf,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Bridge {
    fn listen(path: &Path) -> Bridge {
        use std::io::{BufRead, BufReader, Write};
        use std::sync::atomic::Ordering;
        let listener = UnixListener::bind(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopping = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                let mut line = String::new();
                if let Ok(reader) = stream.try_clone() {
                    let _ = BufReader::new(reader).read_line(&mut line);
                }
                let _ = stream.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
            }
        });
        Bridge {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the accept up so that the thread sees the flag; if the socket is gone, the
        // thread is left to end with the test process.
        if std::os::unix::net::UnixStream::connect(&self.path).is_ok()
            && let Some(thread) = self.thread.take()
        {
            let _ = thread.join();
        }
    }
}
