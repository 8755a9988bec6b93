#!/usr/bin/env bash
# Installs the official MCP TypeScript client and its Tasks extension (package.json, locked by
# package-lock.json) into a cache folder outside the repository, and says which Node runs them.
#
# The cache is $LNK_CONFORMANCE_CACHE, by default ~/.cache/lnk-link-run/conformance; npm's
# downloads are kept there too. It installs once per lock file: the lock is copied beside what it
# installed. Node must be 20 or newer (the client's engines); the first of these that is:
# $LNK_NODE, the Node 22 this cache installed, the Node 22 of the hosts' cache
# (scripts/hosts/run.sh, $LNK_HOSTS_CACHE), `node` on PATH. When none is there at install time,
# the install takes npm's `node` package (22.23.3, an optional dependency) as well, so Debian's
# own nodejs (18) and npm are enough.
#
# On success it prints two lines, `node=<path>` and `modules=<cache>/node_modules`, and exits 0;
# when it cannot (no npm, no registry, no Node 20) it says why on stderr and exits 2.
#
#   tests/conformance/install.sh
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
base="${XDG_CACHE_HOME:-${HOME:-$root/target}/.cache}/lnk-link-run"
cache="${LNK_CONFORMANCE_CACHE:-$base/conformance}"
hosts="${LNK_HOSTS_CACHE:-$base/hosts}"

unavailable() {
    echo "conformance: $*" >&2
    exit 2
}

# Whether $1 runs as Node 20 or newer.
node_ok() {
    local major
    [ -n "$1" ] && [ -x "$1" ] || return 1
    major="$("$1" -p 'process.versions.node.split(".")[0]' 2>/dev/null)" || return 1
    [ "$major" -ge 20 ] 2>/dev/null
}

# The Node to use, in the order above (the cache's own Node only when $1 is "with-cache").
pick_node() {
    local candidates=("${LNK_NODE:-}")
    [ "$1" = with-cache ] && candidates+=("$cache/node_modules/.bin/node")
    candidates+=("$hosts/node_modules/.bin/node" "$(command -v node 2>/dev/null || true)")
    local node
    for node in "${candidates[@]}"; do
        if node_ok "$node"; then
            echo "$node"
            return 0
        fi
    done
    return 1
}

# One install at a time (two tests, or CI and a test, may ask at once).
mkdir -p "$(dirname "$cache")"
if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache.lock"
    flock 9
fi

if ! cmp -s "$here/package-lock.json" "$cache/package-lock.json" \
    || [ ! -f "$cache/node_modules/@modelcontextprotocol/ext-tasks/package.json" ]; then
    command -v npm >/dev/null 2>&1 || unavailable "npm is missing"
    omit=()
    if pick_node without-cache >/dev/null; then
        omit=(--omit=optional)
    fi
    echo "==> installing the TypeScript MCP client into $cache ${omit[*]}" >&2
    mkdir -p "$cache"
    cp "$here/package.json" "$here/package-lock.json" "$cache/"
    if ! (cd "$cache" && npm ci --cache "$cache/npm" --prefer-offline --no-audit --no-fund \
            --loglevel=error "${omit[@]}" >&2); then
        rm -f "$cache/package-lock.json"
        unavailable "npm could not install the client into $cache"
    fi
fi

node="$(pick_node with-cache)" || unavailable "no Node 20 or newer (set LNK_NODE, or remove $cache to install npm's Node 22)"
echo "node=$node"
echo "modules=$cache/node_modules"
