#!/usr/bin/env bash
# Messages and the run's log file (issue 26 item 2, sim/base/log.h): usage log.sh <trnsim-binary> <source-dir>.
# --quiet prints only errors, --verbose adds debug lines, the default keeps the messages as they were; each note
# is said once; OUT/trnsim.log is one file of the run's set: recorded, never over a user's file, and a kill at
# any step of the write leaves it whole (the earlier run's or this run's) or absent, never part of one.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
NAME=matmul_mxfp8_bwd_512_trn3
# A log line: "<UTC time> <level> <message>", the level named once ("debug trnsim: NAME: ...").
STAMP='[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z'

# 1. The default level: the host time on stderr, no debug line; the log file holds the debug lines, recorded
# in the folder's record with the other outputs.
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/a" >"$T/out" 2>"$T/err"
rc=$?
check "default: exit $rc, the host time on stderr ($(head -c 300 "$T/err"))" \
  '[[ $rc == 0 && $(cat "$T/err") =~ ^"trnsim: $NAME: host time "[0-9.]+" s (setup " ]] && ! grep -q debug "$T/err"'
check "default: stdout names the log among the files written ($(grep wrote "$T/out"))" \
  'grep -q "^wrote $T/a/stats.json, host.json, trnsim.log (" "$T/out"'
check "the log: debug lines with their time and level ($(head -c 400 "$T/a/trnsim.log"))" \
  'grep -qE "^$STAMP debug trnsim: $NAME: $SMALL: kernel matmul_mxfp8_backward on trn3, [0-9]+ instructions, numerics off$" "$T/a/trnsim.log" &&
   [[ $(tail -1 "$T/a/trnsim.log") =~ ^$STAMP" debug trnsim: $NAME: writing 3 files into $T/a"$ ]]'
# Each line names its level once (a tester: "debug trnsim: debug: ...").
check "the log names each line's level once: $(grep -Ec "^$STAMP (debug|warning|error) trnsim: ([^ ]*: )?(debug|warning|error): " "$T/a/trnsim.log") lines twice" \
  '[[ $(grep -c "" "$T/a/trnsim.log") -gt 1 ]] && ! grep -Eq "^$STAMP (debug|warning|error) trnsim: ([^ ]*: )?(debug|warning|error): " "$T/a/trnsim.log"'
check "the log is in the folder's record" 'grep -q "\"path\": \"trnsim.log\"" "$T/a/.trnsim-files"'
"$TRNSIM" stats "$T/a/stats.json" >/dev/null 2>"$T/err"
rc=$?
check "stats reads the folder ($(head -c 200 "$T/err"))" '[[ $rc == 0 ]]'

# 2. A note (inputs that overflow BF16: Inf) is said once, on stderr as it always was, and is in the log; the
# summary on stdout no longer repeats it.
NOTE="note: inputs.input_activation: [0-9]* of 262144 values are NaN or Inf (generated values overflowed bfloat16)"
"$TRNSIM" run "$SMALL" --set inputs.input_activation.std=2e38 --out "$T/inf" >"$T/out" 2>"$T/err"
rc=$?
check "the Inf note: exit $rc, said once ($(cat "$T/out" "$T/err" | grep -c "$NOTE") times)" \
  '[[ $rc == 3 && $(cat "$T/out" "$T/err" | grep -c "$NOTE") == 1 ]] && grep -q "^trnsim: $NAME: $NOTE$" "$T/err"'
check "the Inf note: in the log at info" 'grep -q "^[0-9T:.-]*Z info trnsim: $NAME: $NOTE$" "$T/inf/trnsim.log"'

# 3. --quiet: errors only. The same run says nothing on stderr (its summary and FAIL lines are on stdout), and
# the log file still holds the note; a bad input still gets its error.
"$TRNSIM" run "$SMALL" --set inputs.input_activation.std=2e38 --out "$T/q" --quiet >"$T/out" 2>"$T/err"
rc=$?
check "--quiet: exit $rc, nothing on stderr ($(head -c 300 "$T/err"))" '[[ $rc == 3 && ! -s $T/err ]]'
check "--quiet: the summary on stdout" 'grep -q "^FAIL weight_grad: nothing compared" "$T/out"'
check "--quiet: the log keeps the note" 'grep -q "^[0-9T:.-]*Z info trnsim: $NAME: $NOTE$" "$T/q/trnsim.log"'
"$TRNSIM" run "$T/missing.json" --quiet >"$T/out" 2>"$T/err"
rc=$?
check "--quiet: an error is printed (exit $rc: $(cat "$T/err"))" \
  '[[ $rc == 1 && $(wc -l <"$T/err") == 1 ]] && grep -q "^trnsim: error: .*missing.json" "$T/err"'
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/l" --log-level error >"$T/out" 2>"$T/err"
check "--log-level error is --quiet" '[[ $? == 0 && ! -s $T/err ]]'

# 4. --verbose (--log-level debug): the debug lines on stderr too, as they are in the log.
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/v" --verbose >"$T/out" 2>"$T/err"
rc=$?
check "--verbose: exit $rc, debug lines ($(grep -c debug "$T/err"))" \
  '[[ $rc == 0 ]] && grep -q "^trnsim: debug: $NAME: writing 3 files into $T/v$" "$T/err" && grep -q "host time" "$T/err"'
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/v" --log-level debug >"$T/out" 2>"$T/err"
check "--log-level debug is --verbose" '[[ $? == 0 ]] && grep -q "^trnsim: debug: " "$T/err"'
# Every name the refusal lists is taken (a tester: "warn" was refused by a message listing it; spdlog spells it
# "warning").
for l in trace debug info warn error off; do
  rm -rf "$T/n"
  "$TRNSIM" run "$SMALL" --no-numerics --out "$T/n" --log-level "$l" >/dev/null 2>"$T/err"
  check "--log-level $l is taken (exit $?: $(head -1 "$T/err"))" '! grep -q "trnsim: error" "$T/err" && [[ -s $T/n/stats.json ]]'
done
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/o" --log-level off >"$T/out" 2>"$T/err"
check "--log-level off: nothing on stderr, the log as always" '[[ $? == 0 && ! -s $T/err && -s $T/o/trnsim.log ]]'

# 5. Bad options: refused before any work.
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/b1" --log-level loud >"$T/out" 2>"$T/err"
rc=$?
check "--log-level loud: exit $rc ($(cat "$T/err"))" \
  '[[ $rc == 1 && ! -e $T/b1 ]] && grep -q "^trnsim: error: --log-level '"'"'loud'"'"': expected trace, debug, info, warn, error or off$" "$T/err"'
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/b2" --quiet --verbose >"$T/out" 2>"$T/err"
rc=$?
check "--quiet with --verbose: exit $rc ($(head -1 "$T/err"))" '[[ $rc == 1 && ! -e $T/b2 ]] && grep -q "excludes" "$T/err"'

# 6. A user's own trnsim.log in the folder is never replaced (unless --overwrite).
mkdir "$T/u"
echo "my notes" >"$T/u/trnsim.log"
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/u" >"$T/out" 2>"$T/err"
rc=$?
check "a user's trnsim.log: refused (exit $rc: $(head -c 300 "$T/err"))" \
  '[[ $rc == 1 && $(cat "$T/u/trnsim.log") == "my notes" && ! -e $T/u/stats.json ]] && grep -q "the log trnsim.log '"'"'$T/u/trnsim.log'"'"': cannot write: a file is there that trnsim will not replace" "$T/err"'
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/u" --overwrite >"$T/out" 2>"$T/err"
check "a user's trnsim.log: replaced with --overwrite" '[[ $? == 0 ]] && grep -q "writing 3 files" "$T/u/trnsim.log"'

# 7. SIGKILL at every step of the write of set B over set A (TRNSIM_TEST_KILL_AT_WRITE_STEP,
# sim/io/output_files.h): trnsim.log is whole, set A's or set B's, and when `trnsim stats` reads the folder,
# the log is of the set it reads. Into a fresh folder, a kill at the first step leaves no log.
for s in A B; do
  sed -e "s/\"name\": \"$NAME\"/\"name\": \"set_$s\"/" "$SMALL" >"$T/$s.json"
done
{ TRNSIM_TEST_KILL_AT_WRITE_STEP=1 "$TRNSIM" run "$T/B.json" --no-numerics --out "$T/f" >/dev/null 2>&1; } 2>/dev/null
rc=$?
check "a fresh folder killed at step 1: exit $rc, no log ($(ls -A "$T/f" 2>&1 | head -5))" \
  '[[ $rc == 137 && ! -e $T/f/trnsim.log ]]'
# whole_log DIR: the set (A or B) whose whole log DIR/trnsim.log is, else "partial".
whole_log() {
  local f=$1/trnsim.log s
  [[ -f $f && $(tail -c 1 "$f" | od -An -c) == *'\n' ]] || {
    echo partial
    return
  }
  for s in A B; do
    [[ $(tail -1 "$f") =~ ^$STAMP" debug trnsim: set_$s: writing 3 files into $1"$ ]] && {
      echo "$s"
      return
    }
  done
  echo partial
}
steps=0
for n in $(seq 1 60); do
  rm -rf "$T/k"
  "$TRNSIM" run "$T/A.json" --no-numerics --out "$T/k" >/dev/null 2>&1
  { TRNSIM_TEST_KILL_AT_WRITE_STEP=$n "$TRNSIM" run "$T/B.json" --no-numerics --out "$T/k" >"$T/kill.log" 2>&1; } 2>/dev/null
  rc=$?
  log_set=$(whole_log "$T/k")
  if [[ $rc == 0 ]]; then  # the write has fewer steps: every one was tried
    check "after the last step: set B's log" '[[ $log_set == B ]]'
    break
  fi
  steps=$n
  check "step $n: killed (exit $rc: $(tail -1 "$T/kill.log"))" '[[ $rc == 137 ]]'
  check "step $n: the log is whole ($log_set: $(tail -c 200 "$T/k/trnsim.log" 2>&1))" '[[ $log_set == A || $log_set == B ]]'
  if stats_set=$("$TRNSIM" stats "$T/k/stats.json" 2>/dev/null | sed -n 's/^workload set_\([AB]\): .*/\1/p') &&
    [[ -n $stats_set ]]; then
    check "step $n: the log is the set's that stats reads (log $log_set, stats $stats_set)" '[[ $log_set == "$stats_set" ]]'
  fi
  "$TRNSIM" run "$T/B.json" --no-numerics --out "$T/k" >/dev/null 2>&1
  check "step $n: the next run writes set B's log" '[[ $(whole_log "$T/k") == B ]]'
done
check "the write has steps to kill at ($steps)" '[[ $steps -ge 5 ]]'
finish
