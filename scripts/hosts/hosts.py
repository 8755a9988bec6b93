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

`claude-code-cargo` (in `cargo_test.py`) has Claude Code, with the entry the README's quickstart
writes in a HOME with rustup in it, run `cargo test` on a crate through Link Run; the model must
see the test pass.

`claude-code-projects` writes the README quickstart's one user-scope entry (`--files-from roots`)
and runs Claude Code headless in two project folders: each session works in its own folder and
sees its own runs only (`projects.py`).
`claude-code-network` (`network.py`) runs Claude Code headless with `--net-allow` for a
registry stand-in: the model asks for a fetch from it (allowed) and from another site (refused),
and must see the registry's bytes and the refused host named.

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

The checks' common parts are in `check.py`, Claude Code's checks in `claude.py`; this file holds
Codex CLI's, Gemini CLI's and the Inspector's, and runs them all.
"""

import argparse
import json
import re
import shutil
import sys
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check import PROMPT, Check, ConfigFailed, HostCheck, readme_blocks, shell_words  # noqa: E402
from cargo_test import ClaudeCodeCargo  # noqa: E402
from claude import ClaudeCode, ClaudeCodeQuickstart, ClaudeCodeTasks  # noqa: E402
from projects import ClaudeCodeProjects  # noqa: E402
from network import ClaudeCodeNetwork  # noqa: E402

INSPECTOR = "npx @modelcontextprotocol/inspector@2.12.0"


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


CHECKS = {
    c.name: c
    for c in (
        ClaudeCode,
        ClaudeCodeQuickstart,
        ClaudeCodeCargo,
        ClaudeCodeProjects,
        ClaudeCodeTasks,
        ClaudeCodeNetwork,
        Codex,
        GeminiCli,
        InspectorCli,
    )
}


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
