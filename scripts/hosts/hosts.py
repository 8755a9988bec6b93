"""Real MCP hosts against a real `lnk-link-run serve`, with the README's host entries as written.

For Claude Code, Codex CLI and Gemini CLI this takes the host's entry from README.md (the
fenced block right after `<!-- host-entry: NAME -->`), puts a private HOME in place of
`/home/me`, and writes the host's configuration as a person does: `lnk-link-run config <host>
--write` with the entry's flags (the sandbox line left to `config`, which puts in the recommended
one), merged into what the host's files already hold; the entry it wrote must be the README's
(its sandbox line, timeouts, trust and approval), and so must the settings files it wrote beside
it. Then it runs the host headless for one turn against the stand-in model API (`standin.py`)
on 127.0.0.1. The stand-in asks for `command`, `start`,
`list` and `read`; the host passes when the tool results it handed back to the stand-in hold
what the programs printed: both markers and the exit code of `command`, and the run's output
in `read`. It also runs the README's one-line `mcp add` command of each host, in a HOME of its
own, and checks that the host wrote the same server as the README's entry. For the MCP
Inspector CLI it runs the README's line as written and checks the answer of its `ls`.

`claude-code-tasks` drives Claude Code's interactive interface on a pseudo-terminal, as a person
uses it (no flag: MCP tasks are on there), with the same README entry: the stand-in `start`s a
run that prints two markers and exits 3, ends its turn, and passes only when Claude Code later
brings, in a turn it starts by itself, a `<task-notification>` of that run with both markers
and the exit code; then it `start`s a long run and stops it with Claude Code's `TaskStop`,
which must leave the run `stopped` in the state folder and none of its processes.

Everything a host saw and sent is kept under `--evidence`: `<host>/requests.jsonl` (the
stand-in's log), `<host>/seen.json` (the tool calls and results as the model got them), the
host's own stdout and stderr; for `claude-code-tasks`, `turn.screen` (what the terminal showed,
`turn.screen.txt` as text), `notification.txt` and the state folder under `home/`. run.sh starts
this inside a network namespace of its own, where only the loopback interface exists, so no host
can reach anything but the stand-in.
"""

import argparse
import fcntl
import json
import os
import re
import secrets
import select
import shlex
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import standin  # noqa: E402
import steps  # noqa: E402
import tasks  # noqa: E402

PLACEHOLDER_HOME = "/home/me"
PROMPT = "Run the Link Run calls, one after the other."
# Seconds a host may take for its one turn, start-up included (they take about 10), and for its
# `mcp add` line; Claude Code's tasks turn takes about 8 (a run of 3 s, then one stopped), and
# at most a further 21 to see the stopped run end and to quit: three hosts, the tasks turn and
# the Inspector stay within eight minutes even if all hang.
HOST_DEADLINE = 90
ADD_DEADLINE = 30
TASKS_DEADLINE = 40
INSPECTOR = "npx @modelcontextprotocol/inspector@2.12.0"


def readme_blocks(readme):
    """The fenced blocks of README.md right after a `<!-- host-entry: NAME -->` line, by NAME."""
    text = Path(readme).read_text(encoding="utf-8")
    pattern = re.compile(r"^<!-- host-entry: ([a-z0-9._-]+) -->\n```[a-z]*\n(.*?)\n```$", re.S | re.M)
    return {match.group(1): match.group(2) for match in pattern.finditer(text)}


def shell_words(block):
    """A README `sh` block as the words the shell would pass (lines joined at `\\`)."""
    return shlex.split(block.replace("\\\n", " "))


def with_shell(args):
    """The README's serve arguments plus `--program sh`: the stand-in's programs are shell lines
    (the markers are computed by the shell, so they never appear in a call's arguments)."""
    end = args.index("--")
    return args[:end] + ["--program", "sh"] + args[end:]


def processes_mentioning(marker):
    """Pids of processes whose command line mentions `marker` (a path unique to one check)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(pid))
    return found


class ConfigFailed(Exception):
    """`lnk-link-run config --write` failed, or wrote something else than the README shows."""


class Check:
    """One host's checks, in a folder of its own: `home/` is the private HOME (`/home/me`)."""

    name = ""

    def __init__(self, opts, blocks, log):
        self.opts = opts
        self.blocks = blocks
        self.log = log
        self.root = (opts.evidence / self.name).resolve()
        self.root.mkdir()
        self.problems = []

    def block(self, name, home):
        """A README block with `home` in place of `/home/me`."""
        if name not in self.blocks:
            raise SystemExit(f"README.md has no block right after <!-- host-entry: {name} -->")
        return self.blocks[name].replace(PLACEHOLDER_HOME, str(home))

    def make_home(self, folder):
        """A HOME as the README assumes it: the agent's folder, the binaries in ~/.cargo/bin."""
        home = self.root / folder
        (home / "work").mkdir(parents=True)
        (home / ".cargo" / "bin").mkdir(parents=True)
        for binary in ("lnk-link-run", "lnk-link-supervise"):
            os.symlink((self.opts.bin / binary).resolve(), home / ".cargo" / "bin" / binary)
        return home

    def env(self, home):
        return {
            "PATH": f"{self.opts.cache / 'node_modules' / '.bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home),
            "USER": os.environ.get("USER", "root"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "NO_COLOR": "1",
        }

    def run(self, argv, home, label, env=None, deadline=HOST_DEADLINE):
        """Runs a host's command in `home/work`; returns (exit code or None, seconds taken)."""
        started = time.monotonic()
        out_path, err_path = self.root / f"{label}.stdout", self.root / f"{label}.stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            child = subprocess.Popen(
                argv,
                cwd=home / "work",
                env=env or self.env(home),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                code = child.wait(timeout=deadline)
            except subprocess.TimeoutExpired:
                code = None
                self.problems.append(f"{label}: no end within {deadline} s; its process group was killed")
                os.killpg(child.pid, signal.SIGKILL)
                child.wait()
        self.reap(home)
        return code, time.monotonic() - started

    def reap(self, home):
        """What a command started (serve, sandboxes, supervisors) must end with it."""
        deadline = time.monotonic() + 10
        while processes_mentioning(str(home)) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = processes_mentioning(str(home))
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if left:
            self.problems.append(f"processes under {home} still ran 10 s after their host ended: {left}")

    def config_write(self, host, home, readme_entry):
        """Writes the host's configuration with `lnk-link-run config <host> --write`, given the
        README entry's flags and `--program sh` (see `with_shell`), as a person types them;
        returns the entry it wrote after checking it against the README's (command aside)."""
        args = readme_entry["args"]
        flags = args[1 : args.index("--")] + ["--program", "sh"]
        argv = [str(home / ".cargo" / "bin" / "lnk-link-run"), "config", host, "--write"] + flags
        label = f"config-{host}"
        with open(self.root / f"{label}.stdout", "wb") as out, open(self.root / f"{label}.stderr", "wb") as err:
            code = subprocess.run(argv, cwd=home / "work", env=self.env(home), stdout=out, stderr=err, timeout=60).returncode
        if code != 0:
            raise ConfigFailed(f"`lnk-link-run config {host} --write` failed ({code}): {self.output(label)[-800:]}")
        written = self.added_entry(home)
        wanted = dict(readme_entry, args=with_shell(args))
        for key in sorted(set(wanted) | set(written)):
            if key != "command" and written.get(key) != wanted.get(key):
                raise ConfigFailed(
                    f"`config {host} --write` wrote {key} = {json.dumps(written.get(key))}; the README's "
                    f"entry has {json.dumps(wanted.get(key))}"
                )
        return written

    def same_as_block(self, path, name, home):
        """The JSON file `config` wrote at `path` must be the README's block `name`."""
        written = json.loads(path.read_text())
        wanted = json.loads(self.block(name, home))
        if written != wanted:
            raise ConfigFailed(f"`config` wrote {path} as {json.dumps(written)}; the README's {name} is {json.dumps(wanted)}")

    def host_argv(self, words):
        """A README command line with the cached host binary in place of the one on PATH."""
        binary = self.opts.cache / "node_modules" / ".bin" / words[0]
        return [str(binary)] + words[1:]

    def output(self, label):
        return (self.root / f"{label}.stdout").read_text(errors="replace") + (
            self.root / f"{label}.stderr"
        ).read_text(errors="replace")


class HostCheck(Check):
    """A host driven headless against the stand-in, and its one-line `mcp add`."""

    def check(self):
        self.check_add()
        self.check_turn()

    def check_add(self):
        """Runs the README's `mcp add` line; the server it writes must be the README's entry."""
        home = self.make_home("add-home")
        words = shell_words(self.block(f"{self.name}-add", home))
        code, _took = self.run(self.host_argv(words), home, "add", deadline=ADD_DEADLINE)
        if code != 0:
            self.problems.append(f"the README's `mcp add` line failed ({code}): {self.output('add')[-600:]}")
            return
        try:
            written = self.added_entry(home)
        except (OSError, ValueError, KeyError) as err:
            self.problems.append(f"the README's `mcp add` line wrote no readable entry: {err!r}")
            return
        wanted = self.readme_entry(home)
        for key in ("command", "args") + self.add_also:
            if written.get(key) != wanted.get(key):
                self.problems.append(
                    f"`mcp add` wrote {key} = {json.dumps(written.get(key))}, the README's entry has "
                    f"{json.dumps(wanted.get(key))}"
                )

    add_also = ()

    def check_turn(self):
        home = self.make_home("home")
        requests = self.root / "requests.jsonl"
        server = standin.StandIn(str(requests)).serve()
        try:
            self.configure(home, server.url)
            code, took = self.run(self.command(), home, "turn", env=self.turn_env(home, server.url))
        except ConfigFailed as failed:
            self.problems.append(str(failed))
            self.calls, self.took = [], 0.0
            return
        finally:
            server.close()
        calls = standin.calls_seen(str(requests))
        (self.root / "seen.json").write_text(json.dumps(calls, indent=2, ensure_ascii=False))
        self.calls = calls
        self.took = took
        if code != 0:
            self.problems.append(f"the host's turn exited with {code!r}")
        self.problems.extend(judge(calls))

    def turn_env(self, home, url):
        return self.env(home)

    def report(self):
        if not self.problems:
            return (
                f"ok   {self.name} ({self.took:.1f} s): {len(self.calls)} tool calls; markers, exit code, "
                "run bytes and a driven run's answer seen"
            )
        lines = [f"FAIL {self.name}:"] + [f"  - {p}" for p in self.problems]
        for call in getattr(self, "calls", []):
            lines.append(f"  {call['name']} {json.dumps(call.get('args'))}")
            lines.append("    -> " + (call.get("result") or "(no result)")[:1500].replace("\n", "\n       "))
        lines.append(f"  evidence: {self.root}")
        return "\n".join(lines)


class ClaudeCode(HostCheck):
    name = "claude-code"

    def readme_entry(self, home):
        return json.loads(self.block("claude-code", home))["mcpServers"]["link-run"]

    def added_entry(self, home):
        return json.loads((home / "work" / ".mcp.json").read_text())["mcpServers"]["link-run"]

    def configure(self, home, url):
        self.config_write("claude-code", home, self.readme_entry(home))
        self.same_as_block(home / "work" / ".claude" / "settings.local.json", "claude-code-settings", home)

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
            (home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True}))
            self.drive(home, server.url, script, token)
        except ConfigFailed as failed:
            self.problems.append(str(failed))
            return
        finally:
            server.close()
        calls = standin.calls_seen(str(requests))
        (self.root / "seen.json").write_text(json.dumps(calls, indent=2, ensure_ascii=False))
        self.calls = calls
        self.judge(requests, calls)

    def configure(self, home, url):
        super().configure(home, url)
        mcp_path = home / "work" / ".mcp.json"
        mcp = json.loads(mcp_path.read_text())
        args = mcp["mcpServers"]["link-run"]["args"]
        if "--state" not in args:
            # Tasks are background runs: the entry needs a state folder.
            end = args.index("--")
            args[end:end] = ["--state", str(home / ".local" / "state" / "lnk" / "link-run")]
            mcp_path.write_text(json.dumps(mcp, indent=2))

    def state_folder(self, home):
        args = json.loads((home / "work" / ".mcp.json").read_text())["mcpServers"]["link-run"]["args"]
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

    def judge_notification(self, requests):
        """The first request that brings a `<task-notification>` of the run: Claude Code's own
        turn (the model's last turn ended with text, not a tool call), with the markers and the
        exit code in the notification itself."""
        entries = [json.loads(line) for line in requests.read_text().splitlines() if line.strip()]
        started_at = None
        for entry in entries:
            body = entry.get("body") or {}
            step = entry.get("step") or []
            if started_at is None and step[:1] == ["call"] and step[1].endswith("__start"):
                started_at = entry["at"]
            messages = body.get("messages") or []
            if not messages or messages[-1].get("role") != "user":
                continue
            brought = [n for n in tasks.notifications({"messages": messages[-1:]}) if f"MCP task {self.run_id} " in n]
            if not brought:
                continue
            text = brought[0]
            self.notification = text
            (self.root / "notification.txt").write_text(text)
            self.notified_after = entry["at"] - (started_at or entry["at"])
            previous = messages[-2] if len(messages) > 1 else {}
            content = previous.get("content") if isinstance(previous.get("content"), list) else []
            if previous.get("role") != "assistant" or any(b.get("type") == "tool_use" for b in content):
                self.problems.append("the notification came as the answer to a tool call, not in a turn of Claude Code's own")
            for marker, what in ((tasks.TASK_STDOUT_MARKER, "stdout"), (tasks.TASK_STDERR_MARKER, "stderr")):
                if marker not in text:
                    self.problems.append(f"the task notification lacks the run's {what} ({marker}): {text[-800:]}")
            if not re.search(r'exit_code\\?"?\s*:\s*3\b|exited with code 3\b', text):
                self.problems.append(f"the task notification lacks the exit code 3: {text[-800:]}")
            if "<status>completed</status>" not in text:
                self.problems.append(f"the task notification does not say `completed`: {text[-800:]}")
            return
        self.problems.append(f"Claude Code never brought a <task-notification> of run {self.run_id}")

    def report(self):
        if not self.problems:
            return (
                f"ok   {self.name} ({self.took:.1f} s): run {self.run_id}'s end came as a task notification "
                f"{self.notified_after:.1f} s after its start (markers, exit code 3); TaskStop stopped run "
                f"{self.long_run}, nothing of it left (answered: {', '.join(self.answered) or 'nothing'})"
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


class Codex(HostCheck):
    name = "codex"

    def readme_entry(self, home):
        return tomllib.loads(self.block("codex", home))["mcp_servers"]["link-run"]

    def added_entry(self, home):
        return tomllib.loads((home / ".codex" / "config.toml").read_text())["mcp_servers"]["link-run"]

    def configure(self, home, url):
        # The stand-in's provider first, as a person's own settings: `config` merges into them.
        provider = (
            "# the stand-in model API\n"
            'model = "stand-in"\n'
            'model_provider = "stand-in"\n\n'
            "[model_providers.stand-in]\n"
            'name = "stand-in"\n'
            f'base_url = "{url}/v1"\n'
            'wire_api = "responses"\n'
            'env_key = "STAND_IN_API_KEY"\n'
        )
        (home / ".codex").mkdir()
        config = home / ".codex" / "config.toml"
        config.write_text(provider)
        self.config_write("codex", home, self.readme_entry(home))
        if not config.read_text().startswith(provider):
            raise ConfigFailed(f"`config codex --write` did not keep the settings before it: {config}")

    def command(self):
        return self.host_argv(["codex", "exec", "--skip-git-repo-check", PROMPT])

    def turn_env(self, home, url):
        env = self.env(home)
        env["STAND_IN_API_KEY"] = "sk-stand-in"
        return env


class GeminiCli(HostCheck):
    name = "gemini-cli"
    add_also = ("timeout", "trust")

    def readme_entry(self, home):
        return json.loads(self.block("gemini-cli", home))["mcpServers"]["link-run"]

    def added_entry(self, home):
        return json.loads((home / ".gemini" / "settings.json").read_text())["mcpServers"]["link-run"]

    def configure(self, home, url):
        # The stand-in takes any key; usage statistics and telemetry stay off: a person's own
        # settings, which `config` merges the entry into.
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
        }
        (home / ".gemini").mkdir()
        path = home / ".gemini" / "settings.json"
        path.write_text(json.dumps(settings, indent=2))
        self.config_write("gemini", home, self.readme_entry(home))
        merged = json.loads(path.read_text())
        if {k: v for k, v in merged.items() if k != "mcpServers"} != settings:
            raise ConfigFailed(f"`config gemini --write` did not keep the settings there: {path}")
        self.same_as_block(home / ".gemini" / "trustedFolders.json", "gemini-cli-trusted-folders", home)

    def command(self):
        return self.host_argv(["gemini", "-p", PROMPT, "--output-format", "json"])

    def turn_env(self, home, url):
        env = self.env(home)
        env.update({"GEMINI_API_KEY": "stand-in", "GOOGLE_GEMINI_BASE_URL": url})
        return env


class InspectorCli(Check):
    """The README's MCP Inspector line, run as written: `ls -la` of the agent's folder."""

    name = "inspector-cli"

    def check(self):
        home = self.make_home("home")
        (home / "work" / "greeting-from-the-readme.txt").write_text("hello\n")
        line = self.block("inspector-cli", home)
        if not line.startswith(INSPECTOR + " "):
            raise SystemExit(f"the README's Inspector line does not start with `{INSPECTOR}`")
        words = ["mcp-inspector"] + shell_words(line[len(INSPECTOR) :])
        code, self.took = self.run(self.host_argv(words), home, "inspector", deadline=60)
        out = (self.root / "inspector.stdout").read_text(errors="replace")
        if code != 0:
            self.problems.append(f"the README's Inspector line exited with {code!r}: {self.output('inspector')[-800:]}")
        elif not re.search(r'"exit_code":\s*0\b', out) or "greeting-from-the-readme.txt" not in out:
            self.problems.append(f"the Inspector's answer lacks the exit code 0 or the file `ls` lists: {out[-800:]}")

    def report(self):
        if not self.problems:
            return f"ok   {self.name} ({self.took:.1f} s): the README's line ran `ls` in the sandbox"
        return "\n".join([f"FAIL {self.name}:"] + [f"  - {p}" for p in self.problems] + [f"  evidence: {self.root}"])


CHECKS = {c.name: c for c in (ClaudeCode, ClaudeCodeQuickstart, ClaudeCodeTasks, Codex, GeminiCli, InspectorCli)}


def judge(calls):
    """What is missing from the tool results the host handed back, as a list of sentences."""
    names = steps.tool_names([c["name"] for c in calls if c.get("name")])
    by = {i: [c for c in calls if c.get("name") == names.get(i)] for i in steps.INTENTS}
    problems = []
    markers = (steps.STDOUT_MARKER, steps.STDERR_MARKER, steps.RUN_MARKER, steps.DRIVE_MARKER)
    for call in calls:
        if any(m in json.dumps(call.get("args")) for m in markers):
            problems.append(f"a marker appears in the arguments of {call['name']}: the check would prove nothing")
    if not by["command"]:
        problems.append("the host never called Link Run's `command`")
    else:
        result = by["command"][0]["result"] or ""
        for marker, what in ((steps.STDOUT_MARKER, "stdout"), (steps.STDERR_MARKER, "stderr")):
            if marker not in result:
                problems.append(f"`command`'s result lacks the program's {what} ({marker})")
        if not re.search(r'exit_code\\?"?\s*:\s*3\b|exited with code 3\b', result):
            problems.append("`command`'s result lacks the exit code 3")
    run_id = None
    if not by["start"]:
        problems.append("the host never called `start`")
    else:
        match = steps.RUN_ID.search(by["start"][0]["result"] or "")
        if match:
            run_id = match.group(1)
        else:
            problems.append("`start` gave no run id: " + (by["start"][0]["result"] or "")[:300])
    if not by["list"]:
        problems.append("the host never called `list`")
    elif run_id and run_id not in (by["list"][0]["result"] or ""):
        problems.append(f"`list` does not show run {run_id}")
    if run_id:
        if not by["read"]:
            problems.append("the host never called `read`")
        elif not any(steps.RUN_MARKER in (c["result"] or "") for c in by["read"]):
            problems.append(f"`read` never gave the run's bytes ({steps.RUN_MARKER})")
    # Driving a run: an interactive `sh` is written a line, and a waiting `read` brings back its
    # answer, computed by the shell, as the host handed it to the model.
    if not by["write"]:
        problems.append("the host never called `write`: no interactive run was driven")
    else:
        waits = [c for c in by["read"] if "until" in json.dumps(c.get("args"))]
        if not any(steps.DRIVE_MARKER in (c["result"] or "") for c in waits):
            problems.append(
                f"the waiting `read` never gave the interactive run's answer ({steps.DRIVE_MARKER}) "
                "to the line `write` sent it"
            )
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readme", required=True, type=Path)
    parser.add_argument("--bin", required=True, type=Path, help="the folder of lnk-link-run and lnk-link-supervise")
    parser.add_argument("--cache", required=True, type=Path, help="where npm installed the hosts")
    parser.add_argument("--evidence", required=True, type=Path)
    parser.add_argument("--hosts", default=",".join(CHECKS))
    opts = parser.parse_args()
    opts.cache = opts.cache.resolve()

    def log(line):
        print(line, flush=True)

    blocks = readme_blocks(opts.readme)
    if opts.evidence.exists():
        shutil.rmtree(opts.evidence)
    opts.evidence.mkdir(parents=True)
    names = opts.hosts.split(",")
    started = time.monotonic()
    failed = 0
    for name in names:
        check = CHECKS[name](opts, blocks, log)
        check.check()
        log(check.report())
        failed += bool(check.problems)
    log(f"==> the hosts took {time.monotonic() - started:.0f} s; what they sent is in {opts.evidence}")
    log(f"hosts: {len(names) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
