//! The tools as `tools/list` shows them: names, descriptions with the limits in force, and
//! input and output schemas.

use serde_json::{Value, json};

use super::Tool;
use crate::config::Config;
use crate::mcp::protocol::Era;

/// Every tool this server offers, as `tools/list` shows it in `era`.
pub fn definitions(config: &Config, era: &Era) -> Vec<Value> {
    let mut tools = vec![command_definition(config, era)];
    tools.extend(crate::background::definitions(config, era));
    tools
}

/// The `command` tool.
fn command_definition(config: &Config, era: &Era) -> Value {
    let mut command = json!({
        "name": Tool::Command.name(),
        "title": "Run a program",
        "description": command_description(config),
        "inputSchema": command_input_schema(config),
        "annotations": {
            "title": "Run a program",
            "readOnlyHint": false,
            "destructiveHint": true,
            "idempotentHint": false,
            "openWorldHint": false
        }
    });
    if era.has_structured_output() {
        command["outputSchema"] = command_output_schema();
    }
    command
}

fn command_description(config: &Config) -> String {
    let half = config.output / 2;
    let vars = if config.vars.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = config.vars.iter().map(|(n, _)| n.as_str()).collect();
        format!(" Its environment has {}.", names.join(", "))
    };
    let network = match &config.net {
        Some(allow) => format!(
            " Its network reaches these hosts only, through Link Run's proxy (HTTP_PROXY, \
             HTTPS_PROXY and the like are set): {}; anything else is refused, and the answer's \
             `network` names each refusal and why.",
            allow.texts().join(", ")
        ),
        None => String::new(),
    };
    format!(
        "Runs one program in a sandbox and returns how it ended and its output. Programs that may \
         be run: {programs}. `args` are passed as they are, with no shell. The working folder is \
         `dir`, relative to the files folder (default: the files folder itself); it cannot lead \
         outside it. `input` is written to the program's stdin; without it stdin is empty. \
         Limits: after {timeout} the program and everything it started are killed; each of \
         stdout and stderr keeps its first {half} and last {half} bytes and counts the rest; \
         processes still running a second after the program exits are killed.{vars}{network} \
         A non-zero exit is reported, not an error.",
        programs = config.programs.join(", "),
        timeout = humantime::format_duration(config.timeout),
    )
}

fn command_input_schema(config: &Config) -> Value {
    json!({
        "type": "object",
        "properties": {
            "program": {
                "type": "string",
                "enum": config.programs,
                "description": "The program to run, by name."
            },
            "args": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Its arguments, passed as they are (no shell)."
            },
            "dir": {
                "type": "string",
                "description": "The working folder, relative to the files folder. Default: `.`."
            },
            "input": {
                "type": "string",
                "description": "Text written to the program's stdin. Default: an empty stdin."
            }
        },
        "required": ["program"],
        "additionalProperties": false
    })
}

fn command_output_schema() -> Value {
    let count = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "properties": {
            "exit_code": {"type": ["integer", "null"], "description": "The exit code, or null when a signal ended it."},
            "signal": {"type": ["integer", "null"], "description": "The signal that ended it, or null."},
            "timed_out": {"type": "boolean", "description": "Whether the time limit ended it."},
            "stdout": {"type": "string", "description": "Its stdout as kept: the head, then (when bytes were left out) a line saying how many, then the tail."},
            "stderr": {"type": "string", "description": "Its stderr, kept as stdout is."},
            "stdout_bytes": count,
            "stderr_bytes": count,
            "elapsed_ms": count,
            "leftovers_killed": {"type": "boolean", "description": "Whether processes it left running were killed a second after it exited."},
            "network": crate::net::render::schema()
        },
        "required": ["exit_code", "signal", "timed_out", "stdout", "stderr", "stdout_bytes", "stderr_bytes", "elapsed_ms", "leftovers_killed"],
        "additionalProperties": false
    })
}
