#!/usr/bin/env bash
# End-to-end test of the output policy: usage outputs.sh <trnsim-binary> <source-dir>.
# Special files are written through, never replaced; two outputs (or an output and an input) on one file are
# refused before simulating; a rerun into an earlier --out leaves exactly that run's files; an unwritable
# --out is found before the simulation; a trace into a new folder works and a failed run keeps its trace,
# marked incomplete; a damaged stats.json is an error, not a table of NaN.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json

# 1. Special files. /dev/null keeps being a device; /dev/full fails with a message and nothing is written; a
# symlink keeps pointing at its target, which gets the data.
"$TRNSIM" run "$SMALL" --out "$T/a" --dump-inputs >/dev/null 2>&1
IN=$T/a/inputs/output_grad.npy
"$TRNSIM" quantize "$IN" --format e4m3 --rule te --axis row --data /dev/null --scales "$T/s.npy" >/dev/null 2>&1
rc=$?
check "quantize --data /dev/null (exit $rc)" '[[ $rc == 0 && -c /dev/null && -f $T/s.npy ]]'
rm -f "$T/s.npy"
"$TRNSIM" quantize "$IN" --format e4m3 --rule te --axis row --data /dev/full --scales "$T/s.npy" >"$T/out" 2>&1
rc=$?
check "quantize --data /dev/full: exit 1, message, nothing written (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == "trnsim: error: /dev/full: cannot write: No space left on device" && ! -e $T/s.npy && -c /dev/full ]]'
echo "my array" >"$T/target.npy"
ln -s "$T/target.npy" "$T/link.npy"
for flag in --data --scales; do
  if [[ $flag == --data ]]; then args=(--data "$T/link.npy" --scales "$T/s.npy"); else args=(--data "$T/d.npy" --scales "$T/link.npy"); fi
  msg=$("$TRNSIM" quantize "$IN" --format e4m3 --rule te --axis row "${args[@]}" 2>&1)
  check "quantize $flag a symlink to a file: refused, nothing written: $msg" \
    '[[ $? == 1 && $msg == *"$flag '"'"'$T/link.npy'"'"': cannot write: $T/link.npy is a symlink (to $T/target.npy)"* && -L $T/link.npy && $(cat "$T/target.npy") == "my array" && ! -e $T/s.npy && ! -e $T/d.npy ]]'
done

# 2. Two outputs of one run on one file, or an output on an input: refused before simulating.
"$TRNSIM" run "$SMALL" --out "$T/b" --trace "$T/b/stats.json" >"$T/out" 2>&1
rc=$?
check "--trace on stats.json (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == *"stats.json and --trace are the same file ($T/b/stats.json)" && ! -e $T/b ]]'
cat >"$T/w.json" <<EOF
{"name": "w", "hardware": "trn3", "kernel": "matmul_mxfp8_backward",
 "params": {"M": 512, "K": 512, "N": 512, "run_with_lnc2": false},
 "inputs": {"output_grad": {"npy": "$IN"}, "weights": {"generator": "normal", "seed": 2},
            "input_activation": {"generator": "normal", "seed": 3}}}
EOF
cp "$IN" "$T/in_copy.npy"
"$TRNSIM" run "$T/w.json" --out "$T/a" --dump-inputs >"$T/out" 2>&1
rc=$?
check "--dump-inputs onto the input it reads (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == *"are the same file ($IN): an input is never overwritten" ]] && cmp -s "$IN" "$T/in_copy.npy"'

# 3. A rerun with fewer files: the earlier run's outputs and dumped inputs go; other files stay.
touch "$T/a/mine.txt"
"$TRNSIM" run "$SMALL" --out "$T/a" --no-numerics >"$T/out" 2>&1
rc=$?
check "rerun --no-numerics (exit $rc)" '[[ $rc == 0 && -f $T/a/stats.json && -f $T/a/mine.txt ]]'
check "earlier outputs and inputs removed" '[[ ! -e $T/a/input_grad.npy && ! -e $T/a/weight_grad.npy && ! -e $T/a/inputs ]]'
check "the removals are reported" 'grep -q "removed $T/a/input_grad.npy: an earlier run" "$T/out"'

# 4. An unwritable --out is found at once (not after the simulation); nothing is created.
# (/proc refuses new directories even to root, as a read-only mount would.)
"$TRNSIM" run "$SMALL" --out /proc/trnsim_test_out >"$T/out" 2>&1
rc=$?
check "unwritable --out (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == "trnsim: error: --out /proc/trnsim_test_out: cannot create the directory"* ]]'

printf 'x' >"$T/file"
"$TRNSIM" run "$SMALL" --out "$T/file" >"$T/out" 2>&1
rc=$?
check "--out is a file (exit $rc)" '[[ $rc == 1 && $(cat "$T/out") == "trnsim: error: --out $T/file: exists and is not a directory" ]]'
"$TRNSIM" run "$SMALL" --out "" >"$T/out" 2>&1
check "--out '' (exit $?)" '[[ $(cat "$T/out") == "trnsim: error: --out: empty directory name" ]]'
"$TRNSIM" run "$SMALL" --trace "" >"$T/out" 2>&1
check "--trace ''" '[[ $(cat "$T/out") == "trnsim: error: --trace: empty file name" ]]'

# 5. A trace into a folder that does not exist yet; a failing run keeps its trace, marked incomplete.
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/new/run" --trace "$T/new/run/t.pftrace" >"$T/out" 2>&1
rc=$?
check "trace into a new folder (exit $rc: $(cat "$T/out"))" '[[ $rc == 0 && -s $T/new/run/t.pftrace ]]'
cat >"$T/dead.json" <<'EOF'
{"generation": "trn2", "num_cores": 1,
 "tensors": [{"name": "x", "dtype": "float32", "shape": [128, 4], "init": {"generator": "zeros"}}],
 "cores": [{"SP": [{"op": "dma_copy", "queue": 0, "wait": [[3, 1]],
    "dst": {"mem": "sbuf", "partition": [0, 128], "dtype": "float32", "pattern": [[1, 4]]},
    "src": {"tensor": "x", "pattern": [[4, 128], [1, 4]]}}]}]}
EOF
"$TRNSIM" run "$T/dead.json" --trace "$T/dead.json.pftrace" >"$T/out" 2>&1
rc=$?
check "deadlock keeps the trace (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == *"deadlock"*"the trace up to the failure is in $T/dead.json.pftrace (marked incomplete)" && -s $T/dead.json.pftrace ]]'
check "the trace says it is incomplete" 'grep -q "trace incomplete: the run failed" "$T/dead.json.pftrace"'

# 6. A damaged stats.json: an error naming the key, not a table of NaN.
sed 's/"busy_percent": [0-9.e+-]*/"busy_percent": "x"/' "$T/a/stats.json" >"$T/broken.json"
"$TRNSIM" stats "$T/broken.json" >"$T/out" 2>&1
rc=$?
check "damaged stats.json (exit $rc: $(cat "$T/out"))" \
  '[[ $rc == 1 && $(cat "$T/out") == "trnsim: error: $T/broken.json: engines.core0.PE.busy_percent: missing or not a finite number (a damaged stats.json?)" ]]'

# 7. Inputs that hold Inf after conversion to their dtype (std 2e38: most values above the BF16 maximum): the run
# goes on, writes its outputs and stats, notes the input, and counts the non-finite values instead of NaN
# metrics; an output whose every reference value is NaN or Inf was not compared, so its check fails (exit 3).
"$TRNSIM" run "$SMALL" --set inputs.input_activation.std=2e38 --out "$T/inf" >"$T/out" 2>&1
rc=$?
check "Inf inputs: exit $rc, outputs written" '[[ $rc == 3 && -f $T/inf/weight_grad.npy && -f $T/inf/stats.json ]]'
check "Inf inputs: the note" 'grep -q "^trnsim: [a-z0-9_]*: note: inputs.input_activation: [0-9]* of 262144 values are NaN or Inf (generated values overflowed bfloat16)" "$T/out"'
check "Inf inputs: counts, not NaN" 'grep -q "\"reference_nonfinite\": 262144.0" "$T/inf/stats.json" && ! grep -qE ": (NaN|nan),?$" "$T/inf/stats.json"'
check "Inf inputs: nothing compared is a failure" \
  'grep -q "^FAIL weight_grad: nothing compared: all 262144 reference values are NaN or Inf" "$T/out"'
# Output paths that cannot be written are refused before the run simulates, and nothing is created.
"$TRNSIM" run "$SMALL" --out "$T/early1" --trace "$T/early1.txt" >"$T/out" 2>&1
rc=$?
check "--trace with an unknown extension: exit $rc, at once" \
  '[[ $rc == 1 && ! -e $T/early1 ]] && grep -q "trace file .$T/early1.txt.: unknown extension" "$T/out"'
mkdir -p "$T/early2/stats.json" "$T/early3.json"
"$TRNSIM" run "$SMALL" --out "$T/early2" >"$T/out" 2>&1
rc=$?
check "stats.json a directory: exit $rc, at once" \
  '[[ $rc == 1 && ! -e $T/early2/input_grad.npy ]] && grep -q "stats.json .$T/early2/stats.json.: cannot write: it is a directory" "$T/out"'
"$TRNSIM" run "$SMALL" --out "$T/early4" --trace "$T/early3.json" >"$T/out" 2>&1
rc=$?
check "--trace a directory: exit $rc, at once" \
  '[[ $rc == 1 && ! -e $T/early4 ]] && grep -q -- "--trace .$T/early3.json.: cannot write: it is a directory" "$T/out"'

# A run that fails after it created a nested --out removes every level it created.
"$TRNSIM" run "$SMALL" --out "$T/n1/n2/n3" --set inputs.weights=missing.npy >"$T/out" 2>&1
rc=$?
check "nested --out removed on failure: exit $rc" '[[ $rc == 1 && ! -e $T/n1 ]] && grep -q "missing.npy: cannot open" "$T/out"'

# A generator parameter beyond FP32's range (the values are computed in FP32) is refused before any work.
"$TRNSIM" run "$SMALL" --set inputs.input_activation.std=1e39 --out "$T/inf2" >"$T/out" 2>&1
rc=$?
check "std beyond FP32: exit $rc, the message, nothing written" \
  '[[ $rc == 1 && ! -e $T/inf2 ]] && grep -q "inputs.input_activation.std: 1e+39 is beyond FP32.s range" "$T/out"'

finish
