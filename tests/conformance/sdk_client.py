#!/usr/bin/env python3
"""Conformance of `lnk-link-run serve` against a client nobody here wrote: the official MCP
Python SDK (`mcp` 2.3.0, `from mcp import Client`) over stdio.

For each era the SDK can speak it starts the server, connects, lists the tools, calls `command`
and checks what comes back, including the structured value against the tool's `outputSchema`
(validated with `jsonschema`, on top of the SDK's own validation):

- mode "auto":       probes `server/discover`; against our server it must land on 2026-07-28;
- mode "legacy":     the `initialize` handshake at 2025-11-25;
- mode "2026-07-28": the modern revision pinned, no probe.

Usage:
    sdk_client.py [--modes auto,legacy,2026-07-28] [--trace FILE] -- <server command and args>

Without a command after `--`, the command is read from `LNK_SDK_SERVER` (a shell-quoted string).
The server must allow the programs `echo`, `sh` and `sleep`, with a `--timeout` of at least 5 s.
`--trace FILE` puts a line logger between client and server and appends every line of both
directions to FILE (for diagnosing the server; the checks themselves do not need it).

Prints one line per check (`ok` / `FAIL`) and exits 0 only when every check of every era passed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from sdk_background import background_tools
from sdk_checks import CheckFailed, check, text_of

ERAS = ("auto", "legacy", "2026-07-28")
MODERN = "2026-07-28"
LEGACY = "2025-11-25"
# Environment passed on to the server on top of what the SDK itself lets through.
PASSED_ENV = ("RUST_LOG", "RUST_BACKTRACE", "LNK_SUPERVISE", "LNK_KEYRING", "XDG_CONFIG_HOME")
# Keys every structured value of `command` carries (SPEC, "Tools").
STRUCTURED_KEYS = {
    "exit_code",
    "signal",
    "timed_out",
    "stdout",
    "stderr",
    "stdout_bytes",
    "stderr_bytes",
    "elapsed_ms",
    "leftovers_killed",
}


def stream_in_text(text: str, name: str) -> str | None:
    """What the answer's text shows of one stream: the lines after its `--- name: … ---`
    header up to the next header, without the newline the text adds when the stream's last line
    has none. The structured value's `stdout`/`stderr` must equal it."""
    start = text.find(f"--- {name}: ")
    if start < 0:
        return None
    start = text.find("---\n", start + 4)
    if start < 0:
        return None
    start += 4
    end = text.find("\n--- ", start - 1)
    section = text[start : end + 1] if end >= 0 else text[start:]
    return section


def same_stream(shown: Any, section: str | None) -> bool:
    """Whether a structured stream equals its section of the text (the text may add one
    newline after a last line that has none)."""
    if not isinstance(shown, str) or section is None:
        return False
    return shown == section or (not shown.endswith("\n") and shown + "\n" == section)


# --------------------------------------------------------------------------------------------
# The optional wire logger (`--proxy`): the SDK starts this script in place of the server.


def run_proxy(log_path: str, command: list[str]) -> int:
    """Copy lines between our stdin/stdout and the server's, logging each with its direction."""
    log = open(log_path, "a", buffering=1, encoding="utf-8", errors="replace")  # noqa: SIM115
    lock = threading.Lock()
    start = time.monotonic()

    def note(direction: str, line: bytes) -> None:
        with lock:
            text = line.decode("utf-8", errors="replace").rstrip("\n")
            log.write(f"{time.monotonic() - start:8.3f} {direction} {text}\n")

    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None and server.stdout is not None
    server_in, server_out = server.stdin, server.stdout

    def client_to_server() -> None:
        try:
            for line in sys.stdin.buffer:
                note("-->", line)
                server_in.write(line)
                server_in.flush()
        except (BrokenPipeError, OSError):
            pass
        finally:
            note("---", b"(client closed the server's stdin)")
            try:
                server_in.close()
            except OSError:
                pass

    threading.Thread(target=client_to_server, daemon=True).start()
    for line in server_out:
        note("<--", line)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    code = server.wait()
    note("---", f"(server exited with {code})".encode())
    return code


# --------------------------------------------------------------------------------------------
# Helpers.


def leaves(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, which is what anyio task groups raise."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]


def processes_with_arg(token: str) -> list[int]:
    """Pids of the processes that have `token` as one of their arguments (found in /proc)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if token.encode() in argv:
            pids.append(int(entry))
    return pids


async def wait_until(predicate: Callable[[], bool], seconds: float) -> bool:
    import anyio

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        await anyio.sleep(0.05)
    return predicate()


# --------------------------------------------------------------------------------------------
# One era.


async def run_era(era: str, command: list[str], trace: str | None) -> None:
    import anyio
    import jsonschema
    from mcp import Client, MCPError, StdioServerParameters

    if trace:
        with open(trace, "a", encoding="utf-8") as f:
            f.write(f"==== era {era}: {shlex.join(command)}\n")
        argv = [sys.executable, os.path.abspath(__file__), "--proxy", trace, "--", *command]
    else:
        argv = command
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)

    async with Client(params, mode=era, cache=None, read_timeout_seconds=20) as client:
        # The era the connection landed on.
        session = client.session
        if era == "legacy":
            check(
                era,
                f"initialize handshake, protocol {client.protocol_version}",
                session.initialize_result is not None and client.protocol_version == LEGACY,
                f"protocol {client.protocol_version!r}, initialize result {session.initialize_result!r}",
            )
            info = client.server_info
            check(era, f"serverInfo {info.name if info else None!r}", info is not None and bool(info.name), info)
        elif era == "auto":
            discovered = session.discover_result
            check(
                era,
                f"server/discover probe answered, protocol {client.protocol_version}",
                discovered is not None and session.initialize_result is None and client.protocol_version == MODERN,
                f"fell back to initialize (protocol {client.protocol_version!r}): the server did not answer "
                "server/discover with a DiscoverResult listing 2026-07-28",
            )
            assert discovered is not None
            check(
                era,
                f"supportedVersions {discovered.supported_versions} include {MODERN}",
                MODERN in discovered.supported_versions,
            )
            check(era, "capabilities include tools", discovered.capabilities.tools is not None, discovered.capabilities)
        else:
            check(era, f"pinned protocol {client.protocol_version}", client.protocol_version == MODERN)
        modern = client.protocol_version == MODERN

        # tools/list and the `command` tool's schemas.
        listed = await client.list_tools()
        names = [tool.name for tool in listed.tools]
        check(era, f"tools/list names {names}", "command" in names)
        tool = next(t for t in listed.tools if t.name == "command")
        input_schema = tool.input_schema
        program = input_schema.get("properties", {}).get("program", {})
        allowed = program.get("enum")
        check(
            era,
            f"inputSchema: program is an enum {allowed}",
            isinstance(allowed, list) and {"echo", "sh", "sleep"} <= set(allowed),
            program,
        )
        check(era, "inputSchema: program is required", "program" in input_schema.get("required", []), input_schema)
        jsonschema.validators.validator_for(input_schema).check_schema(input_schema)
        input_validator = jsonschema.validators.validator_for(input_schema)(input_schema)
        check(
            era,
            "inputSchema accepts {program: echo, args: [hello]} and refuses program rm",
            input_validator.is_valid({"program": "echo", "args": ["hello"]})
            and not input_validator.is_valid({"program": "rm", "args": ["-rf", "x"]}),
        )
        description = tool.description or ""
        check(
            era,
            "description names the allowed programs",
            all(name in description for name in ("echo", "sh", "sleep")),
            description,
        )
        output_schema = tool.output_schema
        check(era, "outputSchema present", isinstance(output_schema, dict), output_schema)
        assert output_schema is not None
        jsonschema.validators.validator_for(output_schema).check_schema(output_schema)
        output_validator = jsonschema.validators.validator_for(output_schema)(output_schema)

        def structured(what: str, result: Any) -> dict[str, Any]:
            value = result.structured_content
            check(era, f"{what}: structuredContent present", isinstance(value, dict), value)
            errors = sorted(output_validator.iter_errors(value), key=str)
            check(
                era,
                f"{what}: structuredContent conforms to outputSchema",
                not errors,
                "; ".join(e.message for e in errors),
            )
            missing = STRUCTURED_KEYS - set(value)
            check(era, f"{what}: structuredContent has every SPEC key", not missing, f"missing {sorted(missing)}")
            if modern:
                check(era, f"{what}: resultType complete", result.result_type == "complete", result.result_type)
            return value

        # A program that succeeds.
        result = await client.call_tool("command", {"program": "echo", "args": ["hello"]})
        check(era, "echo hello: not an error", not result.is_error, text_of(result))
        value = structured("echo hello", result)
        expect = {
            "exit_code": 0,
            "signal": None,
            "timed_out": False,
            "stdout_bytes": 6,
            "stderr_bytes": 0,
            "leftovers_killed": False,
        }
        got = {k: value.get(k) for k in expect}
        check(era, f"echo hello: values {got}", got == expect, f"expected {expect}")
        elapsed = value.get("elapsed_ms")
        check(
            era,
            f"echo hello: elapsed_ms {elapsed}",
            isinstance(elapsed, int) and 0 <= elapsed < 10_000,
        )
        check(era, "echo hello: text holds the output", "hello" in text_of(result), text_of(result))
        check(era, "echo hello: stdout in the structured value", value.get("stdout") == "hello\n", value)
        for stream in ("stdout", "stderr"):
            check(
                era,
                f"echo hello: structured {stream} is what the text shows",
                same_stream(value.get(stream), stream_in_text(text_of(result), stream)),
                f"{value.get(stream)!r} vs {text_of(result)!r}",
            )

        # A program that exits non-zero is reported, not an error.
        result = await client.call_tool("command", {"program": "sh", "args": ["-c", "echo oops >&2; exit 3"]})
        check(era, "sh -c 'exit 3': not an error", not result.is_error, text_of(result))
        value = structured("sh -c 'exit 3'", result)
        expect = {"exit_code": 3, "signal": None, "timed_out": False, "stdout_bytes": 0, "stderr_bytes": 5}
        got = {k: value.get(k) for k in expect}
        check(era, f"sh -c 'exit 3': values {got}", got == expect, f"expected {expect}")
        check(era, "sh -c 'exit 3': text says 3 and holds stderr", "3" in text_of(result) and "oops" in text_of(result))
        check(era, "sh -c 'exit 3': stderr in the structured value", value.get("stderr") == "oops\n", value)

        # A stream cut to its head and tail is carried cut, exactly as the text shows it.
        result = await client.call_tool(
            "command", {"program": "sh", "args": ["-c", "i=0; while [ $i -lt 20000 ]; do echo line-$i; i=$((i+1)); done"]}
        )
        value = structured("a long stdout", result)
        shown = value.get("stdout")
        check(
            era,
            "a long stdout: cut with a left-out line, as the text shows it",
            isinstance(shown, str)
            and shown.startswith("line-0\n")
            and "bytes left out ...]" in shown
            and shown.endswith("line-19999\n")
            and same_stream(shown, stream_in_text(text_of(result), "stdout")),
            f"{shown!r:.300}",
        )

        # `input` goes to stdin.
        result = await client.call_tool(
            "command", {"program": "sh", "args": ["-c", 'read line; echo "got $line"'], "input": "abc\n"}
        )
        value = structured("input to stdin", result)
        got = {k: value.get(k) for k in ("exit_code", "stdout_bytes")}
        check(era, f"input to stdin: values {got}", got == {"exit_code": 0, "stdout_bytes": 8}, text_of(result))
        check(era, "input to stdin: text holds 'got abc'", "got abc" in text_of(result), text_of(result))

        # A program off the list is refused with isError and a text that says what may be run.
        result = await client.call_tool("command", {"program": "rm", "args": ["-rf", "/"]})
        text = text_of(result)
        check(era, "program rm: refused with isError", result.is_error is True, text)
        check(era, "program rm: the text lists what may be run", all(p in text for p in ("echo", "sh", "sleep")), text)

        # A `dir` that leaves the files folder is refused too.
        result = await client.call_tool("command", {"program": "echo", "args": ["x"], "dir": ".."})
        check(era, "dir '..': refused with isError", result.is_error is True, text_of(result))

        # An unknown tool is a protocol error, -32602.
        try:
            result = await client.call_tool("no-such-tool", {})
        except MCPError as e:
            check(era, f"unknown tool: JSON-RPC error {e.code}", e.code == -32602, e.message)
        else:
            raise CheckFailed(f"unknown tool: expected a -32602 error, got a result: {result!r}")

        # Progress about once a second for a call that asks for it.
        progress: list[tuple[float, float | None, str | None, float]] = []
        started = time.monotonic()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total, message, time.monotonic() - started))

        result = await client.call_tool("command", {"program": "sleep", "args": ["2"]}, progress_callback=on_progress)
        value = structured("sleep 2 with progress", result)
        check(
            era,
            f"sleep 2: exit_code {value.get('exit_code')}, elapsed_ms {value.get('elapsed_ms')}",
            value.get("exit_code") == 0 and 1900 <= (value.get("elapsed_ms") or 0) < 10_000,
        )
        shown = [(p, m, round(at, 2)) for p, _, m, at in progress]
        check(era, f"sleep 2: {len(progress)} progress notification(s) {shown}", len(progress) >= 1)
        values = [p for p, _, _, _ in progress]
        check(era, "sleep 2: progress increases", all(a < b for a, b in zip(values, values[1:])), values)

        # Cancelling the call (the SDK sends notifications/cancelled) kills what it started.
        token = f"3{secrets.randbelow(10**6):06d}.5"
        scope = anyio.CancelScope()

        async def cancelled_call() -> None:
            with scope:
                await client.call_tool("command", {"program": "sleep", "args": [token]})

        seen: list[int] = []

        def started_running() -> bool:
            seen.extend(processes_with_arg(token))
            return bool(seen)

        async with anyio.create_task_group() as group:
            group.start_soon(cancelled_call)
            await wait_until(started_running, 5)
            scope.cancel()
        check(era, f"cancel: sleep {token} was running (pids {seen})", bool(seen), "never seen in /proc")
        gone = await wait_until(lambda: not processes_with_arg(token), 3)
        check(era, "cancel: its processes are gone within 3 s", gone, f"still running: {processes_with_arg(token)}")

        # And the server goes on serving.
        result = await client.call_tool("command", {"program": "echo", "args": ["still", "here"]})
        value = structured("after cancel", result)
        check(era, "after cancel: echo answers", value.get("exit_code") == 0 and value.get("stdout_bytes") == 11)

        # The background tools, when serve runs with --state: each structured value is checked
        # against its tool's outputSchema (the SDK checks too, and raises on a mismatch).
        if "start" in names:
            await background_tools(era, client, {t.name: t for t in listed.tools}, modern)


# --------------------------------------------------------------------------------------------


async def main_async(eras: list[str], command: list[str], trace: str | None) -> int:
    import anyio

    failed = []
    for era in eras:
        print(f"---- era {era}: {shlex.join(command)}", flush=True)
        try:
            with anyio.fail_after(90):
                await run_era(era, command, trace)
        except Exception as e:  # noqa: BLE001 - every failure is reported, then the next era runs
            failed.append(era)
            # The SDK's task groups wrap what was raised inside `async with Client(...)`.
            causes = leaves(e)
            checks = [c for c in causes if isinstance(c, CheckFailed)]
            if checks:
                for c in checks:
                    print(f"FAIL [{era}] {c}", flush=True)
            elif all(isinstance(c, TimeoutError) for c in causes):
                print(f"FAIL [{era}] no result within 90 s (the server hung or did not answer)", flush=True)
            else:  # an SDK error: a rejected answer, a closed connection...
                said = "; ".join(f"{type(c).__name__}: {c}" for c in causes)
                print(f"FAIL [{era}] the SDK raised {said}", flush=True)
                print("".join(traceback.format_exception(e)).rstrip(), file=sys.stderr, flush=True)
    if failed:
        print(f"FAILED eras: {', '.join(failed)}", flush=True)
        return 1
    print(f"all checks passed in eras: {', '.join(eras)}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modes", default=",".join(ERAS), help="comma-separated Client modes to run")
    parser.add_argument("--trace", help="append the wire traffic to this file")
    parser.add_argument("--proxy", help=argparse.SUPPRESS)
    parser.add_argument("command", nargs="*", help="the server command (after --)")
    args = parser.parse_args()
    command = args.command or shlex.split(os.environ.get("LNK_SDK_SERVER", ""))
    if not command:
        print("sdk_client.py: no server command: give it after -- or in LNK_SDK_SERVER", file=sys.stderr)
        return 2
    if args.proxy:
        return run_proxy(args.proxy, command)
    eras = [m for m in args.modes.split(",") if m]
    unknown = [m for m in eras if m not in ERAS]
    if unknown:
        print(f"sdk_client.py: unknown mode(s) {unknown}; known: {', '.join(ERAS)}", file=sys.stderr)
        return 2
    try:
        import anyio
        import jsonschema  # noqa: F401
        import mcp  # noqa: F401
    except ImportError as e:
        print(f"sdk_client.py: {e}; install mcp==2.3.0 and jsonschema in this Python", file=sys.stderr)
        return 2
    from importlib.metadata import version

    print(f"mcp {version('mcp')}, jsonschema {version('jsonschema')}, python {sys.version.split()[0]}", flush=True)
    return anyio.run(main_async, eras, command, args.trace)


if __name__ == "__main__":
    sys.exit(main())
