#!/usr/bin/env bash
# A run's --out folder moved during the run: usage moved_folder.sh <trnsim-binary> <source-dir>.
# A run locks its --out at its start and writes everything through that folder's handle (sim/io/dir_lock.h):
# renamed, or the symlink on its path repointed, while the run lasts, the folder still gets every file of the
# run (outputs, stats.json, host.json, the trace, the record) where it now is, and the folder now at the old
# path is never touched (issue 22: a tester's host.json in another folder was replaced).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json

# leftovers DIR: temporaries, backups, journals or probes.
leftovers() { find "$1" -name '*.tmp.*' -o -name '.trnsim-trace.*' -o -name '*.old.*' -o -name '.trnsim-journal' -o -name '.trnsim-probe.*'; }

# 1. Stopped after its record is written (the first write step), --out a symlink L -> A: A is renamed A2 and L
# repointed to the user's folder V. The run ends in A2; V keeps its files, gains none.
mkdir -p A V/inputs
ln -s A L
echo victim >V/host.json
echo victim >V/stats.json
echo victim >V/inputs/weights.npy
TRNSIM_TEST_KILL_SIGNAL=STOP TRNSIM_TEST_KILL_AT_WRITE_STEP=1 "$TRNSIM" run "$SMALL" --no-numerics --dump-inputs \
  --out L >"$T/log1" 2>&1 &
pid=$!
if wait_stopped $pid; then
  mv A A2
  ln -sfn V L
  kill -CONT $pid
  wait $pid
  rc=$?
  check "moved at step 1: the run succeeds (exit $rc: $(tail -3 "$T/log1"))" '[[ $rc == 0 ]]'
  check "moved at step 1: the other folder keeps its files and gains none ($(ls -A V V/inputs | tr '\n' ' '))" \
    '[[ $(cat V/host.json V/stats.json V/inputs/weights.npy) == $'"'"'victim\nvictim\nvictim'"'"' && $(ls -A V | tr "\n" " ") == "host.json inputs stats.json " && $(ls -A V/inputs) == weights.npy ]]'
  check "moved at step 1: the moved folder has the whole set" \
    '[[ -s A2/stats.json && -s A2/host.json && -s A2/inputs/weights.npy && -s A2/inputs/output_grad.npy && -s A2/inputs/input_activation.npy ]]'
  check "moved at step 1: its record is complete and names the set" \
    'grep -q "\"state\": \"complete\"" A2/.trnsim-files && grep -q "host.json" A2/.trnsim-files'
  check "moved at step 1: stats reads it" '"$TRNSIM" stats A2/stats.json >/dev/null 2>&1'
  # The summary names where the files are, not the old path (issue 22: "wrote L/stats.json").
  check "moved at step 1: the summary names the folder the files are in ($(grep wrote "$T/log1"))" \
    'grep -qF "wrote $(realpath A2)/stats.json, host.json" "$T/log1" && ! grep -q "wrote L/" "$T/log1" && grep -qF "was moved during the run: its files are in $(realpath A2)" "$T/log1"'
  check "moved at step 1: no leftovers: $(leftovers A2) $(leftovers V)" '[[ -z $(leftovers A2) && -z $(leftovers V) ]]'
else
  bad "moved at step 1: the run did not stop at write step 1 ($(tail -3 "$T/log1"))"
fi

# 2. Moved while it simulates, with its trace inside the folder: B is renamed B2 and a new folder of the user's
# made at B. The trace, stats.json and host.json land in B2; the new B keeps only the user's file.
W=$SRC/configs/workloads/moe/qwen3_30b_a3b_fwd_mxfp8.json
mkdir B
"$TRNSIM" run "$W" --set params.T=512 --set params.E=16 --set params.top_k=2 --no-numerics --out B \
  --trace B/trace.json >"$T/log2" 2>&1 &
pid=$!
# Stopped once the trace's temporary exists (the simulation has begun), never at a fixed time.
for ((i = 0; i < 6000; i++)); do
  [[ -n $(find B -name '.trnsim-trace.*' 2>/dev/null) || ! -e /proc/$pid ]] && break
  sleep 0.02
done
if kill -STOP $pid 2>/dev/null && [[ -n $(find B -name '.trnsim-trace.*') ]]; then
  mv B B2
  mkdir B
  echo mine >B/host.json
  kill -CONT $pid
  wait $pid
  rc=$?
  check "moved while simulating: the run succeeds (exit $rc: $(tail -3 "$T/log2"))" '[[ $rc == 0 ]]'
  check "moved while simulating: the new folder keeps only the user's file ($(ls -A B | tr '\n' ' '))" \
    '[[ $(ls -A B) == host.json && $(cat B/host.json) == mine ]]'
  check "moved while simulating: the trace, stats.json and host.json are in the moved folder" \
    '[[ -s B2/stats.json && -s B2/host.json ]] && python3 -c "import json, sys; json.load(open(sys.argv[1]))" B2/trace.json'
  check "moved while simulating: no leftovers: $(leftovers B2) $(leftovers B)" '[[ -z $(leftovers B2) && -z $(leftovers B) ]]'
else
  wait $pid
  bad "moved while simulating: the run ended before its trace was seen ($(tail -3 "$T/log2"))"
fi
# 3. Scratch files (TRNSIM_SCRATCH_MIN_BYTES: every tensor of 4 KiB or more is a nameless scratch file in the
# output folder, sim/base/host_bytes.h; TRNSIM_SCRATCH_IN_MEMORY_BYTES=0: not a memory file) made after the
# folder moved are made where it now is, through the folder's handle, never in the folder now at its old
# path (issue 22: they were made by path). Stopped at write step 1, every scratch file the run maps is in
# the moved folder (/proc/PID/maps names each "FOLDER/#INODE (deleted)").
mkdir S
TRNSIM_SCRATCH_MIN_BYTES=4096 TRNSIM_SCRATCH_IN_MEMORY_BYTES=0 TRNSIM_TEST_KILL_SIGNAL=STOP \
  TRNSIM_TEST_KILL_AT_WRITE_STEP=1 "$TRNSIM" run "$W" \
  --set params.T=256 --set params.E=8 --set params.top_k=2 --out S --trace S/trace.json >"$T/log3" 2>&1 &
pid=$!
for ((i = 0; i < 6000; i++)); do
  [[ -n $(find S -name '.trnsim-trace.*' 2>/dev/null) || ! -e /proc/$pid ]] && break
  sleep 0.02
done
if kill -STOP $pid 2>/dev/null && [[ -n $(find S -name '.trnsim-trace.*') ]]; then
  mv S S2
  mkdir S
  kill -CONT $pid
  if wait_stopped $pid; then
    scratch=$(grep -o '/[^ ]*/#[0-9]* (deleted)' "/proc/$pid/maps" | sed 's|/#[0-9]* (deleted)$||' | sort | uniq -c | tr '\n' ' ')
    kill -CONT $pid
    wait $pid
    rc=$?
    check "scratch after the move: the run succeeds (exit $rc: $(tail -3 "$T/log3"))" '[[ $rc == 0 ]]'
    check "scratch after the move: every scratch file is in the moved folder ($scratch)" \
      '[[ $scratch == *"$(realpath S2)"* && $scratch != *"$(realpath S) "* ]]'
    check "scratch after the move: the new folder is left alone ($(ls -A S | tr '\n' ' '))" '[[ -z $(ls -A S) ]]'
  else
    wait $pid
    bad "scratch after the move: the run did not stop at write step 1 ($(tail -3 "$T/log3"))"
  fi
else
  wait $pid
  bad "scratch after the move: the run ended before its trace was seen ($(tail -3 "$T/log3"))"
fi
# 4. A chain's stage folder moved during the chain: stopped at write step 1 (its record written, nothing
# renamed yet), O/sa is renamed E and a new O/sa made. The chain's files of that stage belong to the set
# recorded in O (which names them sa/...): the chain is refused naming the stage folder and where it went,
# E keeps the earlier set whole, the new O/sa stays empty and O's record stays the earlier one (before: exit
# 0, the new files went into E beside the earlier out.npy, a mix stats accepted, and O's record named sa/*
# files not in O/sa).
sed -e 's/"n": 25600/"n": 2560/' -e 's/"name": "vector_add_stream_free_dim_2"/"name": "sa"/' \
  "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >sa.json
echo '{"name": "pl", "stages": ["sa.json"]}' >pl.json
"$TRNSIM" run pl.json --out O >/dev/null 2>&1 || bad "the first chain run"
before=$(cat O/sa/stats.json O/sa/out.npy | sha256sum)
record=$(sha256sum <O/.trnsim-files)
TRNSIM_TEST_KILL_SIGNAL=STOP TRNSIM_TEST_KILL_AT_WRITE_STEP=1 "$TRNSIM" run pl.json --no-numerics --out O \
  >"$T/log4" 2>&1 &
pid=$!
if wait_stopped $pid; then
  mv O/sa E
  mkdir O/sa
  kill -CONT $pid
  wait $pid
  rc=$?
  check "stage folder moved at step 1: refused, naming it and where it is (exit $rc: $(tail -1 "$T/log4"))" \
    '[[ $rc == 1 ]] && grep -qF "trnsim: error: O/sa: cannot write: the folder was moved, renamed or removed during the run (the folder this run held is now $(realpath E))" "$T/log4"'
  check "stage folder moved at step 1: the moved folder keeps the earlier set whole ($(ls -A E | tr '\n' ' '))" \
    '[[ $(cat E/stats.json E/out.npy | sha256sum) == "$before" && $(ls -A E | tr "\n" " ") == "host.json out.npy stats.json " ]]'
  check "stage folder moved at step 1: the new stage folder gets nothing ($(ls -A O/sa | tr '\n' ' '))" '[[ -z $(ls -A O/sa) ]]'
  check "stage folder moved at step 1: the chain's record is the earlier one, complete" \
    '[[ $(sha256sum <O/.trnsim-files) == "$record" ]]'
  check "stage folder moved at step 1: no leftovers: $(leftovers E) $(leftovers O)" '[[ -z $(leftovers E) && -z $(leftovers O) ]]'
else
  bad "stage folder moved at step 1: the chain did not stop at write step 1 ($(tail -3 "$T/log4"))"
fi
# 5. The same move after the renames began. The timing-only chain replaces 4 files (chain_stats.json,
# trnsim.log, sa/stats.json, sa/host.json; sa/out.npy is the earlier set's, removed at the end): write step 1
# is the record, 2-5 the temporaries, 6-9 their filling, 10-13 the renames, 14 the folders synced, 15-18 the
# backups removed. Stopped at 10, the move is found once the renames are done, while the
# backups are there: the whole set goes back (E the earlier set, O its earlier chain_stats.json and record)
# and the chain is refused as at step 1. Stopped at 15 the set is in place and stays: the chain says where the
# stage's files are now and that out.npy there is the earlier run's, `trnsim stats` on their old path says
# what happened and on E/stats.json names out.npy (before: both exit 0 with no word, E a mix of the new
# stats.json and the earlier out.npy, and stats said only "no such file", then read E without comment).
for st in 10 15; do
  rm -rf O E
  "$TRNSIM" run pl.json --out O >/dev/null 2>&1 || bad "the first chain run"
  before=$(cat O/sa/stats.json O/sa/out.npy | sha256sum)
  record=$(sha256sum <O/.trnsim-files)
  stats_before=$(sha256sum <O/sa/stats.json)
  chain_before=$(sha256sum <O/chain_stats.json)
  TRNSIM_TEST_KILL_SIGNAL=STOP TRNSIM_TEST_KILL_AT_WRITE_STEP=$st "$TRNSIM" run pl.json --no-numerics --out O \
    >"$T/log5" 2>&1 &
  pid=$!
  if ! wait_stopped $pid; then
    wait $pid
    bad "stage folder moved at step $st: the chain did not stop there ($(tail -3 "$T/log5"))"
    continue
  fi
  mv O/sa E
  kill -CONT $pid
  wait $pid
  rc=$?
  if [[ $st == 10 ]]; then
    check "stage folder moved at step 10: refused, naming it and where it is (exit $rc: $(tail -1 "$T/log5"))" \
      '[[ $rc == 1 ]] && grep -qF "trnsim: error: O/sa: cannot write: the folder was moved, renamed or removed during the run (the folder this run held is now $(realpath E))" "$T/log5"'
    check "stage folder moved at step 10: the set went back whole (E: $(ls -A E | tr '\n' ' '))" \
      '[[ $(cat E/stats.json E/out.npy | sha256sum) == "$before" && $(sha256sum <O/.trnsim-files) == "$record" && $(sha256sum <O/chain_stats.json) == "$chain_before" ]]'
    check "stage folder moved at step 10: no leftovers: $(leftovers E) $(leftovers O)" '[[ -z $(leftovers E) && -z $(leftovers O) ]]'
  else
    check "stage folder moved at step 15: the chain says where the stage's files are (exit $rc: $(grep note "$T/log5"))" \
      '[[ $rc == 0 ]] && grep -qF "trnsim: note: O/sa was moved, renamed or removed during the run, after this run'"'"'s files were in place in it: stats.json, host.json are in $(realpath E), beside the earlier run'"'"'s out.npy (which this run did not remove), not where O/.trnsim-files names them" "$T/log5"'
    msg=$("$TRNSIM" stats O/sa/stats.json 2>&1)
    check "stage folder moved at step 15: stats on the old path says why: $msg" \
      '[[ $? == 1 && $msg == "trnsim: error: O/sa/stats.json: no such file; O/.trnsim-files names it as a file a run wrote there: it, or its folder, was moved, renamed or removed since"* ]]'
    check "stage folder moved at step 15: E holds the chain's new stats.json" \
      '[[ $(sha256sum <E/stats.json) != "$stats_before" ]] && "$TRNSIM" stats E/stats.json >/dev/null 2>&1'
    # stats on the moved folder names the file that is not its stats.json's run (a tester: it read the mix
    # without comment): E got a record of its own, naming out.npy as the earlier run's.
    msg=$("$TRNSIM" stats E/stats.json 2>&1 >/dev/null)
    check "stage folder moved at step 15: stats names the earlier run's file in E: $msg" \
      '[[ $msg == "trnsim: note: E: out.npy is an earlier run'"'"'s, not this stats.json'"'"'s: the run that wrote it did not remove it (it was killed first, or the folder was moved during it); the next run into the folder removes it" ]]'
  fi
done
finish
