#!/usr/bin/env python3
"""What each part of the sandbox line costs a consecutive call, for one or two builds.

`echo hi` through `serve`, N calls back to back (after 20 unmeasured ones) on one server at a
time, under a bubblewrap line like the README's with: no `{protected}`; `{protected}`;
`{protected}` and `{caches}` with two `--cache` folders; `{protected}` and `--net-allow`; and
under the pass-through prefix (`lnk-test-passthrough`, found beside the first build). The
files folder is a small project (a repository, four folders). For each: the median time from
request to answer, serve's own CPU per call (`/proc/<pid>/stat`, all its threads, not its
children), the CPU of everything (serve, its reapers, sandboxes and programs; the
children's rusage, start-up included) per call, and the machine's busy time per call
(`/proc/stat`, every CPU, during the measured calls: the kernel's work for namespaces and
mounts done outside these processes included, and this script's own part, a client's). Two
rounds, the builds and lines interleaved.

    bench/consecutive_costs.py [N] <lnk-link-run> [<another build's lnk-link-run>]

Temporary folders go under `target/tmp` of the checkout.
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CHECKOUT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def ticks(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def machine_busy():
    """Every CPU's busy time so far, in seconds (all but idle and iowait)."""
    values = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def call(p, i):
    request = {"jsonrpc": "2.0", "id": i, "method": "tools/call",
               "params": {"name": "command", "arguments": {"program": "echo", "args": ["hi"]}}}
    p.stdin.write((json.dumps(request) + "\n").encode())
    p.stdin.flush()
    while True:
        message = json.loads(p.stdout.readline())
        if "id" in message:
            if "hi" not in json.dumps(message):
                raise SystemExit(f"`echo hi` answered {message}")
            return


def measure(binary, files, line, extra, nocheck, n):
    args = [binary, "serve", "--files", files, "--programs-path", "/usr/bin:/bin",
            "--timeout", "30s", "--output", "64KiB", "--program", "echo"] + extra
    if nocheck:
        args.append("--no-sandbox-check")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen(args + ["--"] + line, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
             "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "consecutive_costs", "version": "1"}}}
    p.stdin.write((json.dumps(hello) + "\n").encode())
    p.stdin.flush()
    json.loads(p.stdout.readline())
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    for i in range(20):
        call(p, 100000 + i)
    start = ticks(p.pid)
    busy = machine_busy()
    took = []
    for i in range(n):
        t = time.perf_counter()
        call(p, i + 1)
        took.append((time.perf_counter() - t) * 1000)
    serve_cpu = (ticks(p.pid) - start) * 1000 / os.sysconf("SC_CLK_TCK") / n
    machine = (machine_busy() - busy) * 1000 / n
    p.stdin.close()
    p.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    tree = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000 / (n + 20)
    took.sort()
    return statistics.median(took), serve_cpu, tree, machine, took[len(took) // 10]


def main():
    argv = sys.argv[1:]
    n = int(argv.pop(0)) if argv and argv[0].isdigit() else 200
    if not argv:
        raise SystemExit(__doc__)
    builds = {"this": argv[0]}
    if len(argv) > 1:
        builds["other"] = argv[1]
    tmp = os.path.join(CHECKOUT, "target", "tmp")
    os.makedirs(tmp, exist_ok=True)
    root = tempfile.mkdtemp(prefix="consecutive-costs-", dir=tmp)
    files = os.path.join(root, "files")
    os.mkdir(files)
    subprocess.run(["git", "init", "-q", files], check=True)
    for folder in ["src/a", "src/b", "tests/x", "docs"]:
        os.makedirs(os.path.join(files, folder))
    caches = [os.path.join(root, "cache1"), os.path.join(root, "cache2")]
    for cache in caches:
        os.mkdir(cache)
    head = ["/usr/bin/bwrap", "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--ro-bind-try", "/bin", "/bin", "--ro-bind-try", "/lib", "/lib",
            "--ro-bind-try", "/lib64", "/lib64", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--bind", files, files]
    tail = ["--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session",
            "--clearenv"]
    lines = {
        "no {protected}": (head + tail, [], True),
        "{protected}": (head + ["{protected}"] + tail, [], False),
        "{protected}, 2 caches": (head + ["{caches}", "{protected}"] + tail,
                                  sum([["--cache", c] for c in caches], []), False),
        "{protected}, --net-allow": (head + ["{protected}"] + tail,
                                     ["--net-allow", "example.test"], False),
    }
    passthrough = os.path.join(os.path.dirname(os.path.abspath(argv[0])), "lnk-test-passthrough")
    if os.path.exists(passthrough):
        lines["pass-through"] = ([passthrough], [], True)
    results = {}
    for _ in range(2):
        for name, (line, extra, nocheck) in lines.items():
            for build, binary in builds.items():
                results.setdefault((name, build), []).append(
                    measure(binary, files, line, extra, nocheck, n))
    print(f"{n} consecutive calls of `echo hi` per line and build, 2 rounds; load {os.getloadavg()}")
    print(f"{'line':26s} {'build':6s} {'median':>9s} {'p10':>9s} {'serve CPU':>10s}"
          f" {'all CPU':>9s} {'machine':>9s}  (per call)")
    for (name, build), runs in results.items():
        median = statistics.median([r[0] for r in runs])
        serve = statistics.mean([r[1] for r in runs])
        tree = statistics.mean([r[2] for r in runs])
        machine = statistics.mean([r[3] for r in runs])
        p10 = statistics.median([r[4] for r in runs])
        print(f"{name:26s} {build:6s} {median:7.2f} ms {p10:6.2f} ms {serve:7.2f} ms"
              f" {tree:6.2f} ms {machine:6.2f} ms")


if __name__ == "__main__":
    main()
