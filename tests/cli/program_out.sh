#!/usr/bin/env bash
# A program run (`trnsim run PROGRAM.json --out DIR`) writes its set into DIR as a workload run does
# (issue 22): usage program_out.sh <trnsim-binary> <source-dir>. Killed at any step of its writes, the
# folder holds one run's set or is marked so that `trnsim stats` refuses it; into a workload run's folder
# it replaces the earlier set and the manifest (the workload's outputs go), and the next workload run
# removes the program's outputs as an earlier run's.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
PROG=$SRC/tests/fuzz/corpus/program/dma_matmul.json

# Two programs that differ in their file name (stats.json records it) and their output's values.
cp "$PROG" "$T/A.json"
sed 's/"seed": 1}/"seed": 7}/' "$PROG" >"$T/B.json"
check "B differs from A" '! cmp -s "$T/A.json" "$T/B.json"'
for s in A B; do "$TRNSIM" run "$T/$s.json" --out "$T/ref_$s" >/dev/null 2>&1 || bad "reference run $s"; done
check "the two outputs differ" '! cmp -s "$T/ref_A/x.npy" "$T/ref_B/x.npy"'
# host.json holds the wall time, so it is told apart by the copy A's run left (hostA), when there is one.
state() { # A, B or mixed
  local s
  for s in A B; do
    if grep -qF "$T/$s.json" "$1/stats.json" 2>/dev/null && cmp -s "$1/x.npy" "$T/ref_$s/x.npy"; then
      if [[ -f $T/hostA ]]; then
        if [[ $s == A ]] && ! cmp -s "$1/host.json" "$T/hostA"; then break; fi
        if [[ $s == B ]] && cmp -s "$1/host.json" "$T/hostA"; then break; fi
      fi
      echo "$s"
      return
    fi
  done
  echo mixed
}

# 1. Killed at every step while B replaces A: a consistent set, or stats refuses the folder; the next run
# puts it right.
for step in 1 2 3 4 5 6 7 8 9 10; do
  rm -rf "$T/P" && cp -r "$T/ref_A" "$T/P"
  "$TRNSIM" run "$T/A.json" --out "$T/P" >/dev/null 2>&1 # the folder's manifest records A
  cp "$T/P/host.json" "$T/hostA"
  { (TRNSIM_TEST_KILL_AT_WRITE_STEP=$step exec "$TRNSIM" run "$T/B.json" --out "$T/P" >/dev/null 2>&1); } 2>/dev/null # bash says "Killed"
  rc=$?
  s=$(state "$T/P")
  msg=$("$TRNSIM" stats "$T/P/stats.json" 2>&1)
  src=$?
  if [[ $s == mixed ]]; then
    check "step $step (exit $rc): a mix, and stats says so (exit $src: ${msg:0:200})" \
      '[[ $src == 1 && $msg == *"was killed while it replaced the folder"* ]]'
  else
    check "step $step (exit $rc): set $s, stats reads it (exit $src: ${msg:0:200})" '[[ $src == 0 ]]'
  fi
  rm -f "$T/hostA"
  "$TRNSIM" run "$T/B.json" --out "$T/P" >"$T/rec.txt" 2>&1
  check "step $step: the next run gives set B ($(state "$T/P"))" '[[ $(state "$T/P") == B ]]'
  check "step $step: manifest complete" 'grep -qF "\"state\": \"complete\"" "$T/P/.trnsim-files"'
done

# 2. A program run into a workload run's folder replaces the set: the workload's outputs go, the manifest
# lists the program's files; the next workload run removes x.npy as an earlier run's output.
"$TRNSIM" run "$W" --no-numerics --dump-inputs --out "$T/O" >/dev/null 2>&1 || bad "workload run"
check "workload inputs written" '[[ -f $T/O/inputs/weights.npy ]]'
"$TRNSIM" run "$T/A.json" --out "$T/O" >"$T/p.txt" 2>&1
rc=$?
check "program run exit 0 ($rc): $(tail -2 "$T/p.txt")" '[[ $rc == 0 ]]'
check "the workload's outputs removed: $(ls -R "$T/O" | tr '\n' ' ')" '[[ ! -e $T/O/inputs/weights.npy ]]'
check "says what it removed" 'grep -qF "removed $T/O/inputs/weights.npy: an earlier run" "$T/p.txt"'
check "manifest lists x.npy and stats.json" \
  'grep -qF "\"path\": \"x.npy\"" "$T/O/.trnsim-files" && grep -qF "\"path\": \"stats.json\"" "$T/O/.trnsim-files"'
check "manifest no longer lists the workload's inputs" '! grep -qF "inputs/" "$T/O/.trnsim-files"'
check "manifest complete" 'grep -qF "\"state\": \"complete\"" "$T/O/.trnsim-files"'
check "folder is set A" '[[ $(state "$T/O") == A ]]'
"$TRNSIM" run "$W" --no-numerics --out "$T/O" >"$T/w.txt" 2>&1
check "next workload run removes x.npy: $(tail -2 "$T/w.txt")" \
  '[[ ! -e $T/O/x.npy ]] && grep -qF "removed $T/O/x.npy: an earlier run" "$T/w.txt"'

finish
