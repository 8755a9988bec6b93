//! The `command` tool: checks a call, runs it to its end, and answers how it ended and what it
//! wrote.

use std::sync::Arc;

use serde_json::{Map, Value};

use crate::call::input::InputBudget;
use crate::call::{self, CallError, CallSpec, Ended, NotRun};
use crate::call::{render, workdir};
use crate::config::Config;
use crate::program;
use crate::tool_call::answer::ToolAnswer;
use crate::tool_call::args;
use crate::tool_call::context::ToolContext;

/// Runs a `command` call on the calling thread; `None` when it was cancelled.
pub fn run(ctx: &mut ToolContext<'_>, arguments: &mut Map<String, Value>) -> Option<ToolAnswer> {
    let spec = match prepare(ctx.config, ctx.input, arguments) {
        Ok(spec) => spec,
        Err(message) => return Some(ToolAnswer::refusal(message)),
    };
    // What the call needs is in `spec` now; the request's copy is not kept for its life.
    arguments.clear();
    let timeout = spec.timeout;
    let dir = spec.cwd.path.strip_prefix(&ctx.config.files).map_or_else(
        |_| spec.cwd.path.display().to_string(),
        |dir| dir.display().to_string(),
    );
    let ended = call::run(spec, ctx.control, ctx.progress.take());
    match ended {
        Ok(Ended::Cancelled) => {
            tracing::debug!("call cancelled; no answer is sent");
            None
        }
        Ok(Ended::Finished(outcome)) => Some(ToolAnswer {
            text: render::text(&outcome, timeout),
            structured: Some(render::structured(&outcome)),
            is_error: false,
        }),
        Err(err @ CallError::ArgumentsTooLong(_)) => Some(ToolAnswer::refusal(format!(
            "{err}; pass less, or write it to a file in the files folder and pass its name"
        ))),
        Err(CallError::NotRun(not_run)) => Some(ToolAnswer::refusal(not_run_text(not_run, &dir))),
        Err(err @ CallError::Sandbox(_)) => Some(ToolAnswer::refusal(format!(
            "{err}; this is the server's setup, not the call: tell the person who runs this \
             server"
        ))),
    }
}

/// The answer to a call a warm sandbox did not run: nothing ran, and what to do.
fn not_run_text(not_run: NotRun, dir: &str) -> String {
    match not_run {
        NotRun::FolderChanged(_) => format!(
            "the working folder `{}` {not_run}: on the way in from the files folder it is no \
             longer a folder inside it. Nothing ran; call again once the folder is in place",
            crate::mcp::protocol::cut_short(dir)
        ),
        NotRun::StubStuck => format!(
            "{not_run}. Most likely nothing ran: call again, unless running the command twice \
             would do harm. (Only a program that can see the waiting sandboxes can stop them, \
             one of an earlier call under a sandbox without a PID namespace of its own; such a \
             program could also have let the command start just as it was killed.)"
        ),
    }
}

/// Turns the arguments into what to run, or a refusal that says what to do instead. The
/// call's `input` is taken out of `arguments` and held within the server's input budget.
pub fn prepare(
    config: &Config,
    budget: &Arc<InputBudget>,
    arguments: &mut Map<String, Value>,
) -> Result<CallSpec, String> {
    let input = args::take_input(arguments)?;
    let args = args::command_args(arguments)?;
    let program = program::resolve(&args.program, &config.programs, &config.programs_path)
        .map_err(|e| e.to_string())?;
    let cwd = workdir::open(&config.files, &args.dir).map_err(|e| e.to_string())?;
    let input = match input {
        Some(text) => Some(budget.take(text).map_err(|e| e.to_string())?),
        None => None,
    };
    let (line, words) = config
        .command_line_and_words(&program, &args.args)
        .map_err(|why| format!("the call's sandbox cannot be made: {why}. Nothing ran"))?;
    Ok(CallSpec {
        argv: line.words,
        passed: line.passed,
        protected: line.protected,
        caches: config.layers(),
        cwd,
        input,
        timeout: config.timeout,
        output: config.output,
        net: config.net.as_ref().map(|allow| (Arc::clone(allow), words)),
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::PathBuf;
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    /// A configuration as `serve` would check it, for a files folder `files`.
    fn config(files: PathBuf) -> Config {
        Config {
            files,
            programs: vec!["true".into(), "echo".into()],
            vars: vec![("DISPLAY".into(), ":1".into())],
            ..crate::testing::config("", &["/usr/bin/bwrap", "--unshare-all"])
        }
    }

    fn arguments(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn files_folder() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary folder: {e}"));
        let canonical = dir.path().canonicalize().unwrap_or_else(|e| panic!("{e}"));
        (dir, canonical)
    }

    #[test]
    fn a_call_runs_its_program_under_the_sandbox_in_its_folder_with_its_limits() {
        let (_dir, files) = files_folder();
        std::fs::create_dir(files.join("src")).unwrap_or_else(|e| panic!("{e}"));
        let config = config(files.clone());
        let budget = InputBudget::new(1024);
        let mut args =
            arguments(json!({"program": "echo", "args": ["a b"], "dir": "src", "input": "x"}));
        let spec = prepare(&config, &budget, &mut args).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !args.contains_key("input"),
            "the input is taken, not copied"
        );
        assert_eq!(budget.held(), 1);
        let echo = program::find_on_path("echo", &config.programs_path)
            .unwrap_or_else(|| panic!("echo is on /usr/bin:/bin"));
        let expected: Vec<OsString> = vec![
            "/usr/bin/bwrap".into(),
            "--unshare-all".into(),
            "--".into(),
            "/usr/bin/env".into(),
            "DISPLAY=:1".into(),
            echo.into_os_string(),
            "a b".into(),
        ];
        assert_eq!(spec.argv, expected);
        assert_eq!(spec.cwd.path, files.join("src"));
        assert_eq!(spec.input.as_ref().map(|i| i.pending()), Some(&b"x"[..]));
        assert_eq!(spec.timeout, Duration::from_secs(7));
        assert_eq!(spec.output, 64);
    }

    #[test]
    fn a_program_off_the_list_or_a_folder_outside_is_refused_with_what_to_do() {
        let (_dir, files) = files_folder();
        let config = config(files);
        let budget = InputBudget::new(4);
        let prepare = |value: Value| prepare(&config, &budget, &mut arguments(value));
        let refused = prepare(json!({"program": "sh"}))
            .err()
            .unwrap_or_else(|| panic!("sh is not on the list"));
        assert!(
            refused.contains("true") && refused.contains("echo"),
            "{refused}"
        );
        let outside = prepare(json!({"program": "true", "dir": ".."}))
            .err()
            .unwrap_or_else(|| panic!(".. leads outside"));
        assert!(outside.contains(".."), "{outside}");
        let typo = prepare(json!({"program": "true", "cwd": "."}))
            .err()
            .unwrap_or_else(|| panic!("cwd is not an argument"));
        assert!(typo.contains("cwd"), "{typo}");
        let too_much = prepare(json!({"program": "true", "input": "12345"}))
            .err()
            .unwrap_or_else(|| panic!("5 bytes pass a budget of 4"));
        assert!(too_much.contains("input"), "{too_much}");
        assert_eq!(budget.held(), 0, "nothing is held for a refused call");
    }
}
