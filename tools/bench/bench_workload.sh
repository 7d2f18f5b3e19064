#!/usr/bin/env bash
# Workload benchmark (issue: the main job on real shapes). For one workload (default: the Llama-3.1-8B MLP down
# projection backward) prints: wall time with numerics off (target < 2 s) and on, simulated instructions per
# host second, the numerics' host GFLOP/s (useful FLOPs / simulation time with numerics on minus the same run's
# time with numerics off) and its ratio to a single-threaded OpenBLAS SGEMM of the same FLOPs measured in the
# same run (target >= 0.3), and peak memory.
# Usage: tools/bench/bench_workload.sh [BUILD_DIR] [WORKLOAD.json]
set -euo pipefail
build=${1:-build}
workload=${2:-configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json}
trnsim="$build/trnsim"
sgemm="$build/tools/trnsim_bench_sgemm"
for b in "$trnsim" "$sgemm"; do
  [[ -x "$b" ]] || { echo "bench_workload: $b not found; build with: cmake --build $build" >&2; exit 1; }
done
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs trnsim, prints "<wall s> <simulation s> <peak MiB>" from its host-time line.
run() {
  local out="$1"; shift
  local start end line
  start=$(date +%s.%N)
  "$trnsim" run "$workload" --out "$out" "$@" > "$out.stdout" 2> "$out.stderr" || {
    echo "bench_workload: trnsim failed:" >&2; cat "$out.stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  line=$(grep "host time" "$out.stderr")
  local sim peak
  sim=$(sed -E 's/.*simulation ([0-9.]+),.*/\1/' <<<"$line")
  peak=$(sed -E 's/.*peak memory ([0-9.]+) MiB.*/\1/' <<<"$line")
  echo "$(calc "$end - $start") $sim $peak"
}

read -r off_wall off_sim off_peak < <(run "$tmp/off" --no-numerics)
read -r on_wall on_sim on_peak < <(run "$tmp/on")
stats="$tmp/on/stats.json"
flops=$(grep -m1 -E '"useful_flops": [0-9]' "$stats" | sed -E 's/.*: ([0-9.e+]+).*/\1/')
instr=$(grep -m1 -E '^  "instructions": [0-9]' "$stats" | sed -E 's/[^0-9]//g')
numerics_s=$(calc "$on_sim - $off_sim")
gflops=$(calc "$flops / $numerics_s / 1e9")
sgemm_json=$("$sgemm" "$(calc "$flops / 1e9")")
sgemm_gflops=$(sed -E 's/.*"gflops": ([0-9.]+).*/\1/' <<<"$sgemm_json")

printf 'workload            %s\n' "$workload"
printf 'instructions        %s\n' "$instr"
printf 'numerics off        wall %.2f s (target < 2 s), simulation %.3f s = %.0f instructions/s, peak %s MiB\n' \
  "$off_wall" "$off_sim" "$(calc "$instr / $off_sim")" "$off_peak"
printf 'numerics on         wall %.2f s, simulation %.2f s = %.0f instructions/s, peak %s MiB\n' \
  "$on_wall" "$on_sim" "$(calc "$instr / $on_sim")" "$on_peak"
printf 'numerics host       %.3g FLOP in %.2f s = %.1f GFLOP/s\n' "$flops" "$numerics_s" "$gflops"
printf 'sgemm (1 thread)    %.1f GFLOP/s (OpenBLAS, same FLOPs: %s)\n' "$sgemm_gflops" "$sgemm_json"
printf 'ratio               %.2f (target >= 0.3)\n' "$(calc "$gflops / $sgemm_gflops")"
