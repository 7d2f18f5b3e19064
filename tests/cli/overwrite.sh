#!/usr/bin/env bash
# Nothing the user had is overwritten (issue 22): usage overwrite.sh <trnsim-binary> <source-dir>.
# An output replaces a file already at its path only when a trnsim record of its folder lists that file and
# the file still has the recorded size and SHA-256 (OUT/.trnsim-files of a run folder, DIR/.trnsim-written
# elsewhere: sim/io/replace_check.h), or with --overwrite. Each writer is tried on a file of the user's
# (refused before any work, the message naming the file, the reason and --overwrite, exit 1, nothing
# written), with --overwrite (replaced), and rerun into the same folder without it (replaced: its record
# lists it); a file edited since the run (size or content) is refused; a folder copied with `cp -a` (new
# inodes, same bytes) is still the run's; an older trnsim's manifest (paths only) is taken at its word.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
PROG=$SRC/tests/fuzz/corpus/program/dma_matmul.json
Q=(--format e4m3 --rule te --axis row)

refused() { # MESSAGE FILE REASON: the refusal names FILE, REASON (a pattern) and --overwrite
  [[ $1 == *"'$2': cannot write: a file is there that trnsim will not replace: "$3*"pass --overwrite"* ]]
}
flip_last_byte() { # FILE: the same size, other bytes
  local b
  b=$(tail -c1 "$1" | od -An -tu1 | tr -d ' ')
  printf "\\x$(printf %02x $((b ^ 1)))" | dd of="$1" bs=1 seek=$(($(stat -c %s "$1") - 1)) conv=notrunc status=none
}
NOREC="no trnsim record lists it"
CHANGED="it changed since the run that wrote it"

# 1. trnsim run w.json --out . in a folder holding the user's stats.json, or an output's name (weight_grad.npy).
for f in stats.json weight_grad.npy; do
  mkdir -p "$T/u_$f" && cd "$T/u_$f" && echo "mine" >"$f"
  msg=$("$TRNSIM" run "$W" --out . 2>&1)
  rc=$?
  check "run --out . over the user's $f refused (exit $rc): $msg" \
    '[[ $rc == 1 ]] && refused "$msg" "./$f" "$NOREC" && [[ $(head -c 5 "$f") == mine && $(ls -A) == "$f" ]]'
  "$TRNSIM" run "$W" --out . --overwrite >"$T/out" 2>&1
  rc=$?
  check "run --out . --overwrite replaces $f (exit $rc)" '[[ $rc == 0 && $(head -c 5 "$f") != mine && -f .trnsim-files ]]'
  "$TRNSIM" run "$W" --out . >"$T/out" 2>&1
  rc=$?
  check "rerun into the same folder without --overwrite (exit $rc): $(tail -1 "$T/out")" '[[ $rc == 0 ]]'
  cd "$T" || exit 1
done

# A workload's default folder (out/<name>) holding the user's file.
mkdir -p "$T/d/out/matmul_mxfp8_bwd_512_trn3" && cd "$T/d" && echo "mine" >out/matmul_mxfp8_bwd_512_trn3/host.json
msg=$("$TRNSIM" run "$W" 2>&1)
check "run without --out: out/<name>/host.json of the user's refused: $msg" \
  '[[ $? == 1 ]] && refused "$msg" "out/matmul_mxfp8_bwd_512_trn3/host.json" "$NOREC" && [[ $(head -c 5 out/matmul_mxfp8_bwd_512_trn3/host.json) == mine ]]'
cd "$T" || exit 1

# 2. A run's files edited since: a different size, or the same size with other bytes; a folder copied with
# cp -a (new inodes) is still the run's; an older trnsim's manifest names files by path only.
"$TRNSIM" run "$W" --out "$T/r" >/dev/null 2>&1 || bad "run into $T/r"
cp -a "$T/r" "$T/rc"
"$TRNSIM" run "$W" --out "$T/rc" >"$T/out" 2>&1
rc=$?
check "rerun into a cp -a copy of the folder (exit $rc): $(tail -1 "$T/out")" '[[ $rc == 0 ]]'
# A timing-only run into a cp -a copy of a numerics run's folder keeps the copy's .npy outputs (another inode:
# they may be the user's own, moved back in) but its record keeps naming them, so the next numerics run
# replaces them without --overwrite (a tester: they were left unrecorded and that run was refused).
rm -rf "$T/rt" && cp -a "$T/r" "$T/rt"
"$TRNSIM" run "$W" --out "$T/rt" --no-numerics >"$T/out" 2>&1
rc=$?
check "a --no-numerics run into a cp -a copy keeps its .npy outputs, recorded (exit $rc)" \
  '[[ $rc == 0 && -f $T/rt/weight_grad.npy ]] && grep -q "\"weight_grad.npy\"" "$T/rt/.trnsim-files"'
"$TRNSIM" run "$W" --out "$T/rt" >"$T/out" 2>&1
rc=$?
check "then a numerics run into it (exit $rc): $(grep -m1 error "$T/out")" '[[ $rc == 0 ]]'
# A run with --trace and --report outside OUT killed (SIGKILL) after its files were all in place, before its
# record of them outside OUT: the next run keeps that set and records it, so it replaces them without
# --overwrite (a tester: at steps 14-15 the report was refused for good, "no trnsim record lists it").
VA=$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json
for step in 12 14 15; do
  rm -rf "$T/kt" && mkdir "$T/kt"
  (TRNSIM_TEST_KILL_AT_WRITE_STEP=$step "$TRNSIM" run "$VA" --set params.n=2560 --out "$T/kt/o" \
    --trace "$T/kt/t.pftrace" --report "$T/kt/r.html" >/dev/null 2>&1) 2>/dev/null
  "$TRNSIM" run "$VA" --set params.n=2560 --out "$T/kt/o" --trace "$T/kt/t.pftrace" --report "$T/kt/r.html" \
    >"$T/out" 2>&1
  rc=$?
  check "--trace and --report outside OUT killed at write step $step, then rerun (exit $rc): $(grep -m1 error "$T/out")" \
    '[[ $rc == 0 ]]'
done
# A run into a cp -a copy killed (SIGKILL) while it replaced the files: the next run puts the copy's files back
# and still takes them as the earlier run's (their record names other inodes, the same bytes). Each write step
# before the record turns complete; the test hook kills at the numbered step (sim/io/output_files.h).
for step in 1 3 5 8 10 13; do
  rm -rf "$T/rk" && cp -a "$T/r" "$T/rk"
  (TRNSIM_TEST_KILL_AT_WRITE_STEP=$step TRNSIM_TEST_KILL_SIGNAL=KILL "$TRNSIM" run "$W" --out "$T/rk" \
    --set inputs.output_grad.seed=77 >/dev/null 2>&1) 2>/dev/null
  "$TRNSIM" run "$W" --out "$T/rk" >"$T/out" 2>&1
  rc=$?
  check "a cp -a copy killed at write step $step, then rerun (exit $rc): $(grep -m1 error "$T/out")" '[[ $rc == 0 ]]'
done
echo " " >>"$T/r/stats.json"
msg=$("$TRNSIM" run "$W" --out "$T/r" 2>&1)
check "stats.json grown since the run: refused: $msg" \
  '[[ $? == 1 ]] && refused "$msg" "$T/r/stats.json" "$CHANGED ($T/r/.trnsim-files lists it with * bytes, it has"'
"$TRNSIM" run "$W" --out "$T/r" --overwrite >/dev/null 2>&1 || bad "run --overwrite into $T/r"
size=$(stat -c %s "$T/r/weight_grad.npy")
flip_last_byte "$T/r/weight_grad.npy"
msg=$("$TRNSIM" run "$W" --out "$T/r" 2>&1)
check "weight_grad.npy edited in place (same size): refused: $msg" \
  '[[ $? == 1 && $(stat -c %s "$T/r/weight_grad.npy") == "$size" ]] && refused "$msg" "$T/r/weight_grad.npy" "$CHANGED ($T/r/.trnsim-files lists it with another SHA-256)"'
mkdir -p "$T/v1" && echo "mine" >"$T/v1/stats.json" && printf 'stats.json\n' >"$T/v1/.trnsim-files"
"$TRNSIM" run "$W" --out "$T/v1" >"$T/out" 2>&1
check "an older trnsim's manifest lists stats.json: replaced by its path (exit $?)" '[[ $? == 0 && $(head -c 5 "$T/v1/stats.json") != mine ]]'

# 3. A program run without --out writes into the current folder: x.npy of the user's there.
mkdir -p "$T/p" && cd "$T/p" && cp "$PROG" prog.json && echo "mine" >x.npy
msg=$("$TRNSIM" run prog.json 2>&1)
check "program run without --out over the user's x.npy refused: $msg" \
  '[[ $? == 1 && $(head -c 5 x.npy) == mine ]] && refused "$msg" "./x.npy" "$NOREC" && [[ ! -e .trnsim-written ]]'
"$TRNSIM" run prog.json --overwrite >"$T/out" 2>&1
check "program run --overwrite replaces x.npy (exit $?)" '[[ $? == 0 && $(head -c 5 x.npy) != mine && -f .trnsim-written ]]'
"$TRNSIM" run prog.json >"$T/out" 2>&1
rc=$?
check "program rerun without --overwrite (exit $rc): $(tail -1 "$T/out")" '[[ $rc == 0 ]]'
echo "more" >>x.npy
msg=$("$TRNSIM" run prog.json 2>&1)
check "x.npy edited since: refused: $msg" '[[ $? == 1 ]] && refused "$msg" "./x.npy" "$CHANGED (${T}/p/.trnsim-written lists it with"'
cd "$T" || exit 1

# 4. trnsim quantize --data X.npy --scales Y.npy over the user's files.
IN=$T/r/input_grad.npy
mkdir -p "$T/q" && echo "mine" >"$T/q/X.npy" && echo "mine" >"$T/q/Y.npy"
msg=$("$TRNSIM" quantize "$IN" "${Q[@]}" --data "$T/q/X.npy" --scales "$T/q/Y.npy" 2>&1)
check "quantize over the user's X.npy refused: $msg" \
  '[[ $? == 1 && $(head -c 5 "$T/q/X.npy") == mine && $(head -c 5 "$T/q/Y.npy") == mine ]] && refused "$msg" "$T/q/X.npy" "$NOREC"'
rm "$T/q/X.npy"
msg=$("$TRNSIM" quantize "$IN" "${Q[@]}" --data "$T/q/X.npy" --scales "$T/q/Y.npy" 2>&1)
check "quantize over the user's Y.npy refused: $msg" \
  '[[ $? == 1 && ! -e $T/q/X.npy && $(head -c 5 "$T/q/Y.npy") == mine ]] && refused "$msg" "$T/q/Y.npy" "$NOREC"'
"$TRNSIM" quantize "$IN" "${Q[@]}" --data "$T/q/X.npy" --scales "$T/q/Y.npy" --overwrite >/dev/null 2>&1
check "quantize --overwrite (exit $?)" '[[ $? == 0 && $(head -c 5 "$T/q/Y.npy") != mine ]]'
"$TRNSIM" quantize "$IN" "${Q[@]}" --data "$T/q/X.npy" --scales "$T/q/Y.npy" >/dev/null 2>"$T/out"
rc=$?
check "quantize rerun without --overwrite (exit $rc): $(cat "$T/out")" '[[ $rc == 0 ]]'
echo "x" >>"$T/q/Y.npy"
msg=$("$TRNSIM" quantize "$IN" "${Q[@]}" --data "$T/q/X.npy" --scales "$T/q/Y.npy" 2>&1)
check "quantize: Y.npy edited since: refused: $msg" '[[ $? == 1 ]] && refused "$msg" "$T/q/Y.npy" "$CHANGED"'

# 5. --trace, --report, trnsim stats --html, trnsim tune --write over the user's files.
cd "$T" || exit 1
for opt in trace report; do
  f=$T/mine_$opt.$([[ $opt == trace ]] && echo pftrace || echo html)
  echo "mine" >"$f"
  msg=$("$TRNSIM" run "$W" --out "$T/o_$opt" --$opt "$f" 2>&1)
  check "run --$opt over the user's file refused: $msg" \
    '[[ $? == 1 && $(head -c 5 "$f") == mine && ! -e $T/o_$opt ]] && refused "$msg" "$f" "$NOREC"'
  "$TRNSIM" run "$W" --out "$T/o_$opt" --$opt "$f" --overwrite >/dev/null 2>&1
  check "run --$opt --overwrite (exit $?)" '[[ $? == 0 && $(head -c 5 "$f") != mine ]]'
  "$TRNSIM" run "$W" --out "$T/o_$opt" --$opt "$f" >"$T/out" 2>&1
  rc=$?
  check "run --$opt rerun without --overwrite (exit $rc): $(tail -1 "$T/out")" '[[ $rc == 0 ]]'
done
echo "mine" >"$T/mine_html.html"
msg=$("$TRNSIM" stats "$T/r/stats.json" --html="$T/mine_html.html" 2>&1)
check "stats --html over the user's file refused: $msg" \
  '[[ $? == 1 && $(head -c 5 "$T/mine_html.html") == mine ]] && refused "$msg" "$T/mine_html.html" "$NOREC"'
"$TRNSIM" stats "$T/r/stats.json" --html="$T/mine_html.html" --overwrite >/dev/null 2>&1
check "stats --html --overwrite (exit $?)" '[[ $? == 0 && $(head -c 5 "$T/mine_html.html") != mine ]]'
"$TRNSIM" stats "$T/r/stats.json" --html="$T/mine_html.html" >"$T/out" 2>&1
rc=$?
check "stats --html rerun (exit $rc): $(tail -1 "$T/out")" '[[ $rc == 0 ]]'
# stats --html over the report a run wrote into its folder (--report OUT/report.html, the default path of
# stats --html): replaced as a file trnsim wrote, and the run's record then names the new one (before: refused
# as "one of the files a run wrote", also with --overwrite); edited since, refused unless --overwrite; the
# next run without --report removes it as the run's own.
"$TRNSIM" run "$W" --out "$T/hr" --report "$T/hr/report.html" >"$T/out" 2>&1 || bad "run --report into OUT"
"$TRNSIM" stats "$T/hr/stats.json" --html >"$T/out" 2>&1
rc=$?
check "stats --html over the run's own report.html (exit $rc): $(tail -1 "$T/out")" \
  '[[ $rc == 0 && $(tail -1 "$T/out") == "wrote $T/hr/report.html" ]]'
check "... the run's record names the new report" \
  '/usr/bin/python3 -c "import json,hashlib,sys; m=json.load(open(sys.argv[1])); e=[f for f in m[\"files\"] if f[\"path\"]==\"report.html\"][0]; sys.exit(e[\"sha256\"]!=hashlib.sha256(open(sys.argv[2],\"rb\").read()).hexdigest())" "$T/hr/.trnsim-files" "$T/hr/report.html"'
msg=$("$TRNSIM" stats "$T/r/stats.json" --html="$T/hr/report.html" 2>&1)
check "stats --html of another run over a run's report: refused: $msg" \
  '[[ $? == 1 && $msg == *"cannot write: it is one of the files a run wrote into $T/hr"* ]]'
echo "<!-- mine -->" >>"$T/hr/report.html"
msg=$("$TRNSIM" stats "$T/hr/stats.json" --html 2>&1)
check "stats --html over the run's report edited since: refused: $msg" \
  '[[ $? == 1 && $(tail -1 "$T/hr/report.html") == "<!-- mine -->" ]] && refused "$msg" "$T/hr/report.html" "$CHANGED"'
"$TRNSIM" stats "$T/hr/stats.json" --html --overwrite >"$T/out" 2>&1
rc=$?
check "... with --overwrite: replaced (exit $rc): $(tail -1 "$T/out")" \
  '[[ $rc == 0 && $(tail -1 "$T/hr/report.html") != "<!-- mine -->" ]]'
"$TRNSIM" run "$W" --out "$T/hr" >"$T/out" 2>&1
rc=$?
check "the next run without --report removes the report as the run's (exit $rc)" \
  '[[ $rc == 0 && ! -e $T/hr/report.html ]] && grep -q "^removed $T/hr/report.html" "$T/out"'
printf '{"name": "ow", "workload": "%s", "set": {"numerics": false}, "axes": [{"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1]}]}' \
  "$W" >"$T/tw.json"
echo "mine" >"$T/best.json"
msg=$("$TRNSIM" tune "$T/tw.json" --budget 1 --out "$T/tn" --no-report --write "$T/best.json" 2>&1)
check "tune --write over the user's file refused: $msg" \
  '[[ $? == 1 && $(head -c 5 "$T/best.json") == mine && ! -e $T/tn ]] && refused "$msg" "$T/best.json" "$NOREC"'
"$TRNSIM" tune "$T/tw.json" --budget 1 --out "$T/tn" --no-report --write "$T/best.json" --overwrite >"$T/out" 2>&1
rc=$?
check "tune --write --overwrite (exit $rc): $(tail -1 "$T/out")" '[[ $rc == 0 && $(head -c 5 "$T/best.json") != mine ]]'
"$TRNSIM" tune "$T/tw.json" --budget 1 --out "$T/tn" --no-report --write "$T/best.json" >"$T/out" 2>&1
rc=$?
check "tune --write rerun (exit $rc): $(tail -1 "$T/out")" '[[ $rc == 0 ]]'

# Names trnsim gives its own temporaries (a record's "..trnsim-files.tmp.PID.N", a probe's
# ".trnsim-probe.PID.N") are refused as outputs: the next trnsim in the folder removes them as a killed
# writer's leftovers (a tester: a quantize --data and a stats --html named so were deleted by the next run).
mkdir -p "$T/lo"
msg=$("$TRNSIM" quantize "$SRC/examples/activations_bf16_256x1024.npy" --format e4m3 --rule te --axis row \
  --data "$T/lo/..trnsim-journal.tmp.99999.1" --scales "$T/lo/s.npy" 2>&1)
check "quantize --data named as a record's temporary: refused (exit $?): $msg" \
  '[[ $msg == *"..trnsim-journal.tmp.99999.1 is a name trnsim gives its own temporary files"* && -z $(ls -A "$T/lo") ]]'
"$TRNSIM" run "$W" --no-numerics --out "$T/lo/o" >/dev/null 2>&1 || bad "a run for stats --html"
msg=$("$TRNSIM" stats "$T/lo/o/stats.json" --html="$T/lo/o/.trnsim-probe.12345678.0" 2>&1)
check "stats --html named as a probe: refused (exit $?): $msg" \
  '[[ $msg == *".trnsim-probe.12345678.0 is a name trnsim gives its own temporary files"* && ! -e $T/lo/o/.trnsim-probe.12345678.0 ]]'
finish
