#!/usr/bin/env python3
"""Idle supervisors: what N background runs that only sleep cost the machine.

Starts N `sleep 600` runs through one `serve` (pass-through prefix), waits, then reads every
supervisor's CPU time (`/proc/<pid>/stat`) over a window, and its RSS and PSS
(`/proc/<pid>/smaps_rollup`), and the same of every run's gate (the supervisor's one child, the
run's reaper); then `stop --state` ends them all and it checks none is left.
Targets: under 1 CPU-second in all over 60 s for 1,000; each supervisor about 280 KiB of PSS,
what it costs the machine (RSS, shown beside it, counts the pages it shares whole).

    bench/idle_supervisors.py <folder of the binaries> [N] [seconds] [interactive|tty]

With `interactive` or `tty`, each run is started so (its stdin held open by its supervisor,
which listens on the run's stdin channel; or on a terminal of its own).

The folder holds `lnk-link-run`, `lnk-link-supervise` and `lnk-test-passthrough` (for
instance `target/profiling` after `bench/run.sh`'s build). Its temporary folders go under
`target/tmp` of the checkout.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def main():
    bins = os.path.abspath(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    window = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    stdin = {sys.argv[4]: True} if len(sys.argv) > 4 else {}
    root = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "target", "tmp"))
    os.makedirs(root, exist_ok=True)
    base = tempfile.mkdtemp(prefix="lnk-idle-", dir=root)
    files, state = os.path.join(base, "files"), os.path.join(base, "state")
    os.makedirs(files)
    serve = subprocess.Popen(
        [f"{bins}/lnk-link-run", "serve", "--files", files, "--programs-path", "/usr/bin:/bin",
         "--program", "sleep", "--timeout", "10s", "--output", "4KiB", "--state", state,
         "--background", str(n + 10), "--background-timeout", "10m",
         "--background-output", "64KiB", "--background-keep", "1h", "--hops", "3",
         "--no-sandbox-check", "--", f"{bins}/lnk-test-passthrough"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def request(i, method, params):
        serve.stdin.write(json.dumps(
            {"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n")
        serve.stdin.flush()
        while True:
            message = json.loads(serve.stdout.readline())
            if message.get("id") == i:
                return message

    def supervisors():
        found = []
        for proc in glob.glob("/proc/[0-9]*"):
            try:
                argv = open(proc + "/cmdline", "rb").read().split(b"\0")
            except OSError:
                continue
            if (argv and argv[0].endswith(b"lnk-link-supervise") and argv[1:2] == [b"supervise"]
                    and state.encode() in b" ".join(argv)):
                found.append(proc)
        return found

    def gates(procs):
        """The gate of each supervisor: its child (`/proc/<pid>/task/<pid>/children`)."""
        found = []
        for proc in procs:
            pid = proc.rsplit("/", 1)[1]
            try:
                children = open(f"{proc}/task/{pid}/children").read().split()
            except OSError:
                continue
            found.extend(f"/proc/{child}" for child in children)
        return found

    def memory(procs):
        """Medians and the largest RSS, PSS of `procs`, in KiB."""
        rss, pss = [], []
        for proc in procs:
            try:
                lines = open(proc + "/smaps_rollup").read().splitlines()
            except OSError:
                continue
            for line in lines:
                if line.startswith("Rss:"):
                    rss.append(int(line.split()[1]))
                elif line.startswith("Pss:"):
                    pss.append(int(line.split()[1]))
        rss.sort()
        pss.sort()
        return rss[len(rss) // 2], rss[-1], pss[len(pss) // 2]

    def cpu_seconds(procs):
        ticks = 0
        for proc in procs:
            try:
                fields = open(proc + "/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")

    try:
        request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                  "clientInfo": {"name": "idle-supervisors", "version": "1"}})
        for i in range(n):
            answer = request(i + 1, "tools/call",
                             {"name": "start", "arguments": {"program": "sleep", "args": ["600"], **stdin}})
            if answer.get("result", {}).get("isError"):
                sys.exit(f"start {i} was refused: {answer}")
        time.sleep(5)
        procs = supervisors()
        print(f"supervisors running: {len(procs)} of {n}")
        reapers = gates(procs)
        before, started = (cpu_seconds(procs), cpu_seconds(reapers)), time.time()
        time.sleep(window)
        spent = (cpu_seconds(procs) - before[0], cpu_seconds(reapers) - before[1])
        print(f"CPU over {time.time() - started:.0f} s: all supervisors {spent[0]:.2f} s, "
              f"all gates {spent[1]:.2f} s")
        for what, of in (("supervisor", procs), ("gate", gates(procs))):
            rss, largest, pss = memory(of)
            print(f"each {what}: PSS median {pss} KiB; RSS median {rss} KiB (max {largest} KiB)")
    finally:
        serve.stdin.close()
        serve.wait()
        stop = subprocess.run([f"{bins}/lnk-link-supervise", "stop", "--state", state],
                              capture_output=True, text=True)
        left = supervisors()
        print(f"stop --state: exit {stop.returncode}; supervisors left: {len(left)}")
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
