#!/usr/bin/env bash
# trnsim tune against the exhaustive sweep (issue 28): usage tools/bench/bench_tune.sh [BUILD_DIR] [SWEEP]
# [SEEDS]. Runs SWEEP (default configs/sweeps/llama3_8b_down_bwd_tiling.json, the main job's tiling space,
# timing only) exhaustively, then trnsim tune with a budget of 100 evaluations for each of SEEDS seeds
# (default 3), each in a folder of its own (no rows shared with the exhaustive sweep), and prints the best
# simulated time of each, the gap of tune's best to the exhaustive best and the wall times. Exit 1 if a seed's
# gap is above 2 %. Prints figures; it is a benchmark, not a timed test.
set -euo pipefail
B=${1:-build}
SWEEP=${2:-configs/sweeps/llama3_8b_down_bwd_tiling.json}
SEEDS=${3:-3}
TRNSIM=$(realpath "$B/trnsim")
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
best_of() {  # the lowest total_time_ns of the ok rows of a results.csv, the ok rows, those within 2 % of it
  /usr/bin/python3 -c '
import csv, sys
rows = [float(r["total_time_ns"]) for r in csv.DictReader(open(sys.argv[1])) if r["status"] == "ok" and r["total_time_ns"]]
b = min(rows)
print(b, len(rows), sum(1 for t in rows if t <= 1.02 * b))' "$1"
}
s=$(date +%s.%N)
"$TRNSIM" sweep "$SWEEP" --out "$T/exhaustive" --no-report >"$T/exh.txt" 2>"$T/exh.err"
e=$(date +%s.%N)
read -r exh_best exh_ok exh_near < <(best_of "$T/exhaustive/results.csv")
npoints=$(($(wc -l <"$T/exhaustive/results.csv") - 1))
printf 'exhaustive: %d points (%d ran ok, %d of them within 2 %% of the best), best total_time_ns %s, %.1f s wall\n' \
  "$npoints" "$exh_ok" "$exh_near" "$exh_best" \
  "$(/usr/bin/python3 -c "print($e - $s)")"
worst=0
for seed in $(seq 1 "$SEEDS"); do
  s=$(date +%s.%N)
  "$TRNSIM" tune "$SWEEP" --budget 100 --seed "$seed" --out "$T/tune$seed" --no-report >"$T/tune.txt" 2>"$T/tune.err"
  e=$(date +%s.%N)
  read -r tune_best tune_ok _ < <(best_of "$T/tune$seed/results.csv")
  gap=$(/usr/bin/python3 -c "print('%.3f' % (100 * ($tune_best / $exh_best - 1)))")
  printf 'tune seed %d: %d evaluations, best total_time_ns %s, %s %% above the exhaustive best, %.1f s wall\n' \
    "$seed" "$tune_ok" "$tune_best" "$gap" "$(/usr/bin/python3 -c "print($e - $s)")"
  worst=$(/usr/bin/python3 -c "print(max($worst, $gap))")
done
printf 'worst gap over %d seeds: %s %% (target: within 2 %%)\n' "$SEEDS" "$worst"
/usr/bin/python3 -c "import sys; sys.exit(0 if $worst <= 2.0 else 1)"
