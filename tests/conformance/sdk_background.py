"""The background tools (`start`, `list`, `read`, `write`, `stop`) driven by the official MCP
Python SDK, for `sdk_client.py` when serve runs with `--state`: each structured value is
checked against its tool's `outputSchema`."""

from __future__ import annotations

import time
from typing import Any

from sdk_checks import anyio_sleep, check, text_of


async def background_tools(era: str, client: Any, tools: dict[str, Any], modern: bool) -> None:
    import jsonschema

    for name in ("start", "list", "read", "write", "stop"):
        check(era, f"tools/list has {name}", name in tools, sorted(tools))

    def conforms(name: str, what: str, result: Any) -> dict[str, Any]:
        check(era, f"{what}: not an error", not result.is_error, text_of(result))
        value = result.structured_content
        schema = tools[name].output_schema
        check(era, f"{what}: outputSchema present", isinstance(schema, dict), schema)
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(value), key=str)
        check(era, f"{what}: structuredContent conforms", not errors, "; ".join(e.message for e in errors))
        if modern:
            check(era, f"{what}: resultType complete", result.result_type == "complete", result.result_type)
        return value

    meta = {"link.local/thread": f"conformance-{era}", "link.local/hops": 0}
    result = await client.call_tool(
        "start", {"program": "sh", "args": ["-c", "echo started; exec sleep 30"]}, meta=meta
    )
    started = conforms("start", "start", result)
    run_id = started.get("id", "")
    check(era, f"start: output is background/{run_id}.out", started.get("output") == f"background/{run_id}.out")

    listed = conforms("list", "list", await client.call_tool("list", {}))
    mine = [run for run in listed.get("runs", []) if run.get("id") == run_id]
    check(era, "list: shows the run, running", len(mine) == 1 and mine[0].get("state") == "running", listed)

    read: dict[str, Any] = {}

    async def output_arrived() -> bool:
        nonlocal read
        result = await client.call_tool("read", {"id": run_id})
        read = conforms("read", "read", result)
        return "started" in text_of(result)

    deadline = time.monotonic() + 5
    arrived = await output_arrived()
    while not arrived and time.monotonic() < deadline:
        await anyio_sleep(0.05)
        arrived = await output_arrived()
    check(era, f"read: the run's output arrived {read}", arrived and read.get("next_offset") == 8, read)
    check(era, "read: the bytes are in the structured value", read.get("text") == "started\n", read)

    # A read that waits: for a text already there (from offset 0), then for its time.
    waited = conforms(
        "read",
        "read waiting for a text",
        await client.call_tool("read", {"id": run_id, "offset": 0, "wait_ms": 5000, "until": "started"}),
    )
    check(
        era,
        "read wait_ms until: matched at offset 0",
        waited.get("matched") is True and waited.get("match_offset") == 0 and waited.get("ended") is False,
        waited,
    )
    waited = conforms(
        "read",
        "read waiting past the output",
        await client.call_tool("read", {"id": run_id, "wait_ms": 300}),
    )
    check(
        era,
        "read wait_ms: nothing new, the time ran out",
        waited.get("matched") is False and waited.get("waited_ms", 0) >= 300 and waited.get("text") == "",
        waited,
    )

    paged = conforms("list", "list limit 1", await client.call_tool("list", {"limit": 1}))
    check(era, "list limit 1: one run", len(paged.get("runs", [])) == 1, paged)
    refused = await client.call_tool("list", {"limit": 0})
    check(era, "list limit 0: refused with isError", refused.is_error is True, text_of(refused))

    stopped = conforms("stop", "stop", await client.call_tool("stop", {"id": run_id}))
    check(era, f"stop: the run is stopped ({stopped.get('state')})", stopped.get("state") == "stopped", stopped)

    # Without a way in nobody is told, so a start needs no `_meta` (hosts send none).
    result = await client.call_tool("start", {"program": "sh", "args": ["-c", "echo plain"]})
    plain = conforms("start", "start without a conversation", result)
    plain_id = plain.get("id", "")
    runs = conforms("list", "list running", await client.call_tool("list", {"state": "ended", "limit": 200}))
    check(era, "list ended: every run shown has ended", all(r.get("state") != "running" for r in runs.get("runs", [])), runs)
    conforms("stop", "stop the plain run", await client.call_tool("stop", {"id": plain_id}))

    # An interactive run driven with `write`, on a pipe and on a terminal.
    for how in ({"interactive": True}, {"tty": True}):
        result = await client.call_tool("start", {"program": "sh", "input": "echo ready\n", **how})
        shell = conforms("start", f"start {how}", result).get("id", "")
        wrote = conforms("write", f"write {how}", await client.call_tool("write", {"id": shell, "text": "echo $((6*7))\n"}))
        check(era, f"write {how}: every byte taken", wrote.get("taken") == 14 and wrote.get("closed") is False, wrote)
        answer: dict[str, Any] = {}
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            answer = conforms("read", f"read {how}", await client.call_tool("read", {"id": shell, "offset": 0}))
            if "42" in answer.get("text", ""):
                break
            await anyio_sleep(0.05)
        check(era, f"read {how}: the shell answered", "42" in answer.get("text", ""), answer)
        closed = conforms("write", f"write eof {how}", await client.call_tool("write", {"id": shell, "text": "", "eof": True}))
        check(era, f"write eof {how}: closed", closed.get("closed") is True, closed)
        refused = await client.call_tool("write", {"id": plain_id, "text": "x"})
        check(era, "write to an ended run: refused with isError", refused.is_error is True, text_of(refused))
        conforms("stop", f"stop {how}", await client.call_tool("stop", {"id": shell}))
