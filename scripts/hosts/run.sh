#!/usr/bin/env bash
# Real MCP hosts against Link Run, end to end: Claude Code, Codex CLI and Gemini CLI, each run
# headless for one turn against a stand-in model API on 127.0.0.1, with docs/hosts.md's own host
# entries as their config (hosts.py says how), and its one-line `mcp add` commands and
# MCP Inspector line run as written. Claude Code is also driven in its interactive interface, on
# a pseudo-terminal, for its MCP tasks: a background run's end brought by Claude Code itself,
# and its TaskStop stopping a run; and, with the entry the README's quickstart writes in a HOME
# with rustup in it, has it run `cargo test` on a crate through Link Run.
#
# It installs the hosts at the versions of package.json (locked by package-lock.json, with
# Node 22 from npm's `node` package) into a cache folder, $LNK_HOSTS_CACHE, by default
# ~/.cache/lnk-link-run/hosts, and keeps npm's downloads there too. It builds the binaries from
# this checkout, then runs everything inside a network namespace of its own with only the
# loopback interface up: no host can reach anything but the stand-in.
#
# Without a host (no npm, no registry, no network namespace), it fails, saying why, unless a
# skip is asked for with LNK_ALLOW_SKIP=1: then it prints "skipped: ..." and exits 0.
# LNK_REQUIRE_HOSTS=1 (CI sets it) keeps the hosts required even then. What the hosts sent the
# stand-in is kept in target/hosts-e2e/<host>/ (or $LNK_HOSTS_EVIDENCE).
#
#   scripts/hosts/run.sh [--hosts claude-code,claude-code-quickstart,claude-code-cargo,
#                                 claude-code-projects,claude-code-tasks,claude-code-network,
#                                 codex,gemini-cli,inspector-cli]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
here=scripts/hosts

cache="${LNK_HOSTS_CACHE:-${XDG_CACHE_HOME:-${HOME:-$PWD/target}/.cache}/lnk-link-run/hosts}"
evidence="${LNK_HOSTS_EVIDENCE:-$PWD/target/hosts-e2e}"

skip() {
    if [ "${LNK_REQUIRE_HOSTS:-}" = 1 ]; then
        echo "hosts: $*, and LNK_REQUIRE_HOSTS=1 requires the hosts to run" >&2
        exit 1
    fi
    if [ "${LNK_ALLOW_SKIP:-}" != 1 ]; then
        echo "hosts: $*: the real hosts cannot run here (set LNK_ALLOW_SKIP=1 to skip them)" >&2
        exit 1
    fi
    echo "skipped: real hosts: $*"
    exit 0
}

for tool in npm python3 bwrap unshare setsid ip; do
    command -v "$tool" >/dev/null 2>&1 || skip "$tool is missing"
done

# The hosts, installed once per lock file: the lock is copied beside what it installed.
mkdir -p "$cache"
if ! cmp -s "$here/package-lock.json" "$cache/package-lock.json" \
    || [ ! -x "$cache/node_modules/.bin/claude" ]; then
    echo "==> installing the hosts into $cache"
    cp "$here/package.json" "$here/package-lock.json" "$cache/"
    if ! (cd "$cache" && npm ci --cache "$cache/npm" --prefer-offline --no-audit --no-fund \
            --loglevel=error); then
        rm -f "$cache/package-lock.json"
        skip "npm could not install the hosts into $cache"
    fi
fi
PATH="$cache/node_modules/.bin:$PATH"
echo "==> hosts: node $(node --version), claude $(claude --version | cut -d' ' -f1)," \
    "codex $(codex --version | cut -d' ' -f2), gemini $(gemini --version)," \
    "inspector $(mcp-inspector --version)"

# The binaries the hosts start, built from this checkout (cargo test builds the same ones).
cargo build --quiet -p lnk-link-run -p lnk-link-supervise
bin="$PWD/target/debug"

# A network namespace with only the loopback interface, and a mount namespace of its own (the
# network check binds its sites' names over /etc/hosts there): as root plain ones, otherwise
# inside a user namespace of our own.
netns=(unshare --net --mount)
[ "$(id -u)" = 0 ] || netns=(unshare --net --mount --map-root-user)
"${netns[@]}" true 2>/dev/null || skip "cannot make a network namespace here (${netns[*]})"

exec "${netns[@]}" -- sh -c 'ip link set lo up && exec "$@"' sh \
    python3 "$here/hosts.py" --readme docs/hosts.md --bin "$bin" --cache "$cache" \
        --evidence "$evidence" "$@"
