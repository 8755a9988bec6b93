"""The script the stand-in model API plays for the hosts' check, whatever the wire format.

It plays the model of a short script: call Link Run's `command` with a program that prints a
stdout marker and a stderr marker and exits 3, then `start` a background run that prints a third
marker, then `list`, then `read` that run; where the server offers `write`, it then drives an
interactive run. It decides each step from the calls made so far (`next_step`), which each wire
format's module reads out of the conversation the host sends back, so it keeps no state of its
own between requests.

The markers are computed by the programs (`$((12345*2))`), so they never appear in a call's own
arguments: hosts echo arguments in their error messages, and a marker found there would prove
nothing.
"""

import json
import re
import time

# What the programs print. The calls' arguments hold only the arithmetic that makes them.
STDOUT_MARKER = "out-24690"
STDERR_MARKER = "err-2331"
RUN_MARKER = "run-21605"
EXIT_CODE = 3

COMMAND_ARGS = {
    "program": "sh",
    "args": ["-c", "echo out-$((12345*2)); echo err-$((777*3)) >&2; exit 3"],
}
START_ARGS = {"program": "sh", "args": ["-c", "echo run-$((4321*5))"]}

# The steps of the script, by the tool each one calls (the host's names end with these).
INTENTS = ("command", "start", "list", "read", "write")

# Driving a run, where the server offers `write`: an interactive `sh` is started, a line is
# written to it, and a waiting `read` gives its answer. The answer is computed by the shell, so
# it is in no call's arguments.
DRIVE_START_ARGS = {"program": "sh", "interactive": True}
DRIVE_LINE = "echo drive-$((1234*3))\n"
DRIVE_MARKER = "drive-3702"
# A run's output may not be in its file yet when the first `read` comes: read again, a few times.
MAX_READS = 5
FINAL_TEXT = "The four Link Run calls are done."

# A run's id where a result names it: `"id":"…"` in a structured value, "run …" in a text.
RUN_ID = re.compile(r'(?:\bid\\*"?\s*[:=]\s*\\*"?|\brun\s+)([a-z0-9]{12,32})\b')


def tool_names(names, intents=INTENTS):
    """Maps each intent to the host's name for Link Run's tool: the one ending in it.

    Hosts prefix MCP tools (`mcp__link-run__command`, `link-run__command`, ...); a name that
    mentions `link` wins over a bare one, so a host's own `read` tool is never taken for ours.
    """
    found = {}
    for intent in intents:
        candidates = [n for n in names if n == intent or re.search(r"[_\-.:/]" + intent + r"$", n)]
        linked = [n for n in candidates if "link" in n.lower()]
        pick = linked or [n for n in candidates if n == intent]
        if pick:
            found[intent] = pick[0]
    return found


def intent_of(name, names):
    for intent, host_name in names.items():
        if host_name == name:
            return intent
    return None


def next_step(calls, names):
    """What the model does next, given the calls made so far (each {name, args, result}).

    Returns ("call", name, args) or ("text", text).
    """
    if "command" not in names:
        return ("text", "No Link Run tools were offered: " + ", ".join(sorted(names)))
    made = [dict(c, intent=intent_of(c["name"], names)) for c in calls]
    by = {intent: [c for c in made if c["intent"] == intent] for intent in INTENTS}
    if not by["command"]:
        return ("call", names["command"], COMMAND_ARGS)
    if "start" not in names:
        return ("text", "No background tools were offered.")
    if not by["start"]:
        return ("call", names["start"], START_ARGS)
    if not by["list"] and "list" in names:
        return ("call", names["list"], {})
    run_id = None
    for call in by["start"] + by["list"]:
        match = RUN_ID.search(call["result"] or "")
        if match:
            run_id = match.group(1)
            break
    reads = [c for c in by["read"] if "until" not in json.dumps(c["args"])]
    if run_id and "read" in names:
        if not reads:
            return ("call", names["read"], {"id": run_id})
        if len(reads) < MAX_READS and RUN_MARKER not in (reads[-1]["result"] or ""):
            time.sleep(0.5)
            return ("call", names["read"], {"id": run_id})
    if "write" in names:
        return drive_step(by, names)
    return ("text", FINAL_TEXT)


def drive_step(by, names):
    """The steps that drive an interactive run: start it, write a line, wait for the answer,
    end its stdin."""
    starts = [c for c in by["start"] if '"interactive"' in json.dumps(c["args"])]
    if not starts:
        return ("call", names["start"], DRIVE_START_ARGS)
    match = RUN_ID.search(starts[0]["result"] or "")
    if not match:
        return ("text", "The interactive `start` gave no run id: " + (starts[0]["result"] or "")[:300])
    run_id = match.group(1)
    writes = by["write"]
    if not writes:
        return ("call", names["write"], {"id": run_id, "text": DRIVE_LINE})
    waits = [c for c in by["read"] if "until" in json.dumps(c["args"])]
    if not waits:
        # The answer's prefix only: the marker itself must be in no call's arguments.
        return ("call", names["read"], {"id": run_id, "offset": 0, "wait_ms": 20000, "until": "drive-"})
    if len(writes) < 2:
        return ("call", names["write"], {"id": run_id, "text": "", "eof": True})
    return ("text", FINAL_TEXT)


def as_text(value):
    """A tool result as one string, however the host wrapped it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)
