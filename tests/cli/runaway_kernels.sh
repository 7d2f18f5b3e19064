#!/usr/bin/env bash
# Kernels that never end, in a sweep and in a run: usage runaway_kernels.sh <trnsim-binary> <source-dir>.
# A sweep checks each point before it runs it, and checking an NKI point traces its Python kernel: a point
# whose kernel loops for ever (`while True: pass`) is stopped by --timeout (an error row "timed out", the
# other points run and report), and a SIGTERM to the sweep stops it at once, leaving no process and no
# temporary behind. A kernel that emits instructions in an endless loop stops at the build's instruction
# limit (max_instructions), named with its key and the kernel's line, instead of filling the host's memory.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
if [[ $("$TRNSIM" validate "$SRC/examples/nki/rmsnorm.json" 2>&1) == *"built without Python support"* ]]; then
  echo "skipped: trnsim was built without Python support"
  exit 77
fi

cat >loop.py <<'PY'
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy_kernel(x, loop=0):
    if loop == 1:
        while True:
            pass
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="y")
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    while loop == 2:
        nisa.tensor_copy(dst=t, src=t)  # MARK-emit-loop
    nisa.dma_copy(dst=out, src=t)
    return out


def copy_ref(x, loop=0):
    return x
PY
mark=$(grep -n MARK-emit-loop loop.py | cut -d: -f1)
cat >loop.json <<'JSON'
{"name": "loop", "hardware": "trn2", "lnc": 1,
 "kernel": {"nki": "loop.py", "function": "copy_kernel"}, "params": {"loop": 0},
 "inputs": {"x": {"generator": "normal", "seed": 1, "std": 1.0, "shape": [128, 64], "dtype": "float32"}},
 "reference": {"nki": "loop.py", "function": "copy_ref"}, "numerics": true}
JSON

# Our own processes still alive whose command line names this test's folder (a sweep's children).
leftovers() { ps -eo pid=,args= | grep -F -- "$T/" | grep -v grep | grep -vF "ps -eo"; }

# 1. A looping point and a plain one, --timeout 6: the looping one is an error row, the other runs.
printf '%s' '{"name": "hang", "workload": "loop.json", "axes": [{"name": "loop", "path": "params.loop", "values": [1, 0]}]}' >s.json
start=$SECONDS
timeout -k 5 60 "$TRNSIM" sweep "$T/s.json" --out "$T/o" -j 1 --timeout 6 --no-report >run.txt 2>err.txt
rc=$?
check "sweep with a looping point ends (exit $rc after $((SECONDS - start)) s; 124: it hung): $(tail -2 err.txt)" \
  '[[ $rc == 0 ]]'
check "summary: 1 ok, 1 failed: $(head -1 run.txt)" 'grep -qF "hang: 2 points: 1 ok, 0 invalid, 1 failed" run.txt'
check "the looping point's row says it timed out: $(sed -n 2p o/results.csv)" \
  '[[ $(sed -n 2p o/results.csv) == 0,,1,error,*"timed out after 6 s (--timeout)"* ]]'
check "the plain point ran: $(sed -n 3p o/results.csv | cut -c1-40)" '[[ $(sed -n 3p o/results.csv) == 1,,0,ok,* ]]'
check "no process left: $(leftovers)" '[[ -z $(leftovers) ]]'

# 2. SIGTERM while the looping point is checked (no --timeout): the sweep ends at once, its child too.
printf '%s' '{"name": "hang1", "workload": "loop.json", "axes": [{"name": "loop", "path": "params.loop", "values": [1]}]}' >s1.json
"$TRNSIM" sweep "$T/s1.json" --out "$T/o1" -j 1 --no-report >run1.txt 2>err1.txt &
pid=$!
sleep 3
kill -TERM $pid
for _ in $(seq 100); do
  kill -0 $pid 2>/dev/null || break
  sleep 0.1
done
alive=no
if kill -0 $pid 2>/dev/null; then
  alive=yes
  kill -KILL $pid
fi
wait $pid
rc=$?
check "SIGTERM stops the sweep within 10 s (still alive: $alive, exit $rc)" '[[ $alive == no && $rc == 143 ]]'
sleep 0.5
check "no process left after SIGTERM: $(leftovers)" '[[ -z $(leftovers) ]]'
check "no temporary or scratch left in the sweep folder: $(find o1 -name '*.tmp.*' -o -name .runs | head -3)" \
  '[[ -z $(find o1 -name "*.tmp.*" -o -name .runs) ]]'
for p in $(leftovers | awk '{print $1}'); do kill -KILL "$p" 2>/dev/null; done  # none survives the test

# 3. A kernel that emits instructions for ever stops at max_instructions, naming the key and its line.
start=$SECONDS
msg=$(ulimit -v 8000000; timeout -k 5 60 "$TRNSIM" run loop.json --set params.loop=2 --set max_instructions=5000 \
  --out "$T/r" 2>&1)
rc=$?
check "an endless emitting loop stops at the limit (exit $rc after $((SECONDS - start)) s): ${msg:0:300}" '[[ $rc == 1 ]]'
check "the message names the limit, its key and the kernel line: ${msg:0:400}" \
  '[[ $msg == *"loop.py:$mark"*"more than 5000 instructions"*"max_instructions"* ]]'
check "no output folder" '[[ ! -e r ]]'

finish
