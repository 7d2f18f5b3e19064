#!/usr/bin/env bash
# Hostile input to every command ends with a clear, short message naming the file and JSON path, exit 1 and
# nothing written: usage bad_input.sh <trnsim-binary> <source-dir>.
# Each case is one of issue 10's findings (or one the fuzz targets in tests/fuzz found): deep nesting, huge
# values echoed in messages, names `run` could not use, duplicate keys and outputs, the core-count conflict,
# `--set hardware=` relative to the current directory, the HBM capacity of programs, numbers beyond a double,
# bytes that are not UTF-8, special files as the trace, and NaN inputs from a .npy.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json

GOOD='"name": "w", "hardware": "trn3", "kernel": "matmul_mxfp8_backward"'
PARAMS='"params": {"M": 512, "K": 512, "N": 512, "run_with_lnc2": false}'
INPUTS='"inputs": {"output_grad": {"generator": "normal", "seed": 1}, "weights": {"generator": "normal", "seed": 2},
  "input_activation": {"generator": "normal", "seed": 3}}'
W=$T/w.json

# expect FILE_TEXT WANT [args...]: validate and run both exit 1 with exactly "trnsim: error: WANT" and leave no
# output directory. WANT may end in '*' to match a prefix.
expect() {
  local text=$1 want=$2
  shift 2
  printf '%s\n' "$text" >"$W"
  for cmd in validate run; do
    local extra=()
    [[ $cmd == run ]] && extra=(--no-numerics --out "$T/out")
    rm -rf "$T/out"
    local msg rc
    msg=$(timeout 60 "$TRNSIM" "$cmd" "$W" "$@" "${extra[@]}" 2>&1)
    rc=$?
    # Only '*' in WANT is a wildcard: [, ], ? and \ match themselves.
    local pat
    pat=$(printf '%s' "$want" | sed 's/[][?\\]/\\&/g')
    # shellcheck disable=SC2053
    if [[ $rc == 1 && $msg == "trnsim: error: "$pat && ! -e $T/out ]]; then ok; else
      bad "$cmd: rc $rc, ${#msg} bytes: ${msg:0:400}
   expected: trnsim: error: $want"
    fi
  done
}
# deep N: N opening brackets (an unterminated value nested N deep)
deep() { head -c "$1" /dev/zero | tr '\0' '['; }
# million TEXT: a JSON array of 1,000,000 copies of TEXT
million() { printf '['; yes "$1" | head -n 999999 | tr '\n' ','; printf '%s]' "$1"; }
# mega: a string of 1 MiB
mega() { head -c 1048576 /dev/zero | tr '\0' 'z'; }
Z56=$(printf 'z%.0s' $(seq 56))
Z60=$(printf 'z%.0s' $(seq 60))

# 1. Values nested 100,000 (and 10,000) deep: refused by the reader, before anything prints or walks them.
expect "{\"description\": $(deep 100000)" "$W: description: nested deeper than 64 levels"
expect "{\"name\": \"w\", \"params\": {\"M\": $(deep 100000)" "$W: params.M: nested deeper than 64 levels"
expect "{\"name\": \"w\", \"params\": {\"M\": $(deep 10000)" "$W: params.M: nested deeper than 64 levels"

# 2. Huge values: the message holds an excerpt, never the value (it once was a 2 MB line).
expect "{$GOOD, \"params\": $(million 7), $INPUTS}" \
  "$W: params: expected an object of kernel parameters, found an array of 1000000 elements"
expect "{$GOOD, \"params\": {\"M\": $(million 7)}, $INPUTS}" \
  "$W: params: kernel 'matmul_mxfp8_backward': parameter 'M': expected an integer in [1, 1048576], got an array of 1000000 elements"
expect "{$GOOD, $PARAMS, $INPUTS, \"description\": $(million '"d"')}" \
  "$W: description: expected a string, found an array of 1000000 elements"
expect "{\"name\": \"w\", \"hardware\": \"trn3\", \"kernel\": \"$(mega)\", $PARAMS, $INPUTS}" \
  "$W: kernel: unknown kernel '$Z60...' (known: *"
expect "{$GOOD, $PARAMS, \"inputs\": {\"weights\": {\"generator\": \"$(mega)\", \"seed\": 1}}}" \
  "$W: inputs.weights.generator: unknown generator '$Z60...' (expected normal, *"
expect "{$GOOD, $PARAMS, \"inputs\": {\"weights\": {\"npy\": \"$(mega)\"}}}" \
  "$W: inputs.weights: '$Z60...' is not a usable .npy path (1048576 bytes)"
expect "{$GOOD, $PARAMS, $INPUTS, \"outputs\": [\"$(mega)\"]}" \
  "$W: outputs[0]: kernel 'matmul_mxfp8_backward' has no output '$Z60...' (outputs: input_grad, weight_grad)"
expect "{$GOOD, $PARAMS, $INPUTS, \"$(mega)\": 1}" \
  "$W: (top level): key '$Z60...' has 1048576 bytes (keys have at most 256)"
expect "{\"name\": \"w\", \"hardware\": \"$(mega)\", \"kernel\": \"matmul_mxfp8_backward\", $PARAMS, $INPUTS}" \
  "$W: hardware: unknown hardware config '$Z60...' (known: trn1, trn2, trn3, or a .json path)"
expect "{\"name\": \"w\", \"hardware\": {\"name\": \"trn3\", \"overrides\": {\"pe.clock_GHz\": \"$(mega)\"}},
  \"kernel\": \"matmul_mxfp8_backward\", $PARAMS, $INPUTS}" \
  "$W: hardware: */configs/hw/trn3.json: pe.clock_GHz.value: expected a number in [0.01, 100], found \"$Z56... (from the override pe.clock_GHz=\"$Z56...)"
# The JSON parser's own message quotes the token it stopped in: cut too.
printf '{"name": "%s\n"}' "$(mega)" >"$W"
msg=$("$TRNSIM" validate "$W" 2>&1)
rc=$?
check "parse error in a huge string: ${#msg} bytes" \
  '[[ $rc == 1 && ${#msg} -lt 400 && $msg == "trnsim: error: $W: not valid JSON: parse error at line 2, column 0: "*"last read: '"'"'\"zzz"*"z...'"'"'" ]]'

N_RULE="is not usable as a directory name (1-200 bytes of printable characters, no '/', not starting with '.': the default output folder is out/<name>, and names starting with '.' are trnsim's hidden records and temporaries)"
# 3. Names `run` could not use, found by validate (they once passed validate and failed run with exit 2).
expect "{\"name\": \"$(printf 'n%.0s' $(seq 300))\", \"hardware\": \"trn3\", \"kernel\": \"matmul_mxfp8_backward\", $PARAMS, $INPUTS}" \
  "$W: name: \"$(printf 'n%.0s' $(seq 56))... is not usable as a directory name (1-200 bytes of printable characters, no '/', not starting with '.': the default output folder is out/<name>, and names starting with '.' are trnsim's hidden records and temporaries)"
expect "{\"name\": \"a\\u0000b\", \"hardware\": \"trn3\", \"kernel\": \"matmul_mxfp8_backward\", $PARAMS, $INPUTS}" \
  "$W: name: \"a\\u0000b\" is not usable as a directory name (1-200 bytes of printable characters, no '/', not starting with '.': the default output folder is out/<name>, and names starting with '.' are trnsim's hidden records and temporaries)"
expect "{\"name\": \"a/b\", \"hardware\": \"trn3\", \"kernel\": \"matmul_mxfp8_backward\", $PARAMS, $INPUTS}" \
  "$W: name: \"a/b\" is not usable as a directory name (1-200 bytes of printable characters, no '/', not starting with '.': the default output folder is out/<name>, and names starting with '.' are trnsim's hidden records and temporaries)"
# A name starting with '.' would make out/.trnsim-files (a folder under the name of trnsim's record) or another
# hidden name there: refused at the name (before: accepted, and `run` made the folder).
for n in .trnsim-files .trnsim-journal .hidden . ..; do
  expect "{\"name\": \"$n\", \"hardware\": \"trn3\", \"kernel\": \"matmul_mxfp8_backward\", $PARAMS, $INPUTS}" \
    "$W: name: \"$n\" $N_RULE"
done
msg=$(cd "$T" && "$TRNSIM" run "$SMALL" --no-numerics --set name=.trnsim-files 2>&1)
check "run with name .trnsim-files: refused at the name, no out/.trnsim-files (exit $?): $msg" \
  '[[ $? == 1 && $msg == *"name: \".trnsim-files\" is not usable as a directory name"* && ! -e $T/out/.trnsim-files ]]'
echo '{"name": ".p", "stages": ["x.json"]}' >"$T/pl.json"
msg=$("$TRNSIM" run "$T/pl.json" 2>&1)
check "a pipeline named .p: refused at its name (exit $?): $msg" \
  '[[ $? == 1 && $msg == *"$T/pl.json: name: \".p\" $N_RULE" ]]'

# 4. Duplicates: an output listed twice, a key given twice (JSON allows it; the second would silently win),
# a key with a NUL in it (it would cut the message).
expect "{$GOOD, $PARAMS, $INPUTS, \"outputs\": [\"input_grad\", \"input_grad\"]}" \
  "$W: outputs[1]: 'input_grad' is listed twice"
expect "{$GOOD, $PARAMS, $INPUTS, \"numerics\": true, \"numerics\": false}" \
  "$W: numerics: key appears twice in one object"
expect "{$GOOD, \"params\": {\"M\": 512, \"K\": 512, \"M\": 1024}, $INPUTS}" "$W: params.M: key appears twice in one object"
expect "{$GOOD, $PARAMS, $INPUTS, \"a\\u0000b\": 1}" "$W: (top level): key 'a\\x00b' holds a control character"

# 5. The core count: "lnc" and the kernel's core parameter must agree.
expect "{$GOOD, \"params\": {\"M\": 512, \"K\": 512, \"N\": 512, \"run_with_lnc2\": true}, \"lnc\": 1, $INPUTS}" \
  "$W: lnc: 1 conflicts with kernel parameter 'run_with_lnc2' = true, which runs the kernel on 2 cores; remove \"lnc\" or change 'run_with_lnc2'"
# LNC2 on Trn1 (tester23v F3): Neuron's compiler refuses it (NCC_EARG001); it ran as a two-core Trn1. The rule is
# sim/config/lnc.h, named at the key that asked for two cores: "lnc", or the kernel's core parameter.
T1WHY="LNC 2 on trn1: a trn1 logical NeuronCore is 1 physical core (LNC2 pairs are Trainium2 and later; Neuron's compiler refuses lnc=2 on trn1: NCC_EARG001)"
VADD='"name": "w", "hardware": "trn1", "kernel": "cs149_vector_add", "params": {"n": 25600, "variant": "stream", "free_dim": 200},
  "inputs": {"a": {"generator": "normal", "seed": 1}, "b": {"generator": "normal", "seed": 2}}'
expect "{$VADD, \"lnc\": 2}" "$W: lnc: $T1WHY: set \"lnc\": 1"
expect "{\"name\": \"w\", \"hardware\": \"trn1\", \"kernel\": \"matmul_mxfp8_backward\", \"params\": {\"M\": 512, \"K\": 512, \"N\": 512, \"run_with_lnc2\": true}, $INPUTS}" \
  "$W: params.run_with_lnc2: $T1WHY: run the kernel with 'run_with_lnc2' off"
# (an NKI kernel needs trnsim's Python layer: the sanitizer job builds without it)
if [[ $("$TRNSIM" validate "$SRC/examples/nki/rmsnorm.json" 2>&1) != *"built without Python support"* ]]; then
  expect "{\"name\": \"w\", \"hardware\": \"trn1\", \"lnc\": 2, \"kernel\": {\"nki\": \"$SRC/examples/nki/softmax.py\", \"function\": \"softmax_kernel\"}, \"inputs\": {\"x\": {\"generator\": \"normal\", \"seed\": 1, \"shape\": [128, 64], \"dtype\": \"float32\"}}}" \
    "$W: lnc: $T1WHY: set \"lnc\": 1"
fi
# Without "lnc", a C++ kernel runs on the LNC2 pair where the hardware has one: on trn1, one core.
printf '%s\n' "{$VADD}" >"$W"
if "$TRNSIM" run "$W" --no-numerics --out "$T/out1" >"$T/log1" 2>&1 && grep -q '"cores": 1' "$T/out1/stats.json"; then ok; else
  bad "trn1 without lnc: $(head -c 400 "$T/log1")"
fi

# "max_instructions": a positive integer; a build past it stops with the kernel's line, not a crash.
expect "{$GOOD, $PARAMS, $INPUTS, \"max_instructions\": 0}" "$W: max_instructions: expected a positive integer, found 0"
expect "{$GOOD, $PARAMS, $INPUTS, \"max_instructions\": \"many\"}" \
  "$W: max_instructions: expected a positive integer, found \"many\""
expect "{$GOOD, $PARAMS, $INPUTS, \"max_instructions\": 5}" "$W: params: *: the kernel emits more than 5 instructions*"

# 6. Numbers beyond a double and bytes that are not UTF-8 are bad input (exit 1), not internal errors (exit 2).
expect "{$GOOD, \"params\": {\"M\": 1e400}, $INPUTS}" "$W: not valid JSON: number overflow parsing '1e400'"
printf '{%s, %s, %s}\n' "$GOOD" "$PARAMS" "$INPUTS" >"$W"
msg=$("$TRNSIM" validate "$W" --set params.output_dtype=$'\xff' 2>&1)
rc=$?
want="trnsim: error: --set params.output_dtype: the value '"$'\xff'"' is not valid UTF-8"
check "--set with a value that is not UTF-8 (exit $rc): $msg" '[[ $rc == 1 && $msg == "$want" ]]'
msg=$("$TRNSIM" validate "$W" --set "params.M=$(deep 100)" 2>&1)
rc=$?
check "--set with a deep value (exit $rc): ${msg:0:200}" '[[ $rc == 1 && $msg == *": nested deeper than 64 levels" ]]'

# 7. --set hardware=PATH is relative to the current directory, not to the workload's folder.
mkdir -p "$T/hw"
sed 's/"name": "trn3"/"name": "my_trn3"/' "$SRC/configs/hw/trn3.json" >"$T/hw/mine.json"
msg=$("$TRNSIM" validate "$SMALL" --set hardware=hw/mine.json 2>&1)
rc=$?
check "--set hardware=hw/mine.json from the current directory: $msg" '[[ $rc == 0 && $msg == *"on my_trn3, 1 core"* ]]'
msg=$("$TRNSIM" validate "$SMALL" --set hardware.name=hw/mine.json 2>&1)
rc=$?
check "--set hardware.name=hw/mine.json: $msg" '[[ $rc == 0 && $msg == *"on my_trn3, 1 core"* ]]'

# 8. Files: a missing workload, a directory; a program whose tensors do not fit the HBM stack.
msg=$("$TRNSIM" run "$T/missing.json" 2>&1)
rc=$?
check "missing workload: $msg" '[[ $rc == 1 && $msg == "trnsim: error: $T/missing.json: no such file" ]]'
msg=$("$TRNSIM" validate "$T/missing.json" 2>&1)
rc=$?
check "validate a missing workload: $msg" '[[ $rc == 1 && $msg == "trnsim: error: $T/missing.json: no such file" ]]'
mkdir -p "$T/dir.json"
for cmd in run validate stats; do
  msg=$("$TRNSIM" $cmd "$T/dir.json" 2>&1)
  rc=$?
  check "$cmd on a directory: $msg" '[[ $rc == 1 && $msg == "trnsim: error: $T/dir.json: is a directory, expected a JSON file" ]]'
done
cat >"$T/big.json" <<'EOF'
{"generation": "trn2", "num_cores": 1,
 "tensors": [{"name": "x", "dtype": "float32", "shape": [1048576, 1048576]}], "cores": [{}]}
EOF
msg=$("$TRNSIM" run "$T/big.json" 2>&1)
rc=$?
check "program beyond the HBM stack (one core: not the LNC2 pair): $msg" \
  '[[ $rc == 1 && $msg == "trnsim: error: $T/big.json: the program'"'"'s HBM tensors need 4096 GiB; the HBM stack of the core (num_cores 1) holds 24 GiB (hbm.capacity_GiB)" ]]'
printf '{"generation": "trn2", "num_cores": 1, "tensors": [{"name": "%s", "dtype": "float32", "shape": [1]}], "cores": [{}]}' \
  "$(mega)" >"$T/name.json"
msg=$("$TRNSIM" run "$T/name.json" 2>&1)
rc=$?
check "program with a huge tensor name: ${msg:0:300}" \
  '[[ $rc == 1 && $msg == "trnsim: error: $T/name.json: tensors[0].name: expected a name of 1-200 bytes of printable characters, found '"'"'$Z60...'"'"'" ]]'
printf '{"generation": "trn2", "num_cores": 1, "cores": [{"SP": [{"op": "%s"}]}]}' "$(mega)" >"$T/op.json"
msg=$("$TRNSIM" run "$T/op.json" 2>&1)
rc=$?
check "program with a huge opcode: ${msg:0:300}" \
  '[[ $rc == 1 && $msg == "trnsim: error: $T/op.json: cores[0].SP[0].op: unknown opcode '"'"'$Z60...'"'"'" ]]'
printf '{"total_time_ns": 1e999, "engines": {}}' >"$T/stats.json"
msg=$("$TRNSIM" stats "$T/stats.json" 2>&1)
rc=$?
check "stats.json with 1e999: $msg" \
  '[[ $rc == 1 && $msg == "trnsim: error: $T/stats.json: not valid JSON: number overflow parsing '"'"'1e999'"'"'" ]]'

# A stats.json whose source-line and phase rows lack their times (found by fuzz_stats): "-" in those cells,
# never "nan".
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/st" >/dev/null 2>&1
sed 's/"busy_ns"/"busytes"/' "$T/st/stats.json" >"$T/st/damaged.json"
msg=$("$TRNSIM" stats "$T/st/damaged.json" 2>&1)
rc=$?
check "stats.json without row times (exit $rc): $(grep -m1 -i nan <<<"$msg")" \
  '[[ $rc == 0 && $msg != *nan* ]] && grep -qE "^  [a-z0-9_/.]+:[0-9]+ +[A-Z]+ +[0-9]+ +- +[0-9.]+% +[0-9.]+$" <<<"$msg"'

# Without "cores" the table cannot say how many cores ran: an error naming the key (found by fuzz_stats).
grep -v '^  "cores":' "$T/st/stats.json" >"$T/st/nocores.json"
msg=$("$TRNSIM" stats "$T/st/nocores.json" 2>&1)
rc=$?
check "stats.json without cores (exit $rc): $msg" \
  '[[ $rc == 1 && $msg == "trnsim: error: $T/st/nocores.json: cores: missing or not a finite number (a damaged stats.json?)" ]]'

# A numerics entry of an unknown check kind, without its values, prints "-", not "nan" (found by fuzz_stats).
sed 's/^  "numerics": null,$/  "numerics": {"input_grad": {"check": "to#erance", "pass": true}},/' "$T/st/stats.json" \
  >"$T/st/badcheck.json"
msg=$("$TRNSIM" stats "$T/st/badcheck.json" 2>&1)
rc=$?
check "stats.json with an unknown check kind (exit $rc): $(grep -m1 -i nan <<<"$msg")" \
  '[[ $rc == 0 && $msg != *nan* ]] && grep -qE "^ +input_grad +- +- +- +PASS$" <<<"$msg"'

# Running out of host memory names the file (it once said only "out of memory"): a sparse .npy of 1 GiB of
# float32 to quantize with 512 MiB of address space. (Skipped under AddressSanitizer, which needs unlimited
# address space and reports a failed huge allocation itself.)
if grep -q __asan_init "$TRNSIM"; then
  ok
else
  {
    dict="{'descr': '<f4', 'fortran_order': False, 'shape': (16384, 16384), }"
    pad=$(((64 - (10 + ${#dict} + 1) % 64) % 64))
    hlen=$((${#dict} + pad + 1))
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
    printf '%s%*s\n' "$dict" "$pad" ''
  } >"$T/huge.npy"
  truncate -s $((128 + 4 * 16384 * 16384)) "$T/huge.npy"
  msg=$(ulimit -v 524288; "$TRNSIM" quantize "$T/huge.npy" --format e4m3 --rule te --axis row --data "$T/d.npy" \
    --scales "$T/s.npy" 2>&1)
    rc=$?
  check "out of memory names the file (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == "trnsim: error: $T/huge.npy: out of memory (the host cannot hold what this input asks for)" ]]'
fi

# 9. A trace through a symlink is refused before the run (trnsim writes through no link: the target would be
# replaced); the link and its target stay as they were. (/dev/null and /dev/full as outputs: outputs.sh.)
cat >"$T/dead.json" <<'EOF'
{"generation": "trn2", "num_cores": 1, "cores": [{"SP": [{"op": "memset", "value": 0, "wait": [[3, 1]],
   "dst": {"mem": "sbuf", "partition": [0, 1], "dtype": "float32", "pattern": [[1, 1]]}}]}]}
EOF
echo "my trace" >"$T/target.pftrace"
ln -s "$T/target.pftrace" "$T/link.pftrace"
"$TRNSIM" run "$T/dead.json" --trace "$T/link.pftrace" >"$T/log" 2>&1
rc=$?
check "a trace symlink: refused (exit $rc): $(cat "$T/log")" \
  '[[ $rc == 1 && -L $T/link.pftrace && $(cat "$T/target.pftrace") == "my trace" ]] && grep -q "cannot write: $T/link.pftrace is a symlink (to $T/target.pftrace)" "$T/log" && ! grep -q "simulated time" "$T/log"'
# A failed run still keeps its trace, marked incomplete.
"$TRNSIM" run "$T/dead.json" --trace "$T/dead.pftrace" >"$T/log" 2>&1
rc=$?
check "failed run: the trace is kept, marked incomplete (exit $rc)" \
  '[[ $rc == 1 && -s $T/dead.pftrace ]] && grep -q "trace incomplete: the run failed" "$T/dead.pftrace"'

# 10. NaN in a .npy input: the run goes on, writes its outputs and stats, and notes the input.
N=$((512 * 512))
{
  dict="{'descr': '<u2', 'fortran_order': False, 'shape': (512, 512), }"
  pad=$(((64 - (10 + ${#dict} + 1) % 64) % 64))
  hlen=$((${#dict} + pad + 1))
  printf '\x93NUMPY\x01\x00'
  printf "\\x$(printf %02x $((hlen & 255)))\\x$(printf %02x $((hlen >> 8)))"
  printf '%s%*s\n' "$dict" "$pad" ''
  head -c $((2 * N)) /dev/zero | tr '\0' '\100'  # 0x4040 = 3.0 in BF16
} >"$T/dy.npy"
printf '\xc0\x7f\xc0\x7f' | dd of="$T/dy.npy" bs=1 seek=128 conv=notrunc status=none  # two NaN (0x7FC0)
printf '{%s, %s, "inputs": {"output_grad": {"npy": "dy.npy"}, "weights": {"generator": "normal", "seed": 2},
  "input_activation": {"generator": "normal", "seed": 3}}}' "$GOOD" "$PARAMS" >"$W"
"$TRNSIM" run "$W" --out "$T/nan" >"$T/log" 2>&1
rc=$?
check "NaN .npy input: exit $rc, outputs written" '[[ $rc == 0 || $rc == 3 ]] && [[ -f $T/nan/input_grad.npy && -f $T/nan/stats.json ]]'
check "NaN .npy input: the note" 'grep -q "note: inputs.output_grad: 2 of 262144 values are NaN or Inf$" "$T/log"'

# A run this machine cannot hold is refused before any work, with the figures, and creates nothing.
# matmul_mxfp8_bwd_512 on Trn3: three BF16 [512, 512] inputs (1.5 MiB) on the host; on the machine those and
# the two BF16 [512, 512] outputs (2.5 MiB), and two cores' SBUF and PSUM, 2 x 128 x (256 + 16) KiB = 68 MiB:
# 76.5 MB; and the larger of the two checks' references: the FP32 and FP64 copies of two [512, 512] operands
# (12 bytes each), the output's FP32 values and one block of 256 FP64 reference rows of 512:
# 6.29 + 1.05 + 1.05 = 8.39 MB; and the FP64 reference rows both checks' prepare steps keep from the
# simulation until the checks, exact and MX of all 512 x 512 elements: 2 x 16 x 262144 = 8.39 MB; the
# simulation's records of its 113 instructions (256 B each, 0.03 MB) and the stacks of the 4 computing threads
# (4 x 8 MiB = 33.55 MB). 126.9 MB in all.
TRNSIM_HOST_MEMORY_BYTES=1000000 "$TRNSIM" run "$SMALL" --out "$T/mem" >"$T/log" 2>&1
rc=$?
check "too little host memory: exit 1, the figures, nothing created (exit $rc: $(cat "$T/log"))" \
  '[[ $rc == 1 && $(cat "$T/log") == "trnsim: error: $SMALL: this run needs at least 126.9 MB of host memory (the host'"'"'s copy of the inputs, the simulated machine'"'"'s HBM tensors, SBUF and PSUM, and the references'"'"' copies of their operands), and 1.0 MB is available: run with --no-numerics (timing only), or on a machine with more memory" && ! -e $T/mem ]]'
TRNSIM_HOST_MEMORY_BYTES=1000000 "$TRNSIM" run "$SMALL" --out "$T/mem" --no-numerics >"$T/log" 2>&1
rc=$?
check "too little host memory, --no-numerics: runs (exit $rc)" '[[ $rc == 0 && -f $T/mem/stats.json ]]'

TRNSIM_HOST_MEMORY_BYTES=12abc "$TRNSIM" run "$SMALL" --out "$T/mem2" >"$T/log" 2>&1
rc=$?
check "TRNSIM_HOST_MEMORY_BYTES not a number: exit 1, named (exit $rc: $(cat "$T/log"))" \
  '[[ $rc == 1 && $(cat "$T/log") == "trnsim: error: environment variable TRNSIM_HOST_MEMORY_BYTES: '"'"'12abc'"'"' is not a byte count (digits only, at most 19)" && ! -e $T/mem2 ]]'
# Under an address-space limit nothing hangs (OpenBLAS's workers retry a failed mmap forever): --help works,
# a small run with numerics runs, a smaller limit is refused with the figures. Not in the sanitizer job: ASan
# itself needs terabytes of address space.
if [[ -z ${ASAN_OPTIONS:-} ]]; then
  (ulimit -v 150000; timeout 60 "$TRNSIM" --help >/dev/null 2>&1)
  rc=$?
  check "--help under ulimit -v 150000 (exit $rc)" '[[ $rc == 0 ]]'
  (ulimit -v 600000; timeout 60 "$TRNSIM" run "$SMALL" --out "$T/lim" >/dev/null 2>&1)
  rc=$?
  check "a small run under ulimit -v 600000 (exit $rc)" '[[ $rc == 0 && -f $T/lim/input_grad.npy ]]'
  (ulimit -v 120000; timeout 60 "$TRNSIM" run "$SMALL" --out "$T/lim2" >"$T/log" 2>&1)
  rc=$?
  check "the same under ulimit -v 120000: refused (exit $rc: $(cat "$T/log"))" \
    '[[ $rc == 1 && $(cat "$T/log") == *"this run needs at least 126.9 MB of host memory"* && ! -e $T/lim2 ]]'
fi


# A result printed to stdout that could not be written (a full disk, ulimit -f) is an error; a pipe whose
# reader left is not.
if [[ -w /dev/full ]]; then
  msg=$("$TRNSIM" list 2>&1 >/dev/full)
  check "list into /dev/full: $msg" '[[ $? == 1 && $msg == "trnsim: error: cannot write to stdout: No space left on device" ]]'
fi
msg=$( (ulimit -f 1; "$TRNSIM" list >"$T/list.txt") 2>&1)
check "list past ulimit -f: $msg" '[[ $? == 1 && $msg == *"cannot write to stdout: File too large"* ]]'
"$TRNSIM" list 2>"$T/pipe.err" | head -1 >/dev/null
rc=${PIPESTATUS[0]}
check "list into a pipe closed early: exit $rc, $(cat "$T/pipe.err")" '[[ $rc == 0 && ! -s $T/pipe.err ]]'

# TRNSIM_TEST_KILL_AT_WRITE_STEP (the crash tests' switch) set to anything but a step number: refused by a
# command that writes (a run, before it simulates; quantize), with nothing written; a command that writes
# nothing (--help, list, validate) is not stopped by it.
for v in abc -1 0 ""; do
  msg=$(TRNSIM_TEST_KILL_AT_WRITE_STEP=$v "$TRNSIM" run "$SMALL" --no-numerics --out "$T/ks" 2>&1)
  check "TRNSIM_TEST_KILL_AT_WRITE_STEP='$v': refused: $msg" \
    '[[ $? == 1 && $msg == *"TRNSIM_TEST_KILL_AT_WRITE_STEP='"'"'$v'"'"': expected a whole number from 1"* && $msg != *"simulat"* && ! -e $T/ks ]]'
  msg=$(TRNSIM_TEST_KILL_AT_WRITE_STEP=$v "$TRNSIM" --help 2>&1)
  check "TRNSIM_TEST_KILL_AT_WRITE_STEP='$v': --help still works (exit $?): ${msg:0:200}" '[[ $? == 0 && $msg == *"Usage"* ]]'
  msg=$(TRNSIM_TEST_KILL_AT_WRITE_STEP=$v "$TRNSIM" validate "$SMALL" 2>&1)
  check "TRNSIM_TEST_KILL_AT_WRITE_STEP='$v': validate still works (exit $?): ${msg:0:200}" '[[ $? == 0 ]]'
done
if "$TRNSIM" run "$SMALL" --no-numerics --dump-inputs --out "$T/ksq" >/dev/null 2>&1; then
  msg=$(TRNSIM_TEST_KILL_AT_WRITE_STEP=x "$TRNSIM" quantize "$T/ksq/inputs/weights.npy" --format e4m3 --rule te --axis row \
    --data "$T/ksq_d.npy" --scales "$T/ksq_s.npy" 2>&1)
  check "TRNSIM_TEST_KILL_AT_WRITE_STEP='x' in quantize: refused, nothing written: $msg" \
    '[[ $? == 1 && $msg == *"TRNSIM_TEST_KILL_AT_WRITE_STEP='"'"'x'"'"': expected a whole number from 1"* && ! -e $T/ksq_d.npy && ! -e $T/ksq_s.npy ]]'
else
  bad "the run that dumps the quantize input"
fi

# TRNSIM_TEST_KILL_SIGNAL names the signal sent at that step: one the run handles (INT, TERM, HUP, ...: it then
# ends as that signal asks, exit 128+N, its message naming it), or KILL/STOP; anything else (a number, a
# name it does not handle) is refused like a bad step, before the simulation, nothing written (before: TERM,
# FOO and 15 all killed the run with SIGKILL, exit 137).
TRNSIM_TEST_KILL_SIGNAL=TERM TRNSIM_TEST_KILL_AT_WRITE_STEP=1 "$TRNSIM" run "$SMALL" --no-numerics --out "$T/kt" \
  >/dev/null 2>"$T/kt.err"
rc=$?
check "TRNSIM_TEST_KILL_SIGNAL=TERM: the run ends of SIGTERM (exit $rc: $(tail -1 "$T/kt.err"))" \
  '[[ $rc == 143 ]] && grep -q "interrupted (SIGTERM)" "$T/kt.err"'
for v in FOO 15 SEGV ""; do
  msg=$(TRNSIM_TEST_KILL_SIGNAL=$v TRNSIM_TEST_KILL_AT_WRITE_STEP=1 "$TRNSIM" run "$SMALL" --no-numerics --out "$T/kf" 2>&1)
  check "TRNSIM_TEST_KILL_SIGNAL='$v': refused: $msg" \
    '[[ $? == 1 && $msg == *"TRNSIM_TEST_KILL_SIGNAL='"'"'$v'"'"': expected one of"*"TERM"*"HUP"* && $msg != *"simulat"* && ! -e $T/kf ]]'
done

finish
