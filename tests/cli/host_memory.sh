#!/usr/bin/env bash
# Pageable host memory (docs/architecture.md, "Host memory"): usage host_memory.sh <trnsim-binary>
# <source-dir>. With TRNSIM_SCRATCH_MIN_BYTES=4096 every tensor of these small runs is a mapping (a .npy
# input is its file's pages, other tensors nameless memory files, or with TRNSIM_SCRATCH_IN_MEMORY_BYTES=0
# nameless scratch files in the output folder): the outputs and stats.json are the same bytes as with
# everything on the heap, the scratch files never show a name and do not outlive a run ended by SIGTERM,
# and the memory estimate counts the mapped memory apart.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
MM=$SRC/configs/workloads/matmul_bf16_2048_trn2_lnc1.json
MOE=$SRC/configs/workloads/moe/qwen3_30b_a3b_fwd_mxfp8.json
MSETS=(--set params.T=1024 --set params.E=16 --set params.top_k=2)
sha() { sha256sum <"$1" | cut -c1-64; }

# 1. The same bytes, heap or mapped; the generated inputs dumped for step 2.
"$TRNSIM" run "$MM" --out "$T/heap" --dump-inputs >/dev/null 2>&1
rc1=$?
TRNSIM_SCRATCH_MIN_BYTES=4096 TRNSIM_SCRATCH_IN_MEMORY_BYTES=0 "$TRNSIM" run "$MM" --out "$T/mapped" --verbose \
  >"$T/mapped.log" 2>&1
rc2=$?
check "matmul with scratch-file tensors: exit 0, y.npy and stats.json the same bytes (exit $rc1, $rc2)" \
  '[[ $rc1 == 0 && $rc2 == 0 && $(sha "$T/heap/y.npy") == $(sha "$T/mapped/y.npy") && $(sha "$T/heap/stats.json") == $(sha "$T/mapped/stats.json") ]]'
check "no scratch file is left in the output folder: $(ls -A "$T/mapped" | tr '\n' ' ')" \
  '[[ $(ls -A "$T/mapped" | tr "\n" " ") == ".trnsim-files host.json stats.json trnsim.log y.npy " ]]'
# The same run fits in RAM many times over: memory files unless TRNSIM_SCRATCH_IN_MEMORY_BYTES says less than
# it needs (its whole figure, 335 MB in step 3, is more than 1000 bytes).
TRNSIM_SCRATCH_MIN_BYTES=4096 "$TRNSIM" run "$MM" --out "$T/memory" --verbose >"$T/memory.log" 2>&1
rc3=$?
check "matmul with memory-file tensors: exit 0, y.npy and stats.json the same bytes (exit $rc3)" \
  '[[ $rc3 == 0 && $(sha "$T/heap/y.npy") == $(sha "$T/memory/y.npy") && $(sha "$T/heap/stats.json") == $(sha "$T/memory/stats.json") ]]'
check "memory files by default, scratch files with TRNSIM_SCRATCH_IN_MEMORY_BYTES=0 (the debug lines)" \
  'grep -q "large tensors in memory files" "$T/memory.log" && grep -q "large tensors in scratch files in the output folder" "$T/mapped.log"'
TRNSIM_SCRATCH_MIN_BYTES=4096 TRNSIM_SCRATCH_IN_MEMORY_BYTES=1000 "$TRNSIM" run "$MM" --out "$T/small" --verbose \
  >"$T/small.log" 2>&1
check "TRNSIM_SCRATCH_IN_MEMORY_BYTES below the run's need: scratch files (exit $?)" \
  'grep -q "large tensors in scratch files in the output folder" "$T/small.log"'
TRNSIM_SCRATCH_IN_MEMORY_BYTES=12abc "$TRNSIM" run "$MM" --out "$T/bad" >"$T/bad.log" 2>&1
rc=$?
check "TRNSIM_SCRATCH_IN_MEMORY_BYTES not a number: exit 1, named, no folder left (exit $rc: $(cat "$T/bad.log"))" \
  '[[ $rc == 1 && $(cat "$T/bad.log") == "trnsim: error: environment variable TRNSIM_SCRATCH_IN_MEMORY_BYTES: '"'"'12abc'"'"' is not a byte count (digits only, at most 19)" && ! -e $T/bad ]]'
# A program JSON reads no memory figure, and refuses the malformed variable all the same.
TRNSIM_SCRATCH_IN_MEMORY_BYTES=12abc "$TRNSIM" run "$SRC/tests/fuzz/corpus/program/dma_matmul.json" --out "$T/badp" \
  >"$T/badp.log" 2>&1
rc=$?
check "a program JSON with TRNSIM_SCRATCH_IN_MEMORY_BYTES not a number: exit 1, named (exit $rc: $(cat "$T/badp.log"))" \
  '[[ $rc == 1 && $(cat "$T/badp.log") == *"TRNSIM_SCRATCH_IN_MEMORY_BYTES: '"'"'12abc'"'"' is not a byte count"* && ! -e $T/badp ]]'
# Memory files never take more than the machine has, whatever the variable says: with 265 MB available (the
# run's anonymous part, 241 MiB = 252.7 MB as in step 3, fits; with its 32 MiB of scratch files, 286.3 MB, it
# does not) they are scratch files.
TRNSIM_SCRATCH_MIN_BYTES=4096 TRNSIM_SCRATCH_IN_MEMORY_BYTES=9999999999999999999 TRNSIM_HOST_MEMORY_BYTES=265000000 \
  "$TRNSIM" run "$MM" --out "$T/over" --verbose >"$T/over.log" 2>&1
rc=$?
check "TRNSIM_SCRATCH_IN_MEMORY_BYTES above the available memory: scratch files (exit $rc: $(grep -E "large tensors|error" "$T/over.log"))" \
  '[[ $rc == 0 ]] && grep -q "large tensors in scratch files in the output folder" "$T/over.log"'

# 2. .npy inputs mapped from their files (BF16 as raw uint16 bits: the tensor is the file's pages).
cp "$T/heap/inputs/x.npy" "$T/heap/inputs/w.npy" "$T/"
/usr/bin/python3 - "$MM" "$T/npy.json" <<'EOF'
import json, sys
w = json.load(open(sys.argv[1]))
w["inputs"] = {"x": "x.npy", "w": "w.npy"}
json.dump(w, open(sys.argv[2], "w"))
EOF
xs=$(sha "$T/x.npy")
TRNSIM_SCRATCH_MIN_BYTES=4096 "$TRNSIM" run "$T/npy.json" --out "$T/npy" >/dev/null 2>&1
rc=$?
check "matmul from mapped .npy inputs: exit 0, y.npy the same bytes, the input file unchanged (exit $rc)" \
  '[[ $rc == 0 && $(sha "$T/heap/y.npy") == $(sha "$T/npy/y.npy") && $(sha "$T/x.npy") == $xs ]]'

# 3. The estimate: the figures of the matmul from .npy files, everything mapped. Mapped .npy inputs: x and w,
# 2048 x 2048 BF16, 2 * 8388608 B = 16.8 MB. Scratch files: the output y, 2048 x 2048 FP32, 16.8 MB (the
# machine's copies of x and w map the files again). The rest is on the heap (SBUF and PSUM of the two
# simulated cores, the references' operands, and the exact FP64 reference of all 2048 x 2048 rows of y that
# the check's prepare step keeps from the simulation until the check, 8 B x 4194304 = 33.6 MB), the
# simulation's records of its 2240 instructions (256 B each, 0.6 MB) and the stacks of the 4 computing
# threads (4 x 8 MiB = 33.6 MB): 252.2 MB, the 302.6 MB of the same run without mapping less its copies of x
# and w (16.8 MB) and the machine's x, w and y (33.6 MB).
TRNSIM_HOST_MEMORY_BYTES=1000000 TRNSIM_SCRATCH_MIN_BYTES=4096 "$TRNSIM" run "$T/npy.json" --out "$T/mem" >"$T/log" 2>&1
rc=$?
TRNSIM_HOST_MEMORY_BYTES=1000000 "$TRNSIM" run "$T/npy.json" --out "$T/mem" >"$T/log0" 2>&1
check "too little memory, nothing mapped: the whole figure (exit $?: $(cat "$T/log0"))" \
  '[[ $(cat "$T/log0") == *"needs at least 302.6 MB of host memory (the host"*"operands), and 1.0 MB is available"* && ! -e $T/mem ]]'
check "too little memory with mapped tensors: exit 1, both figures, nothing created (exit $rc: $(cat "$T/log"))" \
  '[[ $rc == 1 && $(cat "$T/log") == "trnsim: error: $T/npy.json: this run needs at least 252.2 MB of host memory (the host'"'"'s copy of the inputs, the simulated machine'"'"'s HBM tensors, SBUF and PSUM, and the references'"'"' copies of their operands), besides 33.6 MB that the OS can page (16.8 MB of scratch files on the output'"'"'s filesystem, 16.8 MB of mapped .npy inputs), and 1.0 MB is available: run with --no-numerics (timing only), or on a machine with more memory" && ! -e $T/mem ]]'

# 4. SIGTERM while the tensors are mapped: the scratch files were open in the output folder (seen in
# /proc/PID/fd), and nothing of them, nor the folder the run created, is left.
TRNSIM_SCRATCH_MIN_BYTES=4096 TRNSIM_SCRATCH_IN_MEMORY_BYTES=0 "$TRNSIM" run "$MOE" "${MSETS[@]}" --out "$T/term" >"$T/term.log" 2>&1 &
pid=$!
seen=0
for _ in $(seq 1 1200); do
  seen=$(ls -l /proc/$pid/fd 2>/dev/null | grep -c "$T/term/")
  [[ $seen -gt 0 ]] && break
  sleep 0.05
done
sleep 0.5
kill -TERM $pid
wait $pid
rc=$?
check "SIGTERM: scratch files were open in the output folder ($seen), the run ended with 143 ($rc), nothing left" \
  '[[ $seen -gt 0 && $rc == 143 && ! -e $T/term ]]'

# A chain holds every stage (inputs, machine state, outputs) until it writes: the memory check adds the
# stages up (before: each stage was checked alone and the chain ran). A vector_add stage at n = 2560 needs
# 63.0 MB (the SBUF and PSUM of its session, 2 x 128 x (192 + 16) KiB = 54.5 MB, and its tensors), and the
# process the stacks of its 4 computing threads once (4 x 8 MiB = 33.6 MB): one stage 96.6 MB, two 159.6 MB,
# more than the 120 MB said to be available, each alone less.
for s in ma mb; do
  sed -e 's/"n": 25600/"n": 2560/' -e "s/\"name\": \"vector_add_stream_free_dim_2\"/\"name\": \"$s\"/" \
    "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >"$T/$s.json"
done
echo '{"name": "mpl", "stages": ["ma.json", "mb.json"]}' >"$T/mpl.json"
TRNSIM_HOST_MEMORY_BYTES=120000000 "$TRNSIM" run "$T/ma.json" --out "$T/ma" >/dev/null 2>&1
rc1=$?
TRNSIM_HOST_MEMORY_BYTES=120000000 "$TRNSIM" run "$T/mpl.json" --out "$T/mpl" >"$T/log" 2>&1
rc=$?
check "a chain whose stages fit in memory one at a time, not together: refused (exit $rc1, $rc: $(cat "$T/log"))" \
  '[[ $rc1 == 0 && $rc == 1 && $(cat "$T/log") == "trnsim: error: $T/mpl.json: this run needs at least 159.6 MB of host memory"*"and 120.0 MB is available"* && ! -e $T/mpl ]]'

finish
