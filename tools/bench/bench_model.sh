#!/usr/bin/env bash
# Model speed: simulated instructions per host second on a synthetic ~100k-instruction LNC=2 program,
# numerics off and on. Target: >= 1 M instructions/s with numerics off.
# Usage: tools/bench/bench_model.sh [BUILD_DIR] [INSTRUCTIONS] [HW]
set -euo pipefail
build=${1:-build}
n=${2:-100000}
hw=${3:-trn2}
bin="$build/tools/trnsim_bench_model"
if [[ ! -x "$bin" ]]; then
  echo "bench_model: $bin not found; build it with: cmake --build $build --target trnsim_bench_model" >&2
  exit 1
fi
off=$("$bin" "$n" off "$hw")
on=$("$bin" "$n" on "$hw")
echo "numerics off: $off"
echo "numerics on:  $on"
rate=$(sed -E 's/.*"instr_per_s": ([0-9]+).*/\1/' <<<"$off")
if (( rate >= 1000000 )); then
  echo "bench_model: OK, $rate instructions/s with numerics off (target 1000000)"
else
  echo "bench_model: BELOW TARGET, $rate instructions/s with numerics off (target 1000000)"
  exit 2
fi
