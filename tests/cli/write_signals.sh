#!/usr/bin/env bash
# A run ended during its writes, into a folder an earlier run wrote: usage write_signals.sh <trnsim-binary>
# <source-dir>. Every write step of the set (sim/io/output_files.h) is hit with TRNSIM_TEST_KILL_AT_WRITE_STEP.
#   1. A handled signal (INT, TERM, HUP, USR1, ALRM, XCPU) before the renames puts every file back and the
#      folder's record too, byte for byte: `trnsim stats` reads the folder as the earlier run's (issue 22: the
#      record was left in state "writing" and stats refused the intact folder, "already replaced: ...");
#      during the renames the signal waits and the set is the new one; after, the stale files go or the
#      record keeps them.
#   2. A SIGKILL after the record says "complete" and before the earlier set's stale files are removed: the
#      record keeps naming them, `trnsim stats` says they are still there, and the next run removes them
#      (issue 22: they stayed for good beside a --no-numerics stats.json).
#   4. A SIGTERM (SIGQUIT, SIGBUS) once the set is in place, while the run prints its summary: exit 143 (the
#      process was ended by the signal), the folder complete, and the run says so (tester22j: "interrupted
#      (SIGTERM)" alone, which read as a lost run).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
# leftovers DIR: temporaries, backups (the record's too), journals or probes.
leftovers() { find "$1" -name '*.tmp.*' -o -name '.trnsim-trace.*' -o -name '*.old.*' -o -name '.trnsim-files.old' -o -name '.trnsim-journal' -o -name '.trnsim-probe.*'; }
state() { grep -o '"state": "[a-z]*"' "$1/.trnsim-files"; }

# 1. With numerics the set is stats.json, host.json, two outputs and trnsim.log: step 1 the record, 2-6
# temporaries and backups, 7-11 filled, 12-16 renames, 17 the folder synced, 18-22 backups removed, 23 the
# record complete.
"$TRNSIM" run "$SMALL" --out ci >"$T/log0" 2>&1 || bad "first run failed: $(tail -3 "$T/log0")"
trial() {  # trial SIG STEP
  local sig=$1 n=$2 rc code log=$T/log.$1.$2
  cp -p ci/.trnsim-files "$T/record.before"
  { (TRNSIM_TEST_KILL_SIGNAL=$sig TRNSIM_TEST_KILL_AT_WRITE_STEP=$n exec "$TRNSIM" run "$SMALL" --out ci) >"$log" 2>&1; } 2>/dev/null
  rc=$?  # (bash says "Terminated" and such otherwise)
  code=$((128 + $(kill -l "$sig")))
  check "$sig at step $n: the run dies of it (exit $rc, expected $code: $(tail -2 "$log"))" '[[ $rc == $code ]]'
  msg=$("$TRNSIM" stats ci/stats.json 2>&1 >/dev/null)
  check "$sig at step $n: stats reads the folder (exit $?): $msg" '[[ $? == 0 && -z $msg ]]'
  check "$sig at step $n: no leftovers: $(leftovers ci)" '[[ -z $(leftovers ci) ]]'
  check "$sig at step $n: the record is complete ($(state ci))" '[[ $(state ci) == "\"state\": \"complete\"" ]]'
  if ((n <= 11)); then
    check "$sig at step $n (before the renames): the earlier record is back, byte for byte" \
      'cmp -s ci/.trnsim-files "$T/record.before"'
  fi
  check "$sig at step $n: the folder holds the set ($(ls -A ci | tr '\n' ' '))" \
    '[[ $(ls -A ci | tr "\n" " ") == ".trnsim-files host.json input_grad.npy stats.json trnsim.log weight_grad.npy " ]]'
}
for n in $(seq 1 23); do trial INT "$n"; done
for sig in TERM HUP USR1 ALRM XCPU; do
  for n in 1 6 11 14; do trial "$sig" "$n"; done
done

# 2. The same folder then written by a --no-numerics run: stats.json, host.json and trnsim.log, step 1 the
# record, 2-4 temporaries and backups, 5-7 filled, 8-10 renames, 11 the folder synced, 12-14 backups removed,
# 15 the record complete, 16-17 the two earlier outputs removed.
for n in 10 11 12 13 14 15 16 17; do
  rm -rf k
  "$TRNSIM" run "$SMALL" --out k >"$T/logk" 2>&1 || bad "first run into k failed: $(tail -3 "$T/logk")"
  { (TRNSIM_TEST_KILL_AT_WRITE_STEP=$n exec "$TRNSIM" run "$SMALL" --no-numerics --out k) >/dev/null 2>&1; } 2>/dev/null
  left=$(cd k && ls *.npy 2>/dev/null | tr '\n' ' ')
  msg=$("$TRNSIM" stats k/stats.json 2>&1 >/dev/null)
  rc=$?
  if [[ -z $left ]]; then
    check "SIGKILL at step $n: no earlier output left, stats reads the folder quietly (exit $rc): $msg" \
      '[[ $rc == 0 && -z $msg ]]'
  else
    # The files are stats.json and host.json of the --no-numerics run beside the first run's outputs.
    check "SIGKILL at step $n: stats reads the folder (exit $rc) and names the earlier outputs still there ($left): $msg" \
      '[[ $rc == 0 && $msg == *"note"* && $msg == *"${left%% *}"* ]]'
  fi
  "$TRNSIM" run "$SMALL" --no-numerics --out k >"$T/logk2" 2>&1
  rc=$?
  check "SIGKILL at step $n: the next run succeeds (exit $rc: $(tail -2 "$T/logk2"))" '[[ $rc == 0 ]]'
  check "SIGKILL at step $n: the next run removed the earlier outputs ($(ls -A k | tr '\n' ' '))" \
    '[[ $(ls -A k | tr "\n" " ") == ".trnsim-files host.json stats.json trnsim.log " ]]'
  check "SIGKILL at step $n: stats reads the folder quietly" '[[ -z $("$TRNSIM" stats k/stats.json 2>&1 >/dev/null) ]]'
  check "SIGKILL at step $n: the record names no earlier set" '! grep -q previous k/.trnsim-files'
done

# 3. A handled signal from the first rename on (steps 8-17 of the --no-numerics run above) waits until the
# earlier set's files are removed too, then ends the run with a message: the folder is the new set alone
# (a tester found the process ended silently there, before the removal, leaving the earlier outputs).
for n in 8 9 10 11 12 13 14 15 16 17; do
  rm -rf k
  "$TRNSIM" run "$SMALL" --out k >"$T/logk" 2>&1 || bad "first run into k failed: $(tail -3 "$T/logk")"
  { (TRNSIM_TEST_KILL_SIGNAL=TERM TRNSIM_TEST_KILL_AT_WRITE_STEP=$n exec "$TRNSIM" run "$SMALL" --no-numerics \
    --out k) >"$T/logt" 2>&1; } 2>/dev/null
  rc=$?
  check "TERM at step $n: exit $rc (143), says so: $(tail -1 "$T/logt")" \
    '[[ $rc == 143 && $(cat "$T/logt") == *"interrupted (SIGTERM) once the files being written were all in place"* ]]'
  check "TERM at step $n: the folder is the new set ($(ls -A k | tr '\n' ' '))" \
    '[[ $(ls -A k | tr "\n" " ") == ".trnsim-files host.json stats.json trnsim.log " ]]'
  check "TERM at step $n: stats reads the folder quietly" '[[ -z $("$TRNSIM" stats k/stats.json 2>&1 >/dev/null) ]]'
  check "TERM at step $n: the record is complete and names no earlier set" \
    '[[ $(state k) == "\"state\": \"complete\"" ]] && ! grep -q previous k/.trnsim-files'
done
# 4. stdout is a FIFO whose pipe is full (this test holds both ends, reading nothing): the run blocks at its
# first stdout write, the summary, after its set is committed; then the signal: TERM, and QUIT and BUS (sent
# by kill, core-dump signals with their own handlers; tester27r: they said "interrupted (SIGQUIT)" alone).
# No core file: ulimit -c 0.
mkfifo "$T/fifo"
for sig in TERM QUIT BUS; do
  rm -rf k
  exec 3<>"$T/fifo"
  head -c 65536 /dev/zero >&3
  (ulimit -c 0; exec "$TRNSIM" run "$SMALL" --no-numerics --out k) >"$T/fifo" 2>"$T/logs" &
  rp=$!
  for ((i = 0; i < 1200; i++)); do [[ -s k/stats.json && $(state k 2>/dev/null) == *complete* ]] && break; sleep 0.05; done
  sleep 0.5
  kill -"$sig" $rp
  { wait $rp; } 2>/dev/null
  rc=$?
  exec 3<&-
  code=$((128 + $(kill -l "$sig")))
  check "$sig after the set is in place: exit $rc ($code), says the folder is complete: $(cat "$T/logs")" \
    '[[ $rc == $code && $(cat "$T/logs") == *"trnsim: interrupted (SIG$sig)"*"trnsim: every file of the run was written before the signal: k is complete"* ]]'
  check "$sig: the folder is the run's set ($(ls -A k | tr '\n' ' '))" \
    '[[ $(ls -A k | tr "\n" " ") == ".trnsim-files host.json stats.json trnsim.log " && -z $("$TRNSIM" stats k/stats.json 2>&1 >/dev/null) ]]'
done
finish
