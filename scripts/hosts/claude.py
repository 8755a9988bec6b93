"""Claude Code's checks: headless for one turn (`ClaudeCode`), the README's quickstart as a
newcomer runs it (`ClaudeCodeQuickstart`), and its MCP tasks in its interactive interface on a
pseudo-terminal (`ClaudeCodeTasks`: a run's end, a watch's line, TaskStop; with `screen_text`
for what the terminal showed)."""

import fcntl
import json
import os
import re
import secrets
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import standin
import steps
import tasks
from check import PROMPT, TASKS_DEADLINE, ConfigFailed, HostCheck, processes_mentioning, shell_words


class ClaudeCode(HostCheck):
    name = "claude-code"

    def readme_entry(self, home):
        return json.loads(self.block("claude-code", home))["mcpServers"]["link-run"]

    def added_entry(self, home):
        # `config` writes the user's own settings by default, out of the agent's reach.
        return json.loads((home / ".claude.json").read_text())["mcpServers"]["link-run"]

    def configure(self, home, url):
        self.config_write("claude-code", home, self.readme_entry(home))
        self.same_as_block(home / ".claude" / "settings.json", "claude-code-settings", home)

    def command(self):
        return self.host_argv(["claude", "-p", PROMPT, "--output-format", "json", "--model", "claude-sonnet-4-5"])

    def turn_env(self, home, url):
        env = self.env(home)
        env.update(
            {
                "ANTHROPIC_BASE_URL": url,
                "ANTHROPIC_API_KEY": "sk-stand-in",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
        )
        return env


class ClaudeCodeQuickstart(ClaudeCode):
    """The README's three commands, as a newcomer runs them on a fresh HOME: the binaries in
    `~/.cargo/bin` (linked, standing for `scripts/install.sh`), the `config` line as written
    (its `~` expanded as the shell would, and `--program sh` added for the stand-in's
    programs), then `claude` in `~/work`, headless, for the same turn as the claude-code check."""

    name = "claude-code-quickstart"
    MARK = "<!-- quickstart: claude-code -->"

    def check(self):
        self.check_turn()

    def configure(self, home, url):
        readme = Path("README.md").read_text(encoding="utf-8")
        match = re.search(re.escape(self.MARK) + r"\n```sh\n(.*?)\n```", readme, re.S)
        if not match:
            raise SystemExit(f"README.md has no block after {self.MARK}")
        lines = match.group(1).split("\n")
        if lines[0].strip() != "scripts/install.sh" or lines[-1].strip() != "cd ~/work && claude":
            raise SystemExit(f"the README's quickstart is not install, config, claude: {lines}")
        words = shell_words("\n".join(lines[1:-1]))
        words = [str(home) + w[1:] if w.startswith("~") else w for w in words] + ["--program", "sh"]
        label = "quickstart-config"
        with open(self.root / f"{label}.stdout", "wb") as out, open(self.root / f"{label}.stderr", "wb") as err:
            code = subprocess.run(words, cwd=home / "work", env=self.env(home), stdout=out, stderr=err, timeout=60).returncode
        if code != 0:
            raise ConfigFailed(f"the README's config line failed ({code}): {self.output(label)[-800:]}")


class ClaudeCodeTasks(ClaudeCode):
    """Claude Code's MCP tasks, in its interactive interface on a pseudo-terminal.

    The stand-in plays `tasks.TasksScript`. Claude Code asks what it asks a person starting it
    for the first time in a folder: whether to trust the folder, whether to use the API key of
    the environment; this answers both as a person would. Its onboarding is marked done in
    `~/.claude.json` (it would test a connection to Anthropic first, and there is no network).
    """

    name = "claude-code-tasks"
    # Rows and columns of the pseudo-terminal.
    SIZE = (50, 200)
    # The questions asked on a first start, and the keys that answer them (the default of each
    # is the cautious answer: "No, exit", "No (recommended)").
    QUESTIONS = (
        ("trust", "Yes, I trust this folder", (b"\x1b[B", b"\r")),
        ("api-key", "Do you want to use this API key?", (b"\x1b[A", b"\r")),
    )
    # Seconds the screen must stay still before a question is answered (it is drawn in parts).
    SETTLE = 0.4
    # Seconds a stopped run's end may take: TERM, KILL two seconds later, the record written.
    STOP_DEADLINE = 10

    def check(self):
        home = self.make_home("home")
        token = f"{secrets.randbelow(9 * 10**8) + 10**8}"
        self.token = token
        script = tasks.TasksScript(token)
        requests = self.root / "requests.jsonl"
        server = standin.StandIn(str(requests), script=script).serve()
        try:
            self.configure(home, server.url)
            self.state = self.state_folder(home)
            # Onboarding marked done beside the entry `config` wrote there.
            claude_json = home / ".claude.json"
            settings = json.loads(claude_json.read_text()) if claude_json.exists() else {}
            settings["hasCompletedOnboarding"] = True
            claude_json.write_text(json.dumps(settings, indent=2))
            self.drive(home, server.url, script, token)
        except ConfigFailed as failed:
            self.problems.append(str(failed))
            return
        finally:
            server.close()
        calls = self.keep_calls(requests)
        self.judge(requests, calls)

    def configure(self, home, url):
        super().configure(home, url)
        mcp_path = home / ".claude.json"
        mcp = json.loads(mcp_path.read_text())
        args = mcp["mcpServers"]["link-run"]["args"]
        if "--state" not in args:
            # Tasks are background runs: the entry needs a state folder.
            end = args.index("--")
            args[end:end] = ["--state", str(home / ".local" / "state" / "lnk" / "link-run")]
            mcp_path.write_text(json.dumps(mcp, indent=2))

    def state_folder(self, home):
        args = json.loads((home / ".claude.json").read_text())["mcpServers"]["link-run"]["args"]
        return Path(args[args.index("--state") + 1])

    def turn_env(self, home, url):
        env = super().turn_env(home, url)
        env["TERM"] = "xterm-256color"
        return env

    def drive(self, home, url, script, token):
        """Runs `claude` with the prompt on a pseudo-terminal until the stand-in is done (or
        TASKS_DEADLINE), waits for the stopped run to end, then quits it as a person does."""
        started = time.monotonic()
        deadline = started + TASKS_DEADLINE
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", *self.SIZE, 0, 0))
        argv = ["setsid", "--ctty"] + self.host_argv(["claude", "--model", "claude-sonnet-4-5", PROMPT])
        self.screen = open(self.root / "turn.screen", "wb")
        self.master = master
        self.pending = b""
        self.last_output = time.monotonic()
        self.answered = []
        self.long_run_seen = []
        child = subprocess.Popen(
            argv, cwd=home / "work", env=self.turn_env(home, url), stdin=slave, stdout=slave, stderr=slave
        )
        os.close(slave)
        try:
            self.pump(child, deadline, lambda: script.finished.is_set())
            self.took = time.monotonic() - started
            if not script.finished.is_set():
                if child.poll() is not None:
                    self.problems.append(f"Claude Code exited ({child.returncode}) before the stand-in was done")
                else:
                    self.problems.append(f"the stand-in was not done within {TASKS_DEADLINE} s")
            long_run = self.long_run_id()
            if long_run:
                # The stop is asked for when TaskStop answers: give the run its TERM and KILL.
                until = time.monotonic() + self.STOP_DEADLINE
                self.pump(child, until, lambda: self.stopped(long_run))
            # Quit as a person does, once the turn is drawn: Ctrl-C twice; then TERM, then KILL.
            self.pump(child, time.monotonic() + 3, lambda: time.monotonic() - self.last_output >= 1)
            for key in (b"\x03", b"\x03"):
                self.write(key)
                self.pump(child, time.monotonic() + 0.5, lambda: False)
            self.pump(child, time.monotonic() + 3, lambda: False)
            for sig in (signal.SIGTERM, signal.SIGKILL):
                if child.poll() is None:
                    try:
                        os.killpg(child.pid, sig)
                    except ProcessLookupError:
                        pass
                    self.pump(child, time.monotonic() + 2, lambda: False)
            child.wait()
        finally:
            os.close(master)
            self.screen.close()
            (self.root / "turn.screen.txt").write_text(screen_text((self.root / "turn.screen").read_bytes()))
        self.reap(home)

    def pump(self, child, until, done):
        """Reads the terminal until `done()` or `until`, or until Claude Code exits; answers
        the first-start questions; notes when the long run's processes are first seen."""
        while time.monotonic() < until and not done():
            if select.select([self.master], [], [], 0.1)[0]:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    data = b""
                if not data:
                    return
                self.screen.write(data)
                self.pending = (self.pending + data)[-40000:]
                self.last_output = time.monotonic()
            elif child.poll() is not None:
                return
            if self.pending and time.monotonic() - self.last_output >= self.SETTLE:
                flat = re.sub(r"\s", "", screen_text(self.pending))
                for name, question, keys in self.QUESTIONS:
                    if re.sub(r"\s", "", question) in flat:
                        self.answered.append(name)
                        for key in keys:
                            self.write(key)
                            time.sleep(0.2)
                        self.pending = b""
                        break
            if not self.long_run_seen:
                self.long_run_seen = processes_mentioning(self.token)

    def stopped(self, run_id):
        """Whether the run's record says `stopped` and none of the long run's processes is left."""
        return self.run_state(run_id) == "stopped" and not processes_mentioning(self.token)

    def write(self, data):
        try:
            os.write(self.master, data)
        except OSError:
            pass

    def long_run_id(self):
        calls = standin.calls_seen(str(self.root / "requests.jsonl"))
        start = steps.tool_names([c["name"] for c in calls if c.get("name")], intents=("start",)).get("start")
        starts = [c for c in calls if c["name"] == start]
        if len(starts) < 2:
            return None
        match = tasks.TASK_STARTED.search(starts[1]["result"] or "")
        return match.group(1) if match else None

    def run_state(self, run_id):
        """`status.state` of the run's record in the state folder, or None."""
        try:
            return json.loads((self.state / f"{run_id}.json").read_text())["status"]["state"]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def judge(self, requests, calls):
        problems = self.problems
        names = steps.tool_names([c["name"] for c in calls if c.get("name")])
        for intent in ("read", "list"):
            if any(c["name"] == names.get(intent) for c in calls):
                problems.append(f"the stand-in called `{intent}`: the run's end must come from Claude Code alone")
        markers = (tasks.TASK_STDOUT_MARKER, tasks.TASK_STDERR_MARKER)
        for call in calls:
            if any(m in json.dumps(call.get("args")) for m in markers):
                problems.append(f"a marker appears in the arguments of {call['name']}: the check would prove nothing")
        starts = [c for c in calls if c["name"] == names.get("start")]
        if not starts:
            problems.append("the stand-in never called Link Run's `start`")
            return
        first = tasks.TASK_STARTED.search(starts[0]["result"] or "")
        if not first:
            problems.append("Claude Code did not make `start` a task: " + (starts[0]["result"] or "(no result)")[:400])
            return
        self.run_id = first.group(1)
        self.judge_notification(requests)
        if len(starts) < 2:
            problems.append("the stand-in never started the long run")
            return
        second = tasks.TASK_STARTED.search(starts[1]["result"] or "")
        if not second:
            problems.append("Claude Code did not make the long `start` a task: " + (starts[1]["result"] or "")[:400])
            return
        self.long_run = second.group(1)
        self.judge_watch(requests, calls)
        stops = [c for c in calls if c["name"] == tasks.TASK_STOP]
        if not stops:
            problems.append("the stand-in never called Claude Code's TaskStop")
        elif stops[0]["is_error"]:
            problems.append("Claude Code's TaskStop failed: " + (stops[0]["result"] or "")[:400])
        if not self.long_run_seen:
            problems.append(f"the long run's processes (long-run-{self.token}) were never seen running")
        state = self.run_state(self.long_run)
        if state != "stopped":
            problems.append(f"after TaskStop, run {self.long_run}'s record says {state!r}, not 'stopped'")
        left = processes_mentioning(self.token)
        if left:
            problems.append(f"processes of the stopped run still run: {left}")

    def brought(self, requests, task_id, after_step, label):
        """The first request that brings a `<task-notification>` of server-side task `task_id`,
        which must come in Claude Code's own turn (the model's last turn ended with text, not a
        tool call): its text, and the seconds since the first call that ends with `after_step`
        (None when it never came, said as a problem)."""
        entries = [json.loads(line) for line in requests.read_text().splitlines() if line.strip()]
        started_at = None
        for entry in entries:
            body = entry.get("body") or {}
            step = entry.get("step") or []
            if started_at is None and step[:1] == ["call"] and step[1].endswith(after_step):
                started_at = entry["at"]
            messages = body.get("messages") or []
            if not messages or messages[-1].get("role") != "user":
                continue
            brought = [n for n in tasks.notifications({"messages": messages[-1:]}) if f"MCP task {task_id} " in n]
            if not brought:
                continue
            text = brought[0]
            (self.root / f"{label}.txt").write_text(text)
            previous = messages[-2] if len(messages) > 1 else {}
            content = previous.get("content") if isinstance(previous.get("content"), list) else []
            if previous.get("role") != "assistant" or any(b.get("type") == "tool_use" for b in content):
                self.problems.append(f"the {label} came as the answer to a tool call, not in a turn of Claude Code's own")
            return text, entry["at"] - (started_at or entry["at"])
        self.problems.append(f"Claude Code never brought a <task-notification> of task {task_id} ({label})")
        return None, None

    def judge_watch(self, requests, calls):
        """`watch` of the long run became a task of its own, and Claude Code brought its end by
        itself: the line the run printed, in the notification."""
        names = steps.tool_names([c["name"] for c in calls if c.get("name")], intents=("watch",))
        watches = [c for c in calls if c["name"] == names.get("watch")]
        if not watches:
            self.problems.append("the stand-in never called Link Run's `watch`")
            return
        started = tasks.TASK_STARTED.search(watches[0]["result"] or "")
        if not started:
            self.problems.append("Claude Code did not make `watch` a task: " + (watches[0]["result"] or "(no result)")[:400])
            return
        self.watch_id = started.group(1)
        if not self.watch_id.startswith(f"{self.long_run}-"):
            self.problems.append(f"the watch's task id {self.watch_id} is not its run's ({self.long_run}), '-' and a tag")
        text, after = self.brought(requests, self.watch_id, "__watch", "watch-notification")
        if text is None:
            return
        self.watch_notified_after = after
        if tasks.WATCH_MARKER not in text:
            self.problems.append(f"the watch's notification lacks the line {tasks.WATCH_MARKER}: {text[-800:]}")
        if "<status>completed</status>" not in text:
            self.problems.append(f"the watch's notification does not say `completed`: {text[-800:]}")

    def judge_notification(self, requests):
        """The first request that brings a `<task-notification>` of the run: Claude Code's own
        turn, with the markers and the exit code in the notification itself."""
        text, after = self.brought(requests, self.run_id, "__start", "notification")
        if text is None:
            return
        self.notification = text
        self.notified_after = after
        for marker, what in ((tasks.TASK_STDOUT_MARKER, "stdout"), (tasks.TASK_STDERR_MARKER, "stderr")):
            if marker not in text:
                self.problems.append(f"the task notification lacks the run's {what} ({marker}): {text[-800:]}")
        if not re.search(r'exit_code\\?"?\s*:\s*3\b|exited with code 3\b', text):
            self.problems.append(f"the task notification lacks the exit code 3: {text[-800:]}")
        if "<status>completed</status>" not in text:
            self.problems.append(f"the task notification does not say `completed`: {text[-800:]}")

    def report(self):
        if not self.problems:
            return (
                f"ok   {self.name} ({self.took:.1f} s): run {self.run_id}'s end came as a task notification "
                f"{self.notified_after:.1f} s after its start (markers, exit code 3); watch {self.watch_id}'s "
                f"line ({tasks.WATCH_MARKER}) came as a task notification {self.watch_notified_after:.1f} s after "
                f"the watch, with no read in between; TaskStop stopped run {self.long_run}, nothing of it left "
                f"(answered: {', '.join(self.answered) or 'nothing'})"
            )
        lines = [f"FAIL {self.name}:"] + [f"  - {p}" for p in self.problems]
        for call in getattr(self, "calls", []):
            lines.append(f"  {call['name']} {json.dumps(call.get('args'))}")
            lines.append("    -> " + (call.get("result") or "(no result)")[:1500].replace("\n", "\n       "))
        screen = self.root / "turn.screen.txt"
        if screen.exists():
            lines.append("  the terminal's last lines:")
            lines.extend("    " + line for line in screen.read_text().splitlines()[-15:])
        lines.append(f"  evidence: {self.root}")
        return "\n".join(lines)


def screen_text(data):
    """A terminal's bytes as text: escape sequences out, cursor moves as a space."""
    text = re.sub(rb"\x1b\[[0-9;]*[CGH]", b" ", data)
    text = re.sub(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b[=>78]", b"", text)
    return text.decode("utf-8", "replace").replace("\r", "")
