#!/usr/bin/env bash
# A short real session with `lnk-link-run serve`, for a first look on a fresh machine: it builds
# the binaries, starts `serve` (under bubblewrap when `bwrap` is there, else with a pass-through
# prefix, and says which), sends initialize, tools/list and two `command` calls, and prints what
# comes back, one JSON-RPC message per line.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cargo build --quiet --workspace
bin="$PWD/target/debug"

work="$(mktemp -d "${TMPDIR:-/tmp}/link-run-try.XXXXXX")"
trap 'rm -rf "$work"' EXIT
files="$work/files"
mkdir -p "$files"
printf 'hello from the files folder\n' > "$files/greeting.txt"

# The README's recommended sandbox line, with the files folder in place of /home/me/work.
bwrap_line=(/usr/bin/bwrap
    --ro-bind /usr /usr --ro-bind /etc /etc
    --ro-bind-try /bin /bin --ro-bind-try /sbin /sbin
    --ro-bind-try /lib /lib --ro-bind-try /lib64 /lib64
    --ro-bind-try /lib32 /lib32
    --dev /dev --proc /proc --tmpfs /tmp
    --bind "$files" "$files"
    --unshare-all --cap-drop ALL --die-with-parent --new-session --clearenv)
if [ -x /usr/bin/bwrap ] && "${bwrap_line[@]}" -- /bin/true 2>/dev/null; then
    echo "# sandbox: bubblewrap, the README's recommended line (serve checks it at start)" >&2
    sandbox=("${bwrap_line[@]}")
    unchecked=()
else
    echo "# sandbox: none (bwrap is missing); the tests' pass-through prefix stands in," \
        "with --no-sandbox-check" >&2
    sandbox=("$bin/lnk-test-passthrough")
    unchecked=(--no-sandbox-check)
fi

requests() {
    echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"try-it","version":"1"}}}'
    echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
    echo '{"jsonrpc":"2.0","id":2,"method":"tools/list"}'
    echo '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"command","arguments":{"program":"cat","args":["greeting.txt"]}}}'
    echo '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"command","arguments":{"program":"sh","args":["-c","echo to stderr >&2; exit 3"]}}}'
    # Closing stdin ends the session; give the two calls time to answer first.
    sleep 1
}

requests | "$bin/lnk-link-run" serve \
    --files "$files" --programs-path /usr/bin:/bin \
    --timeout 10s --output 64KiB \
    --program cat --program sh --program ls \
    "${unchecked[@]}" -- "${sandbox[@]}"
