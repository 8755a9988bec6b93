//! The background tools as `tools/list` shows them.

use serde_json::{Value, json};

use crate::config::{Background, Config};
use crate::mcp::protocol::Era;

/// `start`, `list`, `read`, `write`, `stop` and `watch`, when the server has background runs.
pub fn definitions(config: &Config, era: &Era) -> Vec<Value> {
    let Some(background) = &config.background else {
        return Vec::new();
    };
    let mut tools = vec![
        json!({
            "name": "start",
            "title": "Start a background run",
            "description": start_description(config, background),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "program": {"type": "string", "enum": config.programs, "description": "The program to run, by name."},
                    "args": {"type": "array", "items": {"type": "string"}, "description": "Its arguments, passed as they are (no shell)."},
                    "dir": {"type": "string", "description": "The working folder, relative to the files folder. Default: `.`."},
                    "input": {"type": "string", "maxLength": lnk_common::stdin::WRITE_MAX, "description": "Text written to the program's stdin at its start (at most 64 KiB; 4 KiB with `tty`). Without `interactive` or `tty`, stdin then ends. Default: none."},
                    "interactive": {"type": "boolean", "description": "Keep the program's stdin open, so that `write` can answer what it asks (a prompt, a REPL, an installer's questions). Default: false (stdin ends at once)."},
                    "tty": {"type": "boolean", "description": "Run the program on a terminal of its own (stdin, stdout and stderr), for programs that behave differently without one: prompts that ask only on a terminal, REPLs, password and confirmation questions, progress bars. Implies `interactive`; `write` types into it (\"\\n\" is Enter, \"\\u0003\" is Ctrl-C). Its output keeps what the terminal showed, escape sequences included. Default: false."},
                    "cols": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "With `tty`: the terminal's width. Default: 80."},
                    "rows": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "With `tty`: the terminal's height. Default: 24."}
                },
                "required": ["program"],
                "additionalProperties": false
            },
            "outputSchema": start_output_schema(),
            "annotations": {"title": "Start a background run", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": false}
        }),
        json!({
            "name": "list",
            "title": "List background runs",
            "description": "Lists the background runs, newest first, a page at a time: program, state (running, exited, timed_out, stopped, lost), exit, times, output sizes and whether the end was told. `state` keeps only runs in that state (`ended`: every state but running); `limit` is the page's size (default 20, at most 200); when more runs match, the answer's `next` is the `before` of the next page.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "state": {"type": "string", "enum": ["running", "ended", "exited", "timed_out", "stopped", "lost"], "description": "Only runs in this state; `ended` is every state but `running`. Default: all."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 200, "description": "At most this many runs. Default: 20."},
                    "before": {"type": "string", "description": "The `next` of the page before: the runs started before its last one. Default: the newest runs."}
                },
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "runs": {"type": "array", "items": run_schema()},
                    "next": {"type": ["string", "null"], "description": "When more runs match: the `before` of the next page; else null."}
                },
                "required": ["runs", "next"],
                "additionalProperties": false
            },
            "annotations": {"title": "List background runs", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        }),
        json!({
            "name": "read",
            "title": "Read a background run's output",
            "description": format!(
                "Reads a background run's output (stdout and stderr together). Offsets count every byte the run wrote since it started, including bytes already dropped from the start of its output file (it keeps the newest part, {} at most). Without `offset`, the last `limit` bytes. `limit` defaults to and is capped at {} bytes of text. The answer gives `next_offset` to read on from. Control characters and escape sequences in the output are shown escaped (`\\e[31m`); `raw: true` gives the bytes as they are, in base64. To find lines in a long output (an error in a build log), give `grep`, a regular expression: the answer lists the matching lines with their offsets, and how many matched in all. To wait instead of calling `read` again and again, give `wait_ms` (at most {} ms): the answer comes as soon as there is output past `offset` (without `offset`: output written after this call began), or, with `until`, as soon as that text appears past `offset` (a server's \"listening on\", a test run's summary: pass `offset: 0` to look from the start), or when the run ends, or when the time is up — whichever is first; it says which (`matched`, `match_offset`, `ended`, `waited_ms`). A host that follows MCP tasks can instead `watch` the run and be told.",
                background.output, config.output, config.timeout.as_millis()
            ),
            "inputSchema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "The run's id."},
                    "offset": {"type": "integer", "minimum": 0, "description": "Where to start reading. Default: the last `limit` bytes."},
                    "limit": {"type": "integer", "minimum": 0, "description": "How many bytes at most."},
                    "wait_ms": {"type": "integer", "minimum": 0, "maximum": u64::try_from(config.timeout.as_millis()).unwrap_or(u64::MAX), "description": "Wait up to this long (milliseconds) for output past `offset`, for `until`, or for the run's end, instead of answering at once."},
                    "until": {"type": "string", "minLength": 1, "maxLength": super::read::UNTIL_BYTES, "description": "With `wait_ms`: the text to wait for in the output past `offset`."},
                    "raw": {"type": "boolean", "description": "Give the bytes as they are, in base64 (`base64`), escape sequences included. Default: false (text, with control characters shown escaped)."},
                    "grep": {"type": "string", "minLength": 1, "maxLength": super::lines::PATTERN_BYTES, "description": "A regular expression (Rust `regex` syntax): answer with the lines of the kept output (from `offset`) that match, each with its offset, within `limit` bytes, and how many matched in all."}
                },
                "required": ["id"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "state": state_schema(),
                    "text": {"type": "string", "description": "The bytes read, as text (control characters and escape sequences shown escaped, bytes that are not UTF-8 as U+FFFD; a character is never cut in two: `next_offset` says where to go on)."},
                    "base64": {"type": "string", "description": "With `raw`: the bytes read, as they are, in base64."},
                    "grep": {"type": "string", "description": "With `grep`: the expression."},
                    "matches": {"type": "array", "items": {"type": "object", "properties": {"offset": count(), "line": {"type": "string"}}, "required": ["offset", "line"], "additionalProperties": false}, "description": "With `grep`: the matching lines shown (within `limit`), each at its offset."},
                    "lines_matched": {"type": "integer", "minimum": 0, "description": "With `grep`: how many lines matched in all."},
                    "offset": count(),
                    "next_offset": count(),
                    "output_bytes": count(),
                    "dropped_bytes": count(),
                    "skipped": {"type": "integer", "minimum": 0, "description": "Bytes between `offset` and `next_offset` that are not in `text`: dropped from the output file's start, or never written (see `unwritten_bytes`)."},
                    "unwritten_bytes": {"type": "integer", "minimum": 0, "description": "Present when some of the run's output could not be written for want of room: how many bytes, in all (counted in `output_bytes`, never readable)."},
                    "unwritten_why": {"type": "string", "description": "With `unwritten_bytes`: why, in words."},
                    "waited_ms": {"type": "integer", "minimum": 0, "description": "With `wait_ms`: how long the read waited."},
                    "matched": {"type": "boolean", "description": "With `wait_ms`: whether `until` was seen."},
                    "match_offset": {"type": ["integer", "null"], "minimum": 0, "description": "With `wait_ms`: where `until` starts, in the run's offsets; null when not seen."},
                    "ended": {"type": "boolean", "description": "With `wait_ms`: whether the run has ended."},
                    "network": crate::net::render::schema()
                },
                "required": ["id", "state", "offset", "next_offset", "output_bytes", "dropped_bytes", "skipped"],
                "additionalProperties": false
            },
            "annotations": {"title": "Read a background run's output", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false}
        }),
        write_definition(),
        stop_definition(),
        watch_definition(config, background, era),
    ];
    if !era.has_structured_output() {
        for tool in &mut tools {
            if let Some(object) = tool.as_object_mut() {
                object.remove("outputSchema");
            }
        }
    }
    tools
}

/// `stop`, with or without a signal.
fn stop_definition() -> Value {
    let mut output = run_schema();
    if let Some(properties) = output["properties"].as_object_mut() {
        properties.insert(
            "sent_signal".into(),
            json!({"type": "string", "description": "With `signal`: the signal sent."}),
        );
        properties.insert("processes_signalled".into(), json!({"type": "integer", "minimum": 0, "description": "With `signal`: how many of the run's processes it reached."}));
    }
    json!({
        "name": "stop",
        "title": "Stop a background run, or send it a signal",
        "description": "Stops a background run (it and everything it started are killed: SIGTERM, then SIGKILL 2 s later), waits up to 5 s for its end to be recorded, and answers with the run as `list` shows it. Stopping a run that ended is not an error. With `signal`, sends that signal alone to the run's program and what it started (not to the sandbox) and answers at once: INT is a Ctrl-C (a dev server's clean stop), HUP often a reload, USR1/USR2 what the program makes of them, CONT lets a program stopped by Ctrl-Z go on; the run ends only if the program does.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The run's id."},
                "signal": {"type": "string", "enum": super::stop::ToSend::names(), "description": "Send this signal alone, instead of stopping the run."}
            },
            "required": ["id"],
            "additionalProperties": false
        },
        "outputSchema": output,
        "annotations": {"title": "Stop a background run, or send it a signal", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": false}
    })
}

/// `watch`: a task for a host that follows MCP tasks (2026-07-28, the extension's era), a
/// waiting call otherwise.
fn watch_definition(config: &Config, background: &Background, era: &Era) -> Value {
    let most = u64::try_from(background.timeout.as_millis()).unwrap_or(u64::MAX);
    let mut tool = json!({
        "name": "watch",
        "title": "Be told when a background run prints a line",
        "description": format!(
            "Waits in the background for a line in a background run's output, or for its end, and tells you when it comes: use it to learn that a server you started is ready (`until: \"listening on\"`), that a build finished, or that a test failed (`until: \"FAILED\"`), instead of calling `read` again and again. A host that follows MCP tasks answers at once and brings you the result by itself when the line appears (you may go on with other work meanwhile); any other host waits for it in this call, {call} at most. `until` is a plain text a line must hold, or with `regex: true` a regular expression (Rust `regex` syntax); `ended: true` without `until` waits for the run's end. Lines are looked at from where the output stands when the watch begins: pass `offset: 0` if the line may have been printed already. The result holds the matching line, its byte offset and the lines around it, or, when the run ended or the time (`timeout`, at most {most} ms) was up first, how the run ended and its last lines. Cancelling the watch leaves the run running.",
            call = humantime::format_duration(config.timeout),
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The run's id."},
                "until": {"type": "string", "minLength": 1, "maxLength": super::lines::PATTERN_BYTES, "description": "The text a line of the output must hold (with `regex`: a regular expression it must match)."},
                "regex": {"type": "boolean", "description": "Read `until` as a regular expression. Default: false (plain text)."},
                "ended": {"type": "boolean", "description": "Wait for the run's end (needed without `until`; with it, the end always ends the watch too)."},
                "timeout": {"type": "integer", "minimum": 0, "maximum": most, "description": "How long to wait at most, in milliseconds. Default and most: the background timeout."},
                "offset": {"type": "integer", "minimum": 0, "description": "Look at lines from this byte offset of the run's output (0: from the start). Default: where the output stands now."}
            },
            "required": ["id"],
            "additionalProperties": false
        },
        "outputSchema": super::watch_result::schema(),
        "annotations": {"title": "Be told when a background run prints a line", "readOnlyHint": true, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}
    });
    if matches!(era, Era::Modern) {
        // Where the Tasks extension is spoken, a watch is meant to be a task.
        tool["execution"] = json!({"taskSupport": "required"});
    }
    tool
}

fn start_description(config: &Config, background: &Background) -> String {
    let told = if background.way_in.is_some() {
        "When it ends, this conversation is told, with a signed message; a host that follows MCP \
         tasks is also told by itself and brings you the result."
    } else {
        "A host that follows MCP tasks is told when it ends and brings you its result (exit and \
         output); otherwise look with `list` and `read`."
    };
    format!(
        "Starts a program in the background, in a sandbox, and answers at once with the run's id. \
         Use it for work that may outlast a call: a build, a test suite, a server. It outlives \
         this call and this server. Programs that may be run: {programs}. `dir` is relative to \
         the files folder. `input` is written to its stdin, which then ends; for a program that \
         asks questions or reads commands as it goes, start it with `interactive: true` and \
         answer with `write`, and with `tty: true` when it needs a terminal (it asks only on \
         one, or draws for one). Its stdout and stderr go to `background/<id>.out` in the files \
         folder, which keeps the newest {output} bytes; read it with `read`, stop the run with \
         `stop`. Limits: at most {max} runs at once; each is killed after {timeout}, with \
         everything it started. {told}",
        programs = config.programs.join(", "),
        output = background.output,
        max = background.max_running,
        timeout = humantime::format_duration(background.timeout),
    )
}

/// `write`, for runs started `interactive` or `tty`.
fn write_definition() -> Value {
    json!({
        "name": "write",
        "title": "Type into a background run's stdin",
        "description": format!(
            "Sends text to the stdin of a background run started with `interactive: true` or `tty: true`, and answers how many bytes its program took. Use it to answer a prompt (\"y\\n\"), drive a REPL (\"print(6*7)\\n\"), or press Ctrl-C on a `tty` run (\"\\u0003\"; Ctrl-\\ is \"\\u001c\", Ctrl-Z \"\\u001a\": each reaches the program as its signal); end lines with \"\\n\". Then `read` the run's output to see the answer. `eof: true` closes stdin after the text (the program sees its input end). At most {max} bytes at once; a program that is not reading takes only what fits, and the rest is refused, not kept. Refused for a run that has ended, was not started interactive, or whose stdin was closed.",
            max = lnk_common::stdin::WRITE_MAX
        ),
        "inputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The run's id."},
                "text": {"type": "string", "maxLength": lnk_common::stdin::WRITE_MAX, "description": "What to type: sent as it is (UTF-8), \"\\n\" included."},
                "eof": {"type": "boolean", "description": "Close the run's stdin after the text. Default: false."}
            },
            "required": ["id", "text"],
            "additionalProperties": false
        },
        "outputSchema": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "taken": {"type": "integer", "minimum": 0, "description": "Bytes the program's stdin took: all of `text`."},
                "closed": {"type": "boolean", "description": "Whether the run's stdin is closed now (`eof`)."}
            },
            "required": ["id", "taken", "closed"],
            "additionalProperties": false
        },
        "annotations": {"title": "Type into a background run's stdin", "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false}
    })
}

fn count() -> Value {
    json!({"type": "integer", "minimum": 0})
}

fn state_schema() -> Value {
    json!({"type": "string", "enum": ["running", "exited", "timed_out", "stopped", "lost"]})
}

/// What `start` answers: the started run (`id`, `output` its file), or — as the result of a
/// completed task, for a host that follows the run as one — the run as `list` shows it with
/// `summary` and `output`, the text it printed. One schema, so that every result validates.
fn start_output_schema() -> Value {
    let mut schema = run_schema();
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.insert(
            "output".into(),
            json!({"type": "string", "description": "When the run was started: its output file, relative to the files folder. In a completed task's result: the head and tail of what it printed (stdout and stderr together)."}),
        );
        properties.insert(
            "summary".into(),
            json!({"type": "string", "description": "In a completed task's result: how the run ended, in one line."}),
        );
        for property in properties.values_mut() {
            if property.get("description").is_none() {
                property["description"] =
                    json!("In a completed task's result: as `list` shows the run.");
            }
        }
        properties.insert(
            "id".into(),
            json!({"type": "string", "description": "The run's id (and its task's)."}),
        );
    }
    schema["required"] = json!(["id", "output"]);
    schema
}

/// A run as `list` shows it.
fn run_schema() -> Value {
    let nullable_int = json!({"type": ["integer", "null"]});
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "program": {"type": "string"},
            "args": {"type": "array", "items": {"type": "string"}},
            "dir": {"type": "string"},
            "state": state_schema(),
            "exit_code": nullable_int,
            "signal": nullable_int,
            "started_at": {"type": "string", "description": "RFC 3339, UTC."},
            "ended_at": {"type": ["string", "null"], "description": "RFC 3339, UTC; null while running."},
            "output_bytes": count(),
            "dropped_bytes": count(),
            "told": {"type": "boolean"},
            "unwritten_bytes": {"type": "integer", "minimum": 0, "description": "Present when some of the run's output could not be written for want of room (a full files folder): how many bytes, in all (counted in `output_bytes`, never readable)."},
            "unwritten_why": {"type": "string", "description": "With `unwritten_bytes`: why, in words."},
            "network": crate::net::render::schema()
        },
        "required": ["id", "program", "args", "dir", "state", "exit_code", "signal", "started_at", "ended_at", "output_bytes", "dropped_bytes", "told"],
        "additionalProperties": false
    })
}
