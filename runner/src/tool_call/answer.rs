//! What a tool call answers: one type for every tool, turned into an MCP result in one place.

use serde_json::{Value, json};

use crate::mcp::protocol::Era;

/// A tool's answer: its text, its structured value, and whether it is a refusal.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolAnswer {
    /// The text for the agent.
    pub text: String,
    /// The structured value, sent where the revision has one.
    pub structured: Option<Value>,
    /// A refusal (`isError`): the call was not carried out, and the text says what to do.
    pub is_error: bool,
}

impl ToolAnswer {
    /// A refusal that says what to do instead.
    pub fn refusal(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            structured: None,
            is_error: true,
        }
    }

    /// A successful answer with its structured value.
    pub fn ok(text: impl Into<String>, structured: Value) -> Self {
        Self {
            text: text.into(),
            structured: Some(structured),
            is_error: false,
        }
    }

    /// The `tools/call` result for `era`: the text block, `isError`, and `structuredContent`
    /// from 2025-06-18 on.
    pub fn into_result(self, era: &Era) -> Value {
        let mut result = json!({
            "content": [{"type": "text", "text": self.text}],
            "isError": self.is_error,
        });
        if era.has_structured_output()
            && let Some(structured) = self.structured
        {
            result["structuredContent"] = structured;
        }
        result
    }
}

/// What a `tools/call` is answered with: a tool's answer, or — for a `start` whose request
/// declared the Tasks extension — the task that follows the run.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The tool's answer, as a `CallToolResult`.
    Tool(ToolAnswer),
    /// A `CreateTaskResult` (its `resultType` is `task`).
    Task(Value),
}

impl Reply {
    /// The `tools/call` result for `era`.
    pub fn into_result(self, era: &Era) -> Value {
        match self {
            Reply::Tool(answer) => answer.into_result(era),
            Reply::Task(task) => task,
        }
    }
}

impl From<ToolAnswer> for Reply {
    fn from(answer: ToolAnswer) -> Self {
        Reply::Tool(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_content_only_where_the_revision_has_it() {
        let answer = ToolAnswer::ok("hi", json!({"a": 1}));
        let modern = answer.clone().into_result(&Era::Modern);
        assert_eq!(modern["structuredContent"], json!({"a": 1}));
        assert_eq!(modern["content"][0]["text"], "hi");
        assert_eq!(modern["isError"], false);
        let old = answer.into_result(&Era::Handshake("2025-03-26"));
        assert!(old.get("structuredContent").is_none());
    }

    #[test]
    fn a_refusal_is_an_error_without_a_structured_value() {
        let result = ToolAnswer::refusal("no").into_result(&Era::Modern);
        assert_eq!(result["isError"], true);
        assert!(result.get("structuredContent").is_none());
    }
}
