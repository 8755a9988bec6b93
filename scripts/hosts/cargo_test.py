"""Claude Code runs `cargo test` on a crate through Link Run, with the entry the README's
quickstart writes (`ClaudeCodeCargo`).

A HOME with rustup in it, as a person's would be (`check.give_cargo`: `~/.cargo/bin/cargo` and
`~/.rustup` linked to this machine's), a crate in `~/work` with one test, the README's `config`
line run as written (`ClaudeCodeQuickstart.configure`: `--scope user --write`), then `claude`
headless in `~/work` for one turn. The stand-in plays a model that loads Link Run's `command`
with Claude Code's `ToolSearch`, asks for `cargo test --offline`, and ends its turn; the check
passes when the result Claude Code handed back to the model says the test passed, with exit
code 0. Inside the sandbox, cargo runs through rustup's proxy from the home that the line
`config` built shows read-only; nothing of the home's secrets is there.
"""

import json
import re
import threading

import standin
from anthropic_api import DEFERRED_NAME, anthropic_calls
from check import ConfigFailed
from claude import ClaudeCodeQuickstart
from steps import tool_names
from tasks import user_texts

CARGO_ARGS = {"program": "cargo", "args": ["test", "--offline"]}
# What cargo prints when the crate's one test passed (computed by cargo: in no call's arguments).
PASSED = re.compile(r"test result: ok\. 1 passed; 0 failed")
FINAL_TEXT = "cargo test ran through Link Run."

CRATE = {
    "Cargo.toml": '[package]\nname = "adder"\nversion = "0.1.0"\nedition = "2021"\n\n[workspace]\n',
    "src/lib.rs": (
        "pub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n\n"
        "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n"
        "        assert_eq!(super::add(2, 3), 5);\n    }\n}\n"
    ),
}


class CargoScript:
    """The model: load `command` (Claude Code defers MCP tools), call it with `cargo test`,
    then end the turn. `finished` is set once it has."""

    def __init__(self):
        self.finished = threading.Event()

    def anthropic(self, body):
        step = self.step(body)
        if step[0] == "text":
            self.finished.set()
        return step

    def step(self, body):
        tools = body.get("tools") or []
        offered = {t.get("name") for t in tools}
        deferred = {t.get("name") for t in tools if t.get("defer_loading")}
        for text in user_texts(body):
            deferred.update(DEFERRED_NAME.findall(text))
        names = tool_names(sorted((offered | deferred) - {None}), intents=("command",))
        calls = anthropic_calls(body)
        searches = [c for c in calls if c["name"] == "ToolSearch"]
        loaded = set()
        for call in searches:
            loaded.update(re.findall(r'"tool_name": "([^"]+)"', call["result"] or ""))
        if "command" not in names:
            # Its servers may still be connecting: ToolSearch waits for them.
            if len(searches) < 2 and "ToolSearch" in offered:
                return ("call", "ToolSearch", {"query": "link-run command"})
            return ("text", "No Link Run `command` was offered: " + ", ".join(sorted(offered - {None})))
        command = names["command"]
        if command not in loaded and command in deferred:
            if any(command in json.dumps(c["args"]) for c in searches):
                return ("text", f"ToolSearch did not load {command}.")
            return ("call", "ToolSearch", {"query": "select:" + command})
        if not any(c["name"] == command for c in calls):
            return ("call", command, CARGO_ARGS)
        return ("text", FINAL_TEXT)


class ClaudeCodeCargo(ClaudeCodeQuickstart):
    name = "claude-code-cargo"

    def check(self):
        home = self.make_home("home")
        for rel, text in CRATE.items():
            path = home / "work" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        requests = self.root / "requests.jsonl"
        script = CargoScript()
        server = standin.StandIn(str(requests), script=script).serve()
        try:
            self.configure(home, server.url)
            code, self.took = self.run(self.command(), home, "turn", env=self.turn_env(home, server.url))
        except ConfigFailed as failed:
            self.problems.append(str(failed))
            self.calls, self.took = [], 0.0
            return
        finally:
            server.close()
        calls = self.keep_calls(requests)
        if code != 0:
            self.problems.append(f"the host's turn exited with {code!r}")
        if not script.finished.is_set():
            self.problems.append("the stand-in never ended its turn")
        cargo = [c for c in calls if (c.get("args") or {}).get("program") == "cargo"]
        if not cargo:
            self.problems.append("the model's `cargo test` never reached Link Run's `command`")
            return
        result = cargo[0]["result"] or ""
        self.result = result
        if not PASSED.search(result):
            self.problems.append("the result handed to the model does not say the test passed: " + result[-1500:])
        if not re.search(r'exit_code\\?"?\s*:\s*0\b', result):
            self.problems.append("the result handed to the model lacks exit code 0")

    def report(self):
        if not self.problems:
            passed = PASSED.search(self.result).group(0)
            return (
                f"ok   {self.name} ({self.took:.1f} s): the quickstart's entry ran `cargo test` through "
                f"rustup in the home; the model saw `{passed}`, exit code 0"
            )
        return super().report()
