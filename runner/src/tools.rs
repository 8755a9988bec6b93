//! The tools this server offers: their definitions for `tools/list` and the checking of a
//! call's arguments.

use serde_json::{Map, Value, json};

use crate::config::Config;
use crate::protocol::Era;

/// The `command` tool's name.
pub const COMMAND: &str = "command";

/// The arguments of a `command` call, checked for shape (not yet for meaning).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandArgs {
    /// The program's bare name.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The working folder, relative to the files folder.
    pub dir: String,
    /// Text for stdin.
    pub input: Option<String>,
}

/// Reads a `command` call's arguments; the error says what is wrong and how to call instead.
pub fn command_args(arguments: &Map<String, Value>) -> Result<CommandArgs, String> {
    const FIELDS: [&str; 4] = ["program", "args", "dir", "input"];
    if let Some(unknown) = arguments.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(format!(
            "unknown argument `{unknown}`; `command` takes program, args, dir and input"
        ));
    }
    let program = match arguments.get("program") {
        Some(Value::String(p)) => p.clone(),
        Some(_) => return Err("`program` must be a string: the program's name".into()),
        None => return Err("`program` is required: the name of the program to run".into()),
    };
    let args = match arguments.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or("`args` must be an array of strings")?,
        Some(_) => return Err("`args` must be an array of strings".into()),
    };
    if args.iter().any(|a| a.contains('\0')) {
        return Err("an argument holds a NUL character, which no program can receive".into());
    }
    let dir = optional_string(arguments, "dir")?.unwrap_or_else(|| ".".to_owned());
    if dir.contains('\0') {
        return Err("`dir` holds a NUL character".into());
    }
    let input = optional_string(arguments, "input")?;
    Ok(CommandArgs {
        program,
        args,
        dir,
        input,
    })
}

fn optional_string(arguments: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

/// Every tool, as `tools/list` shows it in `era`.
pub fn definitions(config: &Config, era: &Era) -> Vec<Value> {
    let mut command = json!({
        "name": COMMAND,
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
    vec![command]
}

fn command_description(config: &Config) -> String {
    let half = config.output / 2;
    let vars = if config.vars.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = config.vars.iter().map(|(n, _)| n.as_str()).collect();
        format!(" Its environment has {}.", names.join(", "))
    };
    format!(
        "Runs one program in a sandbox and returns how it ended and its output. Programs that may \
         be run: {programs}. `args` are passed as they are, with no shell. The working folder is \
         `dir`, relative to the files folder (default: the files folder itself); it cannot lead \
         outside it. `input` is written to the program's stdin; without it stdin is empty. \
         Limits: after {timeout} the program and everything it started are killed; each of \
         stdout and stderr keeps its first {half} and last {half} bytes and counts the rest; \
         processes still running a second after the program exits are killed.{vars} A \
         non-zero exit is reported, not an error.",
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
            "stdout_bytes": count,
            "stderr_bytes": count,
            "elapsed_ms": count,
            "leftovers_killed": {"type": "boolean", "description": "Whether processes it left running were killed a second after it exited."}
        },
        "required": ["exit_code", "signal", "timed_out", "stdout_bytes", "stderr_bytes", "elapsed_ms", "leftovers_killed"],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(value: Value) -> Result<CommandArgs, String> {
        match value {
            Value::Object(map) => command_args(&map),
            _ => Err("not an object".into()),
        }
    }

    #[test]
    fn reads_full_and_minimal_arguments() {
        let full = args(json!({"program": "ls", "args": ["-l"], "dir": "src", "input": "x"}));
        assert_eq!(
            full,
            Ok(CommandArgs {
                program: "ls".into(),
                args: vec!["-l".into()],
                dir: "src".into(),
                input: Some("x".into()),
            })
        );
        let minimal = args(json!({"program": "ls"}));
        assert_eq!(
            minimal.map(|a| (a.dir, a.args.len())),
            Ok((".".to_owned(), 0))
        );
    }

    #[test]
    fn refuses_bad_shapes_with_a_reason() {
        assert!(args(json!({})).is_err_and(|e| e.contains("required")));
        assert!(args(json!({"program": 1})).is_err());
        assert!(args(json!({"program": "ls", "args": "-l"})).is_err());
        assert!(args(json!({"program": "ls", "args": [1]})).is_err());
        assert!(args(json!({"program": "ls", "cwd": "x"})).is_err_and(|e| e.contains("cwd")));
    }
}
