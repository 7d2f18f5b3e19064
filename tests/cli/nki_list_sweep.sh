#!/usr/bin/env bash
# NKI Python kernels in trnsim list and trnsim sweep: usage nki_list_sweep.sh <trnsim-binary> <source-dir>.
# `trnsim list` shows the workloads of examples/nki with their function, inputs and keyword parameters; a sweep
# of an NKI workload over an input shape and a keyword parameter runs every point, keys each point by the
# kernel file's SHA-256 (an edited file reruns the points, an unchanged one keeps them), and refuses a
# parameter the function does not take, naming its parameters.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
export TRNSIM_PYTHON=/nonexistent  # no HTML report (reports.sh tests it)
# A trnsim built without its Python layer (the sanitizer job: -DTRNSIM_PYTHON=OFF) cannot run NKI kernels: skip.
if [[ $("$TRNSIM" validate "$SRC/examples/nki/rmsnorm.json" 2>&1) == *"built without Python support"* ]]; then
  echo "SKIPPED: this trnsim was built without Python support"
  exit 77
fi

# 1. trnsim list: the registered kernels, then the Python ones.
"$TRNSIM" list >"$T/list.txt" 2>"$T/list.err"
rc=$?
check "list exit 0: $(head -3 "$T/list.err")" '[[ $rc == 0 ]]'
check "list has the Python heading" \
  'grep -qF "NKI Python kernels (examples/nki: run one with \`trnsim run examples/nki/<file>.json\`" "$T/list.txt"'
check "list names the softmax workload" 'grep -qF "nki_softmax (examples/nki/softmax.json)" "$T/list.txt"'
check "list gives its function and reference" \
  'grep -qF "  kernel softmax_kernel in softmax.py; reference softmax_ref in softmax.py" "$T/list.txt"'
check "list gives an input's dtype and shape" 'grep -qE "^  input gamma +float32 \[1024\]$" "$T/list.txt"'
check "list gives rmsnorm's keyword parameter eps with its default" \
  'grep -qE "^  eps +float +default 1e-06 +keyword argument of rmsnorm_kernel$" "$T/list.txt"'
"$TRNSIM" list nki_rmsnorm >"$T/rms.txt"
check "list nki_rmsnorm: the inputs in the kernel's parameter order (x, gamma): $(grep input "$T/rms.txt" | tr -s ' ')" \
  '[[ $(grep -E "^  input " "$T/rms.txt" | awk "{print \$2}" | tr "\n" " ") == "x gamma " ]]'
check "list still lists the registered kernels first" '[[ $(head -1 "$T/list.txt") == matmul_bf16 ]]'
"$TRNSIM" list nki_rmsnorm --json >"$T/rms.json"
check "list nki_rmsnorm --json: the parameters and inputs" \
  '/usr/bin/python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
assert j[\"kernel\"] == {\"nki\": \"rmsnorm.py\", \"function\": \"rmsnorm_kernel\"}, j[\"kernel\"]
assert j[\"workload\"] == \"examples/nki/rmsnorm.json\"
assert [(p[\"name\"], p[\"type\"], p[\"default\"]) for p in j[\"params\"]] == [(\"eps\", \"float\", 1e-06)], j[\"params\"]
# In the parameter order of rmsnorm_kernel(x, gamma, eps), as a caller passes them (tester23s F3: was sorted).
assert j[\"inputs\"] == [{\"name\": \"x\", \"dtype\": \"float32\", \"shape\": [256, 1024]},
                       {\"name\": \"gamma\", \"dtype\": \"float32\", \"shape\": [1024]}], j[\"inputs\"]
" "$T/rms.json"'
n=$("$TRNSIM" list --json | /usr/bin/python3 -c 'import json, sys; print(sum(1 for k in json.load(sys.stdin) if "workload" in k))')
nfiles=$(ls "$SRC"/examples/nki/*.json | wc -l)
check "list --json has one entry per examples/nki workload ($n of $nfiles)" '[[ $n == "$nfiles" ]]'
msg=$("$TRNSIM" list nki_nope 2>&1)
check "list of an unknown name: exit 1 naming it: $msg" '[[ $? == 1 && $msg == *"unknown kernel '"'"'nki_nope'"'"'"* ]]'
check "the known kernels of that message include the NKI Python ones" \
  '[[ $msg == *"matmul_bf16"* && $msg == *"nki_rmsnorm"* && $msg == *"nki_softmax"* ]]'
# A path that names no file is that (as run and validate say), not an unknown kernel (tester23o F12).
for p in nope.json ./nope "$T/nope.json"; do
  msg=$(cd "$T" && "$TRNSIM" list "$p" 2>&1)
  check "list of a missing path: exit 1, no such file: $msg" '[[ $? == 1 && $msg == "trnsim: error: $p: no such file" ]]'
done
msg=$("$TRNSIM" list "$T" 2>&1)
check "list of a folder: exit 1 naming it: $msg" \
  '[[ $? == 1 && $msg == "trnsim: error: $T: is a directory, expected a workload file" ]]'

# 2. A sweep of an NKI workload (a copy of examples/nki/rmsnorm, so its file can change): rows x eps.
cp "$SRC/examples/nki/rmsnorm.py" "$SRC/examples/nki/rmsnorm.json" "$T/"
cat >"$T/s.json" <<JSON
{"name": "rms", "workload": "rmsnorm.json", "set": {"numerics": true},
 "axes": [{"name": "x", "path": "inputs.x.shape", "values": [[128, 1024], [256, 1024]]},
          {"name": "eps", "path": "params.eps", "values": [1e-6, 0.5]}]}
JSON
"$TRNSIM" sweep "$T/s.json" --out "$T/o" -j 2 >"$T/run.txt" 2>"$T/err.txt"
rc=$?
check "nki sweep exit 0 ($rc): $(tail -3 "$T/err.txt")" '[[ $rc == 0 ]]'
check "nki sweep: 4 points ok: $(head -1 "$T/run.txt")" 'grep -qF "rms: 4 points: 4 ok, 0 invalid, 0 failed" "$T/run.txt"'
row() { sed -n "$(($1 + 2))p" "$T/o/results.csv"; }
# total_time_ns: the field after "ok" (the shape column holds commas inside its quotes)
t0=$(row 0 | sed -E 's/.*,ok,([^,]*),.*/\1/')
t2=$(row 2 | sed -E 's/.*,ok,([^,]*),.*/\1/')
r0='0,,"[128,1024]",1e-06,ok,'
r2='2,,"[256,1024]",1e-06,ok,'
check "rows: 128 and 256 rows, ok ($(row 0 | cut -c1-60); $(row 2 | cut -c1-60))" \
  '[[ $(row 0) == "$r0"* && $(row 2) == "$r2"* ]]'
check "twice the rows take longer ($t0 vs $t2 ns)" '/usr/bin/python3 -c "import sys; sys.exit(not float(sys.argv[2]) > float(sys.argv[1]) > 0)" "$t0" "$t2"'
key0=$(row 0 | awk -F, '{print $(NF-1)}')
key2=$(row 2 | awk -F, '{print $(NF-1)}')
check "the input shape is part of the key ($key0 vs $key2)" '[[ -n $key0 && $key0 != "$key2" ]]'
"$TRNSIM" sweep "$T/s.json" --out "$T/o" -j 2 >"$T/run2.txt" 2>"$T/err2.txt"
check "rerun, file unchanged: the 4 rows kept: $(grep 4/4 "$T/err2.txt")" 'grep -qF "4/4 points: 4 ok, 0 invalid, 0 failed, 4 kept" "$T/err2.txt"'
echo "# edited" >>"$T/rmsnorm.py"
"$TRNSIM" sweep "$T/s.json" --out "$T/o" -j 2 >"$T/run3.txt" 2>"$T/err3.txt"
check "rerun, kernel file edited: every point runs again: $(grep 4/4 "$T/err3.txt")" \
  'grep -qF "4/4 points: 4 ok, 0 invalid, 0 failed, 0 kept" "$T/err3.txt"'
key0b=$(row 0 | awk -F, '{print $(NF-1)}')
check "the edited file gives another key ($key0 -> $key0b)" '[[ -n $key0b && $key0 != "$key0b" ]]'

# 3. A parameter the function does not take: the sweep file is refused, naming the function's parameters.
printf '%s' '{"name": "bad", "workload": "rmsnorm.json", "axes": {"params.epsilon": [1e-6]}}' >"$T/bad.json"
msg=$("$TRNSIM" sweep "$T/bad.json" --out "$T/ob" 2>&1)
check "unknown keyword parameter: exit 1 naming eps: $msg" \
  '[[ $? == 1 && $msg == *"bad.json: axes.params.epsilon: unknown path '"'"'params.epsilon'"'"': kernel '"'"'rmsnorm_kernel (rmsnorm.py)'"'"' has no parameter '"'"'epsilon'"'"' (its parameters: eps)"* ]]'
# 4. A module the kernel imports from its folder is part of the key: editing it reruns the points.
mkdir -p "$T/imp"
cp "$SRC/examples/nki/rmsnorm.py" "$SRC/examples/nki/rmsnorm.json" "$T/imp/"
printf 'import rms_helper  # noqa: F401\n' >>"$T/imp/rmsnorm.py"
printf 'SCALE = 1\n' >"$T/imp/rms_helper.py"
cat >"$T/imp/s.json" <<JSON
{"name": "imp", "workload": "rmsnorm.json", "axes": {"params.eps": [1e-6, 0.5]}}
JSON
"$TRNSIM" sweep "$T/imp/s.json" --out "$T/imp/o" -j 2 >/dev/null 2>"$T/imp/e1.txt"
check "import sweep: 2 ok: $(tail -2 "$T/imp/e1.txt")" 'grep -qF "2/2 points: 2 ok, 0 invalid, 0 failed, 0 kept" "$T/imp/e1.txt"'
echo "# edited" >>"$T/imp/rms_helper.py"
"$TRNSIM" sweep "$T/imp/s.json" --out "$T/imp/o" -j 2 >/dev/null 2>"$T/imp/e2.txt"
check "imported module edited: both points run again: $(grep 2/2 "$T/imp/e2.txt")" \
  'grep -qF "2/2 points: 2 ok, 0 invalid, 0 failed, 0 kept" "$T/imp/e2.txt"'
"$TRNSIM" sweep "$T/imp/s.json" --out "$T/imp/o" -j 2 >/dev/null 2>"$T/imp/e3.txt"
check "imported module unchanged: both kept: $(grep 2/2 "$T/imp/e3.txt")" \
  'grep -qF "2/2 points: 2 ok, 0 invalid, 0 failed, 2 kept" "$T/imp/e3.txt"'

# 5. A kernel file edited while its sweep runs: the run of the first point (one worker, in sweep order) edits
# the file after reading it, so the second point's run reads other bytes than the plan keyed it by. That
# point's result is not kept under the old key: an error row naming the file; with the file restored, a
# rerun runs it (and keeps the first). (The sweep checks the second point in a child process while the first
# point runs; that check leaves a mark once it has read the file, and the first run edits only after the
# mark, so the order does not depend on the machine's load.)
mkdir -p "$T/ed"
cp "$SRC/examples/nki/rmsnorm.py" "$SRC/examples/nki/rmsnorm.json" "$T/ed/"
cp "$T/ed/rmsnorm.py" "$T/ed/rmsnorm.py.orig"
cat >>"$T/ed/rmsnorm.py" <<'PY'
import os as _os
_argv = open("/proc/self/cmdline", "rb").read().split(b"\0")
if _argv[1:3] == [b"sweep", b"check"] and b"params.eps=0.5" in _argv:  # the second point's check
    open(__file__ + ".checked", "w").close()
if _argv[1:2] == [b"run"] and not _os.path.exists(__file__ + ".edited"):  # the first point's run
    import time as _time
    for _ in range(600):
        if _os.path.exists(__file__ + ".checked"):
            break
        _time.sleep(0.05)
    open(__file__ + ".edited", "w").close()
    with open(__file__, "a") as _f:
        _f.write("\n# edited while the sweep ran\n")
PY
cp "$T/ed/rmsnorm.py" "$T/ed/rmsnorm.py.planned"
cat >"$T/ed/s.json" <<JSON
{"name": "ed", "workload": "rmsnorm.json", "axes": {"params.eps": [1e-6, 0.5]}}
JSON
"$TRNSIM" sweep "$T/ed/s.json" --out "$T/ed/o" -j 1 >"$T/ed/r1.txt" 2>"$T/ed/e1.txt"
check "edited during the sweep: 1 ok, 1 failed: $(grep 2/2 "$T/ed/e1.txt")" \
  'grep -qF "2/2 points: 1 ok, 0 invalid, 1 failed, 0 kept" "$T/ed/e1.txt"'
check "the failed point names the file: $(grep -o "error,.*" "$T/ed/o/results.csv" | head -1)" \
  'grep -qF "ed/rmsnorm.py changed while the sweep ran" "$T/ed/o/results.csv"'
cp "$T/ed/rmsnorm.py.planned" "$T/ed/rmsnorm.py"
"$TRNSIM" sweep "$T/ed/s.json" --out "$T/ed/o" -j 1 >/dev/null 2>"$T/ed/e2.txt"
check "file as planned again: the first kept, the second runs: $(grep 2/2 "$T/ed/e2.txt")" \
  'grep -qF "2/2 points: 2 ok, 0 invalid, 0 failed, 1 kept" "$T/ed/e2.txt"'
# 6. A kernel taking **kwargs: a sweep may set any params.<name>; the function gets it as a keyword argument.
mkdir -p "$T/kw"
cp "$SRC/examples/nki/rmsnorm.py" "$SRC/examples/nki/rmsnorm.json" "$T/kw/"
sed -i 's/^def rmsnorm_kernel(x, gamma, eps=1e-6):$/def rmsnorm_kernel(x, gamma, **kwargs):\n    eps = kwargs["epsilon"]/' "$T/kw/rmsnorm.py"
sed -i 's/^def rmsnorm_ref(x, gamma, eps=1e-6):$/def rmsnorm_ref(x, gamma, epsilon=1e-6):\n    eps = epsilon/' "$T/kw/rmsnorm.py"
sed -i 's/"params": {"eps": 1e-6}/"params": {"epsilon": 1e-6}/' "$T/kw/rmsnorm.json"
check "the copy takes **kwargs" 'grep -qF "**kwargs" "$T/kw/rmsnorm.py"'
cat >"$T/kw/s.json" <<JSON
{"name": "kw", "workload": "rmsnorm.json", "set": {"numerics": true}, "axes": {"params.epsilon": [1e-6, 0.5]}}
JSON
"$TRNSIM" sweep "$T/kw/s.json" --out "$T/kw/o" -j 2 >/dev/null 2>"$T/kw/e.txt"
check "**kwargs sweep: 2 ok (the numerics pass, so epsilon reached the kernel): $(tail -2 "$T/kw/e.txt")" \
  'grep -qF "2/2 points: 2 ok, 0 invalid, 0 failed, 0 kept" "$T/kw/e.txt"'
k1=$(sed -n 2p "$T/kw/o/results.csv" | awk -F, '{print $(NF-1)}')
k2=$(sed -n 3p "$T/kw/o/results.csv" | awk -F, '{print $(NF-1)}')
check "the two epsilons are two keys ($k1, $k2)" '[[ -n $k1 && $k1 != "$k2" ]]'

# 7. The working directory is not on the embedded Python's import path (pybind11 puts '' there by default): a
#    json.py or numpy.py someone left in the folder a user runs trnsim from is never imported, so it cannot run
#    code as that user. The kernel's own folder is still searched for its helper modules (case 4).
mkdir -p "$T/cwd"
for mod in json numpy typing; do
  printf 'open("%s", "w").close()\nraise SystemExit(1)\n' "$T/cwd/ran_$mod" >"$T/cwd/$mod.py"
done
(cd "$T/cwd" && "$TRNSIM" run "$SRC/examples/nki/softmax.json" --out "$T/cwd/o" --no-numerics >"$T/cwd/e.txt" 2>&1)
rc=$?
check "a run from a folder holding json.py, numpy.py and typing.py exits 0: $(tail -2 "$T/cwd/e.txt")" '[[ $rc == 0 ]]'
check "none of the planted modules ran: $(ls "$T/cwd")" '! ls "$T"/cwd/ran_* >/dev/null 2>&1'
finish
