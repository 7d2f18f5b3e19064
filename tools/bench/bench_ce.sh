#!/usr/bin/env bash
# Cross-entropy benchmark (configs/workloads/cross_entropy/README.md states the targets): prints
#  1. the host wall and CPU time (user + system, from GNU time) of llama3_ce_mxfp8_4096 (4096 x 128256) with
#     numerics off and on;
#  2. for every shipped backward shape, the simulated time, HBM roofline and ratio of the fused MXFP8 path
#     (the _mxfp8 workload), the unfused one (--set params.fused=never: BF16 gradient to HBM, then quantize),
#     the BF16 gradient (the _bf16 twin) and the Trn3 rule (--set params.quantize_rule=trn3), all with
#     --no-numerics; then the same for the forward workloads;
#  3. with BYTES=on, for the 4096-row shapes: how many output bytes the Trn3 rule changes against the TE rule
#     (both runs with numerics; slow: two full runs per shape).
# A script that prints figures, not a timed test: on a shared machine compare CPU seconds, not wall seconds.
# Usage: tools/bench/bench_ce.sh [BUILD_DIR]          (default build)
#        BYTES=on tools/bench/bench_ce.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
trnsim="$build/trnsim"
dir=$(cd "$(dirname "$0")/../.." && pwd)/configs/workloads/cross_entropy
[[ -x /usr/bin/time ]] || { echo "bench_ce: needs GNU time (/usr/bin/time)" >&2; exit 1; }
[[ -x "$trnsim" ]] || { echo "bench_ce: $trnsim not found; build with: cmake --build $build --target trnsim" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run OUT WORKLOAD [args...]: runs trnsim into $tmp/OUT; leaves stdout in $tmp/OUT.txt and "wall cpu" in
# $tmp/OUT.time.
run() {
  local out="$1" workload="$2"; shift 2
  local start end
  rm -rf "${tmp:?}/$out"
  start=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o "$tmp/$out.cpu" "$trnsim" run "$workload" --out "$tmp/$out" "$@" \
    > "$tmp/$out.txt" 2> "$tmp/$out.err" || { echo "bench_ce: trnsim failed:" >&2; cat "$tmp/$out.err" >&2; exit 1; }
  end=$(date +%s.%N)
  echo "$(awk "BEGIN { printf \"%.2f\", $end - $start }") $(awk '{ printf "%.2f", $1 + $2 }' "$tmp/$out.cpu")" \
    > "$tmp/$out.time"
}
# sim OUT: "simulated_ms roofline_ms ratio" from a run's report.
sim() {
  awk '/^  simulated time/ { t = $3; u = $4 } /^  roofline lower bound/ { r = $4; v = $5 }
       /^  roofline ratio/ { q = $3 }
       END { if (u == "us") t /= 1000; if (v == "us") r /= 1000; printf "%.3f %.3f %.2f", t, r, q }' "$tmp/$1.txt"
}

echo "== host time of llama3_ce_mxfp8_4096 (4096 x 128256, LNC2, fused MXFP8 E4M3, TE rule)"
run nonum "$dir/llama3_ce_mxfp8_4096.json" --no-numerics
read -r wall cpu < "$tmp/nonum.time"
printf '  numerics off   wall %7.2f s   CPU %7.2f s   [%s]\n' "$wall" "$cpu" \
  "$(grep "host time" "$tmp/nonum.err" | sed -E 's/.*host time //')"
run num "$dir/llama3_ce_mxfp8_4096.json"
read -r wall cpu < "$tmp/num.time"
printf '  numerics on    wall %7.2f s   CPU %7.2f s   [%s]\n' "$wall" "$cpu" \
  "$(grep "host time" "$tmp/num.err" | sed -E 's/.*host time //')"
grep -E 'PASS|FAIL' "$tmp/num.txt" | sed 's/^ */    /' || true
rm -rf "${tmp:?}/num" "${tmp:?}/nonum"

echo
echo "== simulated time (ms) against the HBM roofline, --no-numerics"
printf '  %-22s %-8s %-8s | %-22s | %-22s | %-22s | %-22s\n' shape roofline "" \
  "fused MXFP8 (ratio)" "unfused MXFP8 (ratio)" "BF16 gradient (ratio)" "fused, trn3 rule (ratio)"
for f in "$dir"/*_ce_mxfp8_[0-9]*.json "$dir"/*_ce_mxfp8_masked_*.json; do
  [[ -e $f ]] || continue
  name=$(basename "$f" .json)
  twin="$dir/${name/_mxfp8_/_bf16_}.json"  # none for the masked variant
  run fused "$f" --no-numerics
  run unfused "$f" --no-numerics --set params.fused=never
  run trn3 "$f" --no-numerics --set params.quantize_rule=trn3
  read -r tf rf qf <<< "$(sim fused)"
  read -r tu _ qu <<< "$(sim unfused)"
  read -r tt _ qt <<< "$(sim trn3)"
  if [[ -e $twin ]]; then
    run bf16 "$twin" --no-numerics
    read -r tb _ qb <<< "$(sim bf16)"
    bf="$(printf '%8.3f (%5.2fx)' "$tb" "$qb")"
  else
    bf="$(printf '%-17s' "-")"
  fi
  printf '  %-22s %8.3f %-8s | %8.3f (%5.2fx)      | %8.3f (%5.2fx)      | %s      | %8.3f (%5.2fx)\n' \
    "${name/_ce_mxfp8/}" "$rf" "" "$tf" "$qf" "$tu" "$qu" "$bf" "$tt" "$qt"
done

echo
echo "== forward (cross_entropy_fwd), simulated time (ms) against the HBM roofline, --no-numerics"
for f in "$dir"/*_ce_fwd_*.json; do
  [[ -e $f ]] || continue
  run fwd "$f" --no-numerics
  read -r tf rf qf <<< "$(sim fwd)"
  printf '  %-22s %8.3f          | %8.3f (%5.2fx)\n' "$(basename "$f" .json)" "$rf" "$tf" "$qf"
done

[[ ${BYTES:-off} == on ]] || exit 0
# count_diff A.npy B.npy: "<differing> of <total> bytes" of the two arrays' data (headers skipped), by XOR of
# 1 MiB runs as big integers (no per-byte loop in Python).
count_diff() {
  python3 - "$1" "$2" <<'PY'
import struct, sys
def data(f):
    f.seek(8)
    n = struct.unpack('<H', f.read(2))[0]
    f.seek(10 + n)
fa, fb = open(sys.argv[1], 'rb'), open(sys.argv[2], 'rb')
data(fa); data(fb)
diff = total = 0
while True:
    a, b = fa.read(1 << 20), fb.read(1 << 20)
    if not a:
        break
    x = (int.from_bytes(a, 'little') ^ int.from_bytes(b, 'little')).to_bytes(len(a), 'little')
    diff += len(a) - x.count(0)
    total += len(a)
print(f"{diff} of {total} bytes")
PY
}
echo
echo "== output bytes the Trn3 rule changes against the TE rule (fused, 4096 rows, with numerics)"
for f in "$dir"/*_ce_mxfp8_4096.json; do
  name=$(basename "$f" .json)
  run te "$f"
  run t3 "$f" --set params.quantize_rule=trn3
  line="  $(printf '%-22s' "$name")"
  for o in input_grad_rowwise_data input_grad_rowwise_scale_inv input_grad_columnwise_data \
           input_grad_columnwise_scale_inv; do
    line+=" ${o#input_grad_} $(count_diff "$tmp/te/$o.npy" "$tmp/t3/$o.npy");"
  done
  echo "$line"
  rm -rf "${tmp:?}/te" "${tmp:?}/t3"
done
