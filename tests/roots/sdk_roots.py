"""The official MCP Python SDK's client (`mcp` 2.3.0) gives its roots to `lnk-link-run serve
--files-from roots`, in each era it speaks: "auto" (it probes `server/discover` and speaks
2026-07-28, where the roots come in its retry of a call answered `input_required`) and
"legacy" (the `initialize` handshake, where serve asks `roots/list`). serve is started in
another folder than the root; `pwd` must print the root, and a second call must need no
roots again.

    sdk_roots.py --root <folder> --elsewhere <folder> [--modes auto,legacy] [--cold] -- <serve...>
"""

import argparse
import sys


async def one_era(mode, root, argv, elsewhere, env):
    import mcp.types as types
    from mcp import Client, StdioServerParameters

    asked = []

    async def list_roots(context):
        asked.append(mode)
        return types.ListRootsResult(roots=[types.Root(uri=f"file://{root}", name="project")])

    params = StdioServerParameters(command=argv[0], args=argv[1:], cwd=elsewhere, env=env)
    async with Client(params, mode=mode, cache=None, read_timeout_seconds=30, list_roots_callback=list_roots) as client:
        for attempt in (1, 2):
            result = await client.call_tool("command", {"program": "pwd"})
            if result.is_error:
                raise SystemExit(f"{mode}: call {attempt} was refused: {result.content}")
            stdout = (result.structured_content or {}).get("stdout", "")
            if stdout != f"{root}\n":
                raise SystemExit(f"{mode}: call {attempt} ran in {stdout!r}, not in {root}")
    if asked != [mode]:
        raise SystemExit(f"{mode}: the roots were asked {len(asked)} times, not once")
    print(f"ok {mode}: pwd ran in the client's root, asked once")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--elsewhere", required=True)
    parser.add_argument("--modes", default="auto,legacy")
    parser.add_argument("--cold", action="store_true", help="serve's calls start cold (LNK_COLD_START=1)")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    opts = parser.parse_args()
    argv = opts.argv[1:] if opts.argv[:1] == ["--"] else opts.argv
    import anyio

    for mode in opts.modes.split(","):
        env = {"LNK_COLD_START": "1"} if opts.cold else None
        anyio.run(one_era, mode, opts.root, argv, opts.elsewhere, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
