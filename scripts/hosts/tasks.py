"""The script the stand-in plays for Claude Code's MCP tasks (`TasksScript`), and its markers.

`start` a run that ends after a few seconds, end the turn, and wait for Claude Code to bring the
run's end by itself, as a `<task-notification>`; then `start` a long run that prints a "ready"
line after a few seconds, `watch` it for that line, end the turn, and wait for Claude Code to
bring the line by itself; then stop the long run with Claude Code's own `TaskStop`. It speaks
the Anthropic Messages API (`anthropic_api.py`).
"""

import json
import re
import threading

from anthropic_api import DEFERRED_NAME, anthropic_calls
from steps import tool_names

# What the run that becomes a task prints, and how it ends; its arguments hold only the arithmetic.
TASK_STDOUT_MARKER = "tout-12340"
TASK_STDERR_MARKER = "terr-9499"
TASK_EXIT_CODE = 3
TASK_START_ARGS = {
    "program": "sh",
    "args": ["-c", "sleep 3; echo tout-$((2468*5)); echo terr-$((1357*7)) >&2; exit 3"],
}
TASKS_WAITING_TEXT = "The run is in the background; its end will be brought here."
# The line the long run prints after a few seconds, which `watch` waits for: its arguments hold
# only the arithmetic, and the watch only its start.
WATCH_MARKER = "ready-7777"
WATCH_UNTIL = "ready-"
WATCH_WAITING_TEXT = "The watch is in the background; the line will be brought here."
TASKS_FINAL_TEXT = "The run ended, the watch brought its line, and the long run is stopped."

# Claude Code's answer to a call that became a task: the server's task id (Link Run's run id),
# and its own id for the task, the one its `TaskStop` takes.
TASK_STARTED = re.compile(r"started server-side task ([A-Za-z0-9-]+)")
TASK_STOP_ID = re.compile(r'TaskStop with task_id "([^"]+)"')
# Its tools are deferred too: their names are listed one a line in a reminder.
TASK_STOP = "TaskStop"


def long_run_args(token):
    """A run of ten minutes, to be stopped, that prints `WATCH_MARKER` after three seconds:
    `token` (digits) is in the command lines of its shell and of its `sleep`, so that /proc finds
    every process of it."""
    script = f"sleep 3; echo ready-$((1111*7)); sleep 600.{token}; exit 0"
    return {"program": "sh", "args": ["-c", script, f"long-run-{token}"]}


def notified(body, task_id):
    """Whether Claude Code brought a `<task-notification>` of server-side task `task_id`."""
    return any(f"MCP task {task_id} " in text for text in notifications(body))


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
    `<task-notification>` (a turn it starts by itself), `start` a long run, `watch` it for the
    line it prints after a few seconds, and end the turn; when Claude Code brings the watch's
    end, stop the long run with Claude Code's own `TaskStop`. It never calls `read` or `list`:
    what the runs printed can only reach it through the notifications. `finished` is set once it
    has nothing more to do."""

    WAITING = (TASKS_WAITING_TEXT, WATCH_WAITING_TEXT)

    def __init__(self, token):
        self.long_args = long_run_args(token)
        self.finished = threading.Event()

    def anthropic(self, body):
        step = self.step(body)
        if step[0] == "text" and step[1] not in self.WAITING:
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
        names = tool_names(sorted((offered | deferred) - {None}), intents=("start", "watch"))
        calls = anthropic_calls(body)
        searches = [c for c in calls if c["name"] == "ToolSearch"]
        loaded = set()
        for call in searches:
            loaded.update(re.findall(r'"tool_name": "([^"]+)"', call["result"] or ""))

        def usable(name):
            return name in loaded or (name in offered and name not in deferred)

        def load(name, what):
            """The step that loads a deferred tool, or None when it is usable."""
            if usable(name):
                return None
            if any(name in json.dumps(c["args"]) for c in searches):
                return ("text", f"ToolSearch did not load {what}.")
            return ("call", "ToolSearch", {"query": "select:" + name})

        if "start" not in names:
            # Its servers may still be connecting: ToolSearch waits for them, as a model is told.
            if len(searches) < 2 and "ToolSearch" in offered:
                return ("call", "ToolSearch", {"query": "link-run start"})
            return ("text", "No Link Run `start` was offered: " + ", ".join(sorted(offered - {None})))
        start = names["start"]
        if step := load(start, start):
            return step
        starts = [c for c in calls if c["name"] == start]
        if not starts:
            return ("call", start, TASK_START_ARGS)
        first = TASK_STARTED.search(starts[0]["result"] or "")
        if not first:
            return ("text", "`start` did not become a task.")
        if not notified(body, first.group(1)):
            return ("text", TASKS_WAITING_TEXT)
        if len(starts) < 2:
            return ("call", start, self.long_args)
        long_run = TASK_STARTED.search(starts[1]["result"] or "")
        local = TASK_STOP_ID.search(starts[1]["result"] or "")
        if not long_run or not local:
            return ("text", "The long run did not become a task.")
        if "watch" not in names:
            return ("text", "No Link Run `watch` was offered.")
        watch = names["watch"]
        if step := load(watch, watch):
            return step
        watches = [c for c in calls if c["name"] == watch]
        if not watches:
            return ("call", watch, {"id": long_run.group(1), "until": WATCH_UNTIL})
        watched = TASK_STARTED.search(watches[0]["result"] or "")
        if not watched:
            return ("text", "`watch` did not become a task.")
        if not notified(body, watched.group(1)):
            return ("text", WATCH_WAITING_TEXT)
        if not any(c["name"] == TASK_STOP for c in calls):
            if step := load(TASK_STOP, TASK_STOP):
                return step
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
