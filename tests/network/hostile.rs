//! A hostile program against the network, under the recommended line with `--net-allow`: raw
//! TCP, UDP and DNS out go nowhere; the proxy will not lead an allowed name to this machine's
//! loopback or to a private address, nor open an allowed name at an unlisted port; a second
//! request, in a tunnel or after a plain one, reaches no one the first did not; a client that
//! sends nothing is cut off.

use serde_json::json;

use lnk_tests::results::{structured, text};
use lnk_tests::sandbox::Sandbox;

use super::world::{World, network, refused, stdout_ok, usable};

mod under_the_recommended_line {
    lnk_tests::sandbox_test!(
        nothing_goes_out_but_through_the_proxy,
        nothing_goes_out_but_through_the_proxy,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        nothing_goes_out_but_through_the_proxy_cold,
        nothing_goes_out_but_through_the_proxy,
        Bwrap,
        cold
    );
    lnk_tests::sandbox_test!(
        an_allowed_name_leads_nowhere_special,
        an_allowed_name_leads_nowhere_special,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        a_second_request_reaches_no_one_new,
        a_second_request_reaches_no_one_new,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        a_slow_client_is_cut_off,
        a_slow_client_is_cut_off,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        what_a_program_asks_cannot_write_into_the_answer,
        what_a_program_asks_cannot_write_into_the_answer,
        Bwrap,
        warm
    );
}

/// Raw TCP to an address on the internet and to this machine's loopback, UDP out, and a DNS
/// look-up, from a program that does not use the proxy.
const RAW: &str = r#"
import errno, json, socket, sys
port = int(sys.argv[1])
def tcp(host, port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        return "connected"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def udp(host, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(b"x", (host, port))
        return "sent"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def dns(name):
    try:
        socket.getaddrinfo(name, 443)
        return "resolved"
    except OSError as e:
        return "failed"
print(json.dumps({
    "tcp_out": tcp("192.0.2.1", 443),
    "tcp_loopback": tcp("127.0.0.1", port),
    "udp_out": udp("192.0.2.1", 53),
    "udp_resolver": udp("9.9.9.9", 53),
    "dns": dns("lnk-no-such-name.example"),
}))
"#;

fn nothing_goes_out_but_through_the_proxy(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let r = world.registry.port();
    let mut serve = world.serve(&world.rules()).start();
    let result = serve.call(json!({"program": "python3", "args": ["-c", RAW, r.to_string()]}));
    let seen: serde_json::Value = serde_json::from_str(&stdout_ok(&result)).unwrap();
    assert_eq!(seen["tcp_out"], "ENETUNREACH", "{seen}");
    assert_eq!(seen["tcp_loopback"], "ECONNREFUSED", "{seen}");
    assert_eq!(seen["udp_out"], "ENETUNREACH", "{seen}");
    assert_eq!(seen["udp_resolver"], "ENETUNREACH", "{seen}");
    assert_eq!(seen["dns"], "failed", "{seen}");
    assert!(world.registry.requests().is_empty());
    // Nothing of it came through the proxy either.
    let figures = network(&result);
    assert_eq!(figures["connections"], 0, "{figures}");
}

fn an_allowed_name_leads_nowhere_special(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let r = world.registry.port();
    // Names that lead to this machine's loopback and to a private address, listed by name
    // only (no address listed as one opens them).
    let rules = [
        format!("loopback.test:{r}"),
        format!("private.test:{r}"),
        format!("registry.test:{r}"),
    ];
    let mut serve = world.serve(&rules).start();
    let fetch = |url: String| json!({"program": "curl", "args": ["-sS", "--max-time", "10", &url]});
    let result = serve.call(fetch(format!("http://loopback.test:{r}/hello")));
    assert!(
        refused(
            &result,
            "loopback.test",
            r,
            "resolves to 127.0.0.1, a loopback address"
        ),
        "{}",
        text(&result)
    );
    let result = serve.call(fetch(format!("http://private.test:{r}/hello")));
    assert!(
        refused(
            &result,
            "private.test",
            r,
            "resolves to 10.0.0.1, a private address"
        ),
        "{}",
        text(&result)
    );
    // An allowed name at a port not on the list, through a tunnel and plainly.
    let other = world.forge.port();
    let result = serve.call(json!({"program": "curl", "args": [
        "-sS", "--proxytunnel", "--max-time", "10", format!("http://registry.test:{other}/")
    ]}));
    assert!(
        refused(&result, "registry.test", other, "at this port"),
        "{}",
        text(&result)
    );
    // This machine's loopback asked for by number (through the proxy, which NO_PROXY would
    // have curl go around: to the sandbox's own loopback).
    let result = serve.call(json!({"program": "curl", "args": [
        "-sS", "--max-time", "10", "--noproxy", "", "--proxy", "http://127.0.0.1:3128",
        format!("http://127.0.0.1:{r}/hello")
    ]}));
    assert!(
        refused(
            &result,
            "127.0.0.1",
            r,
            "an address that is not on the allow-list"
        ),
        "{}",
        text(&result)
    );
    // The cloud metadata address, which no rule lists.
    let result = serve.call(fetch("http://169.254.169.254/latest/meta-data/".to_owned()));
    assert!(
        refused(
            &result,
            "169.254.169.254",
            80,
            "an address that is not on the allow-list"
        ),
        "{}",
        text(&result)
    );
    assert!(
        world.registry.requests().is_empty(),
        "{:?}",
        world.registry.requests()
    );
    assert!(
        world.forge.requests().is_empty(),
        "{:?}",
        world.forge.requests()
    );
}

/// A tunnel to the echo carrying a second `CONNECT`, then two plain requests on one
/// connection, the second for a host not on the list.
const SECOND: &str = r#"
import os, socket, sys
echo, first, second = sys.argv[1], sys.argv[2], sys.argv[3]
proxy = os.environ["HTTP_PROXY"].split("//")[1].rsplit(":", 1)
def connect():
    return socket.create_connection((proxy[0], int(proxy[1])), timeout=10)
s = connect()
s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % echo).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
inner = ("CONNECT %s HTTP/1.1\r\n\r\n" % second.split("/")[2]).encode()
s.sendall(inner)
back = b""
while len(back) < len(inner):
    back += s.recv(4096)
print("tunnel:", "echoed" if back == inner else back)
s = connect()
s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\nGET %s HTTP/1.1\r\nHost: y\r\n\r\n" % (first, second)).encode())
answer = b""
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    answer += chunk
print("plain:", answer.count(b"HTTP/1.1 "), "answer(s)")
"#;

fn a_second_request_reaches_no_one_new(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let (r, e) = (world.registry.port(), world.echo.port());
    let mut serve = world.serve(&world.rules()).start();
    let result = serve.call(json!({"program": "python3", "args": [
        "-c", SECOND, format!("forge.test:{e}"),
        format!("http://registry.test:{r}/hello"), format!("http://unlisted.test:{r}/second")
    ]}));
    assert_eq!(stdout_ok(&result), "tunnel: echoed\nplain: 1 answer(s)\n");
    // The registry got the first request alone; the second never left the proxy.
    assert_eq!(
        world.registry.requests(),
        ["GET /hello HTTP/1.1"],
        "{:?}",
        world.registry.requests()
    );
    let figures = network(&result);
    assert_eq!(figures["connections"], 2, "{figures}");
    assert_eq!(figures["refused"], json!([]), "{figures}");
}

/// Connections that send nothing, then one that sends half a request: each is answered 408
/// and closed once its time for a request is up, and a fetch still works meanwhile.
const SLOW: &str = r#"
import os, socket, sys, time, urllib.request
proxy = os.environ["HTTP_PROXY"].split("//")[1].rsplit(":", 1)
held = [socket.create_connection((proxy[0], int(proxy[1])), timeout=30) for _ in range(20)]
held[0].sendall(b"GET http://registry.test")
fetched = urllib.request.urlopen(sys.argv[1]).read().decode()
answers = []
for s in held:
    answer = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        answer += chunk
    answers.append(answer.split(b"\r\n")[0].decode())
print(fetched.strip(), len(set(answers)), answers[0])
"#;

fn a_slow_client_is_cut_off(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let r = world.registry.port();
    let mut serve = world.serve(&world.rules()).start();
    let hello = format!("http://registry.test:{r}/hello");
    let result = serve.call(json!({"program": "python3", "args": ["-c", SLOW, &hello]}));
    assert_eq!(
        stdout_ok(&result),
        "hello from the registry 1 HTTP/1.1 408 Request Timeout\n",
        "{}",
        text(&result)
    );
    let elapsed = structured(&result)["elapsed_ms"].as_u64().unwrap_or(0);
    assert!(elapsed >= 10_000, "cut off after {elapsed} ms");
    let figures = network(&result);
    let slow = figures["refused"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["why"] == "no whole request within 10 s")
        })
        .cloned();
    assert_eq!(
        slow.map(|r| r["count"].clone()),
        Some(json!(20)),
        "{figures}"
    );
}

/// Requests whose host holds terminal escapes, or is very long: each refused, and what the
/// answer says of them is printable and short.
const ESCAPES: &str = r#"
import os, socket
proxy = os.environ["HTTP_PROXY"].split("//")[1].rsplit(":", 1)
for host in ["\x1b[2J\x1b[31mred.test:443", "\u202eevil.test:443", "x" * 5000 + ".test:443"]:
    s = socket.create_connection((proxy[0], int(proxy[1])), timeout=10)
    s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % host).encode())
    print(s.recv(65536).split(b"\r\n")[0].decode())
"#;

fn what_a_program_asks_cannot_write_into_the_answer(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let mut serve = world.serve(&world.rules()).start();
    let result = serve.call(json!({"program": "python3", "args": ["-c", ESCAPES]}));
    let said = stdout_ok(&result);
    assert_eq!(
        said.lines().filter(|l| l.starts_with("HTTP/1.1 4")).count(),
        3,
        "{said}"
    );
    let answer = text(&result);
    assert!(
        !answer.contains('\u{1b}') && !answer.contains('\u{202e}'),
        "{answer:?}"
    );
    let figures = network(&result);
    let refused = figures["refused"].as_array().cloned().unwrap_or_default();
    assert_eq!(refused.len(), 3, "{figures}");
    for r in &refused {
        let host = r["host"].as_str().unwrap_or_default();
        assert!(host.chars().count() <= 256, "{host}");
        assert!(
            host.chars()
                .all(|c| c == '…' || c == ' ' || c.is_ascii_graphic()),
            "{host:?}"
        );
    }
}
