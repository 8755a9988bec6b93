//! A hostile program against the proxy's bounds and against other sandboxes' proxies: a
//! thousand connections at once (the proxy answers past its bound, keeps serving, and closes
//! everything at the call's end), and, where it can see every process (a sandbox without a
//! PID namespace of its own), a program that looks for another call's and another run's
//! proxy: their network namespaces, their descriptors, their listeners.

use std::time::{Duration, Instant};

use serde_json::json;

use lnk_tests::results::text;
use lnk_tests::sandbox::Sandbox;
use lnk_tests::tools::start;

use super::world::{World, network, refused, stdout_ok, usable};

mod under_bubblewrap {
    lnk_tests::sandbox_test!(
        a_thousand_connections_at_once,
        a_thousand_connections_at_once,
        Bwrap,
        warm
    );
    lnk_tests::sandbox_test!(
        another_sandboxs_proxy_is_out_of_reach,
        another_sandboxs_proxy_is_out_of_reach,
        BwrapSharedPid,
        warm
    );
}

/// A thousand connections to the proxy, held; then each read for what the proxy said; then,
/// once all are closed, a fetch (tried again while the proxy still counts them as open).
const THOUSAND: &str = r#"
import os, socket, sys, time, urllib.request
proxy = os.environ["HTTP_PROXY"].split("//")[1].rsplit(":", 1)
held = [socket.create_connection((proxy[0], int(proxy[1])), timeout=10) for _ in range(1000)]
busy = 0
for s in held[200:]:
    s.settimeout(5)
    try:
        busy += s.recv(4096).startswith(b"HTTP/1.1 503")
    except OSError:
        pass
for s in held:
    s.close()
fetched = ""
deadline = time.time() + 10
while time.time() < deadline:
    try:
        fetched = urllib.request.urlopen(sys.argv[1]).read().decode().strip()
        break
    except Exception:
        time.sleep(0.1)
print(busy, fetched)
"#;

fn a_thousand_connections_at_once(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let r = world.registry.port();
    let mut serve = world.serve(&world.rules()).start();
    let hello = format!("http://registry.test:{r}/hello");
    let result = serve.call(json!({"program": "python3", "args": ["-c", THOUSAND, &hello]}));
    let said = stdout_ok(&result);
    let (busy, fetched) = said.trim().split_once(' ').unwrap_or(("", ""));
    // Past the first 128 open at once, each was answered 503 (the 800 read all were).
    assert_eq!(busy, "800", "{said}");
    assert_eq!(fetched, "hello from the registry", "{said}");
    let figures = network(&result);
    let too_many = figures["refused"].as_array().and_then(|refused| {
        refused
            .iter()
            .find(|r| r["why"] == "too many connections open at once (at most 128)")
            .cloned()
    });
    assert_eq!(
        too_many.map(|r| r["count"].clone()),
        Some(json!(1000 - 128)),
        "{figures}"
    );
    assert!(
        text(&result).contains(
            "refused: a request, too many connections open at once (at most 128) (872 times)"
        ),
        "{}",
        text(&result)
    );
    // The call is over: none of its connections is left in serve.
    assert!(
        wait_no_connection_threads(serve.pid(), Duration::from_secs(5)),
        "connection threads left in serve"
    );
    // And serve still serves.
    let result = serve.call(json!({"program": "curl", "args": ["-sS", "--fail", &hello]}));
    assert_eq!(stdout_ok(&result), "hello from the registry\n");
}

/// Whether serve has no thread serving a proxied connection, within `within`.
fn wait_no_connection_threads(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| {
                tasks
                    .flatten()
                    .filter(|task| {
                        std::fs::read_to_string(task.path().join("comm"))
                            .is_ok_and(|comm| comm.trim() == "proxy conn")
                    })
                    .count()
            })
            .unwrap_or(0);
        if threads == 0 {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Holds a tunnel to the echo open for a while: another sandbox's proxy, in use.
const HOLD: &str = r#"
import os, socket, sys, time
proxy = os.environ["HTTP_PROXY"].split("//")[1].rsplit(":", 1)
s = socket.create_connection((proxy[0], int(proxy[1])), timeout=10)
s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % sys.argv[1]).encode())
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
time.sleep(float(sys.argv[2]))
"#;

/// Looks at every process it can see for a way into another sandbox's network: its network
/// namespace (setns), its descriptors (through /proc, and pidfd_getfd), and listens around
/// its own loopback; then asks its own proxy for the host the other sandboxes may reach.
const HUNT: &str = r#"
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
seen = {"processes": 0, "joined": 0, "taken": 0}
for pid in os.listdir("/proc"):
    if not pid.isdigit() or int(pid) == me:
        continue
    seen["processes"] += 1
    try:
        fd = os.open("/proc/%s/ns/net" % pid, os.O_RDONLY)
        if libc.setns(fd, 0x40000000) == 0:
            seen["joined"] += 1
        os.close(fd)
    except OSError:
        pass
    pidfd = libc.syscall(434, int(pid), 0)
    try:
        names = os.listdir("/proc/%s/fd" % pid)
    except OSError:
        names = [str(n) for n in range(64)]
    for name in names:
        try:
            fd = os.open("/proc/%s/fd/%s" % (pid, name), os.O_RDWR)
            os.close(fd)
            if os.readlink("/proc/%s/fd/%s" % (pid, name)).startswith("socket:"):
                seen["taken"] += 1
        except OSError:
            pass
        if pidfd >= 0:
            got = libc.syscall(438, pidfd, int(name), 0)
            if got >= 0:
                try:
                    kind = os.readlink("/proc/self/fd/%d" % got)
                    if kind.startswith("socket:"):
                        seen["taken"] += 1
                finally:
                    os.close(got)
    if pidfd >= 0:
        os.close(pidfd)
listening = [line.split()[1] for line in open("/proc/net/tcp").readlines()[1:] if line.split()[3] == "0A"]
seen["listening"] = listening
proxy = os.environ["HTTP_PROXY"].split("//")[1].rsplit(":", 1)
s = socket.create_connection((proxy[0], int(proxy[1])), timeout=10)
s.sendall(("CONNECT %s HTTP/1.1\r\n\r\n" % sys.argv[1]).encode())
seen["own_proxy"] = s.recv(4096).split(b"\r\n")[0].decode()
print(json.dumps(seen))
"#;

fn another_sandboxs_proxy_is_out_of_reach(sandbox: Sandbox) {
    if !usable() {
        return;
    }
    let world = World::new(sandbox, None);
    let (r, e) = (world.registry.port(), world.echo.port());
    let echo = format!("forge.test:{e}");
    // The other serve's calls and runs may reach the echo; the hunter's, the registry only.
    let others = [echo.clone(), format!("127.0.0.1:{e}")];
    let mut other = world.serve_with_runs(&others).start();
    let run = start(
        &mut other,
        json!({"program": "python3", "args": ["-c", HOLD, &echo, "20"]}),
    );
    let call = other.send_call(
        json!({"program": "python3", "args": ["-c", HOLD, &echo, "20"]}),
        None,
    );
    let mine = [format!("registry.test:{r}"), format!("127.0.0.1:{r}")];
    let mut serve = world.serve(&mine).start();
    // Both of the other serve's tunnels are open before the hunt starts.
    std::thread::sleep(Duration::from_secs(2));
    let result = serve.call(json!({"program": "python3", "args": ["-c", HUNT, &echo]}));
    let seen: serde_json::Value = serde_json::from_str(&stdout_ok(&result)).unwrap();
    assert!(
        seen["processes"].as_u64() > Some(3),
        "it sees other processes: {seen}"
    );
    assert_eq!(seen["joined"], 0, "{seen}");
    assert_eq!(seen["taken"], 0, "{seen}");
    // Its own loopback has its own proxy listening, and nothing else.
    assert_eq!(seen["listening"], json!(["0100007F:0C38"]), "{seen}");
    assert!(
        seen["own_proxy"]
            .as_str()
            .is_some_and(|s| s.starts_with("HTTP/1.1 403")),
        "{seen}"
    );
    assert!(
        refused(&result, "forge.test", e, "not on the allow-list"),
        "{}",
        text(&result)
    );
    // The other serve's call and run each made their one connection.
    let other_call = other.call_result(call, Duration::from_secs(60));
    assert_eq!(
        network(&other_call)["connections"],
        1,
        "{}",
        text(&other_call)
    );
    let ended = world
        .bg
        .wait_record(&run, Duration::from_secs(60), |record| {
            record["status"]["state"] != "running"
        });
    assert_eq!(ended["network"]["connections"], 1, "{ended}");
}
