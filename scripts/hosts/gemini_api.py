"""The stand-in's Gemini API (Gemini CLI): the tool names a request offers, the calls and results
of a conversation, the answer, streamed or whole, and the JSON answer of Gemini CLI's side
requests (its model router, its next-speaker check)."""

import json

from steps import as_text


def gemini_tool_names(body):
    names = []
    for tool in body.get("tools") or []:
        for decl in tool.get("functionDeclarations") or tool.get("function_declarations") or []:
            if decl.get("name"):
                names.append(decl["name"])
    return names


def gemini_calls(body):
    pending, calls = [], []
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if "functionCall" in part:
                call = part["functionCall"]
                entry = {"name": call.get("name"), "args": call.get("args"), "result": None}
                calls.append(entry)
                pending.append(entry)
            elif "functionResponse" in part:
                response = part["functionResponse"]
                for entry in pending:
                    if entry["name"] == response.get("name") and entry["result"] is None:
                        entry["result"] = gemini_response_text(response.get("response"))
                        pending.remove(entry)
                        break
    return calls


def gemini_response_text(response):
    # Gemini CLI wraps a tool's answer as {"output": "..."} or {"error": "..."}; keep it whole.
    if isinstance(response, dict) and set(response) <= {"output"} and isinstance(response.get("output"), str):
        return response["output"]
    return as_text(response)


def gemini_answer(body, step, stream):
    if step[0] == "call":
        part = {"functionCall": {"name": step[1], "args": step[2]}}
    else:
        part = {"text": step[1]}
    chunk = {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
        "modelVersion": "stand-in",
    }
    if stream:
        return "sse", [(None, chunk)]
    return "json", chunk


def gemini_json_answer(body):
    """A side request that wants JSON (Gemini CLI's model router, its next-speaker check): an
    object that fits the schema asked for, saying the task is simple and the user speaks next."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
    text = json.dumps(sample_of(schema) if schema else {"next_speaker": "user"})
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
    }


def sample_of(schema):
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    if kind == "object":
        return {key: sample_of(sub) for key, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "the stand-in model"
