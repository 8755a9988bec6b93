//! The allow-list against a hostile program that speaks to the proxy itself: a listed host
//! written otherwise (a trailing dot, upper case, an IPv4-mapped address), loopback written as
//! a number, in octal or hexadecimal, or as IPv6, the wildcard's edges, a `Host` or user
//! information naming another host, requests smuggled past a body's end or framed two ways, a
//! head over the limit, and a redirect from a listed host to one that is not. Each is refused
//! or reaches the listed host alone; the spellings that name a listed host reach it.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

use lnk_tests::net::{Names, Site};

use super::{Home, call, close, usable};

/// The raw requests a hostile program sends the proxy, each on its own connection, and the
/// status line it must get back (its start). Names: `registry.test` and `a.wild.test` lead to
/// the registry, which is listed by name and as `127.0.0.1` at its port; `wild.test`,
/// `evilwild.test` and `unlisted.test` lead there too but are not listed.
const PROBES: &[(&str, &str, &str)] = &[
    // The probe works: the listed name, written as a resolver would also take it.
    (
        "trailing dot",
        "CONNECT registry.test.:{r} HTTP/1.1\r\n\r\nGET /dot HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 200",
    ),
    (
        "case",
        "CONNECT REGISTRY.Test:{r} HTTP/1.1\r\n\r\nGET /case HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 200",
    ),
    (
        "v4-mapped, listed",
        "CONNECT [::ffff:127.0.0.1]:{r} HTTP/1.1\r\n\r\nGET /mapped HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 200",
    ),
    (
        "below the wildcard",
        "CONNECT a.wild.test:{r} HTTP/1.1\r\n\r\nGET /wild HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        "HTTP/1.1 200",
    ),
    // Loopback by other spellings, and at a port not listed.
    (
        "decimal",
        "CONNECT 2130706433:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 4",
    ),
    (
        "octal",
        "CONNECT 0177.0.0.1:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 4",
    ),
    (
        "hexadecimal",
        "CONNECT 0x7f.0.0.1:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 4",
    ),
    ("short", "CONNECT 127.1:{r} HTTP/1.1\r\n\r\n", "HTTP/1.1 4"),
    (
        "v4-compatible",
        "CONNECT [::127.0.0.1]:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 403",
    ),
    (
        "v6 loopback",
        "CONNECT [::1]:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 403",
    ),
    (
        "unspecified",
        "CONNECT 0.0.0.0:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 403",
    ),
    (
        "v6 unspecified",
        "CONNECT [::]:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 403",
    ),
    (
        "scoped v6",
        "CONNECT [fe80::1%lo]:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 4",
    ),
    (
        "v4-mapped, other port",
        "CONNECT [::ffff:127.0.0.1]:{o} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 403",
    ),
    (
        "listed name, other port",
        "CONNECT registry.test:{o} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 403",
    ),
    // The wildcard's edges.
    (
        "the wildcard's own name",
        "CONNECT wild.test:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 403",
    ),
    (
        "a name ending like it",
        "CONNECT evilwild.test:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 403",
    ),
    (
        "an empty label",
        "CONNECT a..wild.test:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 4",
    ),
    (
        "a leading dot",
        "CONNECT .wild.test:{r} HTTP/1.1\r\n\r\n",
        "HTTP/1.1 4",
    ),
    // A listed host's URI with another Host, or user information naming another.
    (
        "Host differs",
        "GET http://registry.test:{r}/host HTTP/1.1\r\nHost: unlisted.test:{r}\r\n\r\n",
        "HTTP/1.1 404",
    ),
    (
        "user information",
        "GET http://registry.test:{r}@unlisted.test:{r}/u HTTP/1.1\r\nHost: x\r\n\r\n",
        "HTTP/1.1 400",
    ),
    // Smuggling: ambiguous framing refused, bytes past a body's end never sent on.
    (
        "two lengths",
        "POST http://registry.test:{r}/cl HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 60\r\n\r\n",
        "HTTP/1.1 400",
    ),
    (
        "length and chunked",
        "POST http://registry.test:{r}/te HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "HTTP/1.1 400",
    ),
    (
        "a coding hidden",
        "POST http://registry.test:{r}/te HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n",
        "HTTP/1.1 400",
    ),
    (
        "a space before the colon",
        "POST http://registry.test:{r}/te HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n",
        "HTTP/1.1 400",
    ),
    (
        "bare LF",
        "GET http://registry.test:{r}/lf HTTP/1.1\nHost: unlisted.test\n\r\n\r\n",
        "HTTP/1.1 400",
    ),
    (
        "past a length",
        "POST http://registry.test:{r}/length HTTP/1.1\r\nContent-Length: 0\r\n\r\nGET http://unlisted.test:{r}/smuggled HTTP/1.1\r\nHost: unlisted.test\r\n\r\n",
        "HTTP/1.1 404",
    ),
    (
        "past the last chunk",
        "POST http://registry.test:{r}/chunked HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: unlisted.test\r\n\r\n",
        "HTTP/1.1 404",
    ),
    (
        "a header line over the limit",
        "GET http://registry.test:{r}/long HTTP/1.1\r\nX-A: {long}\r\n\r\n",
        "HTTP/1.1 400",
    ),
];

/// Sends each probe (argv: a JSON list of requests) on its own connection to the proxy and
/// prints the first line of each answer.
const SEND: &str = r#"
import json, os, socket, sys
proxy = os.environ["HTTP_PROXY"].split("//")[1].rsplit(":", 1)
for raw in json.loads(sys.argv[1]):
    s = socket.create_connection((proxy[0], int(proxy[1])), timeout=15)
    s.sendall(raw.encode())
    answer = b""
    try:
        while b"\r\n" not in answer:
            chunk = s.recv(4096)
            if not chunk:
                break
            answer += chunk
    except OSError as e:
        answer += str(e).encode()
    print(answer.split(b"\r\n")[0].decode(errors="replace"))
"#;

/// A host that answers every request with a redirect to `location`.
fn redirector(location: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

#[test]
fn the_allow_list_holds_against_other_spellings_smuggling_and_redirects() {
    if !usable() {
        return;
    }
    let home = Home::new("hostile-net-", None);
    let sites = home.root.path().join("sites");
    std::fs::create_dir_all(&sites).unwrap();
    for name in ["dot", "case", "mapped", "wild"] {
        std::fs::write(sites.join(name), "hello\n").unwrap();
    }
    let registry = Site::serve(&sites);
    let other = Site::serve(&sites);
    let (r, o) = (registry.port(), other.port());
    let to_unlisted = redirector(format!("http://unlisted.test:{r}/dot"));
    let to_address = redirector(format!("http://127.0.0.1:{o}/dot"));
    let to_listed = redirector(format!("http://registry.test:{r}/dot"));
    let names = Names::new(
        home.root.path(),
        &[
            ("registry.test", "127.0.0.1"),
            ("a.wild.test", "127.0.0.1"),
            ("wild.test", "127.0.0.1"),
            ("evilwild.test", "127.0.0.1"),
            ("unlisted.test", "127.0.0.1"),
        ],
    );
    let mut rules = Vec::new();
    for rule in [
        format!("registry.test:{r}"),
        format!("127.0.0.1:{r}"),
        format!("*.wild.test:{r}"),
        format!("registry.test:{to_unlisted}"),
        format!("127.0.0.1:{to_unlisted}"),
        format!("registry.test:{to_address}"),
        format!("127.0.0.1:{to_address}"),
        format!("registry.test:{to_listed}"),
        format!("127.0.0.1:{to_listed}"),
    ] {
        rules.extend(["--net-allow".to_owned(), rule]);
    }
    let (command, args) = home.write_entry(&["python3", "curl"], &rules);
    let mut serve = home.serve(&command, &args, Some(&names));

    let long = "a".repeat(40_000);
    let requests: Vec<String> = PROBES
        .iter()
        .map(|(_, raw, _)| {
            raw.replace("{r}", &r.to_string())
                .replace("{o}", &o.to_string())
                .replace("{long}", &long)
        })
        .collect();
    let (code, said, stdout) = call(
        &mut serve,
        "python3",
        &["-c", SEND, &serde_json::to_string(&requests).unwrap()],
    );
    assert_eq!(code, Some(0), "{said}");
    let lines: Vec<&str> = stdout.lines().collect();
    for (i, (what, _, expected)) in PROBES.iter().enumerate() {
        let got = lines.get(i).copied().unwrap_or_default();
        assert!(
            got.starts_with(expected),
            "{what}: {got:?} (expected {expected})\n{said}"
        );
    }
    // What reached the registry: the four tunnels' requests, the plain ones in origin form,
    // nothing smuggled, the other port nothing at all.
    let mut seen = registry.requests();
    seen.sort();
    assert_eq!(
        seen,
        [
            // The chunked body's last chunk, which the site notes as the first line of what
            // followed the head (so the site cannot tell whether more followed it: the proxy's
            // own unit tests show it stops there).
            "0",
            "GET /case HTTP/1.1",
            "GET /dot HTTP/1.1",
            "GET /host HTTP/1.1",
            "GET /mapped HTTP/1.1",
            "GET /wild HTTP/1.1",
            "POST /chunked HTTP/1.1",
            "POST /length HTTP/1.1",
        ],
        "{said}"
    );
    assert!(other.requests().is_empty(), "{:?}", other.requests());

    // A redirect from a listed host to one not listed: curl's second request is checked too.
    for (port, refused) in [
        (
            to_unlisted,
            format!("refused: unlisted.test:{r}, not on the allow-list"),
        ),
        (
            to_address,
            format!("refused: 127.0.0.1:{o}, not on the allow-list at this port"),
        ),
    ] {
        let url = format!("http://registry.test:{port}/");
        let (code, said, _) = call(&mut serve, "curl", &["-sS", "-L", "--max-time", "10", &url]);
        assert!(code.is_some(), "{said}");
        assert!(said.contains(&refused), "{said}");
        assert!(said.contains("Link Run's proxy refused"), "{said}");
    }
    assert_eq!(registry.requests().len(), 8, "{:?}", registry.requests());
    assert!(other.requests().is_empty(), "{:?}", other.requests());
    // The probe works: a redirect within the list is followed.
    let url = format!("http://registry.test:{to_listed}/");
    let (code, said, stdout) = call(
        &mut serve,
        "curl",
        &["-sS", "-L", "--fail", "--max-time", "10", &url],
    );
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(stdout, "hello\n", "{said}");
    assert_eq!(registry.requests().len(), 9, "{:?}", registry.requests());
    close(serve);
}
