#!/usr/bin/env bash
# Builds Link Run and its benchmark in release mode and runs the foreground benchmark.
# Extra arguments go to `lnk-bench foreground` (see `lnk-bench foreground --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p lnk-link-run -p lnk-tests -p lnk-bench
target_dir="${CARGO_TARGET_DIR:-target}"
exec "$target_dir/release/lnk-bench" foreground "$@"
