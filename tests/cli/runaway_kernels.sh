#!/usr/bin/env bash
# Kernels that never end, in a sweep and in a run: usage runaway_kernels.sh <trnsim-binary> <source-dir>.
# A sweep checks each point before it runs it, and checking an NKI point traces its Python kernel: a point
# whose kernel loops for ever (`while True: pass`) is stopped by --timeout (an error row "timed out", the
# other points run and report), and a SIGTERM to the sweep stops it at once, leaving no process and no
# temporary behind. A kernel that emits instructions in an endless loop stops at the build's instruction
# limit (max_instructions), named with its key and the kernel's line, instead of filling the host's memory.
# trnsim tune has the same --timeout; a run that ends while a point is checked is collected at once.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
if [[ $("$TRNSIM" validate "$SRC/examples/nki/rmsnorm.json" 2>&1) == *"built without Python support"* ]]; then
  echo "skipped: trnsim was built without Python support"
  exit 77
fi

cat >loop.py <<'PY'
import os
import time

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy_kernel(x, loop=0):
    if loop == 1:
        while True:
            pass
    # loop 3: until the test creates the file "release" beside this one (then as loop 0)
    while loop == 3 and not os.path.exists(os.path.join(os.path.dirname(__file__), "release")):
        time.sleep(0.05)
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
check "no temporary or scratch left in the sweep folder: $(find o1 -name '*.tmp.*' -o -name '.trnsim-trace.*' -o -name .runs | head -3)" \
  '[[ -z $(find o1 -name "*.tmp.*" -o -name ".trnsim-trace.*" -o -name .runs) ]]'
for p in $(leftovers | awk '{print $1}'); do kill -KILL "$p" 2>/dev/null; done  # none survives the test

# 4. trnsim tune has the same --timeout: the looping point is an error row "timed out", the plain one runs and
# is the best (before: tune had no --timeout, and a looping point hung it until a signal).
printf '%s' '{"name": "hangt", "workload": "loop.json", "axes": [{"name": "loop", "path": "params.loop", "values": [1, 0]}]}' >st.json
start=$SECONDS
timeout -k 5 60 "$TRNSIM" tune "$T/st.json" --out "$T/ot" -j 1 --timeout 6 --budget 2 --no-report >runt.txt 2>errt.txt
rc=$?
check "tune with a looping point ends (exit $rc after $((SECONDS - start)) s; 124: it hung): $(tail -2 errt.txt)" \
  '[[ $rc == 0 ]]'
check "tune: the looping point's row says it timed out: $(grep -h "timed out" ot/results.csv | head -1)" \
  'grep -q "error,.*timed out after 6 s (--timeout) while the point was checked" ot/results.csv'
check "tune: the plain point is the best: $(grep loop ot/best_workload.json)" \
  'grep -q "\"loop\": 0" ot/best_workload.json'
check "no process left after tune: $(leftovers)" '[[ -z $(leftovers) ]]'
# SIGTERM while the looping point is checked ends tune as interrupted (exit 143), with no best workload and
# no results table written as if it had finished (before: exit 0, results.csv rewritten, "best" printed).
"$TRNSIM" tune "$T/st.json" --out "$T/ot2" -j 1 --budget 2 --no-report >runt2.txt 2>errt2.txt &
pid=$!
sleep 2
kill -TERM "$pid"
wait_ended "$pid" 30
rc=$?
check "tune ended by SIGTERM exits 143 ($rc): $(tail -1 errt2.txt)" '[[ $rc == 143 ]]'
check "tune ended by SIGTERM writes no best workload nor results table: $(ls ot2 | tr '\n' ' ')" \
  '[[ ! -e ot2/best_workload.json && ! -e ot2/results.csv ]]'
check "no process left after tune's SIGTERM: $(leftovers)" '[[ -z $(leftovers) ]]'

# 5. While a point is checked in its child, a run that ended meanwhile is collected at once: its row kept, no
# zombie (before: only after the check, so for up to --timeout). Points: plain (checked, then run), held
# (loop 3: its check lasts until this test creates "release", so the plain run surely ends during it,
# however slow the machine). Failing: the plain run's process stays a zombie of the sweep for 50 polls in a
# row (10 s of sleeps; a sweep collects within its 50 ms poll), or no row after 600 polls (2 minutes).
printf '%s' '{"name": "reap", "workload": "loop.json", "axes": [{"name": "loop", "path": "params.loop", "values": [0, 3]}]}' >sr.json
"$TRNSIM" sweep "$T/sr.json" --out "$T/or" -j 2 --timeout 600 --no-report >runr.txt 2>errr.txt &
pid=$!
rows=0 zombie_polls=0
for ((polls = 0; polls < 600 && zombie_polls < 50; polls++)); do
  rows=$(ls or/points 2>/dev/null | wc -l)
  [[ $rows == 1 ]] && break
  kill -0 $pid 2>/dev/null || break  # the sweep ended early (e.g. its points failed): the check below says so
  if ps --ppid $pid -o stat= | grep -q "^Z"; then zombie_polls=$((zombie_polls + 1)); else zombie_polls=0; fi
  sleep 0.2
done
sleep 0.5
zombies=$(ps --ppid $pid -o stat=,args= | grep -c "^Z")
check "the plain point's run was collected during the check ($rows rows, $zombies zombies, a zombie for $zombie_polls polls)" \
  '[[ $rows == 1 && $zombies == 0 ]]'
touch release
wait_ended $pid 120
rc=$?
check "the sweep ends once the check is released, both points run (exit $rc): $(tail -1 errr.txt)" \
  '[[ $rc == 0 ]] && grep -qF "reap: 2 points: 2 ok, 0 invalid, 0 failed" runr.txt'

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
