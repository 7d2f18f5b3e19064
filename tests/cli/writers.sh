#!/usr/bin/env bash
# Several writers, and records that cannot be written: usage writers.sh <trnsim-binary> <source-dir>.
#   1. Users sharing a folder with the sticky bit (/tmp): one user's journal (a killed set's, or a file planted
#      under its name) blocks no other user, and advice to remove a file is given only to who can.
#   2. Concurrent writers: three quantize of the same files never refuse one another; a run into a folder
#      a quantize is writing into waits for it; a run refused by another run's lock is told which process.
#   3. The run folder's record cannot be completed (a full file system just then): exit 1 saying so, and
#      the next run does not speak of a kill.
#   4. A read-only OUT/stats.json of another user's, and a --trace inside OUT (its own file, not the set's).
# Parts 1, 3 and 4 need root (setpriv to run as nobody; mount for a small tmpfs): skipped otherwise.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
X=$SRC/examples/activations_bf16_256x1024.npy
Q=(--format e4m3 --axis row)
sed -e 's/"n": 25600/"n": 2560/' "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >"$T/va.json"
sed -e 's/"n": 2560/"n": 2816/' "$T/va.json" >"$T/vb.json"
chmod 755 "$T"
chmod 644 "$T/va.json" "$T/vb.json"
as_root=0
[[ $(id -u) == 0 ]] && command -v setpriv >/dev/null && as_root=1
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

# 1. A sticky shared folder. Another user's killed quantize leaves its journal (.trnsim-journal, theirs):
# root's quantize, --trace, --report and `--out .` there go on (before: each refused, "written by another
# user (uid 65534)"), and the journal stays theirs, untouched, for their next write to settle.
if [[ $as_root == 1 ]]; then
  ST=$(mktemp -d /tmp/trnsim-writers.XXXXXX)
  chmod 1777 "$ST"
  cp "$T/va.json" "$X" "$ST/" && chmod 644 "$ST/va.json" "$ST/$(basename "$X")"
  NX=$ST/$(basename "$X")
  (cd "$ST" && nobody "$TRNSIM" quantize "$NX" "${Q[@]}" --rule te --data nd.npy --scales ns.npy) >/dev/null 2>&1
  (cd "$ST" && TRNSIM_TEST_KILL_AT_WRITE_STEP=3 nobody "$TRNSIM" quantize "$NX" "${Q[@]}" --rule ocp --data nd.npy \
    --scales ns.npy) >/dev/null 2>&1
  journal=$(sha256sum <"$ST/.trnsim-journal" 2>/dev/null)
  check "nobody's killed quantize left its journal" '[[ $(stat -c %u "$ST/.trnsim-journal") == 65534 ]]'
  msg=$(cd "$ST" && "$TRNSIM" quantize "$NX" "${Q[@]}" --rule te --data rd.npy --scales rs.npy 2>&1)
  rc=$?
  check "root's quantize beside nobody's killed journal (exit $rc): $msg" \
    '[[ $rc == 0 && -f $ST/rd.npy && -f $ST/rs.npy && ! -e $ST/.trnsim-journal.0 ]]'
  msg=$(cd "$ST" && "$TRNSIM" run va.json --out ro --trace r.pftrace --report r.html 2>&1)
  rc=$?
  check "root's --trace and --report there (exit $rc): $(grep -E "error|note" <<<"$msg")" \
    '[[ $rc == 0 && -f $ST/r.pftrace && -f $ST/r.html ]]'
  mkdir "$ST/sub" && chmod 1777 "$ST/sub" && cp -p "$ST/.trnsim-journal" "$ST/sub/.trnsim-journal" &&
    chown 65534:65534 "$ST/sub/.trnsim-journal"
  msg=$(cd "$ST/sub" && "$TRNSIM" run ../va.json --out . 2>&1)
  rc=$?
  check "root's --out . in a sticky folder holding nobody's journal (exit $rc): $(grep error <<<"$msg")" \
    '[[ $rc == 0 && -f $ST/sub/stats.json ]]'
  check "... nobody's journal is left as it was" \
    '[[ $(sha256sum <"$ST/.trnsim-journal") == "$journal" && $(stat -c %u "$ST/.trnsim-journal") == 65534 ]]'
  # Killed as root too: root's journal gets root's own name there (.trnsim-journal is nobody's).
  { (cd "$ST" && TRNSIM_TEST_KILL_AT_WRITE_STEP=3 "$TRNSIM" quantize "$NX" "${Q[@]}" --rule ocp --data rd.npy \
    --scales rs.npy) >/dev/null 2>&1; } 2>/dev/null
  check "root's killed quantize: its journal is .trnsim-journal.0" '[[ $(stat -c %u "$ST/.trnsim-journal.0") == 0 ]]'
  # Each user's next write settles their own set: nobody's files are back to their earlier pair, root's too.
  msg=$(cd "$ST" && nobody "$TRNSIM" quantize "$NX" "${Q[@]}" --rule te --data n2.npy --scales n2s.npy 2>&1)
  rc=$?
  check "nobody's next quantize settles their journal (exit $rc): $msg" \
    '[[ $rc == 0 && ! -e $ST/.trnsim-journal && -e $ST/.trnsim-journal.0 ]] && cmp -s "$ST/nd.npy" "$ST/n2.npy"'
  msg=$(cd "$ST" && "$TRNSIM" quantize "$NX" "${Q[@]}" --rule te --data r2.npy --scales r2s.npy 2>&1)
  rc=$?
  check "root's next quantize settles its own (exit $rc): $msg" \
    '[[ $rc == 0 && ! -e $ST/.trnsim-journal.0 ]] && cmp -s "$ST/rd.npy" "$ST/r2.npy"'
  check "no leftovers" '[[ -z $(find "$ST" -name ".*.tmp.*" -o -name ".trnsim-trace.*" -o -name ".*.old.*") ]]'
  # A file another user planted under the journal's name (garbage) blocks no one else either (before: "look
  # at it, then remove it", which the sticky bit forbids) ...
  nobody sh -c "echo garbage >'$ST/.trnsim-journal'"
  msg=$(cd "$ST" && "$TRNSIM" quantize "$NX" "${Q[@]}" --rule te --data rd.npy --scales rs.npy 2>&1)
  rc=$?
  check "a garbage .trnsim-journal of nobody's: root's quantize goes on (exit $rc): $msg" \
    '[[ $rc == 0 && $msg != *"remove it"* && $(cat "$ST/.trnsim-journal") == garbage ]]'
  # ... and one planted under a user's own journal name (uid 1's, where .trnsim-journal is nobody's too) is
  # refused before anything is written, naming its owner, with advice that user can follow.
  nobody sh -c "echo garbage >'$ST/.trnsim-journal.1'"
  msg=$(cd "$ST" && setpriv --reuid=1 --regid=1 --clear-groups "$TRNSIM" quantize "$NX" "${Q[@]}" --rule te \
    --data u1.npy --scales u1s.npy 2>&1)
  rc=$?
  check "a file nobody made under uid 1's journal name: refused, its owner named (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == *"$ST/.trnsim-journal.1: cannot write: another user (uid 65534) made a file under the name of your journal there"* && $msg == *"its owner (uid 65534) or root can remove it (the folder'"'"'s sticky bit keeps other users from it)"* && ! -e $ST/u1.npy ]]'
  # A symlink of nobody's at a run folder's record: root is told to remove it, uid 1 who cannot is not.
  mkdir "$ST/sl" && chmod 1777 "$ST/sl"
  nobody ln -s /etc/passwd "$ST/sl/.trnsim-files"
  msg=$(cd "$ST" && setpriv --reuid=1 --regid=1 --clear-groups "$TRNSIM" run va.json --out sl 2>&1)
  check "a symlink .trnsim-files of nobody's, uid 1's run: $msg" \
    '[[ $msg == *".trnsim-files: is a symlink; trnsim keeps its record of the files it wrote in the folder there (its owner (uid 65534) or root can remove it"* ]]'
  msg=$(cd "$ST" && "$TRNSIM" run va.json --out sl 2>&1)
  check "... root's: $msg" '[[ $msg == *".trnsim-files: is a symlink; trnsim keeps its record of the files it wrote in the folder there (remove it)"* ]]'
  rm -rf "$ST"
else
  echo "writers: not root or no setpriv: the sticky-folder cases are skipped"
fi

# 2. Three quantize writing the same --data, --scales (another folder) and --dequant at once, each with its
# own rule: each takes its turn, none is refused (before: about one round in seven had one refused, "it
# changed since the run that wrote it": its check read the folder's records while another quantize finished
# its set), and the files are one quantize's.
mkdir -p "$T/A" "$T/B"
for r in te ocp trn3; do
  "$TRNSIM" quantize "$X" "${Q[@]}" --rule $r --data "$T/ref_$r.npy" --scales "$T/ref_${r}_s.npy" >/dev/null 2>&1
done
refused=0
mixed=0
rounds=15
for i in $(seq 1 $rounds); do
  for r in te ocp trn3; do
    "$TRNSIM" quantize "$X" "${Q[@]}" --rule $r --data "$T/A/d.npy" --scales "$T/B/s.npy" --dequant "$T/A/q.npy" \
      >/dev/null 2>"$T/q_$r.err" &
  done
  wait
  for r in te ocp trn3; do
    if grep -q error "$T/q_$r.err"; then
      refused=$((refused + 1))
      echo "round $i, rule $r: $(grep error "$T/q_$r.err")" >&2
    fi
  done
  one=0
  for r in te ocp trn3; do
    cmp -s "$T/A/d.npy" "$T/ref_$r.npy" && cmp -s "$T/B/s.npy" "$T/ref_${r}_s.npy" && one=1
  done
  [[ $one == 1 ]] || mixed=$((mixed + 1))
done
check "three quantize at once, $rounds rounds: none refused ($refused), every time one quantize's pair ($mixed mixed)" \
  '[[ $refused == 0 && $mixed == 0 ]]'

# A run into a folder a quantize is writing into (stopped at its second write step, holding the folder's
# lock): the run waits for it and then runs (before: refused at once, "another trnsim run is writing into
# this folder", though it was a quantize).
mkdir "$T/w"
TRNSIM_TEST_KILL_SIGNAL=STOP TRNSIM_TEST_KILL_AT_WRITE_STEP=2 "$TRNSIM" quantize "$X" "${Q[@]}" --rule te \
  --data "$T/w/d.npy" --scales "$T/w/s.npy" >/dev/null 2>&1 &
qp=$!
if wait_stopped $qp; then
  "$TRNSIM" run "$T/va.json" --out "$T/w" >"$T/w.log" 2>&1 &
  rp=$!
  wait_waiting "$T/w.log" $rp
  kill -CONT $qp
  wait $qp
  qrc=$?
  wait $rp
  rrc=$?
  check "a run into a folder a quantize is writing into waits, then runs (exits $qrc, $rrc): $(grep -E "error|waiting" "$T/w.log")" \
    '[[ $qrc == 0 && $rrc == 0 ]] && grep -q "trnsim: waiting for another trnsim writing into $T/w (pid [0-9]*: trnsim quantize .*600 s at most)$" "$T/w.log" && [[ -f $T/w/stats.json && -f $T/w/d.npy ]]'
else
  wait $qp
  bad "the quantize did not stop at write step 2"
fi
# A run into a folder another run holds is refused at once, naming that run's process.
TRNSIM_TEST_KILL_SIGNAL=STOP TRNSIM_TEST_KILL_AT_WRITE_STEP=1 "$TRNSIM" run "$T/va.json" --out "$T/h" >/dev/null 2>&1 &
hp=$!
if wait_stopped $hp; then
  msg=$(timeout 60 "$TRNSIM" run "$T/va.json" --out "$T/h" 2>&1)
  rc=$?
  kill -CONT $hp
  wait $hp
  check "a run into a folder another run holds: refused, naming it (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == *"--out $T/h: another trnsim run is writing into this folder (pid $hp: trnsim run $T/va.json --out $T/h; it holds the folder'"'"'s lock until it ends)"* ]]'
else
  wait $hp
  bad "the run did not stop at write step 1"
fi

# 3. The run folder's record cannot be completed: stopped just before it writes the record in state
# "complete" (after the last backup went), the small tmpfs it writes into is filled, then it goes on. It
# exits 1 saying its files are in place and what to do (before: exit 0 with a note); the next run keeps the
# set and does not say a run was killed (before: "a trnsim run was killed after it had replaced every file").
mkdir -p "$T/full"
if [[ $as_root == 1 ]] && mount -t tmpfs -o size=2m tmpfs "$T/full" 2>/dev/null; then
  "$TRNSIM" run "$T/va.json" --out "$T/full/o" >/dev/null 2>&1
  n=$(grep -c '"path"' "$T/full/o/.trnsim-files")
  # Steps (sim/io/output_files.h): the record, then per file its temporary and backup, its filling, its
  # rename; the folders synced; per file its backup removed. The record follows the last removal.
  at=$((1 + 3 * n + 1 + n))
  TRNSIM_TEST_KILL_SIGNAL=STOP TRNSIM_TEST_KILL_AT_WRITE_STEP=$at "$TRNSIM" run "$T/vb.json" --out "$T/full/o" \
    >"$T/full.log" 2>&1 &
  fp=$!
  if wait_stopped $fp; then
    dd if=/dev/zero of="$T/full/filler" bs=4k 2>/dev/null
    kill -CONT $fp
    wait $fp
    rc=$?
    check "the record cannot be completed: exit 1, saying the files are in place (exit $rc): $(grep -E "error|note" "$T/full.log")" \
      '[[ $rc == 1 ]] && grep -q "trnsim: error: .*$T/full/o/.trnsim-files: cannot write: No space left on device: every file of the run is in place, but the folder'"'"'s record of them could not be completed" "$T/full.log"'
    check "... the record says \"writing\", the files are the new run's" \
      'grep -q "\"state\": \"writing\"" "$T/full/o/.trnsim-files" && grep -q "\"n\": 2816" "$T/full/o/stats.json"'
    rm -f "$T/full/filler"
    "$TRNSIM" run "$T/vb.json" --out "$T/full/o" >"$T/full.log" 2>&1
    rc=$?
    check "the next run keeps the set and speaks of no kill (exit $rc): $(grep note "$T/full.log")" \
      '[[ $rc == 0 ]] && grep -q "stopped before it had completed its record (it was killed, or the record could not be written: a full disk), after it had replaced every file of its set: the set is kept" "$T/full.log" && ! grep -q "was killed after" "$T/full.log" && grep -q "\"state\": \"complete\"" "$T/full/o/.trnsim-files"'
  else
    wait $fp
    bad "the run did not stop at write step $at"
  fi
  umount "$T/full"
else
  echo "writers: a tmpfs cannot be mounted here: the full-record case is skipped"
fi

# 4. An earlier run's read-only OUT/stats.json (recorded, unchanged), rerun as its owner, not root: replaced,
# read-only again (before: "O/stats.json: cannot write: Permission denied" after the simulation: the
# temporary was given the file's permissions before it was filled).
if [[ $as_root == 1 ]]; then
  mkdir "$T/ro" && chown 65534:65534 "$T/ro"
  (cd "$T/ro" && nobody "$TRNSIM" run ../va.json --out O) >/dev/null 2>&1
  chmod 444 "$T/ro/O/stats.json"
  msg=$(cd "$T/ro" && nobody "$TRNSIM" run ../vb.json --out O 2>&1)
  rc=$?
  check "a read-only OUT/stats.json, rerun as its owner (exit $rc): $(grep error <<<"$msg")" \
    '[[ $rc == 0 && $(stat -c %a "$T/ro/O/stats.json") == 444 ]] && grep -q "\"n\": 2816" "$T/ro/O/stats.json"'
fi
# A --trace inside OUT is its own file, renamed into place when the simulation ends, before the set
# (docs/workloads.md): a run killed at the first step of its set keeps its new trace beside the earlier set,
# and a later run without --trace leaves it.
"$TRNSIM" run "$T/vb.json" --out "$T/tref" --trace "$T/tref/t.pftrace" >/dev/null 2>&1
"$TRNSIM" run "$T/va.json" --out "$T/tr" --trace "$T/tr/t.pftrace" >/dev/null 2>&1
{ TRNSIM_TEST_KILL_AT_WRITE_STEP=1 "$TRNSIM" run "$T/vb.json" --out "$T/tr" --trace "$T/tr/t.pftrace" >/dev/null 2>&1; } 2>/dev/null
"$TRNSIM" run "$T/va.json" --out "$T/tr" >"$T/tr.log" 2>&1
rc=$?
check "a --trace inside OUT, the run killed at its set's first step: the new trace stays beside the earlier set (exit $rc)" \
  '[[ $rc == 0 ]] && cmp -s "$T/tr/t.pftrace" "$T/tref/t.pftrace" && grep -q "\"n\": 2560" "$T/tr/stats.json"'

finish
