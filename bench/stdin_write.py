#!/usr/bin/env python3
"""`write` -> the program has the bytes (target: median under 2 ms).

Starts one interactive run of a small Python program that, each time its read returns, prints
the wall clock (`time.time_ns()`), then sends it N `write`s of "x\\n" through one `serve`, one
after the other. For each: the client's clock just before the request is sent, the program's
clock when its read returned (the same machine's CLOCK_REALTIME), and the client's clock when
the answer arrived. The program is started in raw mode on a terminal with `tty`.

    bench/stdin_write.py <folder of the binaries> [passthrough|bwrap] [tty] [N]

The folder holds `lnk-link-run`, `lnk-link-supervise` and `lnk-test-passthrough` (for
instance `target/release`). `bwrap` is the README's recommended line; the program is
`/usr/bin/python3`. Temporary folders go under `target/tmp` of the checkout.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PROGRAM = """import os, time
while True:
    line = os.read(0, 4096)
    if not line:
        break
    os.write(1, (str(time.time_ns()) + "\\n").encode())
"""


def main():
    bins = os.path.abspath(sys.argv[1])
    mode = sys.argv[2] if len(sys.argv) > 2 else "passthrough"
    tty = "tty" in sys.argv[3:]
    n = int(next((a for a in sys.argv[3:] if a.isdigit()), "200"))
    root = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "target", "tmp"))
    os.makedirs(root, exist_ok=True)
    base = tempfile.mkdtemp(prefix="lnk-stdin-", dir=root)
    files, state = os.path.join(base, "files"), os.path.join(base, "state")
    os.makedirs(files)
    if mode == "passthrough":
        sandbox, check = [f"{bins}/lnk-test-passthrough"], ["--no-sandbox-check"]
    else:
        sandbox = [
            "/usr/bin/bwrap", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--ro-bind-try", "/bin", "/bin", "--ro-bind-try", "/sbin", "/sbin",
            "--ro-bind-try", "/lib", "/lib", "--ro-bind-try", "/lib64", "/lib64",
            "--ro-bind-try", "/lib32", "/lib32", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--bind", files, files, "--unshare-all", "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--clearenv", "--"]
        check = []
    serve = subprocess.Popen(
        [f"{bins}/lnk-link-run", "serve", "--files", files, "--programs-path", "/usr/bin",
         "--program", "python3", "--timeout", "10s", "--output", "64KiB", "--state", state,
         "--background", "4", "--background-timeout", "10m", "--background-output", "1MiB",
         "--background-keep", "1h", "--hops", "3", *check, "--", *sandbox],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ids = iter(range(1, 1 << 30))

    def call(method, params):
        rid = next(ids)
        line = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        serve.stdin.write((line + "\n").encode())
        serve.stdin.flush()
        while True:
            msg = json.loads(serve.stdout.readline())
            if msg.get("id") == rid:
                return msg["result"]

    call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"}})
    program = ("import tty\ntty.setraw(0)\n" if tty else "") + PROGRAM
    args = {"program": "python3", "args": ["-c", program], "interactive": True}
    if tty:
        args["tty"] = True
    run = call("tools/call", {"name": "start", "arguments": args})["structuredContent"]["id"]
    time.sleep(1.0)
    out = os.path.join(files, "background", run + ".out")
    to_program, answered = [], []
    for _ in range(n):
        before = os.path.getsize(out)
        sent = time.time_ns()
        result = call("tools/call", {"name": "write", "arguments": {"id": run, "text": "x\n"}})
        got = time.time_ns()
        assert not result["isError"], result
        while True:
            with open(out, "rb") as f:
                f.seek(before)
                data = f.read()
            if data.endswith(b"\n"):
                break
            time.sleep(0.0005)
        to_program.append((int(data.split()[-1]) - sent) / 1e6)
        answered.append((got - sent) / 1e6)
    call("tools/call", {"name": "stop", "arguments": {"id": run}})
    serve.stdin.close()
    serve.wait()
    subprocess.run([f"{bins}/lnk-link-supervise", "remove", "--state", state], check=True)
    shutil.rmtree(base, ignore_errors=True)
    to_program.sort()
    answered.sort()
    p90 = to_program[int(len(to_program) * 0.9)]
    print(f"{mode}{' tty' if tty else ''}, {n} writes: write -> program median "
          f"{statistics.median(to_program):.2f} ms (p90 {p90:.2f} ms); answer median "
          f"{statistics.median(answered):.2f} ms")


if __name__ == "__main__":
    main()
