#!/usr/bin/env bash
# Installs Link Run's two binaries, side by side, from this checkout, with its lock file:
#
#   scripts/install.sh                 into ~/.cargo/bin (cargo's own place; or $CARGO_INSTALL_ROOT/bin)
#   scripts/install.sh --root /usr/local   into /usr/local/bin
#
# lnk-link-run finds lnk-link-supervise beside itself, so the two must stay in one folder.
# Hosts start lnk-link-run by the absolute path this prints (they pass no shell and no PATH
# of yours).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root_args=()
if [[ $# -gt 0 ]]; then
    if [[ $1 != --root || $# -ne 2 ]]; then
        echo "usage: scripts/install.sh [--root DIR]" >&2
        exit 2
    fi
    root_args=(--root "$2")
fi
for crate in runner supervisor; do
    # One target folder for both, so the second build reuses the first one's dependencies.
    cargo install --locked --force --target-dir target/install --path "$crate" "${root_args[@]}"
done
if [[ ${#root_args[@]} -gt 0 ]]; then
    bin="$(cd "${root_args[1]}/bin" && pwd)"
else
    bin="${CARGO_INSTALL_ROOT:-${CARGO_HOME:-$HOME/.cargo}}/bin"
fi
echo
echo "installed: $bin/lnk-link-run"
echo "           $bin/lnk-link-supervise"
echo "point your MCP host at $bin/lnk-link-run (an absolute path)"
