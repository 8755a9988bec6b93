#!/usr/bin/env bash
# Builds Link Run and its benchmark (the release code, with line tables: the `profiling`
# profile) and runs the benchmarks.
#
#   bench/run.sh                         all: `lnk-bench foreground`, `background`, `check`, then `caches`
#   bench/run.sh foreground [options]    one of them, with its options
#   bench/run.sh background [options]    (see `lnk-bench foreground --help`, `... background --help`)
#   bench/run.sh check [options]         (the sandbox check's cost at start: `... check --help`)
#   bench/run.sh machine [options]       (the line `config` builds for this machine against the
#                                        README's: `... machine --help`)
#   bench/run.sh caches [options]        (the cache layers' cost per call: `... caches --help`)
#   bench/run.sh network [options]       (--net-allow: a call's cost, a download, 32 at once)
#   bench/run.sh soak [--trials N]       random-moment SIGKILLs of serve and supervisors (also as
#                                        their sandbox starts: --kind gate; a supervisor with
#                                        its gate: --kind reapers), each sandbox, and the trials
#                                        that left a process behind (--program sleeps for two
#                                        sleeps in place of the escaping tree; not part of `all`:
#                                        it takes a quarter of an hour)
set -euo pipefail
cd "$(dirname "$0")/.."
which="${1:-all}"
[[ $# -gt 0 ]] && shift
case "$which" in
    all)
        if [[ $# -gt 0 ]]; then
            echo "bench/run.sh: options go after a benchmark's name: run.sh foreground|background|check|caches [options]" >&2
            exit 2
        fi
        ;;
    foreground | background | check | machine | caches | network | soak) ;;
    *)
        echo "usage: bench/run.sh [all | foreground [options] | background [options] | check [options] | machine [options] | caches [options] | network [options] | soak [options]]" >&2
        exit 2
        ;;
esac
# The profiling profile is the release build with line tables (see Cargo.toml). The soak's gate
# trials hold a supervisor's gate shut (`LNK_SUPERVISE_HOLD_GATE`), a test hook only a build with
# lnk-proc's `test-hooks` feature has; the other benchmarks measure the binaries without it.
features=()
[[ "$which" == soak ]] && features=(--features lnk-proc/test-hooks)
cargo build --profile profiling -p lnk-link-run -p lnk-link-supervise -p lnk-tests -p lnk-bench \
    "${features[@]}"
bench="${CARGO_TARGET_DIR:-target}/profiling/lnk-bench"
if [[ "$which" == all ]]; then
    "$bench" foreground
    echo
    "$bench" background
    echo
    "$bench" check
    echo
    "$bench" machine
    echo
    "$bench" caches
    echo
    "$bench" network
else
    exec "$bench" "$which" "$@"
fi
