#!/usr/bin/env bash
# The timing model's instruction rate against issue 27's target (>= 5 M instructions per host second on one
# core, timing only), on the two programs it names:
#   - bench_model: the synthetic DMA -> PE -> ACT -> DVE -> DMA program of ~1 M instructions
#     (tools/bench/bench_model.cpp); the rate is instructions / run_program's CPU seconds (its thread's CPU
#     time: on a loaded machine its wall time also counts the time it waited for a core);
#   - the DeepSeek-V3 MoE backward (configs/workloads/moe/deepseek_v3_bwd_mxfp8.json, --no-numerics) with its
#     workload's schedule=trnsim_optimized (~720 k instructions; case deepseek_opt), and, for a program of
#     millions, the Qwen3-235B-A22B MoE backward with the default nki_library schedule (~2.7 M; case library:
#     nki_library refuses DeepSeek-V3's shape, kernels/moe/README.md); the rate is stats.json's instruction
#     count / the "simulation" part of the host time trnsim reports (the program build is "setup"), and the
#     wall time of the whole command is printed beside it.
# Each case runs RUNS times (default 3) and the median is printed. A script that prints figures, not a timed
# test: on a shared machine compare against another build's figures taken at the same time (BASE=DIR runs
# that build's binaries in turn with this one's and prints the ratio).
# Usage: tools/bench/bench_rate.sh [BUILD_DIR]     (default: build; needs targets trnsim and trnsim_bench_model)
#        RUNS=5 BASE=/other/build tools/bench/bench_rate.sh build
#        CASES=bench tools/bench/bench_rate.sh ...   (bench, deepseek_opt, library: a space-separated subset)
set -euo pipefail
build=${1:-build}
runs=${RUNS:-3}
cases=${CASES:-bench deepseek_opt library}
base=${BASE:-}
target=5000000
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
moe="$root/configs/workloads/moe"
for b in "$build" ${base:+"$base"}; do
  for t in trnsim tools/trnsim_bench_model; do
    [[ -x "$b/$t" ]] || { echo "bench_rate: $b/$t not found; build with: cmake --build $b --target trnsim trnsim_bench_model" >&2; exit 1; }
  done
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# One run of case $2 with build $1; prints "<instructions> <model host s> <wall s>".
one() {
  local b=$1 c=$2
  case $c in
    bench)
      local t0 t1 out
      t0=$(date +%s.%N)
      out=$("$b/tools/trnsim_bench_model" 1000000 off trn2)
      t1=$(date +%s.%N)
      sed -E 's/.*"instructions": ([0-9]+).*"cpu_s": ([0-9.]+).*/\1 \2/' <<<"$out" | tr '\n' ' '
      awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", b - a }'
      ;;
    deepseek_opt | library)
      local workload=$moe/deepseek_v3_bwd_mxfp8.json
      [[ $c == library ]] && workload=$moe/qwen3_235b_a22b_bwd_mxfp8.json
      rm -rf "$tmp/out"
      local t0 t1
      t0=$(date +%s.%N)
      "$b/trnsim" run "$workload" --no-numerics --out "$tmp/out" > /dev/null 2> "$tmp/err" ||
        { echo "bench_rate: trnsim failed:" >&2; cat "$tmp/err" >&2; exit 1; }
      t1=$(date +%s.%N)
      local n sim
      n=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['instructions'])" "$tmp/out/stats.json")
      sim=$(grep "host time" "$tmp/err" | sed -E 's/.*simulation ([0-9.]+).*/\1/')
      echo "$n $sim $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
      ;;
  esac
}

printf '%-14s %12s %10s %14s %10s %8s %s\n' case instructions "model s" "instr/s" "wall s" target "${base:+vs BASE (model s ratio, wall ratio)}"
for c in $cases; do
  : > "$tmp/a"; : > "$tmp/b"
  for ((i = 0; i < runs; ++i)); do
    one "$build" "$c" >> "$tmp/a"
    [[ -n $base ]] && one "$base" "$c" >> "$tmp/b"
  done
  n=$(awk 'NR == 1 { print $1 }' "$tmp/a")
  model=$(awk '{ print $2 }' "$tmp/a" | median)
  wall=$(awk '{ print $3 }' "$tmp/a" | median)
  rate=$(awk -v n="$n" -v s="$model" 'BEGIN { printf "%.0f", n / s }')
  verdict=$(awk -v r="$rate" -v t="$target" 'BEGIN { print (r >= t) ? "OK" : "BELOW" }')
  cmp=""
  if [[ -n $base ]]; then
    bmodel=$(awk '{ print $2 }' "$tmp/b" | median)
    bwall=$(awk '{ print $3 }' "$tmp/b" | median)
    cmp=$(awk -v a="$model" -v b="$bmodel" -v wa="$wall" -v wb="$bwall" \
      'BEGIN { printf "BASE model %.3f s, wall %.2f s: x%.2f faster, wall x%.2f", b, wb, b / a, wb / wa }')
  fi
  printf '%-14s %12s %10.3f %14s %10.2f %8s %s\n' "$c" "$n" "$model" "$rate" "$wall" "$verdict" "$cmp"
done
echo "target: >= $target instructions per host second of the model (issue 27); medians of $runs runs"
