#!/usr/bin/env bash
# Throughput of `trnsim quantize` on an 8192 x 8192 BF16 array, per scale rule and axis, with 1 and 2 threads;
# checks that the output bytes do not depend on the thread count.
# Usage: tools/bench/bench_quantize.sh [BUILD_DIR]   (default: build; needs targets trnsim trnsim_make_array)
# Env: ROWS, COLS (default 8192), MIN_RATE (M elements/s per thread, default 250).
set -euo pipefail

BUILD=${1:-build}
TRNSIM=$BUILD/trnsim
MAKE_ARRAY=$BUILD/tools/trnsim_make_array
ROWS=${ROWS:-8192}
COLS=${COLS:-8192}
MIN_RATE=${MIN_RATE:-250}
for bin in "$TRNSIM" "$MAKE_ARRAY"; do
  [[ -x $bin ]] || {
    echo "bench_quantize: $bin not found (build targets trnsim and trnsim_make_array)" >&2
    exit 1
  }
done

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$MAKE_ARRAY" "$T/x.npy" --rows "$ROWS" --cols "$COLS" --dtype bf16 --seed 1 --outlier-channels 16 \
  --outlier-scale 40 --threads 2

status=0
printf '%-5s %-4s %7s %10s %14s %s\n' rule axis threads ms 'M elem/s' check
for rule in trn3 ocp te; do
  for axis in row col; do
    for threads in 1 2; do
      line=$("$TRNSIM" quantize "$T/x.npy" --format e4m3 --rule $rule --axis $axis --threads $threads \
        --data "$T/d$threads.npy" --scales "$T/s$threads.npy")
      # "...: 12.345 ms, 678.9 M elements/s, ..."
      ms=$(sed -E 's/.*: ([0-9.]+) ms, .*/\1/' <<<"$line")
      rate=$(sed -E 's/.* ms, ([0-9.]+) M elements\/s.*/\1/' <<<"$line")
      check=ok
      if awk -v r="$rate" -v t=$threads -v m="$MIN_RATE" 'BEGIN { exit !(r / t < m) }'; then
        check="below ${MIN_RATE} M/s per thread"
      fi
      if [[ $threads == 2 ]] && ! { cmp -s "$T/d1.npy" "$T/d2.npy" && cmp -s "$T/s1.npy" "$T/s2.npy"; }; then
        check="OUTPUT DIFFERS FROM 1 THREAD"
        status=1
      fi
      printf '%-5s %-4s %7s %10s %14s %s\n' $rule $axis $threads "$ms" "$rate" "$check"
    done
  done
done
exit $status
