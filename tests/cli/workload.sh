#!/usr/bin/env bash
# End-to-end test of workload configs: usage workload.sh <trnsim-binary> <source-dir>.
# `trnsim validate` on every shipped workload; a small MXFP8 backward run end to end (outputs, stats.json,
# numerics, --dump-inputs, --no-numerics, --set, exit 3 on a numerics failure); every kind of bad workload
# fails with its exact message, exit 1 and no output directory.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json

# npy_header PATH: the header dict of a .npy
npy_header() { head -c 128 "$1" | tail -c +11 | tr -d '\0' | head -1; }

# expect_error NAME WORKLOAD_TEXT EXPECTED_STDERR [extra args...]: validate and run both fail with exactly that
# message (after "trnsim: error: "), exit 1, and create no output directory.
expect_error() {
  local name=$1 text=$2 want=$3
  shift 3
  printf '%s\n' "$text" >"$T/w.json"
  local cmds=(validate run)
  [[ ${ONLY_VALIDATE:-0} == 1 ]] && cmds=(validate)
  for cmd in "${cmds[@]}"; do
    local extra=()
    [[ $cmd == run ]] && extra=(--out "$T/err_out")
    rm -rf "$T/err_out"
    "$TRNSIM" "$cmd" "$T/w.json" "$@" "${extra[@]}" >"$T/stdout" 2>"$T/stderr"
    local rc=$?
    local got
    got=$(cat "$T/stderr")
    if [[ $rc == 1 && $got == "trnsim: error: $want" && ! -e $T/err_out ]]; then
      ok
    else
      bad "$name ($cmd): rc $rc, stderr: $got
   expected: trnsim: error: $want"
    fi
  done
}

# 1. Every shipped workload validates.
for w in "$SRC"/configs/workloads/*.json; do
  out=$("$TRNSIM" validate "$w" 2>&1)
  check "validate $w: $out" '[[ $? == 0 && $out == "$w: ok: kernel "* ]]'
done

# 2. The small backward end to end.
"$TRNSIM" run "$SMALL" --dump-inputs >"$T/run.txt" 2>&1
rc=$?
D=$T/out/matmul_mxfp8_bwd_512_trn3
check "small run exit code $rc: $(cat "$T/run.txt")" '[[ $rc == 0 ]]'
check "summary has the PASS lines" '[[ $(grep -cE "^ +(input_grad|weight_grad) .* PASS$" "$T/run.txt") == 2 ]]'
check "summary has the roofline" 'grep -q "roofline lower bound" "$T/run.txt"'
for o in input_grad weight_grad; do
  check "$o.npy float32 (512, 512)" '[[ $(npy_header "$D/$o.npy") == *"'"'"'descr'"'"': '"'"'<f4'"'"'"*"(512, 512)"* ]]'
done
for i in output_grad weights input_activation; do
  check "inputs/$i.npy raw bf16 (512, 512)" '[[ $(npy_header "$D/inputs/$i.npy") == *"<u2"*"(512, 512)"* ]]'
done
S=$D/stats.json
for key in total_time_ns roofline_lower_bound_ns hbm_bytes engines definitions rel_l2_vs_exact rel_l2_vs_quantized \
  cosine_vs_exact max_abs_err; do
  check "stats.json has $key" 'grep -q "\"$key\"" "$S"'
done
check "stats.json: both outputs pass" '[[ $(grep -c "\"pass\": true" "$S") == 2 ]]'
# The kernel equals the MX-quantized reference up to FP32 accumulation (rel L2 ~3e-8 here).
check "rel_l2_vs_quantized < 1e-6" \
  'awk -F": " "/rel_l2_vs_quantized/ {v=\$2+0; if (v >= 1e-6) bad=1} END {exit bad}" "$S"'

# BF16 outputs (uint16 raw bits), two cores, --out.
"$TRNSIM" run "$SMALL" --set params.output_dtype=bfloat16 --set params.run_with_lnc2=true --set params.K=1024 \
  --out "$T/bf16" >"$T/run2.txt" 2>&1
rc=$?
check "bf16 run exit $rc: $(cat "$T/run2.txt")" '[[ $rc == 0 && $(grep -c PASS "$T/run2.txt") == 2 ]]'
check "bf16 input_grad.npy uint16 (512, 1024)" '[[ $(npy_header "$T/bf16/input_grad.npy") == *"<u2"*"(512, 1024)"* ]]'
check "bf16 weight_grad.npy uint16 (512, 1024)" '[[ $(npy_header "$T/bf16/weight_grad.npy") == *"<u2"*"(512, 1024)"* ]]'
check "bf16 run reports 2 cores" 'grep -q "(2 cores)" "$T/run2.txt"'

# --no-numerics: timing only, stats.json without numerics, no output tensors.
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/timing" >"$T/run3.txt" 2>&1
rc=$?
check "--no-numerics exit $rc" '[[ $rc == 0 && -f $T/timing/stats.json && ! -e $T/timing/input_grad.npy ]]'
check "--no-numerics stats" 'grep -q "\"numerics\": null" "$T/timing/stats.json"'

# A numerics failure: products of 1e20 x 1e20 overflow FP32 in the kernel's input_grad (the FP64 reference stays
# finite): FAIL line, exit 3, outputs still written; weight_grad (1e20 x 1) passes.
"$TRNSIM" run "$SMALL" --set inputs.output_grad.std=1e20 --set inputs.weights.std=1e20 --out "$T/fail" \
  >"$T/run4.txt" 2>&1
rc=$?
check "numerics failure exits 3 (got $rc)" '[[ $rc == 3 ]]'
check "FAIL line: $(grep FAIL "$T/run4.txt")" \
  '[[ $(grep "^FAIL" "$T/run4.txt") =~ ^"FAIL input_grad: "[0-9]+" of 262144 values are NaN or Inf where the reference is finite"$ ]]'
check "failed run still writes stats" 'grep -q "\"pass\": false" "$T/fail/stats.json"'

# 3. Bad workloads: exact messages.
GOOD='"name": "w", "hardware": "trn3", "kernel": "matmul_mxfp8_backward",
  "params": {"M": 512, "K": 512, "N": 512, "run_with_lnc2": false}'
IN='"output_grad": {"generator": "normal", "seed": 1}, "weights": {"generator": "normal", "seed": 2}'
X='"input_activation": {"generator": "normal", "seed": 3}'
W=$T/w.json

expect_error "unknown top-level key" "{$GOOD, \"inputs\": {$IN, $X}, \"numerix\": true}" \
  "$W: numerix: unknown key (expected name, description, hardware, kernel, params, lnc, inputs, outputs, numerics, reference, max_instructions)"
expect_error "bad generator" "{$GOOD, \"inputs\": {$IN, \"input_activation\": {\"generator\": \"gauss\", \"seed\": 3}}}" \
  "$W: inputs.input_activation.generator: unknown generator 'gauss' (expected normal, uniform, heavy_tailed, activations_with_outliers, randint, arange, constant, zeros)"
expect_error "unknown generator key" "{$GOOD, \"inputs\": {$IN, \"input_activation\": {\"generator\": \"normal\", \"seed\": 3, \"sd\": 2}}}" \
  "$W: inputs.input_activation.sd: unknown key for generator 'normal' (expected generator, seed, mean, std)"
expect_error "missing seed" "{$GOOD, \"inputs\": {$IN, \"input_activation\": {\"generator\": \"uniform\"}}}" \
  "$W: inputs.input_activation.seed: missing (every random generator needs a seed)"
expect_error "bad generator parameter" "{$GOOD, \"inputs\": {$IN, $X}}" \
  "$W: inputs.weights.std: must be > 0" --set inputs.weights.std=-1
expect_error "missing input" "{$GOOD, \"inputs\": {$IN}}" \
  "$W: inputs: missing input 'input_activation' bfloat16 [512, 512] (kernel 'matmul_mxfp8_backward' needs output_grad, weights, input_activation)"
expect_error "unknown input" "{$GOOD, \"inputs\": {$IN, $X, \"bias\": {\"npy\": \"b.npy\"}}}" \
  "$W: inputs.bias: kernel 'matmul_mxfp8_backward' has no input 'bias' (inputs: output_grad, weights, input_activation)"
printf '%s\n' "{\"name\": \"w\", \"hardware\": \"trn9\", \"kernel\": \"matmul_bf16\", \"params\": {}, \"inputs\": {}}" >"$W"
msg=$("$TRNSIM" validate "$W" 2>&1)
# Every shipped config is listed (configs/hw/*.json; before, trn1 was left out).
shipped=$(cd "$SRC/configs/hw" && ls -- *.json | sed 's/\.json$//' | paste -sd, - | sed 's/,/, /g')
check "bad hardware name message: $msg" \
  '[[ $shipped == *trn1* && $msg == "trnsim: error: $W: hardware: unknown hardware config '"'"'trn9'"'"' (known: $shipped, or a .json path; TRNSIM_CONFIG_DIR names a folder of configs); looked in: $SRC/configs/hw/trn9.json" ]]'
printf '%s\n' "{\"name\": \"w\", \"hardware\": \"trn2\", \"kernel\": \"matmul_bf16\", \"params\": {}, \"inputs\": {}}" >"$W"
msg=$("$TRNSIM" validate "$W" --set hardware=trn9 2>&1)
rc=$?
check "--set hardware=trn9 (rc $rc): $msg" \
  '[[ $rc == 1 && $msg == "trnsim: error: $W: hardware: unknown hardware config '"'"'trn9'"'"' (known: $shipped, or a .json path; TRNSIM_CONFIG_DIR names a folder of configs); looked in: $SRC/configs/hw/trn9.json" ]]'
# TRNSIM_CONFIG_DIR's configs are named too: the lookup's folders are the list.
mkdir -p "$T/myhw"
cp "$SRC/configs/hw/trn2.json" "$T/myhw/mine.json"
msg=$(TRNSIM_CONFIG_DIR=$T/myhw "$TRNSIM" validate "$W" --set hardware=trn9 2>&1)
check "... with TRNSIM_CONFIG_DIR: $msg" \
  '[[ $msg == *"(known: mine, $shipped, or a .json path; "* ]]'
printf '%s\n' "{$GOOD, \"inputs\": {$IN, $X}}" >"$W"
msg=$("$TRNSIM" validate "$W" --set hardware.overrides.pe.clock_Ghz=2 2>&1)
check "bad override path: $msg" \
  '[[ $msg == "trnsim: error: $W: hardware: "*"trn3.json: override pe.clock_Ghz: no such parameter (pe.clock_Ghz does not exist)" ]]'
expect_error "bad kernel parameter" "{$GOOD, \"inputs\": {$IN, $X}}" \
  "$W: params: kernel 'matmul_mxfp8_backward': parameter 'M': expected an integer in [1, 1048576], got -5" --set params.M=-5
msg=$("$TRNSIM" validate "$W" --set params.Q=1 2>&1)
check "unknown kernel parameter: $msg" \
  '[[ $msg == "trnsim: error: $W: params: kernel '"'"'matmul_mxfp8_backward'"'"': unknown parameter '"'"'Q'"'"' (known: M, K, N, "* ]]'
printf '%s\n' "{\"name\": \"w\", \"hardware\": \"trn3\", \"kernel\": \"matmul_fp4\", \"inputs\": {}}" >"$W"
msg=$("$TRNSIM" validate "$W" 2>&1)
check "unknown kernel: $msg" '[[ $msg == "trnsim: error: $W: kernel: unknown kernel '"'"'matmul_fp4'"'"' (known: matmul_bf16, matmul_mxfp8, "*")" ]]'
expect_error "bad lnc" "{$GOOD, \"inputs\": {$IN, $X}, \"lnc\": 3}" "$W: lnc: expected 1 or 2, found 3"
expect_error "unknown output" "{$GOOD, \"inputs\": {$IN, $X}, \"outputs\": [\"dx\"]}" \
  "$W: outputs[0]: kernel 'matmul_mxfp8_backward' has no output 'dx' (outputs: input_grad, weight_grad)"
expect_error "bad --set" "{$GOOD, \"inputs\": {$IN, $X}}" \
  "--set params: expected path=value, e.g. dma.engine_bandwidth_GBps=30" --set params
# (run reads a file that is not JSON as a program and reports it through the program loader)
printf '%s\n' "{\"name\": " >"$W"
msg=$("$TRNSIM" validate "$W" 2>&1)
check "not JSON: $msg" '[[ $msg == "trnsim: error: $W: not valid JSON: parse error at line 2, column 1: "* ]]'

# .npy inputs: shape and dtype checked against the kernel input.
cp "$D/inputs/output_grad.npy" "$T/dy512.npy"
expect_error ".npy shape mismatch" "{$GOOD, \"inputs\": {\"output_grad\": {\"npy\": \"dy512.npy\"}, $X,
  \"weights\": {\"generator\": \"normal\", \"seed\": 2}}}" \
  "$W: inputs.output_grad.npy: $T/dy512.npy: shape (512, 512) does not match kernel input 'output_grad' bfloat16 [512, 1024]" \
  --set params.N=1024
"$TRNSIM" quantize "$D/input_grad.npy" --format e4m3 --rule trn3 --axis row --data "$T/u8.npy" --scales "$T/s.npy" >/dev/null
expect_error ".npy dtype mismatch" "{$GOOD, \"inputs\": {\"output_grad\": {\"npy\": \"u8.npy\"}, $X,
  \"weights\": {\"generator\": \"normal\", \"seed\": 2}}}" \
  "$W: inputs.output_grad.npy: $T/u8.npy: dtype uint8 does not fit kernel input 'output_grad' bfloat16 [512, 512] (expected float32, float64 or uint16 (raw bfloat16 bits))"
expect_error ".npy missing" "{$GOOD, \"inputs\": {\"output_grad\": {\"npy\": \"nope.npy\"}, $X,
  \"weights\": {\"generator\": \"normal\", \"seed\": 2}}}" \
  "$W: inputs.output_grad.npy: $T/nope.npy: cannot open: No such file or directory"
# A valid .npy input (the dumped BF16 bits) reproduces the generated run bit for bit.
printf '%s\n' "{$GOOD, \"params\": {\"M\": 512, \"K\": 512, \"N\": 512, \"run_with_lnc2\": false, \"output_dtype\": \"float32\"},
  \"inputs\": {\"output_grad\": {\"npy\": \"dy512.npy\"}, \"weights\": {\"npy\": \"$D/inputs/weights.npy\"},
  \"input_activation\": {\"npy\": \"$D/inputs/input_activation.npy\"}}}" | sed 's/"params": {"M": 512, "K": 512, "N": 512, "run_with_lnc2": false},//' >"$W"
"$TRNSIM" run "$W" --out "$T/fromnpy" >/dev/null 2>&1
rc=$?
check "npy inputs run (exit $rc)" '[[ $rc == 0 ]] && cmp -s "$T/fromnpy/input_grad.npy" "$D/input_grad.npy" && cmp -s "$T/fromnpy/weight_grad.npy" "$D/weight_grad.npy"'

# A timing-only run into the directory of an earlier run removes that run's outputs (they would not match).
"$TRNSIM" run "$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json" --out "$T/stale" >/dev/null 2>&1
"$TRNSIM" run "$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json" --out "$T/stale" --no-numerics \
  >"$T/stdout" 2>&1
rc=$?
check "no stale outputs after --no-numerics (exit $rc)" \
  '[[ $rc == 0 && -f $T/stale/stats.json && ! -e $T/stale/input_grad.npy && ! -e $T/stale/weight_grad.npy ]]'

# Repeating a run from its --dump-inputs into the same --out: the dumped inputs it reads are kept, and so is a
# listed output the user changed since (the run removes only what the earlier run wrote and it does not).
"$TRNSIM" run "$SMALL" --out "$T/rep" --dump-inputs >/dev/null 2>&1
printf '%s\n' "{\"name\": \"rep\", \"kernel\": \"matmul_mxfp8_backward\", \"hardware\": \"trn3\",
  \"params\": {\"M\": 512, \"K\": 512, \"N\": 512, \"run_with_lnc2\": false, \"output_dtype\": \"float32\"},
  \"inputs\": {\"output_grad\": {\"npy\": \"rep/inputs/output_grad.npy\"}, \"weights\": {\"npy\": \"rep/inputs/weights.npy\"},
  \"input_activation\": {\"npy\": \"rep/inputs/input_activation.npy\"}}}" >"$T/rep.json"
printf 'X' | dd of="$T/rep/weight_grad.npy" bs=1 seek=200 conv=notrunc status=none  # changed in place
"$TRNSIM" run "$T/rep.json" --out "$T/rep" --set 'outputs=["input_grad"]' >"$T/stdout" 2>&1
rc=$?
check "rerun from --dump-inputs keeps the inputs it read (exit $rc: $(cat "$T/stdout" | tail -n 3))" \
  '[[ $rc == 0 && -f $T/rep/inputs/output_grad.npy && -f $T/rep/inputs/weights.npy && -f $T/rep/inputs/input_activation.npy ]]'
check "a listed output the user changed since is kept" '[[ -f $T/rep/weight_grad.npy ]]'
"$TRNSIM" run "$T/rep.json" --out "$T/rep2" --trace "$T/rep.json" >"$T/stdout" 2>"$T/stderr"
rc=$?
check "--trace onto the workload file is refused (exit $rc: $(cat "$T/stderr"))" \
  '[[ $rc == 1 && $(cat "$T/stderr") == *"--trace and the workload file are the same file"* && $(head -c 9 "$T/rep.json") == "{\"name\": " ]]'

# A .npy path given with --set is relative to the current directory; one in the file, to the file's folder.
mkdir -p "$T/sub"
cp "$T/rep.json" "$T/sub/rep.json"
(cd "$T" && "$TRNSIM" run sub/rep.json --out "$T/cwd" --set inputs.output_grad=rep/inputs/output_grad.npy \
  --set 'inputs.weights={"npy": "rep/inputs/weights.npy"}' \
  --set inputs.input_activation=rep/inputs/input_activation.npy) >"$T/stdout" 2>&1
rc=$?
check "--set .npy paths from the current directory (exit $rc: $(tail -n 1 "$T/stdout"))" \
  '[[ $rc == 0 ]] && cmp -s "$T/cwd/input_grad.npy" "$T/rep/input_grad.npy"'
"$TRNSIM" run "$T/sub/rep.json" --out "$T/cwd2" >"$T/stdout" 2>&1
rc=$?
check "a .npy path in the file is relative to its folder (exit $rc)" \
  '[[ $rc == 1 && $(cat "$T/stdout") == *"$T/sub/rep/inputs/input_activation.npy: cannot open"* ]]'
# Reached through a symlink to the file, its folder is the link's (docs/workloads.md): $T/rep/inputs, which
# the target's folder $T/sub lacks.
ln -s sub/rep.json "$T/via_link.json"
"$TRNSIM" run "$T/via_link.json" --out "$T/lnk" >"$T/stdout" 2>&1
rc=$?
check "a .npy path in a linked workload is relative to the link's folder (exit $rc: $(tail -n 1 "$T/stdout"))" \
  '[[ $rc == 0 ]] && cmp -s "$T/lnk/input_grad.npy" "$T/rep/input_grad.npy"'

(cd "$T" && "$TRNSIM" run sub/rep.json --out "$T/cwd3" --set 'inputs={"output_grad": "rep/inputs/output_grad.npy",
  "weights": {"npy": "rep/inputs/weights.npy"}, "input_activation": "rep/inputs/input_activation.npy"}') \
  >"$T/stdout" 2>&1
rc=$?
check "--set inputs={...} paths from the current directory (exit $rc: $(tail -n 1 "$T/stdout"))" \
  '[[ $rc == 0 ]] && cmp -s "$T/cwd3/input_grad.npy" "$T/rep/input_grad.npy"'
# A hardware config the run reads is never written over.
cp "$SRC/configs/hw/trn3.json" "$T/hw.json"
(cd "$T" && "$TRNSIM" run "$SMALL" --out "$T/hwo" --set 'hardware={"name": "hw.json"}' --trace hw.json) \
  >"$T/stdout" 2>&1
rc=$?
check "--trace onto the hardware config is refused (exit $rc: $(tail -n 1 "$T/stdout"))" \
  '[[ $rc == 1 && $(cat "$T/stdout") == *"--trace and the hardware config are the same file"* ]] && cmp -s "$T/hw.json" "$SRC/configs/hw/trn3.json"'
# A positive std that is 0 in FP32, where the values are computed.
"$TRNSIM" validate "$SMALL" --set inputs.weights.std=1e-46 >"$T/stdout" 2>&1
rc=$?
check "std 0 in FP32 (exit $rc)" '[[ $rc == 1 && $(cat "$T/stdout") == *"inputs.weights.std: must be > 0 in FP32"* ]]'

# A directory given as the config is bad input (exit 1), not an internal error.
mkdir -p "$T/dir.json"
for cmd in run validate; do
  "$TRNSIM" "$cmd" "$T/dir.json" >"$T/stdout" 2>"$T/stderr"
  rc=$?
  check "directory as config ($cmd, exit $rc)" \
    '[[ $rc == 1 && $(cat "$T/stderr") == "trnsim: error: $T/dir.json: is a directory, expected a JSON file" ]]'
done

# Shapes the kernel schema allows but no HBM stack holds are refused at once, without building a program.
"$TRNSIM" validate "$SRC/configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json" --set params.M=1048576 \
  --set params.K=1048576 --set params.N=1048576 >"$T/stdout" 2>"$T/stderr"
rc=$?
check "huge shapes (exit $rc)" '[[ $rc == 1 && $(cat "$T/stderr") == *"the HBM stack of the LNC2 pair holds 36 GiB (hbm.capacity_GiB)" ]]'

finish
