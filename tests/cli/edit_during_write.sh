#!/usr/bin/env bash
# An earlier output edited, replaced or made while a run writes its set: usage edit_during_write.sh
# <trnsim-binary> <source-dir>. The check that a file may be replaced (sim/io/replace_check.h) is made again
# under the folder's lock before the renames and before each rename (sim/io/output_files.h): the user's file
# is kept as they left it, the set is rolled back and the run refused, naming the file (issue 22, a fresh
# tester: the check ran once, when the write began, and the backup is a hard link to the same file, so an
# edit made at write steps 1-9 was replaced with no word).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
sed -e 's/"n": 25600/"n": 2560/' "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >va.json
ACT=$SRC/examples/activations_bf16_256x1024.npy

# leftovers DIR: temporaries, backups, journals or probes.
leftovers() { find "$1" -name '*.tmp.*' -o -name '.trnsim-trace.*' -o -name '*.old.*' -o -name '.trnsim-journal' -o -name '.trnsim-probe.*'; }
# edit FILE: the user's edit in place, the same size (only the SHA-256 tells it; mtime may not, within one
# clock tick).
edit() { printf 'X' | dd of="$1" bs=1 seek=0 conv=notrunc status=none; }
# stopped_run STEP LOG ARGS...: trnsim ARGS stopped at write step STEP (SIGSTOP); the PID in $pid.
stopped_run() {
  local st=$1 log=$2
  shift 2
  TRNSIM_TEST_KILL_SIGNAL=STOP TRNSIM_TEST_KILL_AT_WRITE_STEP=$st "$TRNSIM" "$@" >"$log" 2>&1 &
  pid=$!
  wait_stopped $pid
}
# resume: the stopped run goes on; its exit status.
resume() {
  kill -CONT $pid
  wait $pid
}
FILES=(stats.json host.json out.npy trnsim.log)

# 1. A run over an earlier set (stats.json, host.json, out.npy, trnsim.log): write step 1 is the record,
# 2-5 the temporaries and backups, 6-9 the filling, 10-13 the renames in that order. Stopped at each step
# before the renames, one of the earlier files is edited: refused naming it, the edit kept, the earlier set
# and record whole. Stopped at step 10 (stats.json renamed), out.npy is edited; at step 11 (host.json renamed
# too), trnsim.log is replaced by another file (a new inode, as an editor saves): the files renamed already
# go back.
for st in 1 2 3 4 5 6 7 8 9 10 11; do
  f=${FILES[$((st % 4))]}
  [[ $st == 10 ]] && f=out.npy
  rm -rf O
  "$TRNSIM" run va.json --out O >/dev/null 2>&1 || bad "the first run"
  sums=$(cd O && sha256sum "${FILES[@]}" .trnsim-files)
  if ! stopped_run $st "$T/log" run va.json --out O --set params.n=5120; then
    bad "step $st: the run did not stop there ($(tail -2 "$T/log"))"
    continue
  fi
  why="it changed since the run that wrote it ($T/O/.trnsim-files lists it with another SHA-256)"
  if [[ $st == 11 ]]; then
    why="it changed since the run that wrote it ($T/O/.trnsim-files lists it with $(stat -c %s "O/$f") bytes, it has 9 now)"
    echo "my notes" >"$T/mine" && mv "$T/mine" "O/$f"
  else
    edit "O/$f"
  fi
  edited=$(sha256sum <"O/$f")
  resume
  rc=$?
  check "changed $f at step $st: refused naming it (exit $rc: $(grep error "$T/log"))" \
    '[[ $rc == 1 ]] && grep -qF "trnsim: error: O/$f: cannot write: the file there changed while this run was writing its files ($why): it is kept as it is now" "$T/log"'
  check "changed $f at step $st: the change is kept" '[[ $(sha256sum <"O/$f") == "$edited" ]]'
  check "changed $f at step $st: the other files and the record are the earlier run's" \
    '[[ $(cd O && sha256sum "${FILES[@]}" .trnsim-files | grep -v " $f$") == "$(grep -v " $f$" <<<"$sums")" ]]'
  check "changed $f at step $st: no leftovers: $(leftovers O)" '[[ -z $(leftovers O) && ! -e O/.trnsim-files.old ]]'
  [[ $f == stats.json ]] || check "changed $f at step $st: stats reads the folder" '"$TRNSIM" stats O/stats.json >/dev/null 2>&1'
done

# 3. quantize over its earlier outputs (recorded in .trnsim-written): the --data file edited at write step 1
# (its journal written) is kept; and a file the user puts at a new output's path meanwhile is kept too.
q() { "$TRNSIM" quantize "$ACT" --format e4m3 --rule te --axis row "$@"; }
mkdir -p q
q --data q/d.npy --scales q/s.npy >/dev/null 2>&1 || bad "the first quantize"
scales=$(sha256sum <q/s.npy)
if stopped_run 1 "$T/log" quantize "$ACT" --format e4m3 --rule te --axis row --data q/d.npy --scales q/s.npy; then
  edit q/d.npy
  edited=$(sha256sum <q/d.npy)
  resume
  rc=$?
  check "quantize, --data edited at step 1: refused naming it (exit $rc: $(grep error "$T/log"))" \
    '[[ $rc == 1 ]] && grep -qF "trnsim: error: q/d.npy: cannot write: the file there changed while this run was writing its files (it changed since the run that wrote it ($T/q/.trnsim-written lists it with another SHA-256))" "$T/log"'
  check "quantize, --data edited at step 1: kept, the scales the earlier ones, no leftovers: $(leftovers q)" \
    '[[ $(sha256sum <q/d.npy) == "$edited" && $(sha256sum <q/s.npy) == "$scales" && -z $(leftovers q) ]]'
else
  bad "quantize did not stop at step 1 ($(tail -2 "$T/log"))"
fi
if stopped_run 1 "$T/log" quantize "$ACT" --format e4m3 --rule te --axis row --data q/d2.npy --scales q/s2.npy; then
  echo "my data" >q/d2.npy
  resume
  rc=$?
  check "quantize, a file put at --data's path at step 1: refused naming it (exit $rc: $(grep error "$T/log"))" \
    '[[ $rc == 1 ]] && grep -qF "trnsim: error: q/d2.npy: cannot write: a file was put there while this run was writing its files (no trnsim record lists it" "$T/log"'
  check "quantize, a file put at --data's path at step 1: kept, no scales, no leftovers: $(leftovers q)" \
    '[[ $(cat q/d2.npy) == "my data" && ! -e q/s2.npy && -z $(leftovers q) ]]'
else
  bad "quantize did not stop at step 1 ($(tail -2 "$T/log"))"
fi
# With --overwrite the user asked for it: the set is written.
if stopped_run 1 "$T/log" quantize "$ACT" --format e4m3 --rule te --axis row --data q/d.npy --scales q/s.npy --overwrite; then
  edit q/d.npy
  resume
  rc=$?
  check "quantize --overwrite, --data edited at step 1: written (exit $rc: $(tail -1 "$T/log"))" \
    '[[ $rc == 0 && $(head -c 1 q/d.npy) != X ]]'
else
  bad "quantize --overwrite did not stop at step 1 ($(tail -2 "$T/log"))"
fi

# 4. `trnsim stats --html` over a run's recorded OUT/report.html: the record names the bytes trnsim wrote, not
# the file as it is after the rename (tester22f: an edit made at write steps 4-7, the rename to the journal's
# removal, was taken for trnsim's, and the next run removed it as "an earlier run's output"). Its write steps:
# 1 the journal, 2 the temporary and backup, 3 the filling, 4 the rename, 5 the folder synced, 6 the backup
# removed, 7 the journal removed.
if "$TRNSIM" run va.json --out H --report H/report.html >/dev/null 2>"$T/log"; then
  for st in 4 5 6 7; do
    cp -a H H.$st
    if ! stopped_run $st "$T/log" stats H.$st/stats.json --html; then
      bad "stats --html did not stop at step $st ($(tail -2 "$T/log"))"
      continue
    fi
    echo '<!-- my notes -->' >>H.$st/report.html
    resume
    rc=$?
    edited=$(sha256sum <H.$st/report.html)
    check "stats --html, report edited at step $st: written (exit $rc: $(tail -1 "$T/log"))" '[[ $rc == 0 ]]'
    "$TRNSIM" run va.json --out H.$st >"$T/log2" 2>&1
    rc=$?
    check "stats --html, report edited at step $st: the next run keeps it (exit $rc: $(grep report "$T/log2"))" \
      '[[ $rc == 0 && $(sha256sum <H.$st/report.html 2>/dev/null) == "$edited" ]] && ! grep -q "removed.*report.html" "$T/log2"'
    "$TRNSIM" run va.json --out H.$st --report H.$st/report.html >"$T/log2" 2>&1
    rc=$?
    check "stats --html, report edited at step $st: a run with --report refuses it (exit $rc: $(grep error "$T/log2"))" \
      '[[ $rc == 1 && $(sha256sum <H.$st/report.html) == "$edited" ]] && grep -qF "H.$st/report.html" "$T/log2" && grep -qF -- "--overwrite" "$T/log2"'
  done
  # Not edited: still the run's own, replaced by the next --report and removed by a run without one.
  "$TRNSIM" stats H/stats.json --html >/dev/null 2>&1 || bad "stats --html over the run's report"
  "$TRNSIM" run va.json --out H --report H/report.html >"$T/log2" 2>&1
  rc=$?
  check "stats --html, report unchanged: the next --report replaces it ($(grep error "$T/log2"))" '[[ $rc == 0 ]]'
else
  bad "the run with --report ($(tail -2 "$T/log"))"
fi

# 5. A temporary replaced while the set is written (write steps 2-5 make the four temporaries and backups,
# 6-9 fill them): trnsim fills and renames only the file it created, by the descriptor's inode, never what is
# at its name now (tester22f: it reopened the name, so a FIFO there hung the run in open(), and a hard link to
# another file made it write into that file).
for kind in fifo link; do
  rm -rf O
  "$TRNSIM" run va.json --out O >/dev/null 2>&1 || bad "the first run"
  sums=$(cd O && sha256sum "${FILES[@]}" .trnsim-files)
  echo "mine" >"$T/victim"
  if ! stopped_run 5 "$T/log" run va.json --out O --set params.n=5120; then
    bad "$kind: the run did not stop at step 5 ($(tail -2 "$T/log"))"
    continue
  fi
  tmp=$(ls O/.stats.json.tmp.* 2>/dev/null | head -1)
  check "$kind: a temporary for stats.json ($tmp)" '[[ -n $tmp ]]'
  rm -f "$tmp"
  if [[ $kind == fifo ]]; then mkfifo "$tmp"; else ln "$T/victim" "$tmp"; fi
  kill -CONT $pid
  for ((i = 0; i < 600; i++)); do [[ -e /proc/$pid ]] || break; sleep 0.1; done
  if [[ -e /proc/$pid ]]; then
    bad "$kind: the run hangs after its temporary was replaced"
    kill -9 $pid
  fi
  wait $pid
  rc=$?
  check "$kind: refused naming the temporary (exit $rc: $(grep error "$T/log"))" \
    '[[ $rc == 1 ]] && grep -qF "O/stats.json: cannot write: its temporary $(basename "$tmp") was replaced while this run was writing its files" "$T/log"'
  check "$kind: the other file is as it was" '[[ $(cat "$T/victim") == mine ]]'
  check "$kind: the earlier set and record whole" '[[ $(cd O && sha256sum "${FILES[@]}" .trnsim-files) == "$sums" ]]'
done
finish
