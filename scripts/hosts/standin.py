"""A stand-in model API for driving real MCP hosts headless against Link Run.

It serves, on 127.0.0.1 only, the three wire formats the hosts speak: the Anthropic Messages API
(Claude Code), the OpenAI Responses API (Codex CLI) and the Gemini API (Gemini CLI), streamed as
each host asks. It plays the model of a short script: call Link Run's `command` with a program
that prints a stdout marker and a stderr marker and exits 3, then `start` a background run that
prints a third marker, then `list`, then `read` that run. It decides each step from the
conversation the host sends back, so it keeps no state of its own between requests, and it logs
every request it gets (one JSON object a line) so that a test can check what the host handed the
model: the tool results, as the model would have read them.

For Claude Code's MCP tasks it plays another script (`TasksScript`): `start` a run that ends
after a few seconds, end the turn, and wait for Claude Code to bring the run's end by itself, as
a `<task-notification>`; then `start` a long run and stop it with Claude Code's own `TaskStop`.

The markers are computed by the programs (`$((12345*2))`), so they never appear in a call's own
arguments: hosts echo arguments in their error messages, and a marker found there would prove
nothing.
"""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

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


# --- Anthropic Messages API (Claude Code) -------------------------------------------------------


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


# --- Claude Code's MCP tasks ----------------------------------------------------------------------

# What the run that becomes a task prints, and how it ends; its arguments hold only the arithmetic.
TASK_STDOUT_MARKER = "tout-12340"
TASK_STDERR_MARKER = "terr-9499"
TASK_EXIT_CODE = 3
TASK_START_ARGS = {
    "program": "sh",
    "args": ["-c", "sleep 3; echo tout-$((2468*5)); echo terr-$((1357*7)) >&2; exit 3"],
}
TASKS_WAITING_TEXT = "The run is in the background; its end will be brought here."
TASKS_FINAL_TEXT = "The run ended, and the long run is stopped."

# Claude Code's answer to a call that became a task: the server's task id (Link Run's run id),
# and its own id for the task, the one its `TaskStop` takes.
TASK_STARTED = re.compile(r"started server-side task ([A-Za-z0-9]+)")
TASK_STOP_ID = re.compile(r'TaskStop with task_id "([^"]+)"')
# Its tools are deferred too: their names are listed one a line in a reminder.
TASK_STOP = "TaskStop"


def long_run_args(token):
    """A run of ten minutes, to be stopped: `token` (digits) is in the command lines of its shell
    and of its `sleep`, so that /proc finds every process of it."""
    return {"program": "sh", "args": ["-c", f"sleep 600.{token}; exit 0", f"long-run-{token}"]}


def notifications(body):
    """The text blocks of the conversation's user messages that hold a `<task-notification>`
    (Claude Code's own messages, not tool results)."""
    found = []
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        for block in blocks:
            if block.get("type") == "text" and "<task-notification>" in (block.get("text") or ""):
                found.append(block["text"])
    return found


class TasksScript:
    """The model of the tasks check, for Claude Code: `start` a run that prints two markers and
    exits 3 after a few seconds, and end the turn; when Claude Code brings the run's end as a
    `<task-notification>` (a turn it starts by itself), `start` a long run and stop it with
    Claude Code's own `TaskStop`. It never calls `read` or `list`: what the run printed can only
    reach it through the notification. `finished` is set once it has nothing more to do."""

    def __init__(self, token):
        self.long_args = long_run_args(token)
        self.finished = threading.Event()

    def anthropic(self, body):
        step = self.step(body)
        if step[0] == "text" and step[1] != TASKS_WAITING_TEXT:
            self.finished.set()
        return step

    def step(self, body):
        tools = body.get("tools") or []
        offered = {t.get("name") for t in tools}
        deferred = {t.get("name") for t in tools if t.get("defer_loading")}
        for text in user_texts(body):
            deferred.update(DEFERRED_NAME.findall(text))
            if re.search(r"^TaskStop$", text, re.M):
                deferred.add(TASK_STOP)
        names = tool_names(sorted((offered | deferred) - {None}), intents=("start",))
        calls = anthropic_calls(body)
        searches = [c for c in calls if c["name"] == "ToolSearch"]
        loaded = set()
        for call in searches:
            loaded.update(re.findall(r'"tool_name": "([^"]+)"', call["result"] or ""))

        def usable(name):
            return name in loaded or (name in offered and name not in deferred)

        if "start" not in names:
            # Its servers may still be connecting: ToolSearch waits for them, as a model is told.
            if len(searches) < 2 and "ToolSearch" in offered:
                return ("call", "ToolSearch", {"query": "link-run start"})
            return ("text", "No Link Run `start` was offered: " + ", ".join(sorted(offered - {None})))
        start = names["start"]
        if not usable(start):
            if any(start in json.dumps(c["args"]) for c in searches):
                return ("text", f"ToolSearch did not load {start}.")
            return ("call", "ToolSearch", {"query": "select:" + start})
        starts = [c for c in calls if c["name"] == start]
        if not starts:
            return ("call", start, TASK_START_ARGS)
        if not TASK_STARTED.search(starts[0]["result"] or ""):
            return ("text", "`start` did not become a task.")
        if not notifications(body):
            return ("text", TASKS_WAITING_TEXT)
        if len(starts) < 2:
            return ("call", start, self.long_args)
        local = TASK_STOP_ID.search(starts[1]["result"] or "")
        if not local:
            return ("text", "The long run did not become a task.")
        if not any(c["name"] == TASK_STOP for c in calls):
            if not usable(TASK_STOP):
                if any(TASK_STOP in json.dumps(c["args"]) for c in searches):
                    return ("text", "ToolSearch did not load TaskStop.")
                return ("call", "ToolSearch", {"query": "select:" + TASK_STOP})
            return ("call", TASK_STOP, {"task_id": local.group(1)})
        return ("text", TASKS_FINAL_TEXT)


def user_texts(body):
    """The text blocks of the conversation's user messages (tool results left out)."""
    texts = []
    for message in body.get("messages") or []:
        if message.get("role") != "user":
            continue
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        texts.extend(b.get("text") or "" for b in blocks if b.get("type") == "text")
    return texts


# --- OpenAI Responses API (Codex CLI) -----------------------------------------------------------


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


# --- Gemini API (Gemini CLI) --------------------------------------------------------------------


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


# --- The server ---------------------------------------------------------------------------------


class StandIn:
    """The stand-in API: `serve()` binds 127.0.0.1 on a free port; every request goes to `log`."""

    def __init__(self, log_path, script=None):
        self.log_path = log_path
        # A script other than the hosts' one (`TasksScript`), for the Anthropic Messages API.
        self.script = script
        self.lock = threading.Lock()
        self.seq = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def serve(self):
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        return self

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def next_seq(self):
        with self.lock:
            self.seq += 1
            return self.seq

    def record(self, entry):
        with self.lock:
            with open(self.log_path, "a", encoding="utf-8") as log:
                log.write(json.dumps(entry, ensure_ascii=False) + "\n")

    def _handler(self):
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                standin.record({"at": round(time.time(), 3), "method": "GET", "path": self.path})
                if self.path.rstrip("/").endswith("/models"):
                    self.send_json({"object": "list", "data": [], "models": []})
                else:
                    self.send_json({"error": {"message": "the stand-in serves no such path"}}, 404)

            def do_HEAD(self):
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else self.read_chunked()
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                seq = standin.next_seq()
                path = self.path.split("?")[0]
                entry = {"seq": seq, "at": round(time.time(), 3), "method": "POST", "path": self.path, "body": body}
                try:
                    kind, payload, step = self.answer(path, body, seq)
                except Exception as err:  # a request the stand-in cannot read: say so, in the log too
                    entry["error"] = repr(err)
                    standin.record(entry)
                    self.send_json({"error": {"type": "stand_in", "message": repr(err)}}, 500)
                    return
                entry["step"] = step
                standin.record(entry)
                if kind == "sse":
                    self.send_sse(payload)
                else:
                    self.send_json(payload)

            def read_chunked(self):
                if "chunked" not in (self.headers.get("Transfer-Encoding") or ""):
                    return b""
                data = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return data
                    data += self.rfile.read(size)
                    self.rfile.readline()

            def answer(self, path, body, seq):
                if path.endswith("/messages/count_tokens"):
                    return "json", {"input_tokens": 10}, None
                if path.endswith("/messages"):
                    if not body.get("tools"):
                        step = ("text", "Link Run")
                    elif standin.script is not None:
                        step = standin.script.anthropic(body)
                    else:
                        step = anthropic_step(body)
                    kind, payload = anthropic_answer(body, step, seq)
                    return kind, payload, list(step)
                if path.endswith("/responses"):
                    names = tool_names(responses_tool_names(body))
                    step = next_step(responses_calls(body), names)
                    kind, payload = responses_answer(body, step, seq)
                    return kind, payload, list(step)
                if path.endswith("/chat/completions"):
                    raise ValueError("the Chat Completions API is not served; use the Responses API")
                if ":countTokens" in path:
                    return "json", {"totalTokens": 10}, None
                if ":streamGenerateContent" in path or ":generateContent" in path:
                    stream = ":streamGenerateContent" in path
                    config = body.get("generationConfig") or {}
                    if config.get("responseMimeType") == "application/json" or config.get("responseJsonSchema"):
                        payload = gemini_json_answer(body)
                        return ("sse", [(None, payload)], ["json"]) if stream else ("json", payload, ["json"])
                    names = tool_names(gemini_tool_names(body))
                    if not gemini_tool_names(body):
                        step = ("text", "Link Run")
                    else:
                        step = next_step(gemini_calls(body), names)
                    kind, payload = gemini_answer(body, step, stream)
                    return kind, payload, list(step)
                raise ValueError(f"the stand-in serves no {path}")

            def send_json(self, payload, status=200):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def send_sse(self, events):
                data = b""
                for name, payload in events:
                    if name:
                        data += f"event: {name}\n".encode()
                    data += b"data: " + json.dumps(payload).encode() + b"\n\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


def calls_seen(log_path):
    """The tool calls and results in the last conversation a host sent the stand-in, by API."""
    best = []
    try:
        with open(log_path, encoding="utf-8") as log:
            entries = [json.loads(line) for line in log if line.strip()]
    except FileNotFoundError:
        return []
    for entry in entries:
        body = entry.get("body") or {}
        path = entry.get("path", "")
        if "/messages" in path and "messages" in body:
            calls = anthropic_calls(body)
        elif "/responses" in path:
            calls = responses_calls(body)
        elif "generatecontent" in path.lower():
            calls = gemini_calls(body)
        else:
            continue
        if len(calls) >= len(best):
            best = calls
    return best
