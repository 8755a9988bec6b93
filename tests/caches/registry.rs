//! A stand-in package registry for cargo on 127.0.0.1: a sparse index with one crate,
//! `cachedep` 0.1.0, made by the test (its `.crate` packed with `tar`, its checksum from
//! `sha256sum`), served over plain HTTP until dropped. A test fetches from it into a `CARGO_HOME`
//! of its own, outside the sandbox, then stops it: the crate is then only in that registry.
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The crate the registry holds, and what its one function answers.
pub const CRATE: &str = "cachedep";
pub const GREETING: &str = "built from the user's registry";

/// The registry, serving until dropped.
pub struct StandIn {
    /// `sparse+http://127.0.0.1:<port>/index/`.
    pub index: String,
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl StandIn {
    /// Packs the crate in `work` (a folder of the test's) and serves its index and download.
    pub fn start(work: &Path) -> StandIn {
        let source = work.join(format!("{CRATE}-0.1.0"));
        std::fs::create_dir_all(source.join("src")).unwrap();
        std::fs::write(
            source.join("Cargo.toml"),
            format!("[package]\nname = \"{CRATE}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n"),
        )
        .unwrap();
        std::fs::write(
            source.join("src/lib.rs"),
            format!("pub fn greeting() -> &'static str {{\n    \"{GREETING}\"\n}}\n"),
        )
        .unwrap();
        let packed = work.join(format!("{CRATE}-0.1.0.crate"));
        let tar = Command::new("tar")
            .arg("-czf")
            .arg(&packed)
            .arg("-C")
            .arg(work)
            .arg(format!("{CRATE}-0.1.0"))
            .output()
            .unwrap();
        assert!(tar.status.success(), "tar: {tar:?}");
        let sum = Command::new("sha256sum").arg(&packed).output().unwrap();
        assert!(sum.status.success(), "sha256sum: {sum:?}");
        let cksum = String::from_utf8_lossy(&sum.stdout)
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut files: BTreeMap<String, Vec<u8>> = BTreeMap::new();
        files.insert(
            "/index/config.json".into(),
            format!("{{\"dl\":\"http://127.0.0.1:{port}/dl/{{crate}}/{{version}}/download\"}}")
                .into_bytes(),
        );
        // A crate name of four or more letters is found at its first two, then next two.
        files.insert(
            format!("/index/{}/{}/{CRATE}", &CRATE[..2], &CRATE[2..4]),
            format!(
                "{{\"name\":\"{CRATE}\",\"vers\":\"0.1.0\",\"deps\":[],\"cksum\":\"{cksum}\",\
                 \"features\":{{}},\"yanked\":false}}\n"
            )
            .into_bytes(),
        );
        files.insert(
            format!("/dl/{CRATE}/0.1.0/download"),
            std::fs::read(&packed).unwrap(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    return;
                }
                if let Ok(stream) = stream {
                    answer(stream, &files);
                }
            }
        });
        StandIn {
            index: format!("sparse+http://127.0.0.1:{port}/index/"),
            port,
            stop,
            thread: Some(thread),
        }
    }

    /// The cargo settings that name this registry `standin`.
    pub fn cargo_config(&self) -> String {
        format!("[registries.standin]\nindex = \"{}\"\n", self.index)
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Answers one request: the file at its path, or 404.
fn answer(mut stream: TcpStream, files: &BTreeMap<String, Vec<u8>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(reader) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(reader);
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    loop {
        let mut header = String::new();
        match reader.read_line(&mut header) {
            Ok(0) | Err(_) => break,
            Ok(_) if header == "\r\n" || header == "\n" => break,
            Ok(_) => {}
        }
    }
    let path = first.split_whitespace().nth(1).unwrap_or("");
    let head = |status: &str, len: usize| {
        format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n")
    };
    match files.get(path) {
        Some(body) => {
            let _ = stream.write_all(head("200 OK", body.len()).as_bytes());
            let _ = stream.write_all(body);
        }
        None => {
            let _ = stream.write_all(head("404 Not Found", 0).as_bytes());
        }
    }
}

/// A crate in `folder` that depends on the registry's crate and prints its greeting, with
/// `cargo_config` (the settings that name the registry, [`StandIn::cargo_config`]); with `poison`, its build script also writes into the
/// dependency's sources in `CARGO_HOME`'s registry (a file added, a file changed), as a hostile
/// build would, and says so.
pub fn project(folder: &Path, cargo_config: &str, poison: bool) {
    std::fs::create_dir_all(folder.join("src")).unwrap();
    std::fs::create_dir_all(folder.join(".cargo")).unwrap();
    std::fs::write(folder.join(".cargo/config.toml"), cargo_config).unwrap();
    std::fs::write(
        folder.join("Cargo.toml"),
        format!(
            "[package]\nname = \"proj\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{CRATE} = {{ version = \"0.1\", registry = \"standin\" }}\n\n\
             [workspace]\n"
        ),
    )
    .unwrap();
    std::fs::write(
        folder.join("src/main.rs"),
        format!("fn main() {{\n    println!(\"{{}}\", {CRATE}::greeting());\n}}\n"),
    )
    .unwrap();
    if poison {
        std::fs::write(folder.join("build.rs"), POISON).unwrap();
    }
}

/// The build script of a hostile build: it writes into the dependency's unpacked sources.
const POISON: &str = r#"use std::fs;
fn main() {
    let home = std::env::var("CARGO_HOME").expect("CARGO_HOME");
    let mut poisoned = 0;
    for entry in fs::read_dir(format!("{home}/registry/src")).expect("the registry's sources") {
        let dep = entry.expect("an entry").path().join("cachedep-0.1.0");
        if dep.is_dir() {
            fs::write(dep.join("poisoned.rs"), "// the agent was here\n").expect("a new file");
            let lib = dep.join("src/lib.rs");
            let mut text = fs::read_to_string(&lib).expect("the dependency's source");
            text.push_str("// poisoned\n");
            fs::write(&lib, text).expect("a changed file");
            poisoned += 1;
        }
    }
    assert_eq!(poisoned, 1, "the dependency's sources were found in the registry");
    println!("cargo::warning=the build script wrote into the registry");
}
"#;
