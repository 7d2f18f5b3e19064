#!/usr/bin/env bash
# End-to-end test of chained workloads (docs/workloads.md "Chains"): usage chain.sh <trnsim-binary> <source-dir>.
# The shipped LM-head chains validate; the Llama-3 chains run shrunk to V = 4096 with numerics: the chain
# reference's checks pass with pinned values, the outputs' bytes are pinned, the totals are the stages' sums,
# and the fused chain's matmul outputs are the bytes of the same matmul fed by `trnsim quantize --layout x4`
# of the BF16 chain's gradient (so the TE-to-x4 conversions are that quantizer's layout). Every bad chain
# fails before simulating with the file and key named, exit 1, and no output folder.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
CH=$SRC/configs/workloads/chains

# 1. The shipped pipelines validate: two stages each, CE first.
for v in llama3 qwen3; do
  for g in mxfp8 bf16; do
    "$TRNSIM" validate "$CH/${v}_lm_head_bwd_$g.json" >out 2>&1
    rc=$?
    check "validate ${v} $g (exit $rc: $(cat out))" \
      '[[ $rc == 0 && $(cat out) == *": ok: chain ${v}_lm_head_bwd_$g, 2 stages (${v}_lm_head_ce_$g -> ${v}_lm_head_mm_$g)" ]]'
  done
done

# 2. The fused chain at V = 4096 (128 tokens, hidden 512).
CE=llama3_lm_head_ce_mxfp8
MM=llama3_lm_head_mm_mxfp8
SMALL=(--set $CE.params.V=4096 --set $MM.params.N=4096 --set "$MM.params.output_grad_scales=[1024,128]"
  --set "$MM.params.output_grad_columnwise_scales=[32,4096]")
"$TRNSIM" run "$CH/llama3_lm_head_bwd_mxfp8.json" "${SMALL[@]}" --out fused >out 2>&1
rc=$?
check "fused chain runs (exit $rc: $(cat out))" '[[ $rc == 0 ]]'
check "fused chain prints the total" 'grep -q "^total 125.879 us simulated, 13454856 HBM bytes (2 stages)" out'
sha() { sha256sum "$1" | cut -c1-64; }
# Output bytes: the CE's TE tensors and the matmul's gradients.
check "CE rowwise data bytes" '[[ $(sha fused/$CE/input_grad_rowwise_data.npy) == 76ea1b9df31857fc64027d03e7c8f32b2cae140a0b2505a55b24f4feca7b1c62 ]]'
check "CE columnwise scale bytes" '[[ $(sha fused/$CE/input_grad_columnwise_scale_inv.npy) == 3f281a32535cea1a760a2e3e68cca54a89bba1d94507f4300cd67dbb62d4a0e2 ]]'
check "dX bytes" '[[ $(sha fused/$MM/input_grad.npy) == 150bc58141997aab25253fce32617c45e11a430eb575cf534f245e744c6664ca ]]'
check "dW bytes" '[[ $(sha fused/$MM/weight_grad.npy) == 1477c771d39d46b355540adf447fe3e9934f649624a349502c27c7042e3713fe ]]'
# chain_stats.json: sums, links and the chain reference's checks (values from this run, FP64 references).
python3 - fused/chain_stats.json >py 2>&1 <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
s, t = d["stages"], d["total"]
assert [x["name"] for x in s] == ["llama3_lm_head_ce_mxfp8", "llama3_lm_head_mm_mxfp8"], s
assert t["total_time_ns"] == s[0]["total_time_ns"] + s[1]["total_time_ns"], t
assert t["hbm_bytes"] == s[0]["hbm_bytes"] + s[1]["hbm_bytes"] == 13454856, t
assert t["hbm_bytes"] == t["hbm_bytes_read"] + t["hbm_bytes_written"], t
for x in s:
    st = json.load(open("fused/" + x["stats"]))
    assert st["total_time_ns"] == x["total_time_ns"] and st["hbm_bytes"] == x["hbm_bytes"], x
    assert x["numerics"] == "pass", x
links = {(l["input"], l["output"], l["convert"]) for l in s[1]["inputs_from"]}
assert links == {("output_grad", "input_grad_rowwise_data", "te_rowwise_data_to_x4"),
                 ("output_grad_scales", "input_grad_rowwise_scale_inv", "te_rowwise_scales_to_x4"),
                 ("output_grad_columnwise", "input_grad_columnwise_data", "te_columnwise_data_to_x4"),
                 ("output_grad_columnwise_scales", "input_grad_columnwise_scale_inv", "te_columnwise_scales_to_x4")}, links
c = d["checks"]
want = {"llama3_lm_head_ce_mxfp8.input_grad_rowwise_data (dequantized)": 0.031002984281089302,
        "llama3_lm_head_ce_mxfp8.input_grad_columnwise_data (dequantized)": 0.031002984224421836,
        "llama3_lm_head_mm_mxfp8.input_grad": 0.04080238231308104,
        "llama3_lm_head_mm_mxfp8.weight_grad": 0.041132527085086475}
assert set(c) == set(want), sorted(c)
for k, v in want.items():
    assert c[k]["pass"] is True and c[k]["rel_l2_vs_exact"] == v, (k, c[k]["rel_l2_vs_exact"])
    assert c[k]["cosine_vs_exact"] > 0.9996 and c[k]["allclose_vs_exact"] is True, (k, c[k])
print("ok")
EOF
check "chain_stats.json (python: $(cat py))" '[[ $(cat py) == ok ]]'

# 3. The BF16 chain at the same size, then its gradient quantized by `trnsim quantize` into the x4 inputs:
# the same matmul run from them gives the fused chain's bytes.
CEB=llama3_lm_head_ce_bf16
"$TRNSIM" run "$CH/llama3_lm_head_bwd_bf16.json" --set $CEB.params.V=4096 --set llama3_lm_head_mm_bf16.params.N=4096 \
  --out bf16 >out 2>&1
rc=$?
check "BF16 chain runs with its checks passing (exit $rc: $(cat out))" \
  '[[ $rc == 0 && $(grep -c " pass  rel_l2_vs_exact" out) == 3 ]]'
for a in row col; do
  "$TRNSIM" quantize bf16/$CEB/input_grad.npy --format e4m3 --rule te --axis $a --layout x4 --quant-scheme 1x32 \
    --data q_$a.npy --scales s_$a.npy >/dev/null 2>&1
done
python3 - "$CH/$MM.json" <<'EOF'
import json, sys
w = json.load(open(sys.argv[1]))
w["name"] = "mm_quantized"
w["params"].update({"N": 4096, "output_grad_scales": [1024, 128], "output_grad_columnwise_scales": [32, 4096]})
w["inputs"].update({"output_grad": "q_row.npy", "output_grad_scales": "s_row.npy",
                    "output_grad_columnwise": "q_col.npy", "output_grad_columnwise_scales": "s_col.npy"})
json.dump(w, open("mm.json", "w"))
EOF
"$TRNSIM" run mm.json --out mmq >out 2>&1
rc=$?
check "matmul from trnsim quantize (exit $rc: $(cat out))" '[[ $rc == 0 ]]'
check "same dX bytes as the fused chain" '[[ $(sha mmq/input_grad.npy) == $(sha fused/$MM/input_grad.npy) ]]'
check "same dW bytes as the fused chain" '[[ $(sha mmq/weight_grad.npy) == $(sha fused/$MM/weight_grad.npy) ]]'

# 4. Bad chains: small hand-made stages (CE 128 x 4096, matmul M 128, K 512, N 4096).
ce() { # ce FILE NAME [extra params JSON]
  cat >"$1" <<EOF
{"name": "$2", "hardware": "trn3", "kernel": "cross_entropy_bwd",
 "params": {"rows": 128, "V": 4096, "reduce_loss": true, "grad_quantizer": "mxfp8_e4m3"${3:-}},
 "inputs": {"logits_and_target": {"recipe": "lm_logits", "seed": 1}, "statistics": {"recipe": "forward_stats"},
            "grad_output": {"generator": "constant", "value": 1.0}}}
EOF
}
mm() { # mm FILE NAME FROM [extra params JSON] [rowwise convert]
# schedule trnsim_optimized: nki-library asserts quant_scheme 1x32 out for the K-by-F BF16 weights and
# activations (load_tile), so the default (its own stream) refuses this consumer.
  cat >"$1" <<EOF
{"name": "$2", "hardware": "trn3", "kernel": "matmul_mxfp8_backward",
 "params": {"M": 128, "K": 512, "N": 4096, "float8_dtype": "${FP8:-float8_e4m3fn}", "quant_scheme": "1x32", "schedule": "trnsim_optimized",
            "output_grad_scales": [1024, 128], "output_grad_columnwise_scales": [32, 4096]${4:-}},
 "inputs": {"output_grad": {"from": "$3", "output": "input_grad_rowwise_data", "convert": "${5:-te_rowwise_data_to_x4}"},
   "output_grad_scales": {"from": "$3", "output": "input_grad_rowwise_scale_inv", "convert": "te_rowwise_scales_to_x4"},
   "output_grad_columnwise": {"from": "$3", "output": "input_grad_columnwise_data", "convert": "te_columnwise_data_to_x4"},
   "output_grad_columnwise_scales": {"from": "$3", "output": "input_grad_columnwise_scale_inv", "convert": "te_columnwise_scales_to_x4"},
   "weights": {"generator": "normal", "seed": 2, "std": 0.02}, "input_activation": {"generator": "normal", "seed": 3}}}
EOF
}
refused() { # refused NAME EXPECTED-SUBSTRING trnsim-args...
  local name=$1 want=$2
  shift 2
  "$TRNSIM" run "$@" --out bad >out 2>&1
  local rc=$?
  check "$name refused (exit $rc: $(cat out))" '[[ $rc == 1 && $(cat out) == *"$want"* && ! -e bad ]]'
}
ce ce.json ce
mm m.json m ce.json
"$TRNSIM" run m.json --out good >out 2>&1
rc=$?
check "a workload reading another's outputs runs both (exit $rc: $(cat out))" \
  '[[ $rc == 0 && -f good/ce/stats.json && -f good/m/weight_grad.npy && -f good/chain_stats.json ]]'
mm m_missing.json m nowhere.json
refused "missing producer" "m_missing.json: inputs.output_grad.from: nowhere.json: no such file" m_missing.json
sed 's/"input_grad_rowwise_data"/"input_grad"/' m.json >m_noout.json
refused "output not produced" "m_noout.json: inputs.output_grad.output: workload 'ce' (ce.json) makes no output 'input_grad' with its parameters (its outputs: input_grad_rowwise_data, input_grad_rowwise_scale_inv, input_grad_columnwise_data, input_grad_columnwise_scale_inv)" m_noout.json
ce ce8.json ce ', "label_smoothing": 0.0'
sed -i 's/"V": 4096/"V": 8192/' ce8.json
mm m_shape.json m ce8.json
refused "shape mismatch" "m_shape.json: inputs.output_grad: workload 'ce' (ce8.json) output 'input_grad_rowwise_data' float8_e4m3fn [128, 8192] does not fit: kernel 'matmul_mxfp8_backward' reads input 'output_grad' float8_e4m3fn_x4 [1024, 128], which 'te_rowwise_data_to_x4' makes from float8_e4m3fn [128, 4096]" m_shape.json
FP8=float8_e5m2 mm m_dtype.json m ce.json
refused "dtype mismatch" "output 'input_grad_rowwise_data' float8_e4m3fn [128, 4096] does not fit: kernel 'matmul_mxfp8_backward' reads input 'output_grad' float8_e5m2_x4 [1024, 128]" m_dtype.json
mm m_conv.json m ce.json "" te_rowwise_to_x4
refused "unknown conversion" "m_conv.json: inputs.output_grad.convert: unknown conversion 'te_rowwise_to_x4' (known: te_rowwise_data_to_x4, te_rowwise_scales_to_x4, te_columnwise_data_to_x4, te_columnwise_scales_to_x4)" m_conv.json
sed 's/"quant_scheme": "1x32"/"quant_scheme": "wrapX"/' m.json >m_wrapx.json
refused "wrapX consumer" "m_wrapx.json: inputs.output_grad.convert: 'te_rowwise_data_to_x4' writes the x4 layout of quant_scheme 1x32" m_wrapx.json
ce ce_sw.json ce ', "scale_layout": "swizzled"'
mm m_sw.json m ce_sw.json
refused "swizzled producer scales" "m_sw.json: inputs.output_grad.convert: 'te_rowwise_data_to_x4' reads TransformerEngine's compact scale layout, and workload 'ce' (ce_sw.json) writes scale_layout \"swizzled\"" m_sw.json
# A cycle: a reads b, b reads a.
mm a.json a b.json
mm b.json b a.json
refused "cycle" "b.json: inputs.output_grad.from: a.json reads this workload's outputs: a cycle (a.json -> b.json -> a.json)" a.json
mm m_same.json ce ce.json
refused "two stages of one name" "m_same.json: name: 'ce' is also the name of ce.json: the stages of a chain need distinct names" m_same.json
sed 's/"reduce_loss": true,/"reduce_loss": true,/; s/"hardware"/"numerics": false, "hardware"/' ce.json >ce_nonum.json
mm m_nonum.json m ce_nonum.json
refused "producer without numerics" "m_nonum.json: inputs.output_grad.from: workload 'ce' (ce_nonum.json) runs without numerics, so it computes no 'input_grad_rowwise_data' for this one" m_nonum.json
echo '{"name": "p", "stages": ["m.json"], "reference": "lm_head"}' >p_ref.json
refused "unknown chain reference" "p_ref.json: reference: unknown chain reference 'lm_head' (known: lm_head_backward)" p_ref.json
echo '{"name": "p", "stages": ["m.json", "gone.json"]}' >p_gone.json
refused "pipeline stage missing" "p_gone.json: stages[1]: gone.json: no such file" p_gone.json
# A stage or producer that cannot be reached says why, not "no such file".
ln -sf loop_b.json loop_a.json && ln -sf loop_a.json loop_b.json
echo '{"name": "p", "stages": ["m.json", "loop_a.json"]}' >p_loop.json
refused "pipeline stage a symlink loop" "p_loop.json: stages[1]: loop_a.json: a symlink loop (ELOOP: Too many levels of symbolic links)" p_loop.json
mkdir -p stage_dir.json
echo '{"name": "p", "stages": ["m.json", "stage_dir.json"]}' >p_dir.json
refused "pipeline stage a folder" "p_dir.json: stages[1]: stage_dir.json: is a directory, expected a workload" p_dir.json
mm m_loop.json m loop_a.json
refused "producer a symlink loop" "m_loop.json: inputs.output_grad.from: loop_a.json: a symlink loop (ELOOP" m_loop.json
echo '{"name": "p", "stages": ["m.json"], "reference": "lm_head_backward"}' >p.json
refused "--set naming no stage" "--set x.params.M=256: a pipeline's assignments are STAGE.PATH=VALUE with STAGE one of its stages' names (m)" p.json --set x.params.M=256
echo '{"name": "p", "stages": ["ce.json"], "reference": "lm_head_backward"}' >p_ce.json
refused "reference on a chain that does not fit" "p_ce.json: reference: reference 'lm_head_backward' needs a stage running matmul_mxfp8_backward" p_ce.json
"$TRNSIM" run p.json --no-numerics --out nonum >out 2>&1
rc=$?
check "pipeline timing only (exit $rc)" '[[ $rc == 0 && $(python3 -c "import json; print(json.load(open(\"nonum/chain_stats.json\"))[\"checks\"])") == "{}" ]]'

# 5. Issue 22 on chains.
# A chain's stage folders are locked (as a run's --out) for the chain's whole life. A run holding the stage
# folder (here this script, with the lock a run takes: flock on the folder) makes the chain refuse before it
# simulates, and the single run's files there stay as they were.
echo '{"name": "pl", "stages": ["m.json"]}' >pl.json
sed 's/"name": "ce"/"name": "ce_single"/' ce.json >ce_single.json
"$TRNSIM" run ce_single.json --out LK/ce >/dev/null 2>&1
cp -r LK/ce LK_before
exec {lockfd}<LK/ce
flock -n "$lockfd"
timeout 60 "$TRNSIM" run pl.json --out LK >out 2>&1 # (a trnsim that waits for the lock would hang)
rc=$?
exec {lockfd}<&-
check "a chain whose stage folder another run holds is refused (exit $rc: $(cat out))" \
  '[[ $rc == 1 && $(cat out) == *"--out LK: ce: another trnsim run is writing into this folder"* ]]'
check "the single run's files in the stage folder are untouched" 'diff -r LK_before LK/ce >/dev/null'
# A single run into a stage folder while the chain runs is refused: the chain is stopped 0.1 s after it
# made the stage folder (it simulates for about a second, its writes come at the end), the single run tries,
# the chain goes on.
"$TRNSIM" run pl.json --out LK2 >c.log 2>&1 &
pc=$!
for _ in $(seq 1 2000); do
  [[ -d LK2/ce ]] && break
  sleep 0.005
done
sleep 0.1
kill -STOP $pc
held=0
flock -n LK2/ce true || held=1
"$TRNSIM" run ce_single.json --out LK2/ce >s.log 2>&1
rs=$?
kill -CONT $pc
wait $pc
rc=$?
check "the chain held its stage folder's lock" '[[ $held == 1 ]]'
check "a run into a running chain's stage folder is refused (exit $rs: $(cat s.log))" \
  '[[ $rs == 1 && $(cat s.log) == *"another trnsim run is writing into this folder"* ]]'
check "the chain ran (exit $rc: $(tail -1 c.log))" '[[ $rc == 0 ]]'
check "the stage folder holds the chain's files, recorded in the chain's manifest" \
  '[[ ! -e LK2/ce/.trnsim-files ]] && grep -q "\"workload\": \"ce\"" LK2/ce/stats.json && cmp -s LK2/ce/stats.json good/ce/stats.json'

# A chain killed while it replaces its files: `trnsim stats` of a stage's stats.json judges the chain's
# record (OUT/.trnsim-files) and refuses a mix, as for a single run's folder. Set A, then set B (other seeds)
# killed at write steps before, across and after its renames (steps 26 to 37 for these 12 files: one
# temporary and backup each, the record, the fills, then the renames); a folder whose files are all A's or
# all B's reads.
sed 's/"seed": 1}/"seed": 5}/' ce.json >ceB.json
sed 's/ce.json/ceB.json/g; s/"seed": 2,/"seed": 6,/' m.json >mB.json
echo '{"name": "pl", "stages": ["mB.json"]}' >plB.json
"$TRNSIM" run pl.json --out KA >/dev/null 2>&1
"$TRNSIM" run plB.json --out KB >/dev/null 2>&1
mapfile -t SETFILES < <(cd KA && find . -type f ! -name '.*' | sort)
mixed=0
STEPS=(1 12 23 24 25 27 29 31 32 33 40 47)
# Under AddressSanitizer (the CI's sanitizer job) every run is slower: fewer steps there.
grep -q __asan_init "$TRNSIM" && STEPS=(12 24 27 29 31 33 47)
for step in "${STEPS[@]}"; do
  rm -rf K
  cp -r KA K
  (TRNSIM_TEST_KILL_AT_WRITE_STEP=$step "$TRNSIM" run plB.json --out K; true) >/dev/null 2>&1
  nA=0 nB=0
  for f in "${SETFILES[@]}"; do
    if [[ $f == */host.json || $f == ./trnsim.log ]]; then # the host time, the log: A's, or another (B's)
      if cmp -s K/$f KA/$f; then nA=$((nA + 1)); else nB=$((nB + 1)); fi
    else
      cmp -s K/$f KA/$f && nA=$((nA + 1))
      cmp -s K/$f KB/$f && nB=$((nB + 1))
    fi
  done
  for st in ce m; do
    msg=$("$TRNSIM" stats K/$st/stats.json 2>&1)
    rs=$?
    if [[ $nA == "${#SETFILES[@]}" || $nB == "${#SETFILES[@]}" ]]; then
      check "kill at step $step: one set ($nA A, $nB B), $st's stats reads (exit $rs: ${msg:0:200})" '[[ $rs == 0 ]]'
    else
      [[ $st == ce ]] && mixed=$((mixed + 1))
      check "kill at step $step: a mix ($nA A, $nB B), $st's stats says so (exit $rs: ${msg:0:300})" \
        '[[ $rs == 1 && $msg == *"was killed while it replaced the folder'"'"'s files"* ]]'
    fi
  done
done
check "some kills left a mix ($mixed of ${#SETFILES[@]} files)" '[[ $mixed -gt 3 && ${#SETFILES[@]} == 12 ]]'

# Ctrl-C (SIGINT) during a chain's write: before the renames the files stay the earlier set's and the record
# (state "writing", naming the earlier set as "previous") is what the next run repairs; during the renames
# the signal waits until the set is in place. Either way the next run into the folder (a chain of the CE
# only, timing only) finds the earlier set's record and removes exactly its files it does not write again.
echo '{"name": "pc", "stages": ["ce.json"]}' >pc.json
for step in 13 30; do
  rm -rf KI
  "$TRNSIM" run pl.json --out KI >/dev/null 2>&1
  env --default-signal=INT TRNSIM_TEST_KILL_SIGNAL=INT TRNSIM_TEST_KILL_AT_WRITE_STEP=$step \
    "$TRNSIM" run plB.json --out KI >out 2>&1
  rc=$?
  n=0
  for f in "${SETFILES[@]}"; do [[ $f == */host.json || $f == ./trnsim.log ]] || cmp -s KI/$f "K$([[ $step == 13 ]] && echo A || echo B)/$f" || n=$((n + 1)); done
  check "SIGINT at write step $step: exit 130, one set (files differing: $n)" '[[ $rc == 130 && $n == 0 ]]'
  "$TRNSIM" stats KI/m/stats.json >/dev/null 2>&1
  check "SIGINT at write step $step: stats reads the stage" '[[ $? == 0 ]]'
  "$TRNSIM" run pc.json --no-numerics --out KI >out 2>&1
  rc=$?
  check "SIGINT at write step $step: the next run removes the earlier set's 8 other files (exit $rc: $(grep -c removed out))" \
    '[[ $rc == 0 && $(grep -c "^removed KI/" out) == 8 && ! -e KI/m && -z $(find KI -name "*.tmp.*" -o -name ".trnsim-trace.*" -o -name "*.old.*") ]]'
done

# Rowwise and columnwise TE tensors have one dtype and shape here: the conversion must read the component
# it converts, by TransformerEngine's names.
sed 's/"output": "input_grad_rowwise_data"/"output": "SWAP"/; s/"output": "input_grad_columnwise_data"/"output": "input_grad_rowwise_data"/; s/"output": "SWAP"/"output": "input_grad_columnwise_data"/' m.json >m_swap.json
refused "rowwise and columnwise swapped" "m_swap.json: inputs.output_grad.convert: 'te_rowwise_data_to_x4' reads TransformerEngine's rowwise_data (an output named *_rowwise_data), and output 'input_grad_columnwise_data' of workload 'ce' (ce.json) is not that component" m_swap.json
"$TRNSIM" validate m_swap.json >out 2>&1
rc=$?
check "validate refuses the swap too (exit $rc)" '[[ $rc == 1 && $(cat out) == *"m_swap.json: inputs.output_grad.convert: "* ]]'

# A chain reference that cannot run (a stage without numerics) is noted on stderr and in chain_stats.json.
"$TRNSIM" run p.json --no-numerics --out nonum2 >out 2>err
rc=$?
check "the chain reference not run is noted (exit $rc: $(cat err))" \
  '[[ $rc == 0 && $(cat err) == *"p.json: the chain reference '"'"'lm_head_backward'"'"' did not run: stage '"'"'ce'"'"' ran without numerics"* ]]'
check "chain_stats.json says why" \
  '[[ $(python3 -c "import json; print(json.load(open(\"nonum2/chain_stats.json\"))[\"reference_not_run\"])") == "stage '"'"'ce'"'"' ran without numerics (no outputs to check)" ]]'
check "and null when it ran" \
  '[[ $(python3 -c "import json; print(json.load(open(\"good/chain_stats.json\"))[\"reference_not_run\"])") == None ]]'

# Clear messages, each naming the file and key, before anything is simulated.
# run_msg NAME EXPECTED-SUBSTRING trnsim-args...: exit 1 with the message, no stage simulated.
run_msg() {
  local name=$1 want=$2
  shift 2
  "$TRNSIM" "$@" >out 2>&1
  local rc=$?
  check "$name (exit $rc: $(head -c 400 out))" '[[ $rc == 1 && $(cat out) == *"$want"* ]] && ! grep -q "^stage " out'
}
echo '{"name": "swc", "workload": "p.json", "axes": [{"name": "k", "path": "params.K", "values": [512]}]}' >sw.json
run_msg "a sweep over a chain is refused up front" "sw.json: workload: p.json is a chain" sweep sw.json --out swo
check "... and writes nothing" '[[ ! -e swo ]]'
"$TRNSIM" run p.json --no-numerics --trace /dev/null --out tr >out 2>&1
rc=$?
check "--trace /dev/null takes every stage's trace (exit $rc: $(head -c 300 out))" '[[ $rc == 0 ]]'
run_msg "--trace without an extension" "--trace tr_noext: a chain writes one trace per stage, tr_noext.<stage>: " \
  run p.json --no-numerics --trace tr_noext --out tr2
ln -s nowhere dl
run_msg "a dangling symlink as OUT" "--out dl: dl is a symlink to nowhere, which does not exist (a dangling link)" \
  run p.json --no-numerics --out dl
mkdir dl2
ln -s nowhere dl2/ce
run_msg "a dangling symlink as a stage folder" "dl2/ce is a symlink (to nowhere): trnsim does not write through links" \
  run p.json --no-numerics --out dl2
for n in chain_stats.json host.json; do
  sed "s/\"name\": \"ce\"/\"name\": \"$n\"/" ce.json >ce_reserved.json
  mm m_reserved.json m ce_reserved.json
  run_msg "stage name $n refused by validate" "ce_reserved.json: name: '$n' cannot name a chain's stage" validate m_reserved.json
done
# A hidden name is no workload's name at all (io::folder_name_problem), stage or not.
sed 's/"name": "ce"/"name": ".trnsim-files"/' ce.json >ce_reserved.json
mm m_reserved.json m ce_reserved.json
run_msg "stage name .trnsim-files refused by validate" \
  "ce_reserved.json: name: \".trnsim-files\" is not usable as a directory name (1-200 bytes of printable characters, no '/', not starting with '.'" \
  validate m_reserved.json
# A stage's name may hold dots: --set STAGE.PATH=VALUE finds the longest stage name.
sed 's/"name": "ce"/"name": "ce.v1"/' ce.json >ce_dot.json
mm m_dot.json m ce_dot.json
echo '{"name": "pd", "stages": ["ce_dot.json", "m_dot.json"]}' >pd.json
"$TRNSIM" run pd.json --no-numerics --set ce.v1.params.label_smoothing=0.25 --out dot >out 2>&1
rc=$?
check "--set on a dotted stage name (exit $rc: $(head -c 300 out))" \
  '[[ $rc == 0 && $(python3 -c "import json; print(json.load(open(\"dot/ce.v1/stats.json\"))[\"params\"][\"label_smoothing\"])") == 0.25 ]]'
echo '{"name": "p2", "stages": ["m.json", "./m.json"]}' >p_twice.json
run_msg "a stage listed twice" "p_twice.json: stages[1]: ./m.json is listed twice (also stages[0]): a chain runs each workload once" \
  validate p_twice.json
run_msg "stats of chain_stats.json points at the stages" \
  "good/chain_stats.json: a chain's summary (chain_stats.json: the stages' totals and the chain reference's checks), not one run's stats.json: run \`trnsim stats\` on a stage's stats.json (good/ce/stats.json, good/m/stats.json)" \
  stats good/chain_stats.json
# Every output is checked before the stages run: host.json too, and links below OUT.
mkdir -p hj/ce/host.json
run_msg "a directory at a stage's host.json" "stage 'ce' host.json 'hj/ce/host.json': cannot write: it is a directory" \
  run p.json --no-numerics --out hj
mkdir -p lnk/m
echo "the user's" >mine.json
ln -s ../../mine.json lnk/m/stats.json
run_msg "a symlink at a stage's stats.json" "stage 'm' stats.json 'lnk/m/stats.json': cannot write: lnk/m/stats.json is a symlink (to ../../mine.json)" \
  run p.json --no-numerics --out lnk
check "... and the linked file is untouched" '[[ $(cat mine.json) == "the user'"'"'s" ]]'

finish
