//! What a build does with the network, under the recommended line, through the proxy: `curl`
//! plain and through a `CONNECT` tunnel, Python's `urllib`, `git clone` over HTTP, `pip
//! download` from a simple index, and a tunnel carrying bytes that are no HTTP at all; a host
//! not on the list refused and named in the answer; a connection without the proxy going
//! nowhere. Warm and cold, as root and as `nobody`.

use serde_json::{Value, json};

use lnk_tests::results::text;
use lnk_tests::sandbox::Sandbox;

use super::world::{HELLO, NOBODY, README, World, network, refused, stdout_ok, usable};

mod under_the_recommended_line {
    lnk_tests::sandbox_test!(as_root, as_root, Bwrap, warm);
    lnk_tests::sandbox_test!(as_root_cold, as_root, Bwrap, cold);
    lnk_tests::sandbox_test!(as_nobody, as_nobody, Bwrap, warm);
    lnk_tests::sandbox_test!(as_nobody_cold, as_nobody, Bwrap, cold);
}

fn as_root(sandbox: Sandbox) {
    if usable() {
        fetches(sandbox, None);
    }
}

fn as_nobody(sandbox: Sandbox) {
    if usable() {
        fetches(sandbox, Some(NOBODY));
    }
}

/// A `python3 -c` call.
fn python(code: &str) -> Value {
    json!({"program": "python3", "args": ["-c", code]})
}

/// Opens a tunnel to `host:port` through the proxy named by `HTTPS_PROXY`, sends bytes that
/// are no HTTP, and prints what came back.
const TUNNEL: &str = r#"
import os, socket, sys
proxy = os.environ["HTTPS_PROXY"].split("//")[1]
host, port = proxy.rsplit(":", 1)
s = socket.create_connection((host, int(port)), timeout=10)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (sys.argv[1], sys.argv[1])).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
assert head.startswith(b"HTTP/1.1 200"), head
payload = bytes(range(256)) * 64
s.sendall(payload)
s.shutdown(socket.SHUT_WR)
back = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    back += chunk
print("echoed" if back == payload else "changed: %d bytes" % len(back))
"#;

fn fetches(sandbox: Sandbox, user: Option<u32>) {
    let world = World::new(sandbox, user);
    let (r, f, e) = (world.registry.port(), world.forge.port(), world.echo.port());
    let mut serve = world.serve(&world.rules()).start();

    // curl, plain HTTP with an absolute URI.
    let hello = format!("http://registry.test:{r}/hello");
    let result = serve.call(json!({"program": "curl", "args": ["-sS", "--fail", &hello]}));
    assert_eq!(stdout_ok(&result), HELLO);
    let figures = network(&result);
    assert_eq!(figures["connections"], 1, "{figures}");
    assert!(
        figures["bytes_in"].as_u64() > Some(HELLO.len() as u64),
        "{figures}"
    );
    assert!(figures["bytes_out"].as_u64() > Some(0), "{figures}");
    assert_eq!(figures["refused"], json!([]));
    assert!(
        !text(&result).contains("refused:"),
        "nothing refused, nothing said: {}",
        text(&result)
    );

    // curl through a CONNECT tunnel (as https goes).
    let result =
        serve.call(json!({"program": "curl", "args": ["-sS", "--fail", "--proxytunnel", &hello]}));
    assert_eq!(stdout_ok(&result), HELLO);
    assert_eq!(network(&result)["connections"], 1);

    // Python's urllib.
    let code = format!(
        "import urllib.request; print(urllib.request.urlopen('{hello}').read().decode(), end='')"
    );
    assert_eq!(stdout_ok(&serve.call(python(&code))), HELLO);

    // git clone over HTTP (a repository served dumb).
    let repo = format!("http://forge.test:{f}/repo.git");
    let result = serve.call(json!({"program": "git", "args": ["clone", "-q", &repo, "cloned"]}));
    stdout_ok(&result);
    let cloned = std::fs::read_to_string(world.files().join("cloned/README")).unwrap();
    assert_eq!(cloned, README);
    assert!(network(&result)["connections"].as_u64() >= Some(2));

    // pip download from a simple index.
    let index = format!("http://registry.test:{r}/simple/");
    let result = serve.call(json!({"program": "python3", "args": [
        "-m", "pip", "download", "--no-cache-dir", "--disable-pip-version-check", "--no-deps",
        "--index-url", &index, "--trusted-host", "registry.test", "--dest", "wheels", "lnk-demo"
    ]}));
    assert_eq!(
        lnk_tests::results::structured(&result)["exit_code"],
        0,
        "{}",
        text(&result)
    );
    assert!(
        world
            .files()
            .join("wheels/lnk_demo-1.0-py3-none-any.whl")
            .is_file(),
        "{}",
        text(&result)
    );

    // A tunnel carries anything, both ways.
    let echo = format!("forge.test:{e}");
    let result = serve.call(json!({"program": "python3", "args": ["-c", TUNNEL, &echo]}));
    assert_eq!(stdout_ok(&result), "echoed\n");
    let figures = network(&result);
    assert_eq!(figures["bytes_out"], 256 * 64, "{figures}");
    assert_eq!(figures["bytes_in"], 256 * 64, "{figures}");

    // A host not on the list: refused, and named in the answer.
    let before = world.registry.requests().len();
    let unlisted = format!("http://unlisted.test:{r}/hello");
    let result = serve.call(json!({"program": "curl", "args": ["-sS", "--fail", &unlisted]}));
    assert_ne!(lnk_tests::results::structured(&result)["exit_code"], 0);
    assert!(
        refused(&result, "unlisted.test", r, "not on the allow-list"),
        "{}",
        text(&result)
    );
    assert_eq!(network(&result)["connections"], 0);

    // Without the proxy, nowhere: the sandbox's loopback is its own.
    for url in [format!("http://127.0.0.1:{r}/hello"), hello.clone()] {
        let result = serve.call(json!({"program": "curl", "args": [
            "-sS", "--noproxy", "*", "--max-time", "5", &url
        ]}));
        assert_ne!(
            lnk_tests::results::structured(&result)["exit_code"],
            0,
            "{}",
            text(&result)
        );
    }
    assert_eq!(
        world.registry.requests().len(),
        before,
        "the registry saw nothing of the refused or direct tries: {:?}",
        world.registry.requests()
    );
    let stderr = serve.stderr();
    assert!(!stderr.contains("ERROR"), "{stderr}");
}
