#!/usr/bin/env bash
# Cross-entropy benchmark (issue 13): for the 4096 x 128256 workloads (Llama 3 vocabulary; default: the fused
# MXFP8 backward, TE rule) prints the host wall and CPU time with numerics off (target < 2 s) and on (target
# < 30 s, with the bit-exact checks), the host-time split the run reports (setup = inputs and recipes,
# simulation, references, write), peak memory, and the simulated time against the HBM roofline. A script that
# prints figures, not a timed test; on a shared machine compare CPU seconds, not wall seconds.
# Usage: tools/bench/bench_cross_entropy.sh [BUILD_DIR] [WORKLOAD.json ...]
set -euo pipefail
build=${1:-build}
shift || true
workloads=("$@")
[[ ${#workloads[@]} -gt 0 ]] || workloads=(configs/workloads/cross_entropy/llama3_ce_mxfp8_4096.json)
trnsim="$build/trnsim"
[[ -x /usr/bin/time ]] || { echo "bench_cross_entropy: needs GNU time (/usr/bin/time)" >&2; exit 1; }
[[ -x "$trnsim" ]] || { echo "bench_cross_entropy: $trnsim not found; build with: cmake --build $build --target trnsim" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs trnsim on $1 with the remaining arguments; prints "<wall s> <cpu s> <host-time line>" (CPU = user +
# system seconds of the trnsim process, from GNU time).
run() {
  local workload="$1"; shift
  local out="$tmp/out" start end
  rm -rf "$out"
  start=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$tmp/time" "$trnsim" run "$workload" --out "$out" "$@" > "$tmp/stdout" \
    2> "$tmp/stderr" || { echo "bench_cross_entropy: trnsim failed:" >&2; cat "$tmp/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$(awk "BEGIN { printf \"%.2f\", $end - $start }") $(awk '{ printf "%.2f", $1 + $2 }' "$tmp/time")" \
    "$(grep "host time" "$tmp/stderr" | sed -E 's/.*host time //')"
}

for w in "${workloads[@]}"; do
  printf 'workload           %s\n' "$w"
  read -r wall cpu rest < <(run "$w" --no-numerics)
  printf 'numerics off       wall %6.2f s, CPU %6.2f s (target < 2 s)   [%s]\n' "$wall" "$cpu" "$rest"
  sed -nE 's/^  (simulated time|roofline lower bound|roofline ratio|HBM traffic) +/  \1: /p' "$tmp/stdout"
  read -r wall cpu rest < <(run "$w")
  printf 'numerics on        wall %6.2f s, CPU %6.2f s (target < 30 s)   [%s]\n' "$wall" "$cpu" "$rest"
  grep -E '^ +(input_grad|loss|row_|argmax)[^ ]* ' "$tmp/stdout" | sed 's/^/  /' || true
done
