"""What the hosts' checks share: the README's blocks, a private HOME, running a host's command
and reaping what it started, `lnk-link-run config --write` checked against the README (`Check`),
a host driven headless for one turn against the stand-in and its one-line `mcp add`
(`HostCheck`), and the judgement of the tool results the host handed back (`judge`)."""

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

import standin
import steps

PLACEHOLDER_HOME = "/home/me"
PROMPT = "Run the Link Run calls, one after the other."
# Seconds a host may take for its one turn, start-up included (they take about 10), and for its
# `mcp add` line; Claude Code's tasks turn takes about 15 (a run of 3 s, a watch for a line
# printed after 3 s, then the watched run stopped; 40 s were too few on a loaded machine), and
# at most a further 21 to see the stopped run end and to quit: three hosts, the tasks turn and
# the Inspector stay within eight minutes even if all hang.
HOST_DEADLINE = 90
ADD_DEADLINE = 30
TASKS_DEADLINE = 75


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


def give_cargo(home):
    """Puts this machine's cargo into `home/.cargo/bin` as a rustup install in that home has it:
    links to the machine's `rustup` binary (cargo and rustup's other proxies, rustc among them),
    and `home/.rustup` a link to the machine's rustup home ($RUSTUP_HOME, else ~/.rustup). A
    cargo that is not rustup's is linked as it is."""
    found = shutil.which("cargo")
    if not found:
        raise SystemExit("no cargo on PATH: the README's entries allow cargo")
    real = Path(found).resolve()
    os.symlink(real, home / ".cargo" / "bin" / "cargo")
    if real.name == "rustup":
        # rustup's other proxies beside it (cargo runs `rustc` from PATH).
        for proxy in Path(found).parent.iterdir():
            if proxy.name != "cargo" and proxy.resolve() == real and not (home / ".cargo" / "bin" / proxy.name).exists():
                os.symlink(real, home / ".cargo" / "bin" / proxy.name)
        rustup_home = Path(os.environ.get("RUSTUP_HOME") or Path.home() / ".rustup")
        if rustup_home.is_dir():
            os.symlink(rustup_home.resolve(), home / ".rustup")


def without_machine_part(args):
    """An entry's arguments without what `config` adds for the machine (docs/sandbox.md, "What
    `config` adds for your machine"): every `--var` before `--` (the README's entries hold none),
    and the sandbox's words between `--tmpfs /tmp` and the files folder's `--bind`."""
    end = args.index("--")
    flags = []
    words = iter(args[:end])
    for word in words:
        if word == "--var":
            next(words, None)
            continue
        flags.append(word)
    sandbox = args[end:]
    start = next((i + 2 for i in range(len(sandbox) - 1) if sandbox[i : i + 2] == ["--tmpfs", "/tmp"]), None)
    bind = max((i for i, w in enumerate(sandbox) if w == "--bind"), default=None)
    if start is not None and bind is not None and start <= bind:
        sandbox = sandbox[:start] + sandbox[bind:]
    return flags + sandbox


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
        """A HOME as the README assumes it: the agent's folder, the binaries in ~/.cargo/bin,
        and rustup's cargo there too (see `give_cargo`)."""
        home = self.root / folder
        (home / "work").mkdir(parents=True)
        (home / ".cargo" / "bin").mkdir(parents=True)
        for binary in ("lnk-link-run", "lnk-link-supervise"):
            os.symlink((self.opts.bin / binary).resolve(), home / ".cargo" / "bin" / binary)
        give_cargo(home)
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
        returns the entry it wrote after checking it against the README's (command aside, and
        what `config` adds for the machine taken out)."""
        args = readme_entry["args"]
        flags = args[1 : args.index("--")] + ["--program", "sh"]
        argv = [str(home / ".cargo" / "bin" / "lnk-link-run"), "config", host, "--write"] + flags
        label = f"config-{host}"
        with open(self.root / f"{label}.stdout", "wb") as out, open(self.root / f"{label}.stderr", "wb") as err:
            code = subprocess.run(argv, cwd=home / "work", env=self.env(home), stdout=out, stderr=err, timeout=60).returncode
        if code != 0:
            raise ConfigFailed(f"`lnk-link-run config {host} --write` failed ({code}): {self.output(label)[-800:]}")
        written = self.added_entry(home)
        written = dict(written, args=without_machine_part(written.get("args") or []))
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
        calls = self.keep_calls(requests)
        self.took = took
        if code != 0:
            self.problems.append(f"the host's turn exited with {code!r}")
        self.problems.extend(judge(calls))

    def keep_calls(self, requests):
        """The tool calls the stand-in saw in its log `requests`, kept as the check's and
        written to `seen.json` beside it."""
        calls = standin.calls_seen(str(requests))
        (self.root / "seen.json").write_text(json.dumps(calls, indent=2, ensure_ascii=False))
        self.calls = calls
        return calls

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
