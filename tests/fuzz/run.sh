#!/usr/bin/env bash
# Runs the API fuzz target for a bounded time from the checked-in corpus:
#   tests/fuzz/run.sh FUZZ_BINARY SECONDS [extra libFuzzer flags...]
# New inputs go to a scratch corpus (the checked-in one is only read); a failure fails the run and
# leaves its input as crash-* / timeout-* in GEMMKIT_FUZZ_ARTIFACTS (default: artifacts/ next to
# the binary). Replay one with: FUZZ_BINARY crash-<hash>
set -euo pipefail
binary=$1
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export GEMMKIT_NUM_THREADS=${GEMMKIT_NUM_THREADS:-1}
artifacts=${GEMMKIT_FUZZ_ARTIFACTS:-$(dirname "$binary")/artifacts}
mkdir -p "$artifacts"
"$binary" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=512 \
  -print_final_stats=1 -artifact_prefix="$artifacts/" "$@" "$work" "$here/corpus"
