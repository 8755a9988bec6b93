//! A `command` or `start` call's arguments, checked for shape (their meaning — the program,
//! the folder — is checked where they are used).

use serde_json::{Map, Value};

/// Linux's limit on one argument of a command line, its NUL included (`MAX_ARG_STRLEN`, 32
/// pages): a longer one fails the exec with `E2BIG`, which a `start` would meet only after its
/// answer.
const MAX_ARGUMENT_BYTES: usize = 32 * 4096;

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
            "unknown argument `{}`; `command` takes program, args, dir and input",
            crate::mcp::protocol::cut_short(unknown)
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
    if let Some(long) = args.iter().find(|a| a.len() >= MAX_ARGUMENT_BYTES) {
        return Err(format!(
            "an argument is {} bytes long, too long for one command line: Linux passes no \
             argument of {MAX_ARGUMENT_BYTES} bytes or more to a program; write it to a file in \
             the files folder and pass its name",
            long.len()
        ));
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

/// Takes a `command` call's `input` out of its arguments, so that the one copy of it (up to a
/// request line, 16 MiB) is the one written to the program.
pub fn take_input(arguments: &mut Map<String, Value>) -> Result<Option<String>, String> {
    match arguments.remove("input") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(_) => Err("`input` must be a string".into()),
    }
}

fn optional_string(arguments: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match arguments.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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

    /// `start` reads its command with these too: an argument the kernel would refuse is refused
    /// before anything starts, not met by the run's exec after its answer.
    #[test]
    fn refuses_an_argument_too_long_for_a_command_line() {
        let longest = "x".repeat(MAX_ARGUMENT_BYTES - 1);
        assert!(args(json!({"program": "echo", "args": [longest]})).is_ok());
        let long = "x".repeat(MAX_ARGUMENT_BYTES);
        let refused = args(json!({"program": "echo", "args": ["a", long]}));
        assert!(refused.is_err_and(
            |e| e.contains("too long for one command line") && e.contains("write it to a file")
        ),);
    }
}
