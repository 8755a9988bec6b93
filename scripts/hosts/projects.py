"""One user-scope entry for every project: the README's quickstart `config` line (with
`--files-from roots`) written once, then Claude Code started headless in two project folders,
one after the other (`ClaudeCodeProjects`).

In each folder the stand-in plays `ProjectsScript`: `command` runs `pwd`, `start` runs a
short program, `list` lists the runs. The check passes when, in each session, `pwd` printed
that session's own folder (and not the other's), its run's output file lies in its own folder,
its run's record lies in its own project's state folder under the one state folder, and `list`
showed its own run and not the other session's; and when Claude Code's own debug log shows
that it connected in the 2026-07-28 era and was asked for its roots (`ListRoots`, `--debug`). Everything is kept under `--evidence`/claude-code-projects/<project>/.
"""

import json
import re
import subprocess
import time
from pathlib import Path

import standin
from anthropic_api import DEFERRED_NAME, anthropic_calls
from check import HOST_DEADLINE, PROMPT, ConfigFailed, shell_words
from claude import ClaudeCode
from steps import RUN_ID, tool_names

PWD_ARGS = {"program": "sh", "args": ["-c", "pwd"]}
RUN_ARGS = {"program": "sh", "args": ["-c", "echo project-run-$((4321*7))"]}
RUN_MARKER = "project-run-30247"
INTENTS = ("command", "start", "list")
DONE = "The project's calls are done."


class ProjectsScript:
    """The model of one session: load Link Run's tools (Claude Code defers them), then
    `command` (`pwd`), `start`, `list`, and end the turn."""

    def anthropic(self, body):
        tools = body.get("tools") or []
        offered = {t.get("name") for t in tools}
        deferred = {t.get("name") for t in tools if t.get("defer_loading")}
        for message in body.get("messages") or []:
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            for block in blocks:
                if block.get("type") == "text":
                    deferred.update(DEFERRED_NAME.findall(block.get("text") or ""))
        names = tool_names(sorted((offered | deferred) - {None}), intents=INTENTS)
        calls = anthropic_calls(body)
        loaded = set()
        for call in calls:
            if call["name"] == "ToolSearch":
                loaded.update(re.findall(r'"tool_name": "([^"]+)"', call["result"] or ""))
        if set(names) != set(INTENTS):
            searches = [c for c in calls if c["name"] == "ToolSearch"]
            if len(searches) < 2 and "ToolSearch" in offered:
                return ("call", "ToolSearch", {"query": "link-run"})
            return ("text", "Link Run's tools were not offered: " + ", ".join(sorted(offered - {None})))
        unloaded = [n for n in names.values() if n in deferred and n not in loaded]
        if unloaded and not any(c["name"] == "ToolSearch" and "select:" in json.dumps(c["args"]) for c in calls):
            return ("call", "ToolSearch", {"query": "select:" + ",".join(sorted(names.values()))})
        made = {intent: [c for c in calls if c["name"] == names[intent]] for intent in INTENTS}
        if not made["command"]:
            return ("call", names["command"], PWD_ARGS)
        if not made["start"]:
            return ("call", names["start"], RUN_ARGS)
        if not made["list"]:
            return ("call", names["list"], {})
        return ("text", DONE)


class ClaudeCodeProjects(ClaudeCode):
    """The README's quickstart `config` line, run in the person's home, then `claude -p` in two
    project folders of `~/work`, each against a stand-in of its own playing `ProjectsScript`."""

    name = "claude-code-projects"
    MARK = "<!-- quickstart: claude-code -->"
    PROJECTS = ("app-one", "app-two")

    def check(self):
        home = self.make_home("home")
        started = time.monotonic()
        try:
            self.configure(home, None)
        except ConfigFailed as failed:
            self.problems.append(str(failed))
            self.took = 0.0
            return
        self.sessions = {}
        for project in self.PROJECTS:
            folder = (home / "work" / project).resolve()
            folder.mkdir()
            self.sessions[project] = self.session(home, folder)
        self.took = time.monotonic() - started
        self.judge_sessions(home)

    def configure(self, home, url):
        readme = Path("README.md").read_text(encoding="utf-8")
        match = re.search(re.escape(self.MARK) + r"\n```sh\n(.*?)\n```", readme, re.S)
        if not match:
            raise SystemExit(f"README.md has no block after {self.MARK}")
        lines = match.group(1).split("\n")
        words = shell_words("\n".join(lines[1:-1]))
        if "--files-from" not in words or words[words.index("--files-from") + 1] != "roots":
            raise ConfigFailed(f"the README's quickstart does not use --files-from roots: {words}")
        if "user" not in words:
            raise ConfigFailed(f"the README's quickstart does not write a user-scope entry: {words}")
        words = [str(home) + w[1:] if w.startswith("~") else w for w in words] + ["--program", "sh"]
        label = "quickstart-config"
        with open(self.root / f"{label}.stdout", "wb") as out, open(self.root / f"{label}.stderr", "wb") as err:
            # In the home: no project is where `config` runs.
            code = subprocess.run(words, cwd=home, env=self.env(home), stdout=out, stderr=err, timeout=60).returncode
        if code != 0:
            raise ConfigFailed(f"the README's config line failed ({code}): {self.output(label)[-800:]}")
        entry = json.loads((home / ".claude.json").read_text())["mcpServers"]["link-run"]
        if "--files-from" not in entry["args"] or "{files}" not in entry["args"]:
            raise ConfigFailed(f"the user entry does not take its folder from the roots: {entry['args']}")
        self.state = Path(entry["args"][entry["args"].index("--state") + 1])

    def session(self, home, folder):
        """`claude -p` in `folder`, against a stand-in of its own; what it saw."""
        root = self.root / folder.name
        root.mkdir()
        requests = root / "requests.jsonl"
        server = standin.StandIn(str(requests), script=ProjectsScript()).serve()
        env = self.turn_env(home, server.url)
        debug = home / ".claude" / "debug"
        before = set(debug.glob("*.txt")) if debug.exists() else set()
        argv = self.host_argv(["claude", "-p", PROMPT, "--output-format", "json", "--model", "claude-sonnet-4-5", "--debug"])
        try:
            with open(root / "turn.stdout", "wb") as out, open(root / "turn.stderr", "wb") as err:
                child = subprocess.Popen(argv, cwd=folder, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
                try:
                    code = child.wait(timeout=HOST_DEADLINE)
                except subprocess.TimeoutExpired:
                    code = None
                    self.problems.append(f"{folder.name}: no end within {HOST_DEADLINE} s")
                    child.kill()
                    child.wait()
        finally:
            server.close()
        self.reap(home)
        calls = standin.calls_seen(str(requests))
        (root / "seen.json").write_text(json.dumps(calls, indent=2, ensure_ascii=False))
        logs = sorted(set(debug.glob("*.txt")) - before) if debug.exists() else []
        log = "".join(p.read_text(errors="replace") for p in logs)
        (root / "claude-debug.txt").write_text(log)
        if code != 0:
            self.problems.append(f"{folder.name}: the host's turn exited with {code!r}")
        names = tool_names([c["name"] for c in calls if c.get("name")], intents=INTENTS)
        by = {i: [c for c in calls if c["name"] == names.get(i)] for i in INTENTS}
        return {"folder": folder, "by": by, "log": log}

    def judge_sessions(self, home):
        ids = {}
        for project, seen in self.sessions.items():
            folder, by, log = seen["folder"], seen["by"], seen["log"]
            others = [s["folder"] for p, s in self.sessions.items() if p != project]
            if not by["command"]:
                self.problems.append(f"{project}: the host never called `command`")
            else:
                result = by["command"][0]["result"] or ""
                if f"{folder}\\n" not in result and f"{folder}\n" not in result:
                    self.problems.append(f"{project}: `pwd` did not print {folder}: {result[:400]}")
                for other in others:
                    if str(other) in result:
                        self.problems.append(f"{project}: `pwd` printed the other project's {other}")
            match = RUN_ID.search(by["start"][0]["result"] or "") if by["start"] else None
            if not match:
                self.problems.append(f"{project}: `start` gave no run id")
                continue
            ids[project] = match.group(1)
            run = ids[project]
            out = folder / "background" / f"{run}.out"
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and RUN_MARKER not in (out.read_text(errors="replace") if out.exists() else ""):
                time.sleep(0.2)
            if not out.exists() or RUN_MARKER not in out.read_text(errors="replace"):
                self.problems.append(f"{project}: the run's output is not in {out}")
            records = list(self.state.glob(f"projects/{folder.name}-*/{run}.json"))
            if len(records) != 1:
                self.problems.append(f"{project}: run {run}'s record is not in the project's state folder: {records}")
            elif json.loads(records[0].read_text())["launch"]["files"] != str(folder):
                self.problems.append(f"{project}: run {run}'s record names another files folder")
            if '"negotiatedProtocolVersion":"2026-07-28"' not in log:
                self.problems.append(f"{project}: Claude Code's debug log does not show a 2026-07-28 connection")
            if "Received ListRoots request from server" not in log:
                self.problems.append(f"{project}: Claude Code's debug log does not show serve asking its roots")
        for project, seen in self.sessions.items():
            listed = seen["by"]["list"][0]["result"] if seen["by"]["list"] else None
            if listed is None:
                self.problems.append(f"{project}: the host never called `list`")
                continue
            for other, run in ids.items():
                shown = run in listed
                if other == project and not shown:
                    self.problems.append(f"{project}: `list` does not show its own run {run}")
                if other != project and shown:
                    self.problems.append(f"{project}: `list` shows {other}'s run {run}")

    def report(self):
        if not self.problems:
            return (
                f"ok   {self.name} ({self.took:.1f} s): one user entry, two projects; each session's `pwd` "
                "ran in its own folder, its run kept in its own project's state folder, and `list` showed "
                "its own run only (2026-07-28, roots asked with input_required)"
            )
        lines = [f"FAIL {self.name}:"] + [f"  - {p}" for p in self.problems]
        for project, seen in getattr(self, "sessions", {}).items():
            for intent, calls in seen["by"].items():
                for call in calls:
                    lines.append(f"  {project} {intent} {json.dumps(call.get('args'))}")
                    lines.append("    -> " + (call.get("result") or "(no result)")[:800].replace("\n", "\n       "))
        lines.append(f"  evidence: {self.root}")
        return "\n".join(lines)
