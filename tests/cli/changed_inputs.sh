#!/usr/bin/env bash
# An input file that changes while trnsim reads it: usage changed_inputs.sh <trnsim-binary> <source-dir>.
# Issue 22, tester22g's finding 1: a large .npy input is mapped (sim/base/host_bytes.h); truncated during the
# run, it killed trnsim with SIGBUS (exit 135, no message, the output folder it had created left behind).
# Now the run says which file changed, removes what it created and exits 1; `trnsim quantize` says the same
# of a file that shrank while it read it (it said "Bad file descriptor").
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
# 2^22 FP32 values (16 MiB), mapped with a threshold of 1 MiB.
n=4194304
/usr/bin/python3 -c "
import numpy as np
np.save('$T/big.npy', np.arange($n, dtype=np.float32))
"
/usr/bin/python3 -c "
import json
w = json.load(open('$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json'))
w['params'].update(n=$n, free_dim=2048)
w['inputs']['a'] = {'npy': 'big.npy'}
json.dump(w, open('$T/wbig.json', 'w'), indent=1)
"
# Stopped as soon as the file is mapped (before its pages are read), truncated, continued.
TRNSIM_SCRATCH_MIN_BYTES=1048576 "$TRNSIM" run "$T/wbig.json" --out "$T/OB" >"$T/out" 2>"$T/err" &
pid=$!
for ((i = 0; i < 20000; i++)); do
  grep -q "$T/big.npy" "/proc/$pid/maps" 2>/dev/null && break
  [[ -e /proc/$pid ]] || break
done
kill -STOP "$pid" 2>/dev/null
truncate -s 4096 "$T/big.npy"
kill -CONT "$pid" 2>/dev/null
wait "$pid"
rc=$?
check "a mapped input truncated during the run: exit 1, the file named, no folder left (rc $rc): $(cat "$T/err")" \
  '[[ $rc == 1 ]] && grep -qF "error: $T/big.npy: the file changed size while the run read it" "$T/err" && [[ ! -e $T/OB ]]'

# quantize reads its input with read(2): a file that shrank between its size and its data says so.
finish
