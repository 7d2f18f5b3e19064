#!/usr/bin/env bash
# A single run into a finished chain's stage folder: usage stage_folder.sh <trnsim-binary> <source-dir>.
# A chain writes OUT/<stage>/ folders and one record of the whole set (OUT/.trnsim-files, beside
# OUT/chain_stats.json). `trnsim run W --out OUT/<stage>` is refused (exit 1, naming the stage, the chain's
# record and --replace-stage) and the stage's files stay the chain's; with --replace-stage it runs, and then
# `trnsim stats` on the stage notes that the stage was replaced since the chain ran and on chain_stats.json
# says the chain's set is mixed. A single run holds its --out's lock before any kernel code runs: a run
# whose Python kernel is slow to build keeps a second run out of the folder from its start; so does a chain
# whose stage is slow to build.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
sha() { sha256sum "$1" | cut -c1-64; }

sed -e 's/"n": 25600/"n": 2560/' -e 's/"name": "vector_add_stream_free_dim_2"/"name": "va"/' \
  "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >va.json
echo '{"name": "pl", "stages": ["va.json"]}' >pl.json
"$TRNSIM" run pl.json --out O >out 2>&1
rc=$?
check "the chain runs (exit $rc: $(tail -2 out))" '[[ $rc == 0 && -f O/va/stats.json && -f O/chain_stats.json ]]'
before=$(sha O/va/stats.json)

# 1. Refused by default: the stage's files stay the chain's.
msg=$("$TRNSIM" run va.json --set params.n=1280 --out O/va 2>&1)
rc=$?
check "a single run into the stage folder is refused (exit $rc): $msg" \
  '[[ $rc == 1 && $msg == *"--out O/va: is stage '"'"'va'"'"' of the chain recorded in"*".trnsim-files"*"--replace-stage"* ]]'
check "the stage's stats.json is still the chain's" '[[ $(sha O/va/stats.json) == "$before" ]]'
"$TRNSIM" stats O/va/stats.json >st.txt 2>st.err
rc=$?
check "stats on the untouched stage: exit 0, no note ($(cat st.err))" '[[ $rc == 0 && ! -s st.err ]]'

# 1b. The stage folder under another name is the same folder (judged by device and inode, not the path's
# text): a symlink to it, a bind mount of it, and a symlink to a run's --dump-inputs folder are refused the
# same way (before: each wrote into the set with exit 0).
ln -s O/va sal
msg=$("$TRNSIM" run va.json --set params.n=1280 --out sal 2>&1)
rc=$?
check "a run into a symlink to the stage folder is refused (exit $rc): $msg" \
  '[[ $rc == 1 && $msg == *"--out sal: is stage '"'"'va'"'"' of the chain recorded in $T/O "*"--replace-stage"* ]]'
check "... the stage's stats.json is still the chain's" '[[ $(sha O/va/stats.json) == "$before" ]]'
mkdir bm
if mount --bind O/va bm 2>/dev/null; then
  msg=$("$TRNSIM" run va.json --set params.n=1280 --out bm 2>&1)
  rc=$?
  umount bm
  check "a run into a bind mount of the stage folder is refused (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == *"--out bm: is stage '"'"'va'"'"' of the chain recorded in $T/O "*"--replace-stage"* ]]'
  check "... the stage's stats.json is still the chain's" '[[ $(sha O/va/stats.json) == "$before" ]]'
else
  echo "stage_folder: mount --bind is not permitted here: the bind-mount case is skipped"
fi
"$TRNSIM" run va.json --dump-inputs --out R >out 2>&1
check "a run with --dump-inputs (exit $?)" '[[ -d R/inputs ]]'
ln -s R/inputs il
msg=$("$TRNSIM" run va.json --out il 2>&1)
rc=$?
check "a run into a symlink to a run's inputs folder is refused (exit $rc): $msg" \
  '[[ $rc == 1 && $msg == *"--out il: is the folder '"'"'inputs'"'"' of the run recorded in $T/R "*"--replace-stage"* && ! -e R/inputs/stats.json ]]'

# 2. --replace-stage: the run replaces the stage, and stats says the chain's set is mixed.
"$TRNSIM" run va.json --set params.n=1280 --out O/va --replace-stage >out 2>&1
rc=$?
check "--replace-stage runs (exit $rc: $(tail -2 out))" '[[ $rc == 0 && $(sha O/va/stats.json) != "$before" ]]'
"$TRNSIM" stats O/va/stats.json >st.txt 2>st.err
rc=$?
check "stats on the replaced stage notes it (exit $rc): $(cat st.err)" \
  '[[ $rc == 0 && $(cat st.err) == *"stage '"'"'va'"'"' of the chain in"*"was replaced since that chain ran (va/stats.json"*"mixed"* ]]'
msg=$("$TRNSIM" stats O/chain_stats.json 2>&1)
check "stats on chain_stats.json says the set is mixed: $msg" \
  '[[ $msg == *"The chain'"'"'s set is mixed: va/stats.json"*"replaced since the chain ran"* ]]'
# The chain run again: a consistent set, nothing to note.
"$TRNSIM" run pl.json --out O >out 2>&1
"$TRNSIM" stats O/va/stats.json >st.txt 2>st.err
check "after the chain ran again: no note ($(cat st.err))" '[[ ! -s st.err && $(sha O/va/stats.json) == "$before" ]]'

# 3. The lock comes before the kernel's code: run A's Python kernel takes 4 s to build; run B, started a
# second later into the same folder, is refused at once (before: B ran and A wrote over it afterwards).
cat >slow.py <<'PY'
import time

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def copy_kernel(x, delay=0.0):
    time.sleep(delay)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm, name="y")
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out
PY
cat >slow.json <<'JSON'
{"name": "slow", "hardware": "trn2", "lnc": 1, "kernel": {"nki": "slow.py", "function": "copy_kernel"},
 "params": {"delay": 0.0},
 "inputs": {"x": {"generator": "normal", "seed": 1, "std": 1.0, "shape": [128, 64], "dtype": "float32"}},
 "numerics": false}
JSON
if [[ $("$TRNSIM" validate slow.json 2>&1) != *"built without Python support"* ]]; then
  "$TRNSIM" run slow.json --set params.delay=4.0 --out D >a.txt 2>&1 &
  a=$!
  sleep 1
  msg=$("$TRNSIM" run slow.json --out D 2>&1)
  rc=$?
  wait $a
  rca=$?
  check "run B is refused while run A builds its kernel (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == *"--out D:"*"lock"* ]]'
  check "run A completes (exit $rca: $(tail -1 a.txt))" '[[ $rca == 0 ]]'

  # The same for a chain: its folder (from the chain's name, out/<name>, or --out) is locked before any stage
  # is built (before: the chain built its stages, 4 s here, and only then took the lock).
  echo '{"name": "slowchain", "stages": ["slow.json"]}' >slowchain.json
  mkdir cw
  (cd cw && "$TRNSIM" run ../slowchain.json --set slow.params.delay=4.0) >c.txt 2>&1 &
  a=$!
  sleep 1
  msg=$(cd cw && "$TRNSIM" run ../slow.json --out out/slowchain 2>&1)
  rc=$?
  wait $a
  rca=$?
  check "a run is refused while a chain builds its stages (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == *"--out out/slowchain:"*"lock"* ]]'
  check "the chain completes (exit $rca: $(tail -1 c.txt))" '[[ $rca == 0 && -f cw/out/slowchain/chain_stats.json ]]'
fi

# 4. A chain killed after every new file of its set was in place (its record in state "writing" with each
# file the new one, or already "complete") but before it removed the earlier set's files it does not write
# again: `trnsim stats` on a stage's stats.json notes the earlier run's out.npy beside it, as it does for a
# single run's folder (before: no note; the record that names it is the chain's, one level up).
sed -e 's/"name": "va"/"name": "sa"/' va.json >sa.json
echo '{"name": "pl2", "stages": ["sa.json"]}' >pl2.json
noted=0
for st in $(seq 1 40); do
  rm -rf K
  "$TRNSIM" run pl2.json --out K >/dev/null 2>&1
  old=$(sha K/sa/stats.json)
  { TRNSIM_TEST_KILL_AT_WRITE_STEP=$st "$TRNSIM" run pl2.json --no-numerics --out K >/dev/null 2>&1; } 2>/dev/null
  rc=$?
  [[ $rc == 0 ]] && break
  # Only where the new stats.json stands beside the earlier out.npy and stats reads it (not a refused mix).
  [[ -e K/sa/out.npy && $(sha K/sa/stats.json) != "$old" ]] || continue
  msg=$("$TRNSIM" stats K/sa/stats.json 2>&1 >/dev/null)
  src=$?
  [[ $src == 0 ]] || continue
  noted=$((noted + 1))
  check "killed at step $st: stats on the stage notes the earlier out.npy (exit $src): $msg" \
    '[[ $msg == "trnsim: note: K/sa: out.npy is an earlier run'"'"'s, not this stats.json'"'"'s: the run that wrote it did not remove it (it was killed first, or the folder was moved during it); the next run into $T/K (the chain'"'"'s folder) removes it" ]]'
  "$TRNSIM" run pl2.json --no-numerics --out K >/dev/null 2>&1
  check "killed at step $st: the chain's next run removes it" '[[ ! -e K/sa/out.npy ]]'
done
check "the kill steps that leave the earlier out.npy beside the new set ($noted)" '[[ $noted -ge 2 ]]'

# 5. A chain over a stage folder that holds an earlier single run's set (its out.npy and its own record
# .trnsim-files): the chain takes that set as the folder's earlier one. The out.npy it does not write again
# is removed, as a run removes its folder's earlier files, and so is that record; a file of the user's there
# stays, and so does an out.npy replaced since the single run (not the file its record names). Before: the
# single run's out.npy and record stayed beside the chain's stats.json, and stats said nothing.
rm -rf P
"$TRNSIM" run sa.json --out P/sa >/dev/null 2>&1
echo mine >P/sa/notes.txt
"$TRNSIM" run pl2.json --no-numerics --out P >out 2>&1
rc=$?
check "a chain over a single run's folder (exit $rc): that run's out.npy and record are removed, the user's file stays ($(ls -A P/sa | tr '\n' ' '))" \
  '[[ $rc == 0 && ! -e P/sa/out.npy && ! -e P/sa/.trnsim-files && $(cat P/sa/notes.txt) == mine ]] && grep -q "^removed P/sa/out.npy: an earlier run" out'
"$TRNSIM" stats P/sa/stats.json >st.txt 2>st.err
check "... stats on the stage: exit $?, no note ($(cat st.err))" '[[ ! -s st.err ]]'
rm -rf P
"$TRNSIM" run sa.json --out P/sa >/dev/null 2>&1
cp P/sa/out.npy keep.npy && echo changed >>keep.npy && mv keep.npy P/sa/out.npy
"$TRNSIM" run pl2.json --no-numerics --out P >out 2>&1
rc=$?
check "a chain over a single run's folder whose out.npy was replaced since (exit $rc): it stays" \
  '[[ $rc == 0 && $(tail -c 8 P/sa/out.npy) == changed && ! -e P/sa/.trnsim-files ]] && ! grep -q "^removed P/sa/out.npy" out'

finish
