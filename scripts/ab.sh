#!/usr/bin/env bash
# A/B of two builds on one GPU machine, the way kernel changes in docs/perf.md are decided: this
# checkout (built into build-device/) against another commit checked out as a git worktree in ab/
# (built into ab/b/), each row timed with both binaries in turn, for several passes, so that
# machine-to-machine variance does not enter the comparison.
#
# Set-up: `git worktree add --detach ab <commit>` (ab/ is git-ignored) and
# scripts/prepare-device.sh; then, on the GPU machine, with .deps/ and ab/ copied along:
#   bash scripts/ab.sh [--out DIR] 'dw7x7-96|conv --n 8 --in 56x56 --c 96 --o 96 --groups 96 --kernel 7x7 --pad 3 --algo depthwise' ...
# Each argument is `name|gemmkit arguments` (--device cuda:0 --check is added), or `suite:NAME`:
# every row of bench/suites/NAME.csv through `gemmkit bench --no-peers --no-cold` (add bench
# options after the name: `suite:conv-models --filter resnet`), both builds in turn per pass, then
# a per-row comparison of the fastest pass of each (scripts/ab-compare.py). Settings:
# GEMMKIT_AB_PASSES (default 2), GEMMKIT_AB_TAG (output name, to keep several runs apart).
# Two settings of one build instead (no ab/ needed): GEMMKIT_AB_ENV='A|B', A and B each a list of
# VAR=value words, runs this checkout's build under A (reported as this side) and under B (the
# other), e.g. GEMMKIT_AB_ENV='GEMMKIT_CONV_WGMMA_SCHEDULE=pingpong|GEMMKIT_CONV_WGMMA_SCHEDULE=cooperative'.
# Output: DIR/ab[-TAG].txt (default ./out) alone (the build logs stay in a temporary folder and
# only a failing build's tail is printed), one line per (pass, row, build): the time and check
# lines of `gemmkit`; for a suite, its JSON per (pass, build) and the comparison. Run again on the
# same machine, both builds are already up to date.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
take_out_option "$@"
set -- "${rest[@]+"${rest[@]}"}"
[ $# -ge 1 ] || { echo "usage: bash scripts/ab.sh 'name|gemmkit args' ..." >&2; exit 2; }
settings=${GEMMKIT_AB_ENV:-}
this_env=() other_env=() other_bin=ab/b/gemmkit
if [ -n "$settings" ]; then
  read -r -a this_env <<<"${settings%%|*}"
  read -r -a other_env <<<"${settings#*|}"
  other_bin=build-device/gemmkit
else
  [ -d ab ] || { echo "ab/: no worktree of the other commit (see the header)" >&2; exit 2; }
fi
root=$PWD
result=$out_dir/ab${GEMMKIT_AB_TAG:+-$GEMMKIT_AB_TAG}.txt
logs=$(mktemp -d)
use_python_cudnn
# side NAME: runs the rest of the line with that side's binary and settings.
side() {
  local name=$1
  shift
  if [ "$name" = this ]; then
    env "${this_env[@]+"${this_env[@]}"}" build-device/gemmkit "$@"
  else
    env "${other_env[@]+"${other_env[@]}"}" "$other_bin" "$@"
  fi
}
other=""  # the pid of the ab/ build, where there is one
if [ -z "$settings" ]; then
(cmake -S ab -B ab/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEMMKIT_CUDA=ON \
  -DGEMMKIT_GTEST_SOURCE_DIR="$root/.deps/googletest" \
  -DGEMMKIT_DLPACK_INCLUDE_DIR="$root/.deps/include" \
  ${cudnn_root:+-DGEMMKIT_CUDNN_ROOT=$cudnn_root} >"$logs/ab-build.log" 2>&1 &&
  nice cmake --build ab/b -j8 --target gemmkit_cli >>"$logs/ab-build.log" 2>&1) &
  other=$!
fi
GEMMKIT_BUILD_TARGET=gemmkit_cli bash scripts/device.sh --out "$logs/build" build >"$logs/build.txt" 2>&1
this_status=$?
other_status=0
if [ -n "$other" ]; then
  wait "$other"
  other_status=$?
fi
echo "builds: this checkout status $this_status, ab/ status $other_status"
[ $this_status -eq 0 ] && [ $other_status -eq 0 ] || {
  tail -n 30 "$logs/build.txt" "$logs/ab-build.log"
  exit 1
}
for pass in $(seq "${GEMMKIT_AB_PASSES:-2}"); do
  for row in "$@"; do
    if [[ $row == suite:* ]]; then
      read -r -a args <<<"${row#suite:}"
      for which in this other; do
        tag=build-device
        [ $which = other ] && tag=ab
        json=$out_dir/ab-${args[0]}-$tag-$pass.json
        side $which bench --suite "bench/suites/${args[0]}.csv" "${args[@]:1}" --device cuda:0 \
          --no-peers --no-cold --json "$json" >/dev/null 2>&1
        echo "$pass suite ${args[0]} $tag status $?"
      done
      continue
    fi
    name=${row%%|*}
    read -r -a args <<<"${row#*|}"
    for which in this other; do
      result=$(side $which "${args[@]}" --device cuda:0 --check 2>&1 | grep -E "^(time|check)" |
        cut -c1-90 | tr '\n' '|')
      echo "$pass $name $which $result"
    done
  done
done | tee "$result"
for row in "$@"; do
  [[ $row == suite:* ]] || continue
  read -r -a args <<<"${row#suite:}"
  python3 scripts/ab-compare.py "$out_dir"/ab-"${args[0]}"-build-device-*.json -- \
    "$out_dir"/ab-"${args[0]}"-ab-*.json | tee -a "$result"
done
rm -rf "$logs"
