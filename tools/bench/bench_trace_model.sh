#!/usr/bin/env bash
# Cost of tracing: the model benchmark program (tools/bench/bench_model.cpp, ~N instructions, LNC=2, numerics
# off) run with tracing off, to .pftrace and to .json. Prints host time, the slowdown against tracing off
# (target: at most 2x), the process CPU time (user + system, of the same best run), trace events written per
# host second, bytes per event and the trace size.
# Events = slice begins + slice ends + counter samples. Usage: tools/bench/bench_trace_model.sh [BUILD_DIR] [N] [HW]
set -euo pipefail
build=${1:-build}
n=${2:-100000}
hw=${3:-trn2}
bin="$build/tools/trnsim_bench_model"
if [[ ! -x "$bin" ]]; then
  echo "bench_trace_model: $bin not found; build it with: cmake --build $build --target trnsim_bench_model" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

field() { sed -E "s/.*\"$1\": ([0-9.]+).*/\1/" <<<"$2"; }

# Best of 3 runs each, to damp noise on a shared machine. Appends " cpu U+S": the best run's user and system CPU
# seconds for the whole process (program construction included, unlike host_s).
best() {
  local out best_s="" best_line="" cpu
  for _ in 1 2 3; do
    out=$( { TIMEFORMAT='%U+%S'; time "$bin" "$n" off "$hw" "$@"; } 2>"$tmp/cpu")
    cpu=$(tail -n 1 "$tmp/cpu")
    local s
    s=$(field host_s "$out")
    if [[ -z "$best_s" ]] || awk -v a="$s" -v b="$best_s" 'BEGIN { exit !(a < b) }'; then
      best_s=$s
      best_line="$out cpu $cpu"
    fi
  done
  echo "$best_line"
}
cpu_of() { sed -E 's/.* cpu ([0-9.+]+)$/\1/' <<<"$1"; }

off=$(best)
off_s=$(field host_s "$off")
echo "tracing off: $(field instructions "$off") instructions, host $off_s s, cpu $(cpu_of "$off") s (user+sys)"
status=0
for ext in pftrace json; do
  file="$tmp/trace.$ext"
  on=$(best "$file")
  s=$(field host_s "$on")
  events=$(field trace_events "$on")
  bytes=$(stat -c %s "$file")
  awk -v ext="$ext" -v s="$s" -v off="$off_s" -v ev="$events" -v by="$bytes" -v cpu="$(cpu_of "$on")" 'BEGIN {
    printf "%-8s host %.4f s, slowdown %.2fx, cpu %s s, %d events, %.2f M events/s, %.1f bytes/event, trace %.1f MB\n",
           ext, s, s / off, cpu, ev, ev / s / 1e6, by / ev, by / 1e6 }'
  if ! awk -v s="$s" -v off="$off_s" 'BEGIN { exit !(s <= 2 * off) }'; then
    echo "bench_trace_model: $ext slowdown above the 2x target"
    status=2
  fi
done
exit $status
