//! The `command` tool: its description and schemas, the allow-list resolved on
//! `--programs-path`, `input` on stdin, `--var` through
//! `/usr/bin/env`, the text and the structured value, and `isError` only for refusals.
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use lnk_tests::results::{assert_streams_match_the_text, is_error, ran, text};
use lnk_tests::sandbox::{Sandbox, both_sandboxes, path_str};
use lnk_tests::setup::Setup;

both_sandboxes!(
    describes_programs_and_limits,
    reports_exit_streams_and_figures,
    reports_a_signal,
    refuses_programs_not_allowed,
    refuses_bad_arguments,
    refuses_arguments_too_long_for_a_command_line,
    resolves_programs_on_path_in_order,
    input_goes_to_stdin,
    stdin_is_empty_without_input,
    var_reaches_the_program,
);

fn describes_programs_and_limits(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let programs = ["echo", "sh", "lnk-test-write"];
    let mut serve = setup
        .serve()
        .programs(&programs)
        .timeout("37s")
        .output("3KiB")
        .start();
    let list = serve.result("tools/list", json!({}));
    let tool = list["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "command")
        .unwrap_or_else(|| panic!("no command tool: {list}"))
        .clone();
    let description = tool["description"].as_str().unwrap_or_default();
    for program in programs {
        assert!(description.contains(program), "{program}: {description}");
    }
    assert!(description.contains("37"), "the timeout: {description}");
    assert!(
        // The limit, or the half of it that each end of a stream keeps.
        ["3KiB", "3 KiB", "3072", "1536"]
            .iter()
            .any(|o| description.contains(o)),
        "the output limit: {description}"
    );
    let input = &tool["inputSchema"];
    assert_eq!(input["type"], "object", "{tool}");
    let mut allowed: Vec<&str> = input["properties"]["program"]["enum"]
        .as_array()
        .unwrap_or_else(|| panic!("program is not an enum: {tool}"))
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    allowed.sort_unstable();
    let mut expected = programs.to_vec();
    expected.sort_unstable();
    assert_eq!(allowed, expected, "{tool}");
    assert!(
        input["required"]
            .as_array()
            .is_some_and(|r| r.contains(&json!("program"))),
        "{tool}"
    );
    for name in ["args", "dir", "input"] {
        assert!(input["properties"][name].is_object(), "{name}: {tool}");
    }
    let output = &tool["outputSchema"]["properties"];
    for name in [
        "exit_code",
        "signal",
        "timed_out",
        "stdout",
        "stderr",
        "stdout_bytes",
        "stderr_bytes",
        "elapsed_ms",
        "leftovers_killed",
    ] {
        assert!(output[name].is_object(), "{name}: {tool}");
        assert!(
            tool["outputSchema"]["required"]
                .as_array()
                .is_some_and(|r| r.contains(&json!(name))),
            "{name} is required: {tool}"
        );
    }
}

fn reports_exit_streams_and_figures(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let result = serve.call(json!({
        "program": "sh",
        "args": ["-c", "echo out-text; echo err-text >&2; exit 3"],
    }));
    // A program that ran and failed is not a refusal.
    let value = ran(&result);
    assert_eq!(value["exit_code"], 3, "{result}");
    assert_eq!(value["signal"], Value::Null, "{result}");
    assert_eq!(value["timed_out"], false, "{result}");
    assert_eq!(value["stdout_bytes"], 9, "{result}");
    assert_eq!(value["stderr_bytes"], 9, "{result}");
    assert!(value["elapsed_ms"].is_u64(), "{result}");
    assert_eq!(value["leftovers_killed"], false, "{result}");
    // Hosts that hand the model only the structured value must see the output there too.
    assert_eq!(value["stdout"], "out-text\n", "{result}");
    assert_eq!(value["stderr"], "err-text\n", "{result}");
    assert_streams_match_the_text(&result);
    let text = text(&result);
    let first = text.lines().next().unwrap_or_default();
    assert!(first.contains('3'), "the first line says the exit: {text}");
    for needle in ["out-text", "err-text", "stdout", "stderr"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
    // Each stream has a header line with its name and byte count.
    for name in ["stdout", "stderr"] {
        assert!(
            text.lines().any(|l| l.contains(name) && l.contains('9')),
            "{name}'s header: {text}"
        );
    }
    // Nothing was left out: each stream's structured text is all of its bytes.
    for name in ["stdout", "stderr"] {
        let kept = value[name].as_str().unwrap_or_default().len() as u64;
        assert_eq!(
            Some(kept),
            value[format!("{name}_bytes")].as_u64(),
            "{result}"
        );
    }
    // The text holds each stream once.
    assert_eq!(text.matches("out-text").count(), 1, "{text}");

    let result = serve.call(json!({"program": "true"}));
    let value = ran(&result);
    assert_eq!(value["exit_code"], 0, "{result}");
    assert_eq!(value["stdout_bytes"], 0, "{result}");
    assert_eq!(value["stdout"], "", "{result}");

    // A last line without a newline is carried as it is.
    let result = serve.call(json!({"program": "sh", "args": ["-c", "printf 'no newline'"]}));
    assert_eq!(ran(&result)["stdout"], "no newline", "{result}");
    assert_streams_match_the_text(&result);
}

fn reports_a_signal(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let result = serve.call(json!({"program": "sh", "args": ["-c", "kill -9 $$"]}));
    let value = ran(&result);
    assert_eq!(value["timed_out"], false, "{result}");
    match sandbox {
        Sandbox::Passthrough => {
            assert_eq!(value["signal"], 9, "{result}");
            assert_eq!(value["exit_code"], Value::Null, "{result}");
        }
        // bwrap reports a signalled child as its own exit code 128 + signal, and the text
        // says how to read it.
        Sandbox::Bwrap | Sandbox::BwrapSharedPid => {
            assert!(
                value["signal"] == 9 || value["exit_code"] == 137,
                "{result}"
            );
            if value["exit_code"] == 137 {
                let first = text(&result).lines().next().unwrap_or_default().to_owned();
                assert!(
                    first.starts_with(
                        "exited with code 137 (128 + 9: SIGKILL inside the sandbox) after"
                    ),
                    "{first}"
                );
            }
        }
    }
    // A program's own code above 128 reads the same way: the sandbox cannot tell them apart.
    let result = serve.call(json!({"program": "sh", "args": ["-c", "exit 143"]}));
    assert_eq!(ran(&result)["exit_code"], 143, "{result}");
    assert!(
        text(&result).contains("(128 + 15: SIGTERM inside the sandbox)"),
        "{result}"
    );
}

/// Checks that a call was refused with a text, and returns the text.
pub(crate) fn refused(result: &Value) -> String {
    assert!(is_error(result), "expected a refusal: {result}");
    let text = text(result);
    assert!(!text.trim().is_empty(), "a refusal says why: {result}");
    text
}

fn refuses_programs_not_allowed(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    // An allowed program that is there at start (serve refuses to start without it) and gone
    // by the call.
    let gone = setup.path("gone");
    std::fs::create_dir(&gone).unwrap();
    script(&gone.join("lnk-no-such-program"), "echo ran");
    let path = format!("{}:{}", path_str(&gone), setup.programs_path());
    let mut serve = setup
        .serve()
        .visible(&gone)
        .programs_path(&path)
        .programs(&["echo", "sh", "lnk-no-such-program"])
        .start();
    std::fs::remove_file(gone.join("lnk-no-such-program")).unwrap();
    let marker = setup.files.join("touched");
    let marker = path_str(&marker);
    for program in [
        "touch",
        "/usr/bin/touch",
        "./touch",
        "bin/echo",
        "/bin/echo",
        "..",
        "",
    ] {
        let result = serve.call(json!({"program": program, "args": [&marker]}));
        let text = refused(&result);
        assert!(
            text.contains("echo") && text.contains("sh"),
            "{program:?}: the refusal lists what may be run: {text}"
        );
    }
    // Allowed, but on no folder of --programs-path any more.
    let result = serve.call(json!({"program": "lnk-no-such-program"}));
    let why = refused(&result);
    assert!(why.contains("was not found"), "{why}");
    assert!(!Path::new(&marker).exists(), "a refused program ran");
    // Still serving.
    let result = serve.call(json!({"program": "echo", "args": ["fine"]}));
    assert!(text(&result).contains("fine"), "{result}");
}

/// An argument longer than the kernel takes in a command line (128 KiB, `MAX_ARG_STRLEN`): the
/// call is refused as too long, with what to do instead, and nothing ran.
fn refuses_arguments_too_long_for_a_command_line(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().programs(&["echo", "sh"]).start();
    let marker = path_str(&setup.files.join("touched"));
    let long = "x".repeat(256 * 1024);
    let script = ": > \"$1\"";
    let result = serve.call(json!({"program": "sh", "args": ["-c", script, "sh", &marker, &long]}));
    let why = refused(&result);
    assert!(
        why.contains("too long for one command line") && why.contains("write it to a file"),
        "{why}"
    );
    assert!(!Path::new(&marker).exists(), "a call too long ran");
    let result = serve.call(json!({"program": "echo", "args": ["fine"]}));
    assert!(text(&result).contains("fine"), "{result}");
}

fn refuses_bad_arguments(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let marker = path_str(&setup.files.join("touched"));
    for arguments in [
        json!({}),
        json!({"program": 7}),
        json!({"program": ["touch"]}),
        json!({"program": "touch", "args": &marker}),
        json!({"program": "touch", "args": [&marker, 1]}),
        json!({"program": "touch", "args": [&marker], "dir": 5}),
        json!({"program": "touch", "args": [&marker], "input": {"text": "x"}}),
    ] {
        let result = serve.call(arguments.clone());
        refused(&result);
        assert!(!Path::new(&marker).exists(), "ran despite {arguments}");
    }
    let result = serve.call(json!({"program": "echo", "args": ["fine"]}));
    assert!(text(&result).contains("fine"), "{result}");
}

/// Writes an executable `/bin/sh` script.
fn script(path: &Path, body: &str) {
    std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn resolves_programs_on_path_in_order(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let dirs: Vec<_> = (1..=4).map(|i| setup.path(&format!("bin{i}"))).collect();
    for dir in &dirs {
        std::fs::create_dir(dir).unwrap();
    }
    // bin1: a folder of that name; bin2: a file that is not executable; bin3: the one to run;
    // bin4: another one, later on the path.
    std::fs::create_dir(dirs[0].join("lnk-which")).unwrap();
    std::fs::write(dirs[1].join("lnk-which"), "#!/bin/sh\necho two\n").unwrap();
    std::fs::set_permissions(
        dirs[1].join("lnk-which"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    script(&dirs[2].join("lnk-which"), "echo three");
    script(&dirs[3].join("lnk-which"), "echo four");
    let path = dirs
        .iter()
        .map(|d| path_str(d))
        .collect::<Vec<_>>()
        .join(":");
    let mut serve = dirs
        .iter()
        .fold(setup.serve(), |serve, dir| serve.visible(dir))
        .programs_path(&path)
        .programs(&["lnk-which"])
        .start();
    let result = serve.call(json!({"program": "lnk-which"}));
    let value = ran(&result);
    assert_eq!(value["exit_code"], 0, "{result}");
    let text = text(&result);
    assert!(text.contains("three"), "{text}");
    assert!(!text.contains("two") && !text.contains("four"), "{text}");
}

fn input_goes_to_stdin(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().start();
    let input = "line one\nline two, héllo\n";
    let result = serve.call(json!({"program": "cat", "input": input}));
    let value = ran(&result);
    assert_eq!(value["exit_code"], 0, "{result}");
    assert_eq!(value["stdout_bytes"], input.len(), "{result}");
    let text = text(&result);
    assert!(text.contains("line one\nline two, héllo"), "{text}");
    // Input larger than a pipe's buffer arrives whole too.
    let big = "0123456789abcdef".repeat(64 * 1024);
    let result = serve.call(json!({"program": "cat", "input": big}));
    assert_eq!(ran(&result)["stdout_bytes"], big.len(), "{result}");
}

fn stdin_is_empty_without_input(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup.serve().timeout("20s").start();
    let started = std::time::Instant::now();
    let result = serve.call(json!({"program": "cat"}));
    let value = ran(&result);
    assert_eq!(value["exit_code"], 0, "{result}");
    assert_eq!(value["stdout_bytes"], 0, "{result}");
    assert_eq!(value["timed_out"], false, "{result}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "cat waited for input: {result}"
    );
    let result = serve.call(json!({
        "program": "sh",
        "args": ["-c", "if read line; then echo \"got[$line]\"; else echo eof; fi"],
    }));
    assert!(text(&result).contains("eof"), "{result}");
}

fn var_reaches_the_program(sandbox: Sandbox) {
    let setup = Setup::new(sandbox);
    let mut serve = setup
        .serve()
        .var("LNK_TEST_A=alpha")
        .var("LNK_TEST_B=two words")
        .var("LNK_TEST_C=a=b")
        .var("LNK_TEST_EMPTY=")
        .start();
    let result = serve.call(json!({"program": "env"}));
    assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    let text_env = text(&result);
    for line in [
        "LNK_TEST_A=alpha",
        "LNK_TEST_B=two words",
        "LNK_TEST_C=a=b",
        "LNK_TEST_EMPTY=",
    ] {
        assert!(
            text_env.lines().any(|l| l.trim_end() == line),
            "{line}: {text_env}"
        );
    }
    let result = serve.call(json!({
        "program": "sh",
        "args": ["-c", "printf '[%s][%s]\\n' \"$LNK_TEST_B\" \"$LNK_TEST_C\""],
    }));
    assert!(text(&result).contains("[two words][a=b]"), "{result}");
    // The program's own arguments still come after the assignments.
    let result = serve.call(json!({"program": "echo", "args": ["LNK_NOT_A_VAR=1", "x"]}));
    assert!(text(&result).contains("LNK_NOT_A_VAR=1 x"), "{result}");
}

/// Input is held within one budget for all calls (64 MiB): five calls of 15 MiB each whose
/// programs never read it cannot all be held; the one past the budget is refused, and once the
/// others end their input is given back.
#[test]
fn input_held_at_once_is_bounded() {
    let setup = Setup::new(Sandbox::Passthrough);
    let mut serve = setup.serve().timeout("40s").start();
    let input = "i".repeat(15 * 1024 * 1024);
    // Each request's line is written as it is: serializing 15 MiB in a debug build would be
    // the slowest part of the test.
    let send = |serve: &mut lnk_tests::serve::Serve, script: &str| {
        let id = serve.fresh_id();
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"command","arguments":{{"program":"sh","args":["-c","{script}"],"input":"{input}"}}}}}}"#
        );
        serve.send_line(line.as_bytes());
        id
    };
    // The four hold their input until the test lets them end: whatever the machine's speed,
    // they are all still running when the fifth call comes.
    let release = setup.files.join("release");
    let held = setup.files.join("held");
    std::fs::create_dir(&held).unwrap();
    let hold = format!(
        ": > '{}'/$$; while [ ! -e '{}' ]; do sleep 0.05; done",
        held.display(),
        release.display()
    );
    let waiting: Vec<i64> = (0..4).map(|_| send(&mut serve, &hold)).collect();
    // All four run (so all four hold their input) before the fifth is sent.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::fs::read_dir(&held).unwrap().count() < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the four calls did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let refused_id = send(&mut serve, "true");
    let refused = serve.call_result(refused_id, std::time::Duration::from_secs(60));
    std::fs::write(&release, b"").unwrap();
    assert!(is_error(&refused), "{refused}");
    let why = text(&refused);
    assert!(why.contains("input") && why.contains("file"), "{why}");
    for id in waiting {
        let result = serve.call_result(id, std::time::Duration::from_secs(40));
        assert_eq!(ran(&result)["exit_code"], 0, "{result}");
    }
    let counted = send(&mut serve, "wc -c");
    let result = serve.call_result(counted, std::time::Duration::from_secs(20));
    assert_eq!(
        ran(&result)["stdout"],
        format!("{}\n", input.len()),
        "{result}"
    );
}
