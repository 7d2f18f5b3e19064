#!/usr/bin/env bash
# Workload benchmark: for each workload (or every workload in a folder) prints the host wall and CPU time with
# numerics off and on (with the kernel's checks), the host-time split the run reports (setup = inputs and
# recipes, simulation, references, write), peak memory, the simulated time against the roofline, the engine
# busy time per kernel phase, the kernel's stats of its inputs (numerics runs) and the numerics rows. A script that prints figures, not a timed test; on a shared machine compare CPU seconds, not
# wall seconds. The kernels' targets are in their workload folders' READMEs (e.g.
# configs/workloads/cross_entropy/README.md).
# Usage: tools/bench/bench_workloads.sh BUILD_DIR WORKLOAD.json|FOLDER ...
#        NUMERICS=off tools/bench/bench_workloads.sh ...   (timing only)
set -euo pipefail
build=${1:-build}
shift || true
workloads=()
for a in "$@"; do
  if [[ -d $a ]]; then workloads+=("$a"/*.json); else workloads+=("$a"); fi
done
[[ ${#workloads[@]} -gt 0 ]] || { echo "usage: $0 BUILD_DIR WORKLOAD.json|FOLDER ..." >&2; exit 1; }
trnsim="$build/trnsim"
[[ -x /usr/bin/time ]] || { echo "bench_workloads: needs GNU time (/usr/bin/time)" >&2; exit 1; }
[[ -x "$trnsim" ]] || { echo "bench_workloads: $trnsim not found; build with: cmake --build $build --target trnsim" >&2; exit 1; }
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
    2> "$tmp/stderr" || { echo "bench_workloads: trnsim failed:" >&2; cat "$tmp/stderr" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$(awk "BEGIN { printf \"%.2f\", $end - $start }") $(awk '{ printf "%.2f", $1 + $2 }' "$tmp/time")" \
    "$(grep "host time" "$tmp/stderr" | sed -E 's/.*host time //')"
}

for w in "${workloads[@]}"; do
  printf 'workload           %s\n' "$w"
  read -r wall cpu rest < <(run "$w" --no-numerics)
  printf 'numerics off       wall %6.2f s, CPU %6.2f s   [%s]\n' "$wall" "$cpu" "$rest"
  sed -nE 's/^  (simulated time|roofline lower bound|roofline ratio|HBM traffic) +/  \1: /p' "$tmp/stdout"
  # The kernel's phases (engine busy time per phase), when it names any.
  sed -n '/^  phase /,/^[^ ]\|^  kernel stats/p' "$tmp/stdout" | grep -v -E '^[^ ]|^  kernel stats' || true
  [[ ${NUMERICS:-on} == off ]] && continue
  read -r wall cpu rest < <(run "$w")
  printf 'numerics on        wall %6.2f s, CPU %6.2f s   [%s]\n' "$wall" "$cpu" "$rest"
  # The kernel's stats of its inputs (made with numerics only), then the numerics rows.
  sed -n '/^  kernel stats/,/^[^ ]/p' "$tmp/stdout" | grep -v '^[^ ]' || true
  sed -n '/^numerics/,$p' "$tmp/stdout" | grep -E 'PASS|FAIL' | sed 's/^/  /' || true
done
