//! The one way a tool call runs: registered in flight, run on a thread of its own while it
//! runs (`threads`; a panic is the call's refusal, not the server's end), its id freed,
//! answered unless it was cancelled, and its place given back — in that order, for every tool.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use crate::mcp::progress::ProgressSink;
use crate::mcp::protocol::{self, Era, RpcError};
use crate::mcp::stdout::Writer;
use crate::serve::in_flight::{CallRefused, Calls, InFlight};
use crate::tool_call::answer::ToolAnswer;
use crate::tool_call::context::{ToolContext, Toolbox};
use crate::tools::Tool;

/// A `tools/call` request, read.
pub struct ToolCall {
    /// The request's id.
    pub id: Value,
    /// The revision it is served at.
    pub era: Era,
    /// The tool.
    pub tool: Tool,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// Its `_meta` (the progress token, the conversation, the hops).
    pub meta: Option<Map<String, Value>>,
    /// Whether the request declared the Tasks extension (2026-07-28 only).
    pub tasks: bool,
}

/// Starts `call` on a thread of its own (one that waited for a call, or a new one), which
/// answers it. A call that may not start is answered here: a refusal, or an error for an id
/// already in flight.
pub fn dispatch(toolbox: &Arc<Toolbox>, calls: &Arc<Calls>, writer: &Writer, call: ToolCall) {
    let in_flight = match calls.begin(&call.id) {
        Ok(in_flight) => in_flight,
        Err(refused @ CallRefused::DuplicateId) => {
            let error = RpcError::new(call.id, protocol::INVALID_REQUEST, refused.to_string());
            return writer.send(&error.to_message());
        }
        Err(refused) => {
            let result = ToolAnswer::refusal(refused.to_string()).into_result(&call.era);
            return writer.send(&protocol::result_message(&call.id, &call.era, result));
        }
    };
    let id = call.id.clone();
    let thread_toolbox = Arc::clone(toolbox);
    let thread_writer = writer.clone();
    let name = format!(
        "{} {}",
        call.tool.name(),
        protocol::cut_short(&call.id.to_string())
    );
    let started = crate::serve::threads::run(name, move || {
        run(&thread_toolbox, &thread_writer, call, in_flight);
    });
    if let Err(err) = started {
        // The thread's closure, and the call's place with it, was dropped: the id is free.
        let error = RpcError::new(
            id,
            protocol::INTERNAL_ERROR,
            format!("no thread for the call: {}", lnk_common::Causes(&err)),
        );
        writer.send(&error.to_message());
    }
}

/// Runs the call to its end on this thread and answers it, unless it was cancelled.
fn run(toolbox: &Toolbox, writer: &Writer, call: ToolCall, in_flight: InFlight) {
    let ToolCall {
        id,
        era,
        tool,
        mut arguments,
        meta,
        tasks,
    } = call;
    // What the tool holds until its answer is out (`Tool::begin`).
    let holding = tool.begin();
    // Every line the call logs names it, so that two calls' lines can be told apart.
    let _span = tracing::info_span!(
        "call",
        id = %protocol::cut_short(&id.to_string()),
        tool = tool.name()
    )
    .entered();
    // The project's folder may still be being asked for or made: the call waits for it.
    let project = toolbox.projects.wait(in_flight.control());
    let token = meta
        .as_ref()
        .and_then(|meta| meta.get("progressToken"))
        .filter(|token| token.is_string() || token.is_number())
        .cloned();
    let mut sink = token.map(|token| ProgressSink::new(writer.clone(), token, &era));
    let mut report;
    let progress: Option<&mut dyn FnMut(Duration, u64)> = match sink.as_mut() {
        Some(sink) => {
            report = |elapsed, bytes| sink.report(elapsed, bytes);
            Some(&mut report)
        }
        None => None,
    };
    let answer = catch_unwind(AssertUnwindSafe(|| {
        let project = match &project {
            Ok(project) => project,
            Err(_) if in_flight.control().is_cancelled() => return None,
            Err(refusal) => return Some(ToolAnswer::refusal(refusal.clone()).into()),
        };
        let mut ctx =
            ToolContext::new(toolbox, project, &era, in_flight.control(), tasks, progress);
        tool.run(&mut ctx, &mut arguments, meta.as_ref())
    }))
    .unwrap_or_else(|_| {
        Some(
            ToolAnswer::refusal(format!(
                "`{}` failed inside the server (a bug; its log says where)",
                tool.name()
            ))
            .into(),
        )
    });
    in_flight.finish(|| {
        if let Some(answer) = answer {
            let result = answer.into_result(&era);
            writer.send(&protocol::result_message(&id, &era, result));
        }
    });
    holding.answered();
}
