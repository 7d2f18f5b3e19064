#!/usr/bin/env bash
# Folders another process holds locked, and traces to a pipe: usage folder_holders.sh <trnsim-binary>
# <source-dir>. Issue 22, tester22h 1 and 3, tester22g's `--trace /dev/stderr`:
#   1. A --trace into a folder another process holds locked (a quantize writing there; here flock(1)) is
#      renamed into place and recorded under that folder's lock: while the holder keeps it the earlier trace
#      stays, and a run killed while it waits leaves it so; the next --trace there goes on. (Before: the trace
#      was renamed in at once and recorded only once the lock was free; killed meanwhile, the next --trace
#      was refused: "no trnsim record lists it".)
#   2. A quantize waiting for a folder another program holds names that program (its pid and command line),
#      says how long it waits at most, and says again every 10 s while it waits (before: "waiting for
#      another trnsim", nothing more, for up to 600 s).
#   3. A trace to a pipe (/dev/stderr when stderr is one) is written straight through, as stats.json to a
#      FIFO is (before: "No such file or directory").
#   4. Two runs whose traces go into each other's --out do not wait for each other (tester22i: each held its
#      own folder for its whole run and waited for the other's, 600 s twice).
#   5. Two runs with the same --trace: neither is refused as "changed" (tester22i), and a SIGKILL while a
#      trace waits for its folder's lock leaves a temporary the next trace there removes, by its lock, not its
#      PID (tester22j: removing it by PID lost a live run's trace in another PID namespace; files merely named
#      like an earlier trnsim's, .NAME.tmp.PID.N, stay).
#   6. A record's temporary, a probe or a trace's temporary whose writer still holds its lock is never
#      removed as a killed run's, though its PID is no process here (a trnsim in another PID namespace: a
#      container sharing the folder; here flock(1) holds it under a PID no process has). Before, "dead" was
#      judged by the PID alone. Once nobody holds them they go (a trace's, rel22t: it was kept for ever).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$T/va.json
sed 's/"n": 25600/"n": 2560/' "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >"$W"
X=$SRC/examples/activations_bf16_256x1024.npy
# hold DIR SECONDS: flock(1) holds DIR's lock for SECONDS (returns once it holds it); $holder is its pid, the
# lock's only holder (-o: its command does not inherit it).
hold() {
  rm -f "$T/held"
  flock -o "$1" sh -c "touch '$T/held'; sleep $2" &
  holder=$!
  for ((i = 0; i < 200; i++)); do [[ -e $T/held ]] && break; sleep 0.05; done
}

# 1. An earlier trace, recorded; then a run whose --trace lands there while flock holds the folder.
mkdir "$T/tl"
"$TRNSIM" run "$W" --out "$T/o1" --trace "$T/tl/t.pftrace" >/dev/null 2>&1
check "a first trace" '[[ $? == 0 && -s $T/tl/t.pftrace ]]'
first=$(sha256sum <"$T/tl/t.pftrace")
hold "$T/tl" 30
"$TRNSIM" run "$W" --out "$T/o2" --set params.n=5120 --trace "$T/tl/t.pftrace" >"$T/r.log" 2>&1 &
rp=$!
if wait_waiting "$T/r.log" $rp "waiting for"; then
  check "while another process holds the folder, the earlier trace stays: $(cat "$T/r.log")" \
    '[[ $(sha256sum <"$T/tl/t.pftrace") == "$first" ]]'
  kill -KILL $rp
  wait $rp 2>/dev/null
  check "... and stays when the waiting run is killed" '[[ $(sha256sum <"$T/tl/t.pftrace") == "$first" ]]'
  check "... which leaves its full trace's temporary" '[[ -n $(ls -A "$T/tl" | grep "^\.trnsim-trace\.$rp\.") ]]'
else
  bad "the run did not wait for the folder's lock: $(cat "$T/r.log")"
fi
kill $(pgrep -P $holder) $holder 2>/dev/null
wait $holder 2>/dev/null
msg=$("$TRNSIM" run "$W" --out "$T/o3" --set params.n=5120 --trace "$T/tl/t.pftrace" 2>&1)
rc=$?
check "the next --trace there goes on (rc $rc): $msg" \
  '[[ $rc == 0 && $(sha256sum <"$T/tl/t.pftrace") != "$first" ]]'
# ... and removes the killed run's trace temporary, noted (rel22t: it was kept for ever). Its writer's lock
# is gone with it; a live writer's, also in another PID namespace, is kept (6 below).
check "... removing the killed run's trace temporary, noted" \
  '[[ -z $(ls -A "$T/tl" | grep "^\.trnsim-trace\.") && $msg == *"$T/tl/.trnsim-trace.$rp."*": removed: the unfinished trace of a trnsim that was killed (pid $rp)"* ]]'
# tester22j 5: files merely named like an earlier trnsim's trace temporary (a complete trace, an empty file)
# are kept: trnsim's are .trnsim-trace.PID.N.
cp "$T/tl/t.pftrace" "$T/tl/.keep.json.tmp.99999.1" && : >"$T/tl/.notes.json.tmp.99999.2"
"$TRNSIM" run "$W" --out "$T/o3b" --trace "$T/tl/x.json" >/dev/null 2>&1
check "files named like a trace's temporary stay" '[[ -s $T/tl/.keep.json.tmp.99999.1 && -e $T/tl/.notes.json.tmp.99999.2 ]]'
# Waiting, then let go: the trace is renamed in and recorded once the holder ends.
hold "$T/tl" 8
"$TRNSIM" run "$W" --out "$T/o4" --trace "$T/tl/t.pftrace" >"$T/r4.log" 2>&1
rc=$?
check "a run that waited for the holder writes and records its trace (rc $rc): $(cat "$T/r4.log")" \
  '[[ $rc == 0 && $(sha256sum <"$T/tl/t.pftrace") == "$first" ]] && grep -q "waiting for" "$T/r4.log" && grep -q "\"t.pftrace\"" "$T/tl/.trnsim-written"'
wait $holder 2>/dev/null

# 2. A quantize waiting for another program's lock: who holds it, for how long trnsim waits, and again later.
mkdir "$T/q"
hold "$T/q" 14
start=$SECONDS
"$TRNSIM" quantize "$X" --format e4m3 --axis row --rule ocp --data "$T/q/d.npy" --scales "$T/q/s.npy" >"$T/q.log" 2>&1
rc=$?
took=$((SECONDS - start))
check "the quantize waited, then wrote (rc $rc, $took s): $(cat "$T/q.log")" \
  '[[ $rc == 0 && -f $T/q/d.npy && $took -ge 8 ]]'
check "... naming the holder and the longest wait" \
  'grep -q "trnsim: waiting for pid $holder (flock -o $T/q sh -c .*), not a trnsim, which holds the lock of $T/q (.* s so far, 600 s at most)" "$T/q.log"'
check "... and saying again while it waits" \
  'grep -q "trnsim: still waiting for pid $holder (flock .*), not a trnsim, which holds the lock of $T/q (1[0-9] s so far, 600 s at most)" "$T/q.log"'
wait $holder 2>/dev/null

# 4. Two runs whose traces go into each other's --out: neither waits for the other (each holds its own
# folder until it ends), so neither waits at all; each trace is written (tester22i: both waited 600 s twice).
mkdir "$T/x" "$T/y"
start=$SECONDS
timeout 300 "$TRNSIM" run "$W" --out "$T/x" --trace "$T/y/a.pftrace" >"$T/x.log" 2>&1 &
ra=$!
timeout 300 "$TRNSIM" run "$W" --out "$T/y" --trace "$T/x/b.pftrace" >"$T/y.log" 2>&1
rb=$?
wait $ra
ra=$?
took=$((SECONDS - start))
check "runs tracing into each other's --out end without waiting (rc $ra $rb, $took s): $(cat "$T/x.log" "$T/y.log" | grep -v '^ ')" \
  '[[ $ra == 0 && $rb == 0 && $took -lt 120 && -s $T/y/a.pftrace && -s $T/x/b.pftrace ]] && ! grep -q "waiting for" "$T/x.log" "$T/y.log"'

# 5. Two runs with the same --trace: the one that renames its trace second wins, neither is refused. The
# moment between the first's rename and its record (both under the folder's lock) is made by hand: the
# first trace's bytes at the path, the record naming another trace, flock holding the folder until the
# first's record is back. A run starting then judges the file again under the lock and goes on (tester22i:
# 2 of 15 concurrent rounds were refused as "changed").
mkdir "$T/e"
"$TRNSIM" run "$W" --out "$T/e1" --trace "$T/e/t.pftrace" >/dev/null 2>&1
cp "$T/e/.trnsim-written" "$T/e_rec" && cp "$T/e/t.pftrace" "$T/e_trace"
"$TRNSIM" run "$W" --out "$T/e2" --set params.n=5120 --trace "$T/e/t.pftrace" >/dev/null 2>&1
cp "$T/e_trace" "$T/e/t.pftrace"
rm -f "$T/held"
flock -o "$T/e" sh -c "touch '$T/held'; sleep 2; cp '$T/e_rec' '$T/e/.trnsim-written'" &
holder=$!
for ((i = 0; i < 200; i++)); do [[ -e $T/held ]] && break; sleep 0.05; done
msg=$("$TRNSIM" run "$W" --out "$T/e3" --set params.n=5120 --trace "$T/e/t.pftrace" 2>&1)
rc=$?
wait $holder
check "a run whose --trace another run has just put in place, not yet recorded, goes on (rc $rc): $msg" \
  '[[ $rc == 0 && $(sha256sum <"$T/e/t.pftrace") != $(sha256sum <"$T/e_trace") ]]'

# 6. A live writer's record temporary and probe (flock(1) holds each; the PID in their names is no process:
# above the kernel's pid_max) stay; once nobody holds them, the next run removes them as a killed run's.
mkdir "$T/live"
"$TRNSIM" run "$W" --out "$T/live" >/dev/null 2>&1
rec="$T/live/..trnsim-files.tmp.99999999.0"
probe="$T/live/.trnsim-probe.99999999.0"
trace="$T/live/.trnsim-trace.99999999.0"  # a trace being written (rel22t: its lock is held too)
echo '{"files": [], "state": "complete", "trnsim_files": 2}' >"$rec"
: >"$probe"
head -c 4096 "$T/tl/t.pftrace" >"$trace"
rm -f "$T/held" "$T/held2" "$T/held3"
flock -o "$rec" sh -c "touch '$T/held'; sleep 30" &
h1=$!
flock -o "$probe" sh -c "touch '$T/held2'; sleep 30" &
h2=$!
flock -o "$trace" sh -c "touch '$T/held3'; sleep 30" &
h3=$!
for ((i = 0; i < 200; i++)); do [[ -e $T/held && -e $T/held2 && -e $T/held3 ]] && break; sleep 0.05; done
msg=$("$TRNSIM" run "$W" --out "$T/live" --set params.n=5120 2>&1)
rc=$?
check "a record temporary, a probe and a trace temporary whose writer holds their lock stay (rc $rc): $msg" \
  '[[ $rc == 0 && -s $rec && -e $probe && -s $trace && $msg != *"removed: an empty file"* && $msg != *"removed: the unfinished trace"* ]]'
kill $(pgrep -P $h1) $(pgrep -P $h2) $(pgrep -P $h3) $h1 $h2 $h3 2>/dev/null
wait $h1 $h2 $h3 2>/dev/null
msg=$("$TRNSIM" run "$W" --out "$T/live" 2>&1)
rc=$?
check "... and go once nobody holds them (rc $rc): $msg" \
  '[[ $rc == 0 && ! -e $rec && ! -e $probe && ! -e $trace && $msg == *"$trace: removed: the unfinished trace of a trnsim that was killed (pid 99999999)"* ]]'
# A file of the user's at such a name (not a trace) is kept, with a note.
echo "my notes" >"$trace"
msg=$("$TRNSIM" run "$W" --out "$T/live" --set params.n=5120 2>&1)
rc=$?
check "a file at a trace temporary's name that holds no trace stays (rc $rc): $msg" \
  '[[ $rc == 0 && $(cat "$trace") == "my notes" && $msg == *"$trace: left as it is: named as trnsim'"'"'s temporaries are, but it does not hold one"* ]]'

# 3. A trace to a pipe: the same bytes as to a file (the run's --out differs; a trace names no path).
"$TRNSIM" run "$W" --out "$T/p1" --trace "$T/p1.pftrace" >/dev/null 2>&1
"$TRNSIM" run "$W" --quiet --out "$T/p2" --trace /dev/stderr 2>&1 >/dev/null | cat >"$T/pipe.pftrace"
rc=${PIPESTATUS[0]}
check "--trace /dev/stderr on a pipe (rc $rc): $(head -c 200 "$T/pipe.pftrace" | tr -cd '[:print:]')" \
  '[[ $rc == 0 ]] && cmp -s "$T/p1.pftrace" "$T/pipe.pftrace"'
finish
