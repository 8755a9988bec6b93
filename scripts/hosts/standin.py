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

Here is the server (`StandIn`) and what a test reads of its log (`calls_seen`). The script's
steps, whatever the wire format, are in `steps.py`; each wire format has a module of its own
(`anthropic_api.py`, `responses_api.py`, `gemini_api.py`), and the tasks script is in `tasks.py`.
"""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from anthropic_api import anthropic_answer, anthropic_calls, anthropic_step
from gemini_api import gemini_answer, gemini_calls, gemini_json_answer, gemini_tool_names
from responses_api import responses_answer, responses_calls, responses_tool_names
from steps import next_step, tool_names


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
