#!/usr/bin/env bash
# LM-head backward chain comparison (configs/workloads/chains/README.md): the fused MXFP8 gradient (the cross
# entropy writes TE's MXFP8 tensors, the matmul reads them pre-quantized) against the BF16 gradient (the
# cross entropy writes BF16, matmul_mxfp8_backward quantizes it itself), per vocabulary: simulated time and
# HBM bytes of each stage and their sums (OUT/chain_stats.json), all runs --no-numerics on Trn3.
# Sizes: the shipped one (128 tokens, hidden 512) and a real one (4096 tokens, hidden 4096: Llama 3 8B,
# Qwen3 8B). The BF16 variant needs V % 512 == 0 (matmul_mxfp8_backward's weight_grad phase reads a BF16 dY
# K-by-F, kernels/lib/mxfp8/plan.cpp), so it runs the vocabularies padded to 128512 and 152064; the fused
# chain is given at the real and the padded vocabulary, and at the padded one also with the cross entropy's
# quantize_rule trn3 (Trn3's quantize_mx scale rule instead of TE's: other bytes, less DVE time).
# Prints a Markdown table. Usage: tools/bench/bench_chain.sh [BUILD_DIR]     (default build)
set -euo pipefail
build=${1:-build}
trnsim="$build/trnsim"
dir=$(cd "$(dirname "$0")/../.." && pwd)/configs/workloads/chains
[[ -x "$trnsim" ]] || { echo "bench_chain: $trnsim not found; build with: cmake --build $build --target trnsim" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run VOCAB VARIANT V TOKENS HIDDEN [RULE]: one chain, --no-numerics; prints a table row. RULE trn3: the cross
# entropy quantizes with Trn3's quantize_mx instead of TE's rule.
run() {
  local v=$1 g=$2 V=$3 M=$4 K=$5 rule=${6:-te}
  local ce=${v}_lm_head_ce_$g mm=${v}_lm_head_mm_$g
  local sets=(--set "$ce.params.rows=$M" --set "$ce.params.V=$V" --set "$mm.params.M=$M" --set "$mm.params.N=$V"
    --set "$mm.params.K=$K")
  if [[ $g == mxfp8 ]]; then
    sets+=(--set "$mm.params.output_grad_scales=[$((V / 4)),$M]" --set "$mm.params.output_grad_columnwise_scales=[$((M / 4)),$V]"
      --set "$ce.params.quantize_rule=$rule")
  fi
  "$trnsim" run "$dir/${v}_lm_head_bwd_$g.json" --no-numerics "${sets[@]}" --out "$tmp/o" >"$tmp/log" 2>&1 ||
    { echo "bench_chain: trnsim failed:" >&2; cat "$tmp/log" >&2; exit 1; }
  python3 - "$tmp/o/chain_stats.json" "$v" "$g" "$V" "$M" "$K" "$rule" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
v, g, V, M, K, rule = sys.argv[2:]
ce, mm = d["stages"]
t = d["total"]
name = {"mxfp8": "fused MXFP8" + (", Trn3 rule" if rule == "trn3" else ""), "bf16": "BF16, quantized by the matmul"}[g]
print(f"| {v} | {V} | {M} x {K} | {name} | {ce['total_time_ns'] / 1e3:.3f} | {mm['total_time_ns'] / 1e3:.3f} | "
      f"{t['total_time_ns'] / 1e3:.3f} | {ce['hbm_bytes'] / 1e6:.1f} | {mm['hbm_bytes'] / 1e6:.1f} | "
      f"{t['hbm_bytes'] / 1e6:.1f} |")
EOF
}

echo "| vocabulary | V | tokens x hidden | gradient | CE us | matmul us | total us | CE HBM MB | matmul HBM MB | total HBM MB |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for size in "128 512" "4096 4096"; do
  read -r M K <<<"$size"
  for vv in "llama3 128256 128512" "qwen3 151936 152064"; do
    read -r v V Vp <<<"$vv"
    run "$v" mxfp8 "$V" "$M" "$K"
    run "$v" mxfp8 "$Vp" "$M" "$K"
    run "$v" mxfp8 "$Vp" "$M" "$K" trn3
    run "$v" bf16 "$Vp" "$M" "$K"
  done
done
