#!/usr/bin/env bash
# Tracing cost on the benchmark workload (the Llama-3.1-8B MLP down projection backward, timing only so the
# trace writing is not hidden behind the numerics): whole-run wall time and simulation time without a trace,
# with .pftrace and with JSON; the slowdown (target: at most 2x), trace size, events written per second and
# bytes per event. Events: every slice is a begin and an end, every flow a start and an end, every counter
# sample one event (JSON writes a slice as one "X" event, so its events/s is computed the same way).
# Usage: tools/bench/bench_trace_workload.sh [BUILD_DIR] [WORKLOAD.json] [REPEATS]
set -euo pipefail
build=${1:-build}
workload=${2:-configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json}
reps=${3:-3}
trnsim="$build/trnsim"
[[ -x "$trnsim" ]] || { echo "bench_trace_workload: $trnsim not found; build first" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }

# best-of-REPEATS: prints "<wall s> <simulation s>" and leaves the last stdout in $tmp/stdout
measure() {
  local best_wall=1e9 best_sim=1e9 start end wall line sim
  for _ in $(seq "$reps"); do
    start=$(date +%s.%N)
    "$trnsim" run "$workload" --no-numerics --out "$tmp/out" "$@" >"$tmp/stdout" 2>"$tmp/stderr"
    end=$(date +%s.%N)
    wall=$(calc "$end - $start")
    line=$(grep "host time" "$tmp/stderr")
    sim=$(sed -E 's/.*simulation ([0-9.]+),.*/\1/' <<<"$line")
    best_wall=$(calc "($wall < $best_wall) ? $wall : $best_wall")
    best_sim=$(calc "($sim < $best_sim) ? $sim : $best_sim")
  done
  echo "$best_wall $best_sim"
}

read -r base_wall base_sim < <(measure)
printf 'workload %s (numerics off, best of %s)\n' "$workload" "$reps"
printf '%-9s %9s %9s %10s %8s %9s %12s %11s\n' format "wall s" "sim s" "slowdown" "MB" events "events/s" bytes/event
printf '%-9s %9.3f %9.3f %10s\n' none "$base_wall" "$base_sim" "1.00x"
for fmt in pftrace json; do
  read -r wall sim < <(measure --trace "$tmp/t.$fmt")
  counts=$(grep -oE '\([0-9]+ slices, [0-9]+ flows, [0-9]+ counter samples' "$tmp/stdout" | tr -dc '0-9 ')
  read -r slices flows counters <<<"$counts"
  events=$((2 * slices + 2 * flows + counters))
  bytes=$(stat -c %s "$tmp/t.$fmt")
  printf '%-9s %9.3f %9.3f %9.2fx %8.1f %9d %12.0f %11.1f\n' "$fmt" "$wall" "$sim" "$(calc "$wall / $base_wall")" \
    "$(calc "$bytes / 1e6")" "$events" "$(calc "$events / ($sim - $base_sim + 1e-9)")" "$(calc "$bytes / $events")"
done
echo "(slowdown: whole-run wall time over the untraced run; events/s: events over the extra simulation time)"
