#!/usr/bin/env bash
# End-to-end test of the MoE forward workloads: usage moe.sh <trnsim-binary> <source-dir>.
# The shipped real layers validate (gpt-oss-120b's raw 2880 is rejected with the reason); a small layer run
# with --dump-inputs writes every input by its argument name and the outputs by theirs, and its trace shows
# the token gathers and the output scatters (indirect DMAs) on the DMA queues of the engine that issues them.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
MOE=$SRC/configs/workloads/moe

# 1. The shipped layers, forward and backward, validate (each builds its program).
for w in "$MOE"/*.json; do
  case "$w" in
    *affinity_on_h_bwd_mxfp8.json) want="blockwise_mm_bwd_mxfp8 on trn3, 2 cores, 10 inputs, 4 outputs," ;;
    *prequantized_weights_bwd_mxfp8.json) want="blockwise_mm_bwd_mxfp8 on trn3, 2 cores, 11 inputs, 4 outputs," ;;
    *_bwd_mxfp8.json) want="blockwise_mm_bwd_mxfp8 on trn3, 2 cores, 9 inputs, 4 outputs," ;;
    *) want="blockwise_mm_fwd_mxfp8 on trn3, 2 cores, 6 inputs, 3 outputs," ;;
  esac
  "$TRNSIM" validate "$w" >"$T/out" 2>&1
  rc=$?
  check "validate $(basename "$w") (exit $rc: $(cat "$T/out"))" '[[ $rc == 0 && $(cat "$T/out") == *": ok: kernel $want"* ]]'
done
"$TRNSIM" validate "$MOE/gpt_oss_120b_fwd_mxfp8.json" --set params.H=2880 --set params.I_TP=2880 >"$T/out" 2>&1
rc=$?
check "gpt-oss raw shape rejected (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == *"params: kernel '"'"'blockwise_mm_fwd_mxfp8'"'"': parameter '"'"'H'"'"' = 2880 must be a multiple of 128 (the x4 interleave puts H/4 rows on partitions in groups of 32; a model whose size is not, e.g. 2880, runs zero-padded to the next multiple, 3072)" ]]'

# 2. A small layer: 256 tokens, top-2 over 4 experts, blocks of 128 (N = 7).
cat >"$T/w.json" <<'EOF'
{"name": "moe_small", "hardware": "trn3", "kernel": "blockwise_mm_fwd_mxfp8",
 "params": {"T": 256, "H": 256, "I_TP": 128, "E": 4, "top_k": 2, "block_size": 128,
            "skip_dma": {"skip_token": true}},
 "inputs": {"hidden_states": {"generator": "normal", "seed": 1},
            "gate_up_proj_weight": {"generator": "uniform", "seed": 2, "low": -0.1, "high": 0.1},
            "down_proj_weight": {"generator": "uniform", "seed": 3, "low": -0.1, "high": 0.1},
            "routing": {"recipe": "routing", "seed": 4, "zipf": 0.5}}}
EOF
"$TRNSIM" run "$T/w.json" --out "$T/a" --dump-inputs --trace "$T/t.json" >"$T/out" 2>&1
rc=$?
check "small layer runs and passes its checks (exit $rc)" '[[ $rc == 0 && $(grep -c " PASS" "$T/out") == 3 ]]'
check "inputs by argument name" \
  '[[ $(cd "$T/a/inputs" && ls | tr "\n" " ") == "block_to_expert.npy down_proj_weight.npy expert_affinities_masked.npy gate_up_proj_weight.npy hidden_states.npy token_position_to_id.npy " ]]'
check "outputs by name" \
  '[[ -f $T/a/output_hidden_states.npy && -f $T/a/gate_up_proj_act_checkpoint_T.npy && -f $T/a/scaled_intermediate_checkpoint_T.npy ]]'
check "routing shapes: [N*B] and [N, 1]" \
  '[[ $(head -c 128 "$T/a/inputs/token_position_to_id.npy" | tr -d "\0") == *"(896,)"* && $(head -c 128 "$T/a/inputs/block_to_expert.npy" | tr -d "\0") == *"(7, 1)"* ]]'
# The queue tracks' slices: gathers read hidden_states rows through a vector_offset into the block scratch,
# scatters write the core's output slab through one; POOL issues both, on its queues (12 to 15).
grep '"name":"DMA_COPY"' "$T/t.json" >"$T/dma"
check "trace: token gathers on POOL's DMA queues" \
  'grep "src=hbm:hidden_states[^\"]*vector_offset" "$T/dma" | grep -q "\"dma_queue\":1[2-5],.*\"issuer\":\"POOL\""'
check "trace: output scatters on POOL's DMA queues" \
  'grep "dst=hbm:output_slab_[01][^\"]*vector_offset" "$T/dma" | grep -q "\"dma_queue\":1[2-5],.*\"issuer\":\"POOL\""'
check "trace: the queue tracks are named" 'grep -q "\"thread_name\".*\"qGpSimdIO12\"" "$T/t.json"'


# 3. Routing read from .npy files is checked before a recipe reads it, and by validate: an expert id out of
# range in block_to_expert, with the backward's checkpoints recipe (which runs the forward on the host), is
# an error naming the tensor and the index, not a crash.
cp "$T/a/inputs/block_to_expert.npy" "$T/be.npy"
data=$((10 + $(od -An -tu2 -j8 -N2 "$T/be.npy")))
printf '\x04\x00\x00\x00' | dd of="$T/be.npy" bs=1 seek=$((data + 8)) conv=notrunc status=none
cat >"$T/b.json" <<EOF
{"name": "moe_small_bwd", "hardware": "trn3", "kernel": "blockwise_mm_bwd_mxfp8",
 "params": {"T": 256, "H": 256, "I_TP": 256, "E": 4, "top_k": 2, "block_size": 128,
            "skip_dma": {"skip_token": true}},
 "inputs": {"hidden_states": {"generator": "normal", "seed": 1},
            "output_hidden_states_grad": {"generator": "normal", "seed": 5},
            "gate_up_proj_weight": {"generator": "uniform", "seed": 2, "low": -0.1, "high": 0.1},
            "down_proj_weight": {"generator": "uniform", "seed": 3, "low": -0.1, "high": 0.1},
            "token_position_to_id": {"npy": "$T/a/inputs/token_position_to_id.npy"},
            "block_to_expert": {"npy": "$T/be.npy"},
            "expert_affinities_masked": {"npy": "$T/a/inputs/expert_affinities_masked.npy"},
            "checkpoints": {"recipe": "checkpoints"}}}
EOF
"$TRNSIM" run "$T/b.json" --out "$T/b" >"$T/out" 2>&1
rc=$?
check "bad expert id before the checkpoints recipe (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == "trnsim: error: $T/b.json: inputs: block_to_expert[2] = 4 is not an expert id in [0, E = 4)" ]]'
"$TRNSIM" validate "$T/b.json" >"$T/out" 2>&1
rc=$?
check "validate reads the routing .npy values too (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == "trnsim: error: $T/b.json: inputs: block_to_expert[2] = 4 is not an expert id in [0, E = 4)" ]]'

# 4. A negative num_valid_tokens is an input error; one above T is clamped to T (nki-library's API reference):
# the run of 257 writes the bytes of the run of 256.
"$TRNSIM" run "$SRC/configs/workloads/moe/dense_single_expert_bwd_mxfp8.json" --out "$T/d" --dump-inputs \
  --no-numerics --set params.T=256 --set params.H=256 --set params.I_TP=256 --set params.block_size=128 \
  --set inputs.num_valid_tokens.value=-1 >"$T/out" 2>&1
rc=$?
check "num_valid_tokens = -1 rejected (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == *"inputs: num_valid_tokens[0] = -1 is negative: not a token count" ]]'
for v in 256 257; do
  "$TRNSIM" run "$SRC/configs/workloads/moe/dense_single_expert_bwd_mxfp8.json" --out "$T/d$v" \
    --set params.T=256 --set params.H=256 --set params.I_TP=256 --set params.block_size=128 \
    --set inputs.num_valid_tokens.value=$v >"$T/out" 2>&1
  rc=$?
  check "num_valid_tokens = $v runs (exit $rc: $(cat "$T/out"))" '[[ $rc == 0 ]]'
done
check "num_valid_tokens = 257 is clamped to T = 256: the same gradients" \
  'cmp -s "$T/d256/hidden_states_grad.npy" "$T/d257/hidden_states_grad.npy" &&
   cmp -s "$T/d256/gate_up_proj_weight_grad.npy" "$T/d257/gate_up_proj_weight_grad.npy"'

# 5. A NaN in an input the checkpoints recipe reads: the note on its outputs names the recipe.
cp "$T/a/inputs/hidden_states.npy" "$T/hs.npy"
data=$((10 + $(od -An -tu2 -j8 -N2 "$T/hs.npy")))
printf '\xc0\x7f' | dd of="$T/hs.npy" bs=1 seek=$data conv=notrunc status=none
sed -e "s|\"block_to_expert\": {\"npy\": \"$T/be.npy\"}|\"block_to_expert\": {\"npy\": \"$T/a/inputs/block_to_expert.npy\"}|" \
  -e "s|\"hidden_states\": {\"generator\": \"normal\", \"seed\": 1}|\"hidden_states\": {\"npy\": \"$T/hs.npy\"}|" \
  "$T/b.json" >"$T/c.json"
"$TRNSIM" run "$T/c.json" --out "$T/c" --no-numerics --dump-inputs >"$T/out" 2>&1
rc=$?
check "a NaN hidden row: the recipe's outputs are noted as its doing (exit $rc: $(grep note "$T/out"))" \
  '[[ $rc == 0 && $(grep -c "note: inputs.gate_up_proj_act_checkpoint_T: [0-9]* of [0-9]* values are NaN or Inf (made by recipe '"'"'checkpoints'"'"' from the other inputs)" "$T/out") == 1 ]]'

# 6. skip_grad_initialization: the caller zeroes the gradients (nkilib); trnsim, the caller, does, says so,
# and the run passes its checks (the model starts outputs undefined otherwise).
sed -e "s|\"block_to_expert\": {\"npy\": \"$T/be.npy\"}|\"block_to_expert\": {\"npy\": \"$T/a/inputs/block_to_expert.npy\"}|" \
  -e 's|"skip_dma": {"skip_token": true}|"skip_dma": {"skip_token": true}, "skip_grad_initialization": true|' \
  "$T/b.json" >"$T/s.json"
"$TRNSIM" run "$T/s.json" --out "$T/s" >"$T/out" 2>&1
rc=$?
check "skip_grad_initialization: outputs zeroed by trnsim, checks pass (exit $rc: $(grep -v PASS "$T/out" | head -5))" \
  '[[ $rc == 0 && $(grep -c " PASS" "$T/out") == 4 && $(cat "$T/out") == *"note: outputs hidden_states_grad, expert_affinities_masked_grad, gate_up_proj_weight_grad, down_proj_weight_grad start at zero, set by trnsim as the caller (kernel parameters leave their initialization to the caller)"* ]]'

# 7. num_valid_tokens: the roofline counts the token slots the dense loop handles, so count 0 (no block runs)
# is a valid run, not a simulated time below the roofline. T = H = I_TP = 256, B = 128, BF16 weights:
# count 0 moves no token rows and reads no weight; the setup writes both weight gradients, 256*512*2 +
# 256*256*2 = 393216 bytes, plus token_position_to_id, block_to_expert and the count (4 bytes each): 393228.
# Count 100: useful FLOPs 100 * 12 * 256 * 256 = 78643200; per-token tensors hidden_states, dY,
# hidden_states_grad (131072 bytes each), the gate/up checkpoint [2, 2, 256, 128] BF16 (262144) and both
# affinity tensors (1024 each) = 657408 bytes x 100/256 = 256800, + both weights and both weight
# gradients (786432) + 12 = 1043244.
for v in 0 100; do
  "$TRNSIM" run "$SRC/configs/workloads/moe/dense_single_expert_bwd_mxfp8.json" --out "$T/n$v" --no-numerics \
    --set params.T=256 --set params.H=256 --set params.I_TP=256 --set params.block_size=128 \
    --set inputs.num_valid_tokens.value=$v >"$T/out" 2>&1
  rc=$?
  flops=$(grep -E '^  "useful_flops": ' "$T/n$v/stats.json")
  bytes=$(grep -E '^  "compulsory_hbm_bytes": ' "$T/n$v/stats.json")
  want_flops=$([[ $v == 0 ]] && echo 0.0 || echo 78643200.0)
  want_bytes=$([[ $v == 0 ]] && echo 393228.0 || echo 1043244.0)
  check "num_valid_tokens = $v: roofline of the handled slots (exit $rc: $flops $bytes $(grep -i bug "$T/out"))" \
    '[[ $rc == 0 && $flops == "  \"useful_flops\": $want_flops," && $bytes == "  \"compulsory_hbm_bytes\": $want_bytes," ]]'
done

# 8. The checkpoint slots past num_valid_tokens are undefined: a NaN there, inside the last block that runs
# (slot 100 of block 0, element 100) or in the skipped block 1 (element 1 * 2 * 256 * 128 = 65536), changes
# neither the kernel's outputs nor the reference: the same bytes as the clean run, every check PASS.
SETS="--set params.T=256 --set params.H=256 --set params.I_TP=256 --set params.block_size=128"
"$TRNSIM" run "$SRC/configs/workloads/moe/dense_single_expert_bwd_mxfp8.json" --out "$T/v" --dump-inputs $SETS \
  --set inputs.num_valid_tokens.value=100 >"$T/out" 2>&1
ck="$T/v/inputs/gate_up_proj_act_checkpoint_T.npy"
data=$((10 + $(od -An -tu2 -j8 -N2 "$ck")))
for e in 100 65536; do
  cp "$ck" "$T/ck$e.npy"
  printf '\xc0\x7f' | dd of="$T/ck$e.npy" bs=1 seek=$((data + 2 * e)) conv=notrunc status=none
  sed -e "s|\"checkpoints\": {\"recipe\": \"checkpoints\"}|\"gate_up_proj_act_checkpoint_T\": {\"npy\": \"$T/ck$e.npy\"}|" \
    "$SRC/configs/workloads/moe/dense_single_expert_bwd_mxfp8.json" >"$T/ck$e.json"
  "$TRNSIM" run "$T/ck$e.json" --out "$T/ck$e" $SETS --set inputs.num_valid_tokens.value=100 >"$T/out" 2>&1
  rc=$?
  same=1
  for o in hidden_states_grad expert_affinities_masked_grad gate_up_proj_weight_grad down_proj_weight_grad; do
    cmp -s "$T/v/$o.npy" "$T/ck$e/$o.npy" || same=0
  done
  check "NaN in undefined checkpoint element $e: outputs unchanged, checks pass (exit $rc, same $same: $(grep -E "FAIL|error" "$T/out"))" \
    '[[ $rc == 0 && $same == 1 && $(grep -c " PASS" "$T/out") == 4 ]]'
done

finish
