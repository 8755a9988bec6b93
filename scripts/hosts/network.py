"""The network by allow-list through a real host: Claude Code, headless, with the README's
claude-code entry plus `--net-allow` for a registry stand-in, asks Link Run's `command` to fetch
from that registry (allowed) and from another site (refused), and the model must see both: the
registry's bytes in the first result, and the refused host named, with why, in the second.

Both sites are plain HTTP servers on 127.0.0.1 in run.sh's network namespace (only loopback),
named `registry.test` and `elsewhere.test` by a hosts file bound over /etc/hosts in run.sh's
own mount namespace (`.test` is reserved for tests; no real registry is named). What the
registry serves is computed here, so it is in no call's arguments: a host echoing a call's
arguments in an error could not pass the check.
"""

import json
import re
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import standin
from anthropic_api import DEFERRED_NAME, anthropic_calls
from check import ConfigFailed
from claude import ClaudeCode
from steps import tool_names

# What the registry serves at /hello; the calls hold only its URL.
REGISTRY_MARKER = "pkg-" + str(7919 * 13)
FINAL_TEXT = "Both fetches are done."


class Site:
    """A plain HTTP site on 127.0.0.1: `/hello` answers `body`; every request line is kept."""

    def __init__(self, body):
        self.requests = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                site.requests.append(self.requestline)
                data = body.encode() if self.path == "/hello" else b"not found\n"
                self.send_response(200 if self.path == "/hello" else 404)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class NetworkScript:
    """The model: `command` curl from the registry, then from elsewhere, then a final text."""

    def __init__(self, allowed_url, refused_url):
        self.args = [
            {"program": "curl", "args": ["-sS", "--fail", "--max-time", "20", allowed_url]},
            {"program": "curl", "args": ["-sS", "--fail", "--max-time", "20", refused_url]},
        ]

    def anthropic(self, body):
        tools = body.get("tools") or []
        deferred = {t.get("name") for t in tools if t.get("defer_loading")}
        for message in body.get("messages") or []:
            content = message.get("content")
            blocks = content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
            for block in blocks:
                if block.get("type") == "text":
                    deferred.update(DEFERRED_NAME.findall(block.get("text") or ""))
        names = tool_names(sorted({t.get("name", "") for t in tools} | deferred), intents=("command",))
        if "command" not in names:
            return ("text", "No Link Run `command` was offered.")
        command = names["command"]
        calls = anthropic_calls(body)
        loaded = set()
        for call in calls:
            if call["name"] == "ToolSearch":
                loaded.update(re.findall(r'"tool_name": "([^"]+)"', call["result"] or ""))
        if command in deferred and command not in loaded:
            if not any(c["name"] == "ToolSearch" for c in calls):
                return ("call", "ToolSearch", {"query": "select:" + command})
        made = [c for c in calls if c["name"] == command]
        if len(made) < len(self.args):
            return ("call", command, self.args[len(made)])
        return ("text", FINAL_TEXT)


class ClaudeCodeNetwork(ClaudeCode):
    name = "claude-code-network"

    def check(self):
        self.registry = Site(REGISTRY_MARKER + "\n")
        self.elsewhere = Site("elsewhere\n")
        try:
            self.name_the_sites()
            self.check_network_turn()
        finally:
            self.registry.close()
            self.elsewhere.close()

    def name_the_sites(self):
        """`registry.test` and `elsewhere.test` lead to 127.0.0.1, for serve's proxy: a hosts
        file bound over /etc/hosts, in run.sh's own mount namespace."""
        hosts = self.root / "hosts"
        hosts.write_text(Path("/etc/hosts").read_text() + "\n127.0.0.1 registry.test elsewhere.test\n")
        hosts.chmod(0o644)
        done = subprocess.run(["mount", "--bind", str(hosts), "/etc/hosts"], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"cannot bind the sites' names over /etc/hosts: {done.stderr.strip()}")

    def configure(self, home, url):
        entry = self.readme_entry(home)
        args = entry["args"]
        port = self.registry.port
        flags = args[1 : args.index("--")] + [
            "--program", "sh", "--program", "curl",
            "--net-allow", f"registry.test:{port}", "--net-allow", f"127.0.0.1:{port}",
        ]
        argv = [str(home / ".cargo" / "bin" / "lnk-link-run"), "config", "claude-code", "--write"] + flags
        label = "config-claude-code"
        with open(self.root / f"{label}.stdout", "wb") as out, open(self.root / f"{label}.stderr", "wb") as err:
            code = subprocess.run(argv, cwd=home / "work", env=self.env(home), stdout=out, stderr=err, timeout=60).returncode
        if code != 0:
            raise ConfigFailed(f"`config claude-code --write` with --net-allow failed ({code}): {self.output(label)[-800:]}")
        written = self.added_entry(home)["args"]
        if f"registry.test:{port}" not in written or "--net-allow" not in written:
            raise ConfigFailed(f"`config` wrote no --net-allow into the entry: {json.dumps(written)}")

    def check_network_turn(self):
        home = self.make_home("home")
        requests = self.root / "requests.jsonl"
        allowed = f"http://registry.test:{self.registry.port}/hello"
        refused = f"http://elsewhere.test:{self.elsewhere.port}/hello"
        server = standin.StandIn(str(requests), script=NetworkScript(allowed, refused)).serve()
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
        self.problems.extend(self.judge_network(calls))

    def judge_network(self, calls):
        names = tool_names([c["name"] for c in calls if c.get("name")], intents=("command",))
        made = [c for c in calls if c.get("name") == names.get("command")]
        problems = []
        if len(made) < 2:
            return [f"the host made {len(made)} `command` calls, not 2"]
        fetched, refused = (made[0]["result"] or ""), (made[1]["result"] or "")
        if REGISTRY_MARKER not in fetched:
            problems.append(f"the allowed fetch did not bring the registry's bytes ({REGISTRY_MARKER})")
        if "elsewhere.test" not in refused or "not on the allow-list" not in refused:
            problems.append("the refused fetch's result does not name elsewhere.test and why")
        if self.elsewhere.requests:
            problems.append(f"the site not on the list was reached: {self.elsewhere.requests}")
        if len(self.registry.requests) != 1:
            problems.append(f"the registry got {len(self.registry.requests)} requests, not 1")
        return problems

    def report(self):
        if not self.problems:
            return (
                f"ok   {self.name} ({self.took:.1f} s): the registry's bytes came through the proxy, "
                "and the refused host was named to the model"
            )
        return super().report()
