//! What the tests of `--net-allow` stand the network in with, all on this machine's loopback:
//! a registry or a forge ([`Site`]: static files over plain HTTP, which `curl`, `urllib`,
//! `pip` and git's dumb HTTP fetch), a host that sends back what it reads ([`Echo`], for a
//! tunnel carrying anything), and names for them ([`Names`]): a hosts file that serve reads in
//! a mount namespace of its own, so that `registry.test` resolves to 127.0.0.1 for serve's
//! proxy without naming any real registry and without touching this machine's `/etc/hosts`.
//! (`.test` is reserved for tests, RFC 6761.)

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A hosts file of the test's own, for serve's proxy to resolve names by.
#[derive(Debug, Clone)]
pub struct Names {
    path: PathBuf,
}

impl Names {
    /// Writes `entries` (name, address) as a hosts file in `dir`, readable by every user.
    pub fn new(dir: &Path, entries: &[(&str, &str)]) -> Names {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("hosts");
        let mut text = String::from("127.0.0.1 localhost\n::1 localhost\n");
        for (name, address) in entries {
            text.push_str(&format!("{address} {name}\n"));
        }
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path:?}: {e}"));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        Names { path }
    }

    /// The program and arguments that run `program argv…` with this hosts file as
    /// `/etc/hosts` (in a mount namespace of its own) and as `user` when given: `unshare`,
    /// `mount --bind`, then `setpriv` (so that the mount is made as root).
    pub fn wrap(
        &self,
        program: &Path,
        argv: &[OsString],
        user: Option<u32>,
    ) -> (PathBuf, Vec<OsString>) {
        let mut words: Vec<OsString> = [
            "--mount",
            "--propagation",
            "private",
            "--",
            "/bin/sh",
            "-c",
            "mount --bind \"$0\" /etc/hosts && exec \"$@\"",
        ]
        .map(OsString::from)
        .to_vec();
        words.push(self.path.clone().into_os_string());
        if let Some(uid) = user {
            let uid = uid.to_string();
            words.extend(
                [
                    "/usr/bin/setpriv",
                    "--reuid",
                    &uid,
                    "--regid",
                    &uid,
                    "--clear-groups",
                    "--",
                ]
                .map(OsString::from),
            );
        }
        words.push(program.as_os_str().to_owned());
        words.extend(argv.iter().cloned());
        (PathBuf::from("/usr/bin/unshare"), words)
    }
}

/// A site of static files on `127.0.0.1`, over plain HTTP/1.1, one request per connection:
/// a registry's simple index and its files, a forge's repository served dumb.
#[derive(Debug)]
pub struct Site {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
}

impl Site {
    /// Serves the files under `root` (a folder's `index.html` for the folder).
    pub fn serve(root: &Path) -> Site {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopped, root) = (Arc::clone(&requests), Arc::clone(&stop), root.to_owned());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (seen, root) = (Arc::clone(&seen), root.clone());
                std::thread::spawn(move || answer(stream, &root, &seen));
            }
        });
        Site {
            port,
            requests,
            stop,
        }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The request lines it was sent so far (`GET /path HTTP/1.1`), with any that followed a
    /// first on the same connection.
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes its accept, which then sees the stop.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Answers one connection: its first request, then notes whatever else it sends.
fn answer(stream: TcpStream, root: &Path, seen: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(reader) => reader,
        Err(_) => return,
    });
    let mut writer = stream;
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let request = line.trim_end().to_owned();
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(request.clone());
    let mut words = request.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split(['?', '#']).next().unwrap_or("");
    let body = file_of(root, path).and_then(|file| std::fs::read(file).ok());
    let (status, body) = match body {
        Some(body) => ("200 OK", body),
        None => ("404 Not Found", b"not found\n".to_vec()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: {}\r\nConnection: close\r\n\r\n",
        body.len(),
        if path.ends_with('/') || path.ends_with(".html") {
            "text/html"
        } else {
            "application/octet-stream"
        }
    );
    let _ = writer.write_all(head.as_bytes());
    if method != "HEAD" {
        let _ = writer.write_all(&body);
    }
    let _ = writer.flush();
    let _ = writer.shutdown(Shutdown::Write);
    // A second request on the same connection is noted, never answered.
    let mut rest = String::new();
    if reader.read_to_string(&mut rest).is_ok() && !rest.is_empty() {
        let next = rest.lines().next().unwrap_or_default().to_owned();
        seen.lock().unwrap_or_else(|e| e.into_inner()).push(next);
    }
}

/// The file `path` names under `root` (its `index.html` for a folder), never outside it.
fn file_of(root: &Path, path: &str) -> Option<PathBuf> {
    let mut file = root.to_path_buf();
    for component in Path::new(path.trim_start_matches('/')).components() {
        match component {
            Component::Normal(part) => file.push(part),
            Component::CurDir => {}
            _ => return None,
        }
    }
    if file.is_dir() {
        file.push("index.html");
    }
    file.is_file().then_some(file)
}

/// A host on `127.0.0.1` that sends back every byte it reads, until its peer ends.
#[derive(Debug)]
pub struct Echo {
    port: u16,
}

impl Echo {
    /// Starts it.
    pub fn start() -> Echo {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("{e}"))
            .port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                std::thread::spawn(move || {
                    let Ok(mut reader) = stream.try_clone() else {
                        return;
                    };
                    let mut writer = stream;
                    let mut buf = [0u8; 16384];
                    while let Ok(n @ 1..) = reader.read(&mut buf) {
                        if writer.write_all(&buf[..n]).is_err() {
                            return;
                        }
                    }
                    let _ = writer.shutdown(Shutdown::Write);
                });
            }
        });
        Echo { port }
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }
}

/// A registry's simple index (`<root>/simple/<name>/`) with one wheel of a package that holds
/// nothing, `lnk-demo` 1.0, made with Python's own zipfile; its file name.
pub fn simple_index(root: &Path) -> String {
    let wheel = "lnk_demo-1.0-py3-none-any.whl";
    let work = root.join("wheel-src");
    let info = work.join("lnk_demo-1.0.dist-info");
    let package = work.join("lnk_demo");
    for dir in [&info, &package] {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
    }
    let write = |path: PathBuf, text: &str| {
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("writing {path:?}: {e}"));
    };
    write(package.join("__init__.py"), "VALUE = 1\n");
    write(
        info.join("METADATA"),
        "Metadata-Version: 2.1\nName: lnk-demo\nVersion: 1.0\n",
    );
    write(
        info.join("WHEEL"),
        "Wheel-Version: 1.0\nGenerator: lnk-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    );
    write(info.join("RECORD"), "");
    let files = root.join("files");
    std::fs::create_dir_all(&files).unwrap_or_else(|e| panic!("{e}"));
    let made = std::process::Command::new("/usr/bin/python3")
        .current_dir(&work)
        .args(["-m", "zipfile", "-c"])
        .arg(files.join(wheel))
        .args(["lnk_demo", "lnk_demo-1.0.dist-info"])
        .status()
        .unwrap_or_else(|e| panic!("python3 -m zipfile: {e}"));
    assert!(made.success(), "the wheel could not be made");
    let page = root.join("simple/lnk-demo");
    std::fs::create_dir_all(&page).unwrap_or_else(|e| panic!("{e}"));
    write(
        page.join("index.html"),
        &format!("<html><body><a href=\"../../files/{wheel}\">{wheel}</a></body></html>\n"),
    );
    wheel.to_owned()
}

/// A forge's repository, `<root>/repo.git`, bare and served dumb (`git update-server-info`),
/// with one commit holding `README` = `text`.
pub fn dumb_repository(root: &Path, text: &str) {
    let work = root.join("repo-work");
    std::fs::create_dir_all(&work).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(work.join("README"), text).unwrap_or_else(|e| panic!("{e}"));
    let git = |dir: &Path, args: &[&str]| {
        let status = std::process::Command::new("/usr/bin/git")
            .current_dir(dir)
            .env("HOME", root)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args([
                "-c",
                "user.name=Link Run",
                "-c",
                "user.email=tests@link-run.test",
            ])
            .args(["-c", "init.defaultBranch=main"])
            .args(args)
            .status()
            .unwrap_or_else(|e| panic!("git {args:?}: {e}"));
        assert!(status.success(), "git {args:?} failed");
    };
    git(&work, &["init", "-q"]);
    git(&work, &["add", "README"]);
    git(&work, &["commit", "-q", "-m", "the first"]);
    git(root, &["clone", "-q", "--bare", "repo-work", "repo.git"]);
    git(&root.join("repo.git"), &["update-server-info"]);
}
