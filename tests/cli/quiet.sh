#!/usr/bin/env bash
# --quiet on every command (issue 26: spdlog carries every message; --quiet prints only errors): usage
# quiet.sh <trnsim-binary> <source-dir>. run, a chain, sweep, tune, quantize, validate, stats, list and sweep
# status / collect say nothing on stderr with --quiet; a report script's output goes through the logger (a
# warning, hidden by --quiet; an error names what it said); the signal handler's own messages follow the
# level (--quiet keeps the errors, --log-level off drops them too). The default level's messages are log.sh's.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
CH=$SRC/configs/workloads/chains

# 1. Each command with --quiet: its exit status 0, its result on stdout, nothing on stderr.
quiet() {  # NAME COMMAND...: runs it with --quiet
  local name=$1
  shift
  "$@" --quiet >"$T/out" 2>"$T/err"
  local rc=$?
  check "$name --quiet: exit $rc, nothing on stderr ($(head -c 300 "$T/err"))" '[[ $rc == 0 && ! -s $T/err && -s $T/out ]]'
}
quiet run "$TRNSIM" run "$W" --no-numerics --out "$T/r"
quiet chain "$TRNSIM" run "$CH/llama3_lm_head_bwd_bf16.json" --set llama3_lm_head_ce_bf16.params.V=4096 \
  --set llama3_lm_head_mm_bf16.params.N=4096 --no-numerics --out "$T/c"
cat >"$T/s.json" <<JSON
{"name": "q", "workload": "$W", "set": {"numerics": false},
 "axes": [{"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1, 2, 16]}]}
JSON
quiet sweep env TRNSIM_PYTHON=/nonexistent "$TRNSIM" sweep "$T/s.json" --out "$T/s" -j 1 --no-report
quiet tune env TRNSIM_PYTHON=/nonexistent "$TRNSIM" tune "$T/s.json" --budget 2 --out "$T/t" --no-report
/usr/bin/python3 -c "import numpy as np; np.save('$T/x.npy', np.arange(64 * 64, dtype=np.float32).reshape(64, 64))"
"$TRNSIM" quantize "$T/x.npy" --format e4m3 --rule te --axis row --data "$T/d.npy" --scales "$T/sc.npy" --quiet \
  >"$T/out" 2>"$T/err"
rc=$?
check "quantize --quiet: exit $rc, nothing on stderr ($(head -c 300 "$T/err"))" '[[ $rc == 0 && ! -s $T/err && -s $T/d.npy ]]'

# 2. A report script's output (an interpreter that warns, then draws a page) is a warning through the logger:
# on stderr as "trnsim: warning: run_report.py: ..." at the default level, in the run's log, hidden by
# --quiet. Before, it went to stderr as it was, whatever the level.
cat >"$T/py" <<'SH'
#!/bin/sh
echo "UserWarning: a font is missing" >&2
echo "<html></html>" >"$3"
SH
chmod +x "$T/py"
TRNSIM_PYTHON=$T/py "$TRNSIM" run "$W" --no-numerics --out "$T/p1" --report "$T/p1.html" >"$T/out" 2>"$T/err"
rc=$?
check "a report script's warning: exit $rc, through the logger ($(cat "$T/err"))" \
  '[[ $rc == 0 ]] && grep -qx "trnsim: warning: run_report.py: UserWarning: a font is missing" "$T/err" && [[ -s $T/p1.html ]]'
TRNSIM_PYTHON=$T/py "$TRNSIM" run "$W" --no-numerics --out "$T/p2" --report "$T/p2.html" --quiet >"$T/out" 2>"$T/err"
rc=$?
check "a report script's warning with --quiet: exit $rc, nothing on stderr ($(cat "$T/err"))" \
  '[[ $rc == 0 && ! -s $T/err && -s $T/p2.html ]]'
cat >"$T/py" <<'SH'
#!/bin/sh
echo "Traceback (most recent call last):"
echo "ValueError: the stats cannot be drawn" >&2
exit 1
SH
TRNSIM_PYTHON=$T/py "$TRNSIM" run "$W" --no-numerics --out "$T/p3" --report "$T/p3.html" --quiet >"$T/out" 2>"$T/err"
rc=$?
check "a report script that fails: exit $rc, the error says what it said ($(cat "$T/err"))" \
  '[[ $rc != 0 && $(head -1 "$T/err") == "trnsim: error: "*"run_report.py failed (exit status 1):" ]] &&
   grep -qx "  ValueError: the stats cannot be drawn" "$T/err" && [[ $(grep -c . "$T/err") == 3 ]]'

# 2b. Every other command takes the same options: validate (the build's warnings, tests/nki_validate),
# stats --html and sweep collect (a report script's warning), list, sweep status. Before, only run, quantize,
# sweep and tune did: `validate W --quiet` was refused ("The following argument was not expected").
cat >"$T/pyw" <<'SH'
#!/bin/sh
echo "UserWarning: a font is missing" >&2
if [ -d "$3" ]; then echo "<html></html>" >"$3/report.html"; mkdir -p "$3/plots"; else echo "<html></html>" >"$3"; fi
SH
chmod +x "$T/pyw"
cat >"$T/carried.json" <<JSON
{"name": "carried", "hardware": "trn2", "lnc": 1,
 "kernel": {"nki": "$SRC/python/tests/kernels/nki_carried.py", "function": "swapped_regions"},
 "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"}}}
JSON
said() {  # NAME EXPECTED-WARNING COMMAND...: the warning at the default level, nothing with --quiet
  local name=$1 warning=$2
  shift 2
  "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  check "$name: exit $rc, the warning ($(head -c 300 "$T/err"))" '[[ $rc == 0 ]] && grep -q "$warning" "$T/err"'
  "$@" --quiet >"$T/out" 2>"$T/err"
  rc=$?
  check "$name --quiet: exit $rc, its result on stdout, nothing on stderr ($(head -c 300 "$T/err"))" \
    '[[ $rc == 0 && ! -s $T/err && -s $T/out ]]'
  "$@" --log-level off >/dev/null 2>"$T/err"
  rc=$?
  check "$name --log-level off: exit $rc, nothing on stderr" '[[ $rc == 0 && ! -s $T/err ]]'
}
# (A trnsim built without its Python layer, the sanitizer job's, cannot validate an NKI kernel: that case only.)
if [[ $("$TRNSIM" validate "$T/carried.json" 2>&1) != *"built without Python support"* ]]; then
  said validate "warning: nki_carried.py:.*nl.affine_range" "$TRNSIM" validate "$T/carried.json"
fi
said "stats --html" "warning: run_report.py: UserWarning" env TRNSIM_PYTHON="$T/pyw" "$TRNSIM" stats \
  "$T/r/stats.json" --html "$T/r.html"
said "sweep collect" "warning: sweep_report.py: UserWarning" env TRNSIM_PYTHON="$T/pyw" "$TRNSIM" sweep collect "$T/s"
for cmd in "list" "sweep status $T/s" "stats $T/r/stats.json"; do
  # shellcheck disable=SC2086
  "$TRNSIM" $cmd --quiet >"$T/out" 2>"$T/err"
  rc=$?
  check "$cmd --quiet: exit $rc, nothing on stderr ($(head -c 300 "$T/err"))" '[[ $rc == 0 && ! -s $T/err && -s $T/out ]]'
done

# 3. The signal handler's messages. A TERM during the write's renames ends the run once the files are in
# place with an error message: --quiet keeps it, --log-level off drops it (the handler wrote it whatever the
# level before).
"$TRNSIM" run "$W" --no-numerics --out "$T/k" >/dev/null 2>&1
for lvl in --quiet "--log-level off"; do
  # shellcheck disable=SC2086
  { (TRNSIM_TEST_KILL_SIGNAL=TERM TRNSIM_TEST_KILL_AT_WRITE_STEP=9 exec "$TRNSIM" run "$W" --no-numerics \
    --out "$T/k" $lvl) >"$T/out" 2>"$T/err"; } 2>/dev/null
  rc=$?
  if [[ $lvl == --quiet ]]; then
    check "TERM at write step 9, $lvl: exit $rc (143), the error ($(cat "$T/err"))" \
      '[[ $rc == 143 && $(grep . "$T/err") == "trnsim: interrupted (SIGTERM) once the files being written were all in place" ]]'
  else
    check "TERM at write step 9, $lvl: exit $rc (143), nothing on stderr ($(cat "$T/err"))" '[[ $rc == 143 && ! -s $T/err ]]'
  fi
done
# A SIGINT during the simulation stops it: "stopping the simulation" is a warning (hidden by --quiet), the
# run's error then says it was interrupted. (A slow machine may still be building the kernel at 3 s: then the
# process ends at once with the handler's error, which --quiet keeps too.)
M=$SRC/configs/workloads/moe/qwen3_30b_a3b_fwd_mxfp8.json
timeout --preserve-status -s INT 3 "$TRNSIM" run "$M" --set params.T=1024 --set params.E=16 --set params.top_k=2 \
  --out "$T/m" --trace "$T/m.json" --quiet >"$T/out" 2>"$T/err"
rc=$?
if [[ $rc != 0 ]]; then
  check "INT during the run, --quiet: exit $rc (130), no warning, the error ($(cat "$T/err"))" \
    '[[ $rc == 130 ]] && ! grep -q "stopping the simulation" "$T/err" && grep -q "^trnsim: .*interrupted" "$T/err"'
fi
finish
