#![allow(clippy::unwrap_used)]

use super::*;

fn asked(head: &str) -> Result<Asked, Unreadable> {
    read(head.as_bytes())
}

fn http_of(head: &str) -> HttpRequest {
    match asked(head).unwrap() {
        Asked::Http(request) => request,
        other => panic!("{other:?}"),
    }
}

#[test]
fn connect_names_its_host_and_port() {
    let connect = asked("CONNECT Pkg.Example:443 HTTP/1.1\r\nHost: pkg.example:443\r\n\r\n");
    assert_eq!(
        connect.unwrap(),
        Asked::Connect {
            host: Host::Name("pkg.example".into()),
            port: 443
        }
    );
    let v6 = asked("CONNECT [::1]:8443 HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!(
        v6,
        Asked::Connect {
            host: Host::Address("::1".parse().unwrap()),
            port: 8443
        }
    );
    let no_port = asked("CONNECT pkg.example HTTP/1.1\r\n\r\n").unwrap_err();
    assert!(no_port.why.to_string().contains("host:port"), "{no_port:?}");
}

#[test]
fn a_plain_request_goes_on_in_origin_form_with_its_own_host_and_close() {
    let request = http_of(
        "GET http://Registry.Test:8080/simple/pkg/?x=1 HTTP/1.1\r\nHost: evil.example\r\n\
         Accept: */*\r\nProxy-Connection: Keep-Alive\r\nConnection: keep-alive, X-Secret\r\n\
         X-Secret: 1\r\nProxy-Authorization: Basic Zm9v\r\nUser-Agent: t\r\n\r\n",
    );
    assert_eq!(request.host, Host::Name("registry.test".into()));
    assert_eq!(request.port, 8080);
    assert_eq!(request.body, Framing::None);
    assert_eq!(
        String::from_utf8(request.head).unwrap(),
        "GET /simple/pkg/?x=1 HTTP/1.1\r\nHost: registry.test:8080\r\nAccept: */*\r\n\
         User-Agent: t\r\nConnection: close\r\n\r\n"
    );
}

#[test]
fn a_uri_without_a_path_asks_for_the_root_at_port_80() {
    let request = http_of("HEAD http://a.example HTTP/1.0\r\n\r\n");
    assert_eq!(request.port, 80);
    assert!(
        request
            .head
            .starts_with(b"HEAD / HTTP/1.0\r\nHost: a.example\r\n")
    );
    let query = http_of("GET http://a.example?q HTTP/1.1\r\n\r\n");
    assert!(query.head.starts_with(b"GET /?q HTTP/1.1\r\n"));
}

#[test]
fn a_body_is_framed_one_way_only() {
    let length = http_of("POST http://a.example/ HTTP/1.1\r\nContent-Length: 12\r\n\r\n");
    assert_eq!(length.body, Framing::Length(12));
    assert!(
        String::from_utf8(length.head)
            .unwrap()
            .contains("Content-Length: 12\r\n")
    );
    let chunked = http_of("POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n");
    assert_eq!(chunked.body, Framing::Chunked);
    let same = http_of("POST http://a.example/ HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n");
    assert_eq!(same.body, Framing::Length(3));
    for ambiguous in [
        "POST http://a.example/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        "POST http://a.example/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "POST http://a.example/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST http://a.example/ HTTP/1.1\r\nContent-Length: +3\r\n\r\n",
    ] {
        let refused = asked(ambiguous).unwrap_err();
        assert_eq!(refused.host, "a.example", "{ambiguous}");
    }
}

#[test]
fn expect_continue_is_the_proxys_to_answer() {
    let request = http_of(
        "PUT http://a.example/x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
    );
    assert!(request.expects_continue);
    assert!(!String::from_utf8(request.head).unwrap().contains("Expect"));
}

#[test]
fn what_is_not_a_proxy_request_is_refused_with_why() {
    for head in [
        "GET /path HTTP/1.1\r\nHost: a.example\r\n\r\n",
        "GET https://a.example/ HTTP/1.1\r\n\r\n",
        "GET http://user:pw@a.example/ HTTP/1.1\r\n\r\n",
        "GET http://a.example/ HTTP/2.0\r\n\r\n",
        "GET http://a.example/ HTTP/1.1 extra\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nBad Header: x\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\n folded: x\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nNoColon\r\n\r\n",
        "GET http://a.example:0/ HTTP/1.1\r\n\r\n",
        "GET http://a.example:99999/ HTTP/1.1\r\n\r\n",
        "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
        "CONNECT 127.1:443 HTTP/1.1\r\n\r\n",
        "SSH-2.0-OpenSSH\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nX: a\rInjected: b\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nX: a\nInjected: b\r\n\r\n",
        "GET http://a.example/ HTTP/1.1\r\nX: a\u{1b}[0m\r\n\r\n",
        "\u{0}\u{1}\r\n\r\n",
    ] {
        assert!(asked(head).is_err(), "{head:?} was taken");
    }
    let disguised = asked("CONNECT 0x7f000001:443 HTTP/1.1\r\n\r\n").unwrap_err();
    assert_eq!(
        (disguised.host.as_str(), disguised.port),
        ("0x7f000001", 443)
    );
    assert!(
        asked("GET /x HTTP/1.1\r\n\r\n")
            .unwrap_err()
            .why
            .to_string()
            .contains("absolute")
    );
}

#[test]
fn a_head_ends_at_its_empty_line() {
    assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(18));
    assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
}
