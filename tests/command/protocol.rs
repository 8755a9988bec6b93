//! MCP over stdio: the initialize handshake with version negotiation, the stateless 2026-07-28
//! revision, `ping`, `tools/list`, `tools/call`, and JSON-RPC errors after which the server keeps
//! serving. Only JSON-RPC messages ever appear on stdout (every test's client checks each line).
use std::io::Write;
use std::sync::mpsc::channel;
use std::time::Duration;

use serde_json::{Value, json};

use lnk_tests::results::{error_code, is_error, modern_meta, ok, structured, text};
use lnk_tests::sandbox::{Sandbox, both_sandboxes};
use lnk_tests::serve::{ANSWER, Era, Serve};
use lnk_tests::setup::Setup;

both_sandboxes!(
    refusals_quote_what_was_sent_only_cut_short,
    ids_come_back_unchanged_or_are_refused,
    handshake_negotiates_each_version,
    modern_requests_are_served_statelessly,
    modern_version_and_envelope_errors,
    bad_lines_get_parse_errors,
    unknown_method_and_unknown_tool,
    stdout_carries_protocol_only,
);

/// The revisions that have `outputSchema` and `structuredContent`.
fn has_structured(version: &str) -> bool {
    matches!(version, "2025-06-18" | "2025-11-25" | "2026-07-28")
}

/// The `command` tool of a `tools/list` result.
fn command_tool(list: &Value) -> Value {
    list["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools/list without tools: {list}"))
        .iter()
        .find(|t| t["name"] == "command")
        .unwrap_or_else(|| panic!("no command tool: {list}"))
        .clone()
}

/// Checks `tools/list` and a `tools/call` at `version` on an open session.
fn check_tools(serve: &mut Serve, version: &str) {
    let tool = command_tool(&serve.result("tools/list", json!({})));
    assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    assert_eq!(
        tool.get("outputSchema").is_some(),
        has_structured(version),
        "outputSchema at {version}: {tool}"
    );
    let result = serve.call(json!({"program": "echo", "args": ["hello", "era"]}));
    assert!(text(&result).contains("hello era"), "{result}");
    assert_eq!(
        result.get("structuredContent").is_some(),
        has_structured(version),
        "structuredContent at {version}: {result}"
    );
    if has_structured(version) {
        assert_eq!(structured(&result)["exit_code"], 0, "{result}");
    }
}

fn handshake_negotiates_each_version(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    for (asked, answered) in [
        ("2024-11-05", "2024-11-05"),
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let mut serve = setup.serve().spawn();
        let init = serve.initialize(asked);
        assert_eq!(init["protocolVersion"], answered, "asked {asked}: {init}");
        assert!(init["capabilities"]["tools"].is_object(), "{init}");
        assert!(init["serverInfo"]["name"].is_string(), "{init}");
        let pong = serve.result("ping", json!({}));
        assert!(pong.is_object(), "ping answers an object: {pong}");
        check_tools(&mut serve, answered);
    }
}

fn modern_requests_are_served_statelessly(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().era(Era::Modern).start();
    // A call first, with no handshake and nothing before it.
    let call = serve.call(json!({"program": "echo", "args": ["modern"]}));
    assert_eq!(call["resultType"], "complete", "{call}");
    assert!(text(&call).contains("modern"), "{call}");
    assert_eq!(structured(&call)["exit_code"], 0, "{call}");

    let discover = serve.result("server/discover", json!({}));
    assert_eq!(discover["resultType"], "complete", "{discover}");
    assert!(
        discover["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!("2026-07-28"))),
        "{discover}"
    );
    assert!(discover["capabilities"]["tools"].is_object(), "{discover}");
    check_cacheable(&discover);

    let list = serve.result("tools/list", json!({}));
    assert_eq!(list["resultType"], "complete", "{list}");
    check_cacheable(&list);
    let tool = command_tool(&list);
    assert!(tool["outputSchema"].is_object(), "{tool}");
}

/// `ttlMs` and `cacheScope` of a cacheable 2026-07-28 result.
fn check_cacheable(result: &Value) {
    assert!(result["ttlMs"].is_u64(), "ttlMs: {result}");
    assert!(
        matches!(result["cacheScope"].as_str(), Some("public" | "private")),
        "cacheScope: {result}"
    );
}

fn modern_version_and_envelope_errors(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().spawn();
    let mut unknown = modern_meta();
    unknown["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let mut bare = modern_meta();
    bare.as_object_mut()
        .unwrap()
        .remove("io.modelcontextprotocol/clientCapabilities");
    for method in ["server/discover", "tools/list"] {
        let response = serve.request(method, json!({"_meta": unknown}));
        assert_eq!(error_code(&response), -32022, "{method}: {response}");
        assert!(
            response["error"]["data"]["supported"]
                .as_array()
                .is_some_and(|v| v.contains(&json!("2026-07-28"))),
            "{response}"
        );
        // The version as it was sent: the string itself, not its JSON text.
        assert_eq!(
            response["error"]["data"]["requested"], "2099-01-01",
            "{response}"
        );
        let response = serve.request(method, json!({"_meta": bare}));
        assert_eq!(error_code(&response), -32602, "{method}: {response}");
    }
    let response = serve.request(
        "tools/call",
        json!({"name": "command", "arguments": {"program": "true"}, "_meta": unknown}),
    );
    assert_eq!(error_code(&response), -32022, "{response}");
    // A version that is no string is named by its JSON text; a long one is shortened.
    let mut number = modern_meta();
    number["io.modelcontextprotocol/protocolVersion"] = json!(20260728);
    let response = serve.request("server/discover", json!({"_meta": number}));
    assert_eq!(
        response["error"]["data"]["requested"], "20260728",
        "{response}"
    );
    let mut long = modern_meta();
    long["io.modelcontextprotocol/protocolVersion"] = json!("9".repeat(10_000));
    let response = serve.request("server/discover", json!({"_meta": long}));
    let requested = response["error"]["data"]["requested"]
        .as_str()
        .unwrap_or("");
    assert!(
        requested.starts_with("999") && requested.ends_with('…') && requested.len() < 200,
        "{response}"
    );
    // Still serving.
    let list = serve.result("tools/list", json!({"_meta": modern_meta()}));
    assert_eq!(list["resultType"], "complete", "{list}");
}

fn bad_lines_get_parse_errors(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let mut errors = 0;
    for line in [
        &b"this is not json"[..],
        b"{\"jsonrpc\":\"2.0\",\"id\":",
        b"\xff\xfe{",
    ] {
        serve.send_line(line);
        errors += 1;
        // A ping after each bad line: it is answered, and the parse error came before it.
        let pong = serve.request("ping", json!({}));
        ok(&pong);
        let error = wait_null_error(&mut serve, errors);
        assert_eq!(error_code(&error), -32700, "{error}");
    }
    // A line over 16 MiB is refused without being read into memory, and serving goes on. The
    // writer is a thread of its own, so a server that stops reading fails the test, not hangs it.
    let mut stdin = serve.take_stdin();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        let mut written = Ok(());
        for _ in 0..17 {
            written = written.and_then(|()| stdin.write_all(&chunk));
        }
        let written = written.and_then(|()| stdin.write_all(b"\n"));
        let _receiver_gone = tx.send((written.map_err(|e| e.to_string()), stdin));
    });
    let (written, stdin) = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("serve did not read a 17 MiB line within a minute");
    written.expect("writing the oversized line");
    serve.put_stdin(stdin);
    let pong = serve.request("ping", json!({}));
    ok(&pong);
    let error = wait_null_error(&mut serve, errors + 1);
    assert!(error_code(&error) < 0, "{error}");
    let result = serve.call(json!({"program": "echo", "args": ["still here"]}));
    assert!(text(&result).contains("still here"), "{result}");
}

/// Waits (up to [`ANSWER`]) for the `n`th error response with a null id.
fn wait_null_error(serve: &mut Serve, n: usize) -> Value {
    let deadline = std::time::Instant::now() + ANSWER;
    loop {
        let errors: Vec<Value> = serve
            .inbox()
            .iter()
            .filter(|m| m.get("id") == Some(&Value::Null) && m.get("error").is_some())
            .cloned()
            .collect();
        if let Some(error) = errors.get(n - 1) {
            return error.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "expected {n} errors with id null, got {errors:?}"
        );
        let _more = serve.wait_for(Duration::from_millis(100), |_| false);
    }
}

/// What a client sent is quoted back only cut short: a 3 MiB method, tool, program, argument
/// name or `dir` comes back as a short message, never 3 MiB long.
fn refusals_quote_what_was_sent_only_cut_short(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let long = "x".repeat(3 * 1024 * 1024);
    let response = serve.request(&long, json!({}));
    assert_eq!(error_code(&response), -32601);
    assert!(
        response.to_string().len() < 1024,
        "{} bytes",
        response.to_string().len()
    );
    let response = serve.request("tools/call", json!({"name": long, "arguments": {}}));
    assert_eq!(error_code(&response), -32602);
    assert!(response.to_string().len() < 1024);
    for arguments in [
        json!({"program": long}),
        json!({"program": "echo", long.clone(): 1}),
        json!({"program": "echo", "dir": format!("/{long}")}),
        json!({"program": "echo", "dir": long}),
    ] {
        let result = serve.call(arguments);
        assert!(is_error(&result), "refused");
        let why = text(&result);
        assert!(
            why.len() < 1024,
            "a refusal of {} bytes: {:.200}",
            why.len(),
            why
        );
    }
}

/// An integer id too large for 64 bits would come back changed (read as a float): it is
/// refused, and ids up to 2^64 - 1 come back as they were sent.
fn ids_come_back_unchanged_or_are_refused(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    serve.send_line(br#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#);
    let error = wait_null_error(&mut serve, 1);
    assert_eq!(error_code(&error), -32600, "{error}");
    assert!(text_of_error(&error).contains("string"), "{error}");
    serve.send_line(br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#);
    let pong = serve
        .wait_for(ANSWER, |m| {
            m.get("result").is_some() && m["id"] == json!(18446744073709551615u64)
        })
        .unwrap_or_else(|| panic!("the ping is answered"));
    assert_eq!(pong["result"], json!({}), "{pong}");
}

fn text_of_error(error: &Value) -> String {
    error["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn unknown_method_and_unknown_tool(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    for era in [Era::Legacy("2025-11-25"), Era::Modern] {
        let mut serve = setup.serve().era(era).start();
        let response = serve.request("no/such/method", json!({}));
        assert_eq!(error_code(&response), -32601, "{era:?}: {response}");
        let response = serve.request(
            "tools/call",
            json!({"name": "no-such-tool", "arguments": {"program": "true"}}),
        );
        assert_eq!(error_code(&response), -32602, "{era:?}: {response}");
        // Still serving.
        let result = serve.call(json!({"program": "echo", "args": ["after errors"]}));
        assert!(text(&result).contains("after errors"), "{era:?}: {result}");
    }
}

fn stdout_carries_protocol_only(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let result = serve.call(json!({
        "program": "sh",
        "args": ["-c", "echo PLAIN-OUT; echo PLAIN-ERR >&2; echo '{\"jsonrpc\":\"2.0\",\"id\":999}'"],
    }));
    assert!(text(&result).contains("PLAIN-OUT"), "{result}");
    assert!(text(&result).contains("PLAIN-ERR"), "{result}");
    let result = serve.call(
        json!({"program": "lnk-test-write", "args": ["1", "300000", "0a", "2", "300000", "0a"]}),
    );
    assert_eq!(structured(&result)["stdout_bytes"], 300_000, "{result}");
    // Large answers written at once by many calls arrive whole, one per line.
    let ids: Vec<i64> = (0..8)
        .map(|i| {
            let unit = format!("{:02x}", b'a' + i);
            serve.send_call(
                json!({"program": "lnk-test-write", "args": ["1", "1000000", unit, "2", "1000000", "0a"]}),
                None,
            )
        })
        .collect();
    for id in ids {
        let result = serve.call_result(id, lnk_tests::serve::ANSWER);
        assert_eq!(structured(&result)["stdout_bytes"], 1_000_000, "{result}");
    }
    // Everything written so far has been read once the ping's answer is.
    ok(&serve.request("ping", json!({})));
    serve.check_stdout();
    let inbox = serve.inbox().to_vec();
    assert!(
        inbox.iter().all(|m| m.get("id") != Some(&json!(999))),
        "a program's output reached serve's stdout: {inbox:?}"
    );
    assert!(inbox.iter().all(|m| m["jsonrpc"] == "2.0"));
}

/// serve's log lines name the call they come from (a span with its request id and tool), so
/// that the lines of two calls in flight can be told apart.
#[test]
fn log_lines_name_their_call() {
    let setup = Setup::new(Sandbox::Passthrough);
    let mut serve = setup.serve().env("RUST_LOG", "debug").start();
    let first = serve.send_call(json!({"program": "sleep", "args": ["5"]}), None);
    let second = serve.send_call(json!({"program": "sleep", "args": ["5"]}), None);
    std::thread::sleep(Duration::from_millis(300));
    for id in [first, second] {
        serve.send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": id}}),
        );
    }
    let deadline = std::time::Instant::now() + ANSWER;
    let said = |serve: &Serve, id: i64| {
        serve.stderr().lines().any(|line| {
            line.contains(&format!("call{{id={id} tool=\"command\"}}"))
                && line.contains("call cancelled")
        })
    };
    while !(said(&serve, first) && said(&serve, second)) {
        assert!(
            std::time::Instant::now() < deadline,
            "no line names each cancelled call: {}",
            serve.stderr()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
