"""The stand-in's Anthropic Messages API (Claude Code): the calls and results of a conversation,
the next step of the hosts' script (after loading Claude Code's deferred MCP tools with its
`ToolSearch`, as a real model does), and the answer, streamed or whole."""

import json
import re

from steps import as_text, next_step, tool_names


def anthropic_calls(body):
    uses, results = {}, {}
    for message in body.get("messages") or []:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "tool_use":
                uses[block.get("id")] = block
            elif block.get("type") == "tool_result":
                results[block.get("tool_use_id")] = block
    calls = []
    for use_id, use in uses.items():
        result = results.get(use_id)
        text = None
        if result is not None:
            content = result.get("content")
            if isinstance(content, list):
                text = "\n".join(
                    b.get("text", "") if b.get("type") == "text" else as_text(b) for b in content
                )
            else:
                text = as_text(content)
        calls.append(
            {
                "name": use.get("name"),
                "args": use.get("input"),
                "result": text,
                "is_error": bool(result and result.get("is_error")),
            }
        )
    return calls


# Claude Code defers MCP tools: their names are listed in a reminder, and the model loads their
# schemas with its `ToolSearch` tool before it can call them, as a real model does.
DEFERRED_NAME = re.compile(r"\bmcp__[A-Za-z0-9_-]+__[A-Za-z0-9_]+")


def anthropic_step(body):
    tools = body.get("tools") or []
    deferred = {t.get("name") for t in tools if t.get("defer_loading")}
    for message in body.get("messages") or []:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        for block in blocks:
            if block.get("type") == "text":
                deferred.update(DEFERRED_NAME.findall(block.get("text") or ""))
    names = tool_names(sorted({t.get("name", "") for t in tools} | deferred))
    calls = anthropic_calls(body)
    loaded = set()
    for call in calls:
        if call["name"] == "ToolSearch":
            loaded.update(re.findall(r'"tool_name": "([^"]+)"', call["result"] or ""))
    unloaded = [n for n in names.values() if n in deferred and n not in loaded]
    if unloaded and any(t.get("name") == "ToolSearch" for t in tools):
        if not any(c["name"] == "ToolSearch" for c in calls):
            return ("call", "ToolSearch", {"query": "select:" + ",".join(sorted(names.values()))})
    return next_step(calls, names)


def anthropic_answer(body, step, seq):
    model = body.get("model", "stand-in")
    if step[0] == "call":
        block = {"type": "tool_use", "id": f"toolu_standin_{seq}", "name": step[1], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(step[2])}
        stop = "tool_use"
        full = dict(block, input=step[2])
    else:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": step[1]}
        stop = "end_turn"
        full = {"type": "text", "text": step[1]}
    usage = {"input_tokens": 10, "output_tokens": 10}
    message = {
        "id": f"msg_standin_{seq}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    if not body.get("stream"):
        return "json", dict(message, content=[full], stop_reason=stop)
    events = [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 10},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "sse", events
