"""The stand-in's OpenAI Responses API (Codex CLI): the tool names a request offers (a namespace's
tools as `namespace/name`), the calls and results of a conversation, and the answer, streamed
or whole."""

import json

from steps import as_text


def responses_tool_names(body):
    names = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "namespace":
            prefix = tool.get("name", "")
            for inner in tool.get("tools") or []:
                names.append(prefix + "/" + inner.get("name", ""))
        elif "name" in tool:
            names.append(tool["name"])
        elif isinstance(tool.get("function"), dict):
            names.append(tool["function"].get("name"))
    return [n for n in names if n]


def responses_calls(body):
    items = body.get("input") or []
    uses, results = {}, {}
    for item in items if isinstance(items, list) else []:
        kind = item.get("type")
        if kind == "function_call":
            uses[item.get("call_id")] = item
        elif kind == "function_call_output":
            results[item.get("call_id")] = item
    calls = []
    for call_id, use in uses.items():
        result = results.get(call_id)
        text = None
        if result is not None:
            output = result.get("output")
            if isinstance(output, list):
                text = "\n".join(
                    o.get("text", "") if isinstance(o, dict) and "text" in o else as_text(o)
                    for o in output
                )
            else:
                text = as_text(output)
        try:
            args = json.loads(use.get("arguments") or "{}")
        except ValueError:
            args = use.get("arguments")
        name = use.get("name") or ""
        if use.get("namespace"):
            name = use["namespace"] + "/" + name
        calls.append({"name": name, "args": args, "result": text})
    return calls


def responses_answer(body, step, seq):
    rid = f"resp_standin_{seq}"
    if step[0] == "call":
        name = step[1]
        item = {
            "type": "function_call",
            "id": f"fc_standin_{seq}",
            "call_id": f"call_standin_{seq}",
            "name": name,
            "arguments": json.dumps(step[2]),
            "status": "completed",
        }
        if "/" in name:
            # A tool of a namespace (Codex puts each MCP server's tools in one).
            item["namespace"], item["name"] = name.split("/", 1)
    else:
        item = {
            "type": "message",
            "id": f"msg_standin_{seq}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": step[1], "annotations": []}],
        }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 20,
    }
    response = {"id": rid, "object": "response", "status": "completed", "model": body.get("model")}
    if not body.get("stream"):
        return "json", dict(response, output=[item], usage=usage)
    events = [
        ("response.created", {"type": "response.created", "response": dict(response, status="in_progress")}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        (
            "response.completed",
            {"type": "response.completed", "response": dict(response, output=[item], usage=usage)},
        ),
    ]
    return "sse", events
