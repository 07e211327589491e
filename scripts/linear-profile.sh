#!/usr/bin/env bash
# Nsight Compute on a few linear configurations (device machine, after scripts/device.sh built):
# kernel duration, launch statistics, speed-of-light and warp stall reasons per configuration,
# three launches each; everything goes to DIR/ncu-linear.txt (default ./out), a digest to stdout,
# and per-instruction counters to DIR/ncu-linear-I-sass.csv (scripts/sass-stalls.py digests them).
# Usage: bash scripts/linear-profile.sh [--out DIR]
set -uo pipefail
source "$(dirname "$0")/lib.sh"
take_out_option "$@"
bin=build-device/gemmkit
log=$out_dir/ncu-linear.txt
: >"$log"
# kernel, cluster bound, n, m, k[, extra CLI flags]: the ring variants and the peers on the
# decode shapes, then seed-tiny under auto and kimi-k2's router (n 8, 384 x 7168, f32 out), whose ring got slower when the consumer
# warps began taking slices instead of groups (docs/perf.md). GEMMKIT_PROFILE_CONFIGS replaces
# the set: ";"-separated configurations of the same form.
default_configs="ring4 1 1 128 720;ring4 16 1 128 720;ring4 16 1 128 2880;ring8 16 1 128 14336;\
ring16 16 1 128 14336;reference 16 1 128 2880;cublaslt 16 1 128 2880;auto 16 1 128 720;\
auto 16 8 384 7168 --out-dtype f32;ring8 16 8 384 7168 --out-dtype f32"
IFS=';' read -r -a configs <<<"${GEMMKIT_PROFILE_CONFIGS:-$default_configs}"
index=0
for cfg in "${configs[@]}"; do
  set -- $cfg
  kernel=$1 cluster=$2 n=$3 m=$4 k=$5
  shift 5
  echo "== kernel $kernel, max cluster $cluster, n=$n m=$m k=$k $*" | tee -a "$log"
  report=$out_dir/ncu-linear-$((++index))
  GEMMKIT_LINEAR_KERNEL=$kernel GEMMKIT_LINEAR_MAX_CLUSTER=$cluster timeout 90 ncu --clock-control none \
    --cache-control none -c 3 -k regex:'linear|gemm|Kernel' --section SpeedOfLight \
    --section LaunchStats --section WarpStateStats --section SchedulerStats --section SourceCounters \
    --section MemoryWorkloadAnalysis \
    --metrics gpu__time_duration.sum,smsp__cycles_active.avg,sm__cycles_elapsed.max \
    --import-source no -f -o "$report" \
    "$bin" linear --n "$n" --m "$m" --k "$k" --bias "$@" --device cuda:0 --reps 2 >/dev/null 2>&1
  ncu -i "$report.ncu-rep" >>"$log" 2>&1
  # Per-instruction counters and stall samples of the profiled launches (SASS, CSV), read by
  # scripts/sass-stalls.py; the report itself is dropped.
  ncu -i "$report.ncu-rep" --page source --print-source sass --csv \
    >"$report-sass.csv" 2>&1 || true
  rm -f "$report.ncu-rep"
  grep -E "gpu__time_duration|Cluster Size|Registers Per|Stall|Warp Cycles Per Issued" "$log" |
    tail -8
done
