//! The `command` tool: checks a call, runs it on a thread of its own, and answers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::call::{self, CallSpec, Ended};
use crate::protocol::{self, Era, RpcError};
use crate::server::{CallRefused, Server, refusal_result};
use crate::{program, render, spawn, tools, workdir};

/// Checks a `command` call and starts it; refusals are answered at once with `isError`.
pub fn start(
    server: &Arc<Server>,
    id: Value,
    era: Era,
    arguments: &Map<String, Value>,
    progress: Option<Value>,
) {
    let spec = match prepare(server, arguments) {
        Ok(spec) => spec,
        Err(message) => return refuse(server, &id, &era, &message),
    };
    let control = match server.call_started(&id) {
        Ok(control) => control,
        Err(CallRefused::DuplicateId) => {
            let err = RpcError::new(
                id,
                protocol::INVALID_REQUEST,
                CallRefused::DuplicateId.to_string(),
            );
            return server.writer.send(&err.to_message());
        }
        Err(refused) => return refuse(server, &id, &era, &refused.to_string()),
    };
    let thread_server = Arc::clone(server);
    let thread_id = id.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("call {id}"))
        .spawn(move || {
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(&thread_server, &thread_id, &era, spec, &control, progress)
            }))
            .unwrap_or_else(|_| {
                Some(refusal_result(
                    "the call failed inside the server (a bug; its log says where)",
                ))
            });
            // The id is free again before its answer goes out, so a client may reuse it as
            // soon as it has the answer.
            thread_server.forget(&thread_id);
            if let Some(result) = result
                && !control.is_cancelled()
            {
                thread_server.answer(&thread_id, &era, result);
            }
            thread_server.count_ended();
        });
    if let Err(err) = spawned {
        server.forget(&id);
        server.count_ended();
        let err = RpcError::new(
            id,
            protocol::INTERNAL_ERROR,
            format!("no thread for the call: {err}"),
        );
        server.writer.send(&err.to_message());
    }
}

/// Turns the arguments into what to run, or a refusal that says what to do instead.
fn prepare(server: &Server, arguments: &Map<String, Value>) -> Result<CallSpec, String> {
    let config = &server.config;
    let args = tools::command_args(arguments)?;
    let program = program::resolve(&args.program, &config.programs, &config.programs_path)
        .map_err(|e| e.to_string())?;
    let cwd = workdir::open(&config.files, &args.dir).map_err(|e| e.to_string())?;
    Ok(CallSpec {
        argv: spawn::call_argv(&config.sandbox, &config.vars, &program, &args.args),
        cwd,
        input: args.input.map(String::into_bytes),
        timeout: config.timeout,
        output: config.output,
    })
}

/// Runs the call to its end; the result to answer with, `None` when it was cancelled.
fn run(
    server: &Server,
    id: &Value,
    era: &Era,
    spec: CallSpec,
    control: &call::CallControl,
    progress: Option<Value>,
) -> Option<Value> {
    let timeout = spec.timeout;
    let mut last_sent: Option<u64> = None;
    let mut report = |elapsed: Duration, bytes: u64| {
        let Some(token) = &progress else { return };
        let seconds = elapsed.as_secs();
        // `progress` must increase from one notification to the next.
        if control.is_cancelled() || last_sent.is_some_and(|last| seconds <= last) {
            return;
        }
        last_sent = Some(seconds);
        let mut params = json!({"progressToken": token, "progress": seconds});
        if era.has_progress_message() {
            params["message"] = json!(format!("{seconds} s, {bytes} bytes of output"));
        }
        server.writer.send_if_room(&json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": params,
        }));
    };
    let progress_fn: Option<&mut dyn FnMut(Duration, u64)> = Some(&mut report);
    match call::run(spec, control, Some(&server.watchdog), progress_fn) {
        Ok(Ended::Cancelled) => {
            tracing::debug!(%id, "call cancelled; no answer is sent");
            None
        }
        Ok(Ended::Finished(outcome)) => {
            let mut result = json!({
                "content": [{"type": "text", "text": render::text(&outcome, timeout)}],
                "isError": false,
            });
            if era.has_structured_output() {
                result["structuredContent"] = render::structured(&outcome);
            }
            Some(result)
        }
        Err(err) if err.raw_os_error() == Some(rustix::io::Errno::TOOBIG.raw_os_error()) => {
            Some(refusal_result(&format!(
                "the arguments are too long for one command line ({err}); pass less, or write \
                 it to a file in the files folder and pass its name"
            )))
        }
        Err(err) => Some(refusal_result(&format!(
            "the sandbox could not be started ({err}); this is the server's setup, not the \
             call: tell the person who runs this server"
        ))),
    }
}

fn refuse(server: &Server, id: &Value, era: &Era, message: &str) {
    server.answer(id, era, refusal_result(message));
}
