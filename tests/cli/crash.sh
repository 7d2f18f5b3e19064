#!/usr/bin/env bash
# Crash and concurrency harness: usage crash.sh <trnsim-binary> <source-dir>.
# An output folder holds one run's complete set of files or, after a kill while the set was being replaced,
# is marked so that `trnsim stats` refuses it and the next run puts it right; never a silent mix (issue 22,
# items 4 and 5). Cases:
#   1. SIGKILL at every step of the writes (TRNSIM_TEST_KILL_AT_WRITE_STEP, sim/io/output_files.h);
#   2. SIGKILL at random times during a run whose writes take a while;
#   3. two runs into one folder, and two quantize writing the same files, at the same time;
#   4. a full file system: a file-size limit (ulimit -f), and a small tmpfs where mounting is permitted;
#   5. a sweep's results (results.csv and results.jsonl, one set) killed at every step of their rewrite.
# Each folder state is judged against reference runs: "A" (the earlier set), "B" (the new set) or a mix.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
# Under AddressSanitizer (the CI's sanitizer job) every run is slower: fewer random kills there.
KILLS=12
grep -q __asan_init "$TRNSIM" && KILLS=4

# Two workloads whose every file differs: names (stats.json says which) and input seeds. Timing only, with
# the inputs dumped: stats.json and three .npy files per set, written in a fraction of a second.
for s in A B; do
  seed=$([[ $s == A ]] && echo 11 || echo 21)
  sed -e "s/\"name\": \"matmul_mxfp8_bwd_512_trn3\"/\"name\": \"set_$s\"/" \
    -e "s/\"seed\": 1,/\"seed\": $seed,/; s/\"seed\": 2,/\"seed\": $((seed + 1)),/; s/\"seed\": 3,/\"seed\": $((seed + 2)),/" \
    "$SMALL" >"$T/$s.json"
  "$TRNSIM" run "$T/$s.json" --no-numerics --dump-inputs --out "$T/ref_$s" >/dev/null 2>&1 || bad "reference run $s"
done
FILES=(inputs/output_grad.npy inputs/weights.npy inputs/input_activation.npy)
# state DIR: A or B when every file, stats.json and trnsim.log are that set's, else "mixed".
state() {
  local d=$1 s f ok
  for s in A B; do
    ok=1
    grep -q "\"workload\": \"set_$s\"" "$d/stats.json" 2>/dev/null || ok=0
    grep -q " debug trnsim: set_$s: writing" "$d/trnsim.log" 2>/dev/null || ok=0  # the log names its run
    for f in "${FILES[@]}"; do cmp -s "$d/$f" "$T/ref_$s/$f" || ok=0; done
    if [[ $ok == 1 ]]; then
      echo "$s"
      return
    fi
  done
  echo mixed
}
# leftovers DIR: temporaries, backups, journals or probes of a killed run.
leftovers() { find "$1" -name '*.tmp.*' -o -name '.trnsim-trace.*' -o -name '*.old.*' -o -name '.trnsim-journal' -o -name '.trnsim-probe.*'; }
# judge DIR WHAT: consistent, or marked so that `trnsim stats` refuses it.
judge() {
  local d=$1 what=$2 s msg rc
  s=$(state "$d")
  msg=$("$TRNSIM" stats "$d/stats.json" 2>&1)
  rc=$?
  if [[ $s == A || $s == B ]]; then
    check "$what: set $s, stats reads it (exit $rc: ${msg:0:200})" '[[ $rc == 0 ]]'
  else
    check "$what: a mix, and stats says so (exit $rc: ${msg:0:300})" \
      '[[ $rc == 1 && $msg == *"was killed while it replaced the folder'"'"'s files"* ]]'
  fi
}
# recover DIR WHAT: the next run puts the folder right: set B complete, no leftovers, a complete manifest.
recover() {
  local d=$1 what=$2
  "$TRNSIM" run "$T/B.json" --no-numerics --dump-inputs --out "$d" >"$T/rec.log" 2>&1
  local rc=$?
  check "$what: the next run (exit $rc: $(tail -2 "$T/rec.log"))" '[[ $rc == 0 && $(state "$d") == B ]]'
  check "$what: no leftovers after it ($(leftovers "$d" | head -3))" '[[ -z $(leftovers "$d") ]]'
  check "$what: its manifest is complete" 'grep -q "\"state\": \"complete\"" "$d/.trnsim-files"'
}

# 1. A kill at every step of the switch from set A to set B.
steps=0
for n in $(seq 1 80); do
  rm -rf "$T/k"
  "$TRNSIM" run "$T/A.json" --no-numerics --dump-inputs --out "$T/k" >/dev/null 2>&1
  {
    TRNSIM_TEST_KILL_AT_WRITE_STEP=$n "$TRNSIM" run "$T/B.json" --no-numerics --dump-inputs --out "$T/k" \
      >"$T/kill.log" 2>&1
  } 2>/dev/null  # the shell's own "Killed"
  rc=$?
  if [[ $rc == 0 ]]; then  # the run has fewer steps: every one was tried
    check "after the last step: set B" '[[ $(state "$T/k") == B && -z $(leftovers "$T/k") ]]'
    break
  fi
  steps=$n
  check "step $n: killed (exit $rc: $(tail -1 "$T/kill.log"))" '[[ $rc == 137 ]]'
  judge "$T/k" "step $n"
  recover "$T/k" "step $n"
done
check "the switch has steps to kill at ($steps)" '[[ $steps -ge 10 ]]'

# 1b. A kill inside each write of the folder's record, between its temporary written and its rename
# (TRNSIM_TEST_KILL_AT_WRITE_STEP=rN): the window a random kill once hit in CI, leaving
# ..trnsim-files.tmp.PID.N behind the next run ("random kill 5: no leftovers"). The next run removes it.
records=0
for n in 1 2 3 4 5 6; do
  rm -rf "$T/k"
  "$TRNSIM" run "$T/A.json" --no-numerics --dump-inputs --out "$T/k" >/dev/null 2>&1
  { TRNSIM_TEST_KILL_AT_WRITE_STEP=r$n "$TRNSIM" run "$T/B.json" --no-numerics --dump-inputs --out "$T/k" \
    >"$T/kill.log" 2>&1; } 2>/dev/null
  rc=$?
  if [[ $rc == 0 ]]; then
    check "after the last record write: set B, no leftovers" '[[ $(state "$T/k") == B && -z $(leftovers "$T/k") ]]'
    break
  fi
  records=$n
  check "record write $n: killed (exit $rc: $(tail -1 "$T/kill.log")), its temporary left" \
    '[[ $rc == 137 ]] && compgen -G "$T/k/..trnsim-files.tmp.*" >/dev/null'
  judge "$T/k" "record write $n"
  recover "$T/k" "record write $n"
done
check "a run's switch writes its record at least twice ($records)" '[[ $records -ge 2 ]]'
# Only a record's temporary of this user's whose PID is no live process goes: one of a live process (this
# shell), a name that only looks like one, and the user's own files stay.
rm -rf "$T/k"
"$TRNSIM" run "$T/A.json" --no-numerics --out "$T/k" >/dev/null 2>&1
sleep 0.01 &
dead=$!
wait $dead
for f in "..trnsim-files.tmp.$dead.0" "..trnsim-journal.tmp.$dead.3" "..trnsim-written.tmp.$dead.1" \
  ".trnsim-probe.$dead.0" "..trnsim-files.tmp.$$.0" "..trnsim-files.tmp.$dead.x" "..trnsim-files.tmp.$dead" \
  "..trnsim-filesX.tmp.$dead.0" "mine.tmp.$dead.0"; do
  # What a killed trnsim leaves there: a record's bytes, an empty probe (reserved_names.sh: a user's other
  # content at such a name stays).
  case $f in
    .trnsim-probe.*) : >"$T/k/$f" ;;
    mine.*) echo mine >"$T/k/$f" ;;
    *) cp "$T/k/.trnsim-files" "$T/k/$f" ;;
  esac
done
mkdir "$T/k/..trnsim-files.tmp.$dead.9"
"$TRNSIM" run "$T/B.json" --no-numerics --out "$T/k" >"$T/rec.log" 2>&1
rc=$?
left=$(cd "$T/k" && ls -A | grep -v '^inputs$' | sort | tr '\n' ' ')
kept=$(printf '%s\n' "..trnsim-files.tmp.$$.0" "..trnsim-files.tmp.$dead" "..trnsim-files.tmp.$dead.9" \
  "..trnsim-files.tmp.$dead.x" "..trnsim-filesX.tmp.$dead.0" .trnsim-files host.json "mine.tmp.$dead.0" stats.json trnsim.log |
  sort | tr '\n' ' ')
check "a killed run's record temporaries are removed, nothing else (exit $rc): $left" '[[ $rc == 0 && $left == "$kept" ]]'

# 2. Kills at random times, the writes slowed by a big output: the MoE forward's inputs, dumped (about 30 MB).
MOE=$SRC/configs/workloads/moe/qwen3_30b_a3b_fwd_mxfp8.json
MSETS=(--set params.T=1024 --set params.E=16 --set params.top_k=2 --no-numerics --dump-inputs)
"$TRNSIM" run "$MOE" "${MSETS[@]}" --out "$T/moe_ref" >"$T/moe.log" 2>&1
grep -q "host time" "$T/moe.log" || bad "the MoE reference run: $(tail -2 "$T/moe.log")"
RANDOM=22
for i in $(seq 1 $KILLS); do
  rm -rf "$T/r"
  cp -a "$T/moe_ref" "$T/r"
  # A different set: other seeds for every input and the routing (a file may still come out the same, e.g.
  # block_to_expert; the killed run's complete set is made apart to compare with).
  NEW=(--set inputs.hidden_states.seed=$((100 + i)) --set inputs.gate_up_proj_weight.seed=$((200 + i))
    --set inputs.down_proj_weight.seed=$((300 + i)) --set inputs.routing.seed=$((400 + i)))
  rm -rf "$T/new_ref"
  "$TRNSIM" run "$MOE" "${MSETS[@]}" "${NEW[@]}" --out "$T/new_ref" >/dev/null 2>&1
  "$TRNSIM" run "$MOE" "${MSETS[@]}" "${NEW[@]}" --out "$T/r" >/dev/null 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 10))$((RANDOM % 10))"
  kill -KILL $pid 2>/dev/null
  { wait $pid; } 2>/dev/null
  # Every file in the folder is the reference's or the killed run's, as the manifest's state says.
  msg=$("$TRNSIM" stats "$T/r/stats.json" 2>&1)
  rc=$?
  old_set=0 new_set=0
  for f in "$T/moe_ref"/inputs/*.npy; do
    cmp -s "$f" "$T/r/inputs/${f##*/}" && old_set=$((old_set + 1))
    cmp -s "$T/new_ref/inputs/${f##*/}" "$T/r/inputs/${f##*/}" && new_set=$((new_set + 1))
  done
  total=$(ls "$T/moe_ref"/inputs/*.npy | wc -l)
  if [[ $rc == 0 ]]; then
    check "random kill $i: stats reads a whole set ($old_set of $total files old, $new_set new)" \
      '[[ $old_set == $total || $new_set == $total ]]'
  else
    check "random kill $i: a mix, marked (exit $rc: ${msg:0:200})" '[[ $msg == *"was killed while it replaced"* ]]'
  fi
  "$TRNSIM" run "$MOE" "${MSETS[@]}" --out "$T/r" >"$T/rec.log" 2>&1
  rc=$?
  check "random kill $i: the next run (exit $rc)" '[[ $rc == 0 ]] && diff -rq "$T/moe_ref/inputs" "$T/r/inputs" >/dev/null'
  check "random kill $i: no leftovers ($(leftovers "$T/r" | head -3))" '[[ -z $(leftovers "$T/r") ]]'
done

# 3. Two runs into one folder at once: one runs, the other is refused at once; each prints its own summary.
# The second starts once the first holds the folder's lock (its flock in /proc/locks, looked at without
# taking it), with the first stopped meanwhile (SIGSTOP): on a loaded machine the first can neither lose the
# race for its own folder nor finish before the second starts.
for i in 1 2 3; do
  rm -rf "$T/c" "$T/c1.log" "$T/c2.log"
  "$TRNSIM" run "$MOE" "${MSETS[@]}" --out "$T/c" >"$T/c1.log" 2>&1 &
  p1=$!
  for _ in $(seq 1 6000); do
    [[ -d $T/c ]] && grep -q "FLOCK .* $p1 [0-9a-f]*:[0-9a-f]*:$(stat -c %i "$T/c") " /proc/locks && break
    [[ -e /proc/$p1 ]] || break
    sleep 0.01
  done
  kill -STOP $p1 2>/dev/null
  "$TRNSIM" run "$T/A.json" --out "$T/c" >"$T/c2.log" 2>&1
  rc2=$?
  kill -CONT $p1 2>/dev/null
  wait $p1
  rc1=$?
  check "two runs, $i: the first runs (exit $rc1: $(tail -1 "$T/c1.log"))" '[[ $rc1 == 0 ]]'
  check "two runs, $i: the second is refused (exit $rc2: $(cat "$T/c2.log"))" \
    '[[ $rc2 == 1 ]] && grep -q "another trnsim run is writing into this folder" "$T/c2.log"'
  check "two runs, $i: the folder holds the first run's set" \
    'grep -q "\"workload\": \"qwen3_30b_a3b_fwd_mxfp8\"" "$T/c/stats.json" && diff -rq "$T/moe_ref/inputs" "$T/c/inputs" >/dev/null'
  check "two runs, $i: the first printed its own summary" 'grep -q "workload qwen3_30b_a3b_fwd_mxfp8" "$T/c1.log"'
done
# Started together: exactly one writes.
rm -rf "$T/c"
"$TRNSIM" run "$T/A.json" --no-numerics --dump-inputs --out "$T/c" >"$T/c1.log" 2>&1 &
p1=$!
"$TRNSIM" run "$T/B.json" --no-numerics --dump-inputs --out "$T/c" >"$T/c2.log" 2>&1 &
p2=$!
wait $p1
rc1=$?
wait $p2
rc2=$?
s=$(state "$T/c")
check "two runs started together: one set ($s; exits $rc1, $rc2: $(tail -1 "$T/c1.log"); $(tail -1 "$T/c2.log"))" '[[ $s == A || $s == B ]] && [[ $rc1 == 0 || $rc2 == 0 ]]'

# Two quantize writing the same --data and --scales: each pair of files is one input's.
"$TRNSIM" run "$T/A.json" --no-numerics --dump-inputs --out "$T/q" >/dev/null 2>&1
QX=$T/q/inputs/weights.npy
QY=$T/q/inputs/input_activation.npy
Q=(--format e4m3 --rule te --axis row)
"$TRNSIM" quantize "$QX" "${Q[@]}" --data "$T/x_d.npy" --scales "$T/x_s.npy" >/dev/null
"$TRNSIM" quantize "$QY" "${Q[@]}" --data "$T/y_d.npy" --scales "$T/y_s.npy" >/dev/null
mixed=0
for i in $(seq 1 20); do
  "$TRNSIM" quantize "$QX" "${Q[@]}" --data "$T/d.npy" --scales "$T/s.npy" >/dev/null 2>&1 &
  "$TRNSIM" quantize "$QY" "${Q[@]}" --data "$T/d.npy" --scales "$T/s.npy" >/dev/null 2>&1 &
  wait
  if ! { cmp -s "$T/d.npy" "$T/x_d.npy" && cmp -s "$T/s.npy" "$T/x_s.npy"; } &&
    ! { cmp -s "$T/d.npy" "$T/y_d.npy" && cmp -s "$T/s.npy" "$T/y_s.npy"; }; then
    mixed=$((mixed + 1))
  fi
done
check "two quantize at once: every time one input's pair ($mixed of 20 mixed)" '[[ $mixed == 0 ]]'
check "two quantize at once: no leftovers" '[[ -z $(find "$T" -maxdepth 1 -name ".*.tmp.*" -o -maxdepth 1 -name ".trnsim-trace.*" -o -maxdepth 1 -name ".*.old.*" -o -maxdepth 1 -name .trnsim-journal) ]]'

# A trace's record in its folder (.trnsim-written) is read, changed and written under the folder's lock: a
# run whose --trace lands in a folder another trnsim is writing into (a quantize, stopped while it holds the
# lock) waits for it, and every file of both is recorded (before: it rewrote the record meanwhile, so a
# concurrent writer's entry could be dropped).
rm -rf "$T/tl" "$T/tl_o" && mkdir "$T/tl"
TRNSIM_TEST_KILL_SIGNAL=STOP TRNSIM_TEST_KILL_AT_WRITE_STEP=2 "$TRNSIM" quantize "$QX" "${Q[@]}" --data "$T/tl/d.npy" \
  --scales "$T/tl/s.npy" >/dev/null 2>&1 &
qp=$!
if wait_stopped $qp; then
  "$TRNSIM" run "$T/A.json" --no-numerics --out "$T/tl_o" --trace "$T/tl/t.pftrace" >"$T/tl.log" 2>&1 &
  rp=$!
  wait_waiting "$T/tl.log" $rp
  waited=$(grep -c "trnsim: waiting for another trnsim writing into $T/tl (pid [0-9]*: trnsim quantize .*600 s at most)$" "$T/tl.log")
  kill -CONT $qp
  wait $qp
  qrc=$?
  wait $rp
  rrc=$?
  check "a --trace into a folder a quantize holds: the run waits for it (exits $qrc, $rrc; $(tail -2 "$T/tl.log"))" \
    '[[ $waited == 1 && $qrc == 0 && $rrc == 0 ]]'
  check "... and the folder's record lists both writers' files" \
    'grep -q "\"d.npy\"" "$T/tl/.trnsim-written" && grep -q "\"s.npy\"" "$T/tl/.trnsim-written" && grep -q "\"t.pftrace\"" "$T/tl/.trnsim-written"'
else
  wait $qp
  bad "a --trace into a folder a quantize holds: the quantize did not stop at write step 2"
fi

# A quantize whose --data and --scales are in two folders is one set too: killed at every step of its writes,
# then a writer into one of the two folders (alternately) puts it right; both folders then hold one input's
# pair, all old or all new, and nothing is left behind. (Each folder's journal once named its own file only:
# a kill between the two renames left the new data kept in one folder and the old scales in the other.)
pair() {  # pair: X or Y when qa/d.npy and qb/s.npy are that input's, else "mixed"
  if cmp -s "$T/qa/d.npy" "$T/x_d.npy" && cmp -s "$T/qb/s.npy" "$T/x_s.npy"; then echo X
  elif cmp -s "$T/qa/d.npy" "$T/y_d.npy" && cmp -s "$T/qb/s.npy" "$T/y_s.npy"; then echo Y
  else echo mixed; fi
}
bad_steps=""
for k in $(seq 1 30); do
  rm -rf "$T/qa" "$T/qb"
  mkdir -p "$T/qa" "$T/qb"
  "$TRNSIM" quantize "$QX" "${Q[@]}" --data "$T/qa/d.npy" --scales "$T/qb/s.npy" >/dev/null 2>&1
  {
    TRNSIM_TEST_KILL_AT_WRITE_STEP=$k "$TRNSIM" quantize "$QY" "${Q[@]}" --data "$T/qa/d.npy" --scales "$T/qb/s.npy" \
      >/dev/null 2>&1
  } 2>/dev/null
  rc=$?
  if [[ $rc == 0 ]]; then
    [[ $(pair) == Y && -z $(leftovers "$T/qa") && -z $(leftovers "$T/qb") ]] || bad_steps+=" $k(complete run: $(pair))"
    break
  fi
  next=$([[ $((k % 2)) == 1 ]] && echo qa || echo qb)
  "$TRNSIM" quantize "$QX" "${Q[@]}" --data "$T/$next/n.npy" --scales "$T/$next/ns.npy" >/dev/null 2>&1 ||
    bad_steps+=" $k(the next writer failed)"
  p=$(pair)
  [[ $p != mixed && -z $(leftovers "$T/qa") && -z $(leftovers "$T/qb") ]] || bad_steps+=" $k($p, next into $next)"
done
check "a two-folder quantize killed at every step (last $k): one pair, no leftovers after the next writer${bad_steps:+; bad at:$bad_steps}" \
  '[[ -z $bad_steps && $rc == 0 && $k -gt 8 ]]'

# 4. A full file system. A file-size limit below the dumped inputs' size: the write fails with a message, the
# earlier set stays whole, nothing is left behind.
rm -rf "$T/f"
"$TRNSIM" run "$T/A.json" --no-numerics --dump-inputs --out "$T/f" >/dev/null 2>&1
(
  ulimit -f 256  # 256 KiB: stats.json fits, a 512 KiB input does not
  "$TRNSIM" run "$T/B.json" --no-numerics --dump-inputs --out "$T/f"
) >"$T/out" 2>&1
rc=$?
check "ulimit -f: exit $rc, the reason ($(tail -1 "$T/out"))" '[[ $rc == 1 ]] && grep -q "cannot write: File too large" "$T/out"'
check "ulimit -f: the earlier set stays" '[[ $(state "$T/f") == A && -z $(leftovers "$T/f") ]]'
msg=$("$TRNSIM" stats "$T/f/stats.json" 2>&1)
check "ulimit -f: stats reads it" '[[ $? == 0 ]]'
(
  ulimit -f 64
  "$TRNSIM" quantize "$QX" "${Q[@]}" --data "$T/x_d.npy" --scales "$T/x_s.npy"
) >"$T/out" 2>&1
rc=$?
check "ulimit -f, quantize: exit $rc, the reason" '[[ $rc == 1 ]] && grep -q "File too large" "$T/out"'
# A rename refused midway (an immutable file, where the file system has the attribute): the files already
# renamed go back from their backups; the earlier set stays whole and nothing is left behind.
if chattr +i "$T/f/inputs/weights.npy" 2>/dev/null; then
  "$TRNSIM" run "$T/B.json" --no-numerics --dump-inputs --out "$T/f" >"$T/out" 2>&1
  rc=$?
  chattr -i "$T/f/inputs/weights.npy"
  check "an immutable output: exit $rc, the reason ($(tail -1 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "weights.npy: cannot write: Operation not permitted" "$T/out"'
  check "an immutable output: the earlier set stays whole" '[[ $(state "$T/f") == A && -z $(leftovers "$T/f") ]]'
else
  echo "crash: chattr +i is not available here: the refused-rename case is skipped"
fi
# A quantize killed between its two renames (its data replaced, its scales not), its journal in a run folder: the
# next run into the folder rolls that set back first.
"$TRNSIM" quantize "$QX" "${Q[@]}" --data "$T/f/qd.npy" --scales "$T/f/qs.npy" >/dev/null 2>&1
{
  TRNSIM_TEST_KILL_AT_WRITE_STEP=6 "$TRNSIM" quantize "$QY" "${Q[@]}" --data "$T/f/qd.npy" --scales "$T/f/qs.npy" \
    >/dev/null 2>&1
} 2>/dev/null
"$TRNSIM" run "$T/A.json" --no-numerics --dump-inputs --out "$T/f" >"$T/out" 2>&1
rc=$?
check "a killed quantize in a run folder: the next run rolls it back (exit $rc)" \
  '[[ $rc == 0 && ! -e $T/f/.trnsim-journal ]] && cmp -s "$T/f/qd.npy" "$T/x_d.npy" && cmp -s "$T/f/qs.npy" "$T/x_s.npy"'
check "a killed quantize in a run folder: no leftovers" '[[ -z $(leftovers "$T/f") ]]'
# A small tmpfs, where this machine lets us mount one (root, outside a locked-down container). The files the
# run would write (its --dump-inputs, new files beside the earlier ones until the renames) do not fit: the
# run is refused before it simulates, naming the figures (before: it simulated, then failed at the write
# with "No space left on device"; a write that still meets a full file system is the ulimit -f case above).
mkdir -p "$T/small"
if mount -t tmpfs -o size=1m tmpfs "$T/small" 2>/dev/null; then
  "$TRNSIM" run "$T/A.json" --no-numerics --out "$T/small/o" >/dev/null 2>&1
  "$TRNSIM" run "$T/B.json" --no-numerics --dump-inputs --out "$T/small/o" >"$T/out" 2>&1
  rc=$?
  check "a full tmpfs: refused before the simulation (exit $rc: $(tail -1 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "this run needs .* on the filesystem of $T/small/o (.* of new files it writes.* is free there" "$T/out" && ! grep -q "No space left\|^wrote\|host time" "$T/out"'
  check "a full tmpfs: the earlier stats.json stays" 'grep -q "\"workload\": \"set_A\"" "$T/small/o/stats.json"'
  check "a full tmpfs: no leftovers" '[[ -z $(leftovers "$T/small/o") ]]'
  umount "$T/small"
else
  echo "crash: a tmpfs cannot be mounted here: the full-file-system case runs with ulimit -f only"
fi
# The disk check counts what every stage of a chain and every file of a run writes (before: a chain checked
# one stage at a time, and a run only its .npy files: each simulated, then failed at the write with "No
# space left on device"). vector_add n = 300032 writes a 1.2 MB out.npy per stage; n = 230144 a 0.92 MB one,
# which fits in 1 MiB alone but not with stats.json (160 KB); 2500 instructions trace 3.2 MB as .json.
mkdir -p "$T/s1" "$T/s2"
if mount -t tmpfs -o size=1m tmpfs "$T/s1" 2>/dev/null && mount -t tmpfs -o size=2m tmpfs "$T/s2" 2>/dev/null; then
  mkva() {
    sed -e "s/\"n\": 25600/\"n\": $2/" -e "s/\"name\": \"vector_add_stream_free_dim_2\"/\"name\": \"$1\"/" \
      "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >"$T/$1.json"
  }
  mkva va 300032
  mkva vb 300032
  mkva vc 230144
  mkva vt 160000
  echo '{"name": "pl", "stages": ["va.json", "vb.json"]}' >"$T/pl.json"
  "$TRNSIM" run "$T/pl.json" --out "$T/s2/co" >"$T/out" 2>&1
  rc=$?
  check "a chain whose stages fit one at a time, not together: refused before it simulates (exit $rc: $(tail -1 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "pl.json: this run needs 3.1 MB on the filesystem of $T/s2/co (.* of new files it writes" "$T/out" && ! grep -q "No space left\|^stage\|^wrote" "$T/out" && [[ ! -e $T/s2/co ]]'
  "$TRNSIM" run "$T/vc.json" --out "$T/s1/o" >"$T/out" 2>&1
  rc=$?
  check "a run whose .npy fits but not with stats.json: refused before it simulates (exit $rc: $(tail -1 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "vc.json: this run needs 1.2 MB on the filesystem of $T/s1/o" "$T/out" && ! grep -q "No space left\|^wrote" "$T/out" && [[ ! -e $T/s1/o ]]'
  "$TRNSIM" run "$T/vt.json" --out "$T/vt" --trace "$T/s1/t.json" >"$T/out" 2>&1
  rc=$?
  check "a --trace that does not fit its filesystem: refused before it simulates (exit $rc: $(tail -1 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "vt.json: --trace $T/s1/t.json needs up to 10.3 MB on its filesystem .* 1.0 MB is free there" "$T/out" && [[ ! -e $T/vt && -z $(ls -A "$T/s1") ]]'
  "$TRNSIM" run "$T/pl.json" --out "$T/s1/co" --trace "$T/s1/t.json" --no-numerics >"$T/out" 2>&1
  rc=$?
  check "a chain's traces on its output's filesystem count with its files (exit $rc: $(tail -1 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "pl.json: this run needs .* on the filesystem of $T/s1/co (.*, and up to 38.5 MB of --trace $T/s1/t.<stage>.json" "$T/out" && [[ ! -e $T/s1/co ]]'
  umount "$T/s1" "$T/s2"
fi
# A --report counts too, on its own filesystem or with the output's (before: not counted; a run simulated,
# then its report could meet a full disk). Its estimate for vector_add (3 tensors): 4 x (256 KiB + 3 x 2 KiB)
# = 1.1 MB (tools/trnsim/host_memory.cpp), more than a 512 KiB tmpfs holds.
mkdir -p "$T/s3"
if mount -t tmpfs -o size=512k tmpfs "$T/s3" 2>/dev/null; then
  sed -e 's/"n": 25600/"n": 2560/' "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >"$T/vr.json"
  "$TRNSIM" run "$T/vr.json" --out "$T/vr" --report "$T/s3/r.html" >"$T/out" 2>&1
  rc=$?
  check "a --report that does not fit its filesystem: refused before it simulates (exit $rc: $(tail -1 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "vr.json: --report $T/s3/r.html needs up to 1.1 MB on its filesystem (an upper estimate), and 0.5 MB is free there" "$T/out" && [[ ! -e $T/vr && -z $(ls -A "$T/s3") ]]'
  "$TRNSIM" run "$T/vr.json" --out "$T/s3/o" --report "$T/s3/o/r.html" >"$T/out" 2>&1
  rc=$?
  check "a --report into OUT counts with its files (exit $rc: $(tail -1 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "vr.json: this run needs .* on the filesystem of $T/s3/o (.*, and up to 1.1 MB of --report $T/s3/o/r.html" "$T/out" && [[ ! -e $T/s3/o ]]'
  umount "$T/s3"
fi

# 5. A sweep's results files are one set: results.csv and results.jsonl are both the earlier or both the new
# ones, or a journal marks the folder and the next writer puts it right. Two timing-only points; the new
# results lack one row (its kept row removed: "not run").
cat >"$T/sw.json" <<JSON
{"name": "crash", "workload": "$SMALL", "set": {"numerics": false},
 "axes": [{"name": "order", "path": "params.tile_loop_order", "values": ["mnk", "nmk"]}]}
JSON
export TRNSIM_PYTHON=/nonexistent  # no HTML report: its own test is reports.sh
"$TRNSIM" sweep "$T/sw.json" --out "$T/sw" -j 1 >"$T/sw.log" 2>&1
check "sweep for the results case (exit $?: $(tail -1 "$T/sw.log"))" '[[ -f $T/sw/results.csv && -f $T/sw/results.jsonl ]]'
cp "$T/sw/results.csv" "$T/sw_old.csv"
cp "$T/sw/results.jsonl" "$T/sw_old.jsonl"
cp "$T/sw/.trnsim-written" "$T/sw_old.written"  # the record of the earlier results (a copy back is theirs)
rm "$T/sw/points/$(ls "$T/sw/points" | head -1)"
# pair: old, new or mixed (each file compared with the earlier one; the new ones differ from it).
pair() {
  local c=0 j=0
  cmp -s "$T/sw/results.csv" "$T/sw_old.csv" && c=1
  cmp -s "$T/sw/results.jsonl" "$T/sw_old.jsonl" && j=1
  if [[ $c == 1 && $j == 1 ]]; then echo old; elif [[ $c == 0 && $j == 0 ]]; then echo new; else echo mixed; fi
}
steps=0
for n in $(seq 1 40); do
  cp "$T/sw_old.csv" "$T/sw/results.csv"
  cp "$T/sw_old.jsonl" "$T/sw/results.jsonl"
  cp "$T/sw_old.written" "$T/sw/.trnsim-written"
  { TRNSIM_TEST_KILL_AT_WRITE_STEP=$n "$TRNSIM" sweep collect "$T/sw" >"$T/kill.log" 2>&1; } 2>/dev/null
  rc=$?
  if [[ $rc == 0 ]]; then
    check "sweep results after the last step: the new pair, no leftovers" \
      '[[ $(pair) == new && -z $(leftovers "$T/sw") ]]'
    break
  fi
  steps=$n
  p=$(pair)
  check "sweep results, step $n: killed (exit $rc), the pair is $p" \
    '[[ $rc == 137 && ( $p != mixed || -e $T/sw/.trnsim-journal ) ]]'
  "$TRNSIM" sweep collect "$T/sw" >"$T/rec.log" 2>&1
  rc=$?
  check "sweep results, step $n: the next collect (exit $rc) leaves the new pair and no leftovers" \
    '[[ $rc == 0 && $(pair) == new && -z $(leftovers "$T/sw") ]]'
done
check "the results' switch has steps to kill at ($steps)" '[[ $steps -ge 4 ]]'
unset TRNSIM_PYTHON

finish
