#!/usr/bin/env bash
# The HTML reports' files and processes: usage report_files.sh <trnsim-binary> <source-dir>. Issue 22,
# tester22g's findings: a --report that cannot be drawn replaced the run's set and removed its earlier report
# (2); a signal while a report is drawn left the Python script running and its staging folder in $TMPDIR (4);
# a matplotlibrc in the current folder changed the page and could run code (5). Tester22h: a full $TMPDIR
# said "cannot stage the stats" without why (3); SIGSEGV/SIGABRT (and, found later, SIGKILL) while a report
# is drawn left the staging folder and the empty OUT it created (4). Tester22j: a report through a folder
# alias did not join the run's set (6), a SIGBUS to `stats --html` said "cannot read the drawn report" after
# its cleanup (4), a killed `stats --html` was noted as "a trnsim run was killed" (6).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$T/va.json
sed 's/"n": 25600/"n": 2560/' "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >"$W"
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "SKIPPED: report_files.sh needs python3-matplotlib" >&2
  exit 77
fi
mkdir -p "$T/tmp"
export TMPDIR=$T/tmp

# 2. A report that cannot be drawn (no interpreter that works, no staging folder, a file-size limit) stops the
# run before anything is written: the earlier set and its report stay, byte for byte.
"$TRNSIM" run "$W" --out "$T/G" --report "$T/G/r.html" >/dev/null 2>&1
rc=$?
check "first run with --report (rc $rc)" '[[ $rc == 0 && -s $T/G/r.html ]]'
snapshot() { (cd "$T/G" && find . -type f -print0 | sort -z | xargs -0 sha256sum); }
before=$(snapshot)
for how in python tmpdir fsize; do
  case $how in
    python) msg=$(TRNSIM_PYTHON=/bin/false "$TRNSIM" run "$W" --out "$T/G" --set params.n=5120 --report "$T/G/r.html" 2>&1) ;;
    tmpdir) msg=$(TMPDIR=$T/nonexistent "$TRNSIM" run "$W" --out "$T/G" --set params.n=5120 --report "$T/G/r.html" 2>&1) ;;
    fsize) msg=$(ulimit -f 100 && "$TRNSIM" run "$W" --out "$T/G" --set params.n=5120 --report "$T/G/r.html" 2>&1) ;;
  esac
  rc=$?
  check "a --report that fails ($how) leaves every file as it was (rc $rc): $msg" \
    '[[ $rc == 1 && $msg != *"wrote "* && $(snapshot) == "$before" ]]'
done
# Into a new folder: nothing is left of it.
msg=$(TRNSIM_PYTHON=/bin/false "$TRNSIM" run "$W" --out "$T/G2" --report "$T/G2.html" 2>&1)
rc=$?
check "a failed --report into a new folder leaves no folder (rc $rc): $msg" '[[ $rc == 1 && ! -e $T/G2 && ! -e $T/G2.html ]]'
check "no staging folder is left" '[[ -z $(ls -A "$T/tmp") ]]'

# 3. A $TMPDIR with no room (a 64 KiB tmpfs, filled; needs root for the mount): the message names the staged
# file and the reason.
if [[ $(id -u) == 0 ]] && mkdir "$T/full" && mount -t tmpfs -o size=64k tmpfs "$T/full" 2>/dev/null; then
  dd if=/dev/zero of="$T/full/fill" bs=4k count=64 2>/dev/null
  msg=$(TMPDIR=$T/full "$TRNSIM" run "$W" --out "$T/F" --report "$T/F.html" 2>&1)
  rc=$?
  check "a full \$TMPDIR: the staged file and the reason are named (rc $rc): $msg" \
    '[[ $rc == 1 && $msg == *"$T/full/trnsim-report."*": cannot stage "*": No space left on device"* && ! -e $T/F ]]'
  check "... and no staging folder is left" '[[ -z $(find "$T/full" -name "trnsim-report.*") ]]'
  umount "$T/full"
fi

# 4. A signal while the report script runs: the script is killed and its staging folder removed, for a signal
# to trnsim alone (SIGTERM, SIGHUP; SIGSEGV and SIGABRT, which keep their core dump) and for one to its
# process group (timeout, Slurm).
ulimit -c 0
cat >"$T/slow_py" <<SH
#!/bin/sh
echo \$\$ >"$T/script.pid"
exec sleep 60
SH
chmod +x "$T/slow_py"
# SIGBUS and SIGTRAP too (tester22i: they left the script running, its staging folder and the empty OUT).
signals=(TERM HUP SEGV ABRT BUS TRAP group)
# A sanitizer's own SIGSEGV and SIGBUS handlers stay in place of trnsim's (tests/sanitize.sh): those are left
# out there.
[[ -n ${ASAN_OPTIONS:-}${UBSAN_OPTIONS:-} ]] && signals=(TERM HUP ABRT TRAP group)
for how in "${signals[@]}"; do
  rm -f "$T/script.pid"
  # In a session of its own, so that the process-group kill reaches trnsim and its script, not this test.
  TRNSIM_PYTHON=$T/slow_py setsid "$TRNSIM" run "$W" --out "$T/S_$how" --report "$T/S_$how.html" >"$T/s.out" 2>&1 &
  runner=$!
  for ((i = 0; i < 600; i++)); do [[ -s $T/script.pid ]] && break; sleep 0.05; done
  script=$(cat "$T/script.pid" 2>/dev/null)
  tpid=$(ps -o ppid= -p "$script" | tr -d ' ')
  case $how in
    group) kill -TERM -- "-$(ps -o pgid= -p "$tpid" | tr -d ' ')" ;;
    *) kill -"$how" "$tpid" ;;
  esac
  wait "$runner"
  rc=$?
  sleep 0.2
  check "a SIG$how while drawing the report ends the script and leaves no staging folder (rc $rc): $(cat "$T/s.out")" \
    '[[ -n $script && $rc != 0 ]] && ! kill -0 "$script" 2>/dev/null && [[ -z $(ls -A "$T/tmp") && ! -e $T/S_$how ]]'
  [[ -n $script ]] && kill "$script" 2>/dev/null
done
# A SIGBUS or SIGTRAP sent with kill to `stats --html` lands on the idle main thread: handled there, the
# command went on after the cleanup and said "cannot read the drawn report" (tester22j; about one time in
# four): the command's thread handles it, and nothing more is said.
"$TRNSIM" run "$W" --out "$T/B" >/dev/null 2>&1
said=""
for how in BUS TRAP; do
  [[ -n ${ASAN_OPTIONS:-}${UBSAN_OPTIONS:-} && $how == BUS ]] && continue
  for ((k = 0; k < 12; k++)); do
    rm -f "$T/script.pid"
    TRNSIM_PYTHON=$T/slow_py "$TRNSIM" stats "$T/B/stats.json" --html="$T/B/b.html" >"$T/b.out" 2>&1 &
    sp=$!
    for ((i = 0; i < 600; i++)); do [[ -s $T/script.pid ]] && break; sleep 0.02; done
    kill -"$how" $sp
    wait $sp 2>/dev/null
    grep -q "error" "$T/b.out" && said+="SIG$how: $(cat "$T/b.out") "
  done
done
check "a SIGBUS or SIGTRAP to stats --html says only that it was interrupted: $said" '[[ -z $said && -z $(ls -A "$T/tmp") ]]'
# A SIGKILL leaves the staging folder (no handler runs): the next report's run removes it, as the folder of a
# trnsim that is gone (no process holds its lock); a live run's is left.
rm -f "$T/script.pid"
TRNSIM_PYTHON=$T/slow_py "$TRNSIM" run "$W" --out "$T/K" --report "$T/K.html" >/dev/null 2>&1 &
runner=$!
for ((i = 0; i < 600; i++)); do [[ -s $T/script.pid ]] && break; sleep 0.05; done
script=$(cat "$T/script.pid" 2>/dev/null)
kill -KILL $runner
wait $runner 2>/dev/null
for ((i = 0; i < 100; i++)); do kill -0 "$script" 2>/dev/null || break; sleep 0.05; done
check "a SIGKILL while drawing ends the script with trnsim (tester22i: it was left running)" \
  '[[ -n $script ]] && ! kill -0 "$script" 2>/dev/null'
[[ -n $script ]] && kill "$script" 2>/dev/null
left=$(ls -A "$T/tmp")
check "a SIGKILL while drawing leaves its staging folder ($left)" '[[ $left == trnsim-report.$runner.* ]]'
rm -f "$T/script.pid"
TRNSIM_PYTHON=$T/slow_py "$TRNSIM" run "$W" --out "$T/K2" --report "$T/K2.html" >/dev/null 2>"$T/k2.err" &
live=$!
for ((i = 0; i < 600; i++)); do [[ -s $T/script.pid ]] && break; sleep 0.05; done
check "the next report removes the killed one's staging folder, noted: $(cat "$T/k2.err")" \
  '[[ ! -e $T/tmp/$left ]] && grep -qF "$T/tmp/$left: removed the staging folder of a trnsim report killed while it was drawn" "$T/k2.err"'
msg=$(TRNSIM_PYTHON=/bin/false "$TRNSIM" run "$W" --out "$T/K3" --report "$T/K3.html" 2>&1)
check "... and a report beside a live one leaves the live one's: $msg" \
  '[[ $(ls -A "$T/tmp") == trnsim-report.$live.* && $msg != *"removed the staging folder"* ]]'
kill -TERM $live
wait $live 2>/dev/null
check "... and the live one's goes with it" '[[ -z $(ls -A "$T/tmp") ]]'

# 6. A `stats --html` report beside a run's stats.json joins the run's set (tester22g 3: it was recorded only
# in .trnsim-written, so the next run left it, a report of an older run, beside the new stats.json): the next
# run removes it with the earlier set's other files. A report whose stats.json another run replaced while it
# was drawn is not written (before: it landed after the newer set).
"$TRNSIM" run "$W" --out "$T/H" >/dev/null 2>&1
"$TRNSIM" stats "$T/H/stats.json" --html="$T/H/stats.html" >"$T/h.out" 2>&1
check "stats --html beside the run's stats.json: recorded in the run's set ($(cat "$T/h.out"))" \
  '[[ -s $T/H/stats.html ]] && grep -q "\"stats.html\"" "$T/H/.trnsim-files"'
"$TRNSIM" run "$W" --out "$T/H" --set params.n=5120 >"$T/h.out" 2>&1
rc=$?
check "... and the next run removes it with the earlier set (rc $rc: $(tail -1 "$T/h.out"))" '[[ $rc == 0 && ! -e $T/H/stats.html ]]'
# A report written through a link to /dev/null (or a FIFO) in the folder is no file of the set: the next run
# goes on (tester22i: it was recorded with inode 0 and the next run refused the folder).
ln -s /dev/null "$T/H/null.html"
"$TRNSIM" stats "$T/H/stats.json" --html="$T/H/null.html" >"$T/n.out" 2>&1
"$TRNSIM" run "$W" --out "$T/H" --set params.n=5120 >"$T/n2.out" 2>&1  # (the same set as before: the next
# check needs a run that changes stats.json)
rc=$?
check "a report through a link to /dev/null leaves the set usable (rc $rc): $(grep -v '^ ' "$T/n2.out" | tail -2)" \
  '[[ $rc == 0 && -L $T/H/null.html ]] && ! grep -q "null.html" "$T/H/.trnsim-files"'
# The renderer says it started (stats.json read) and waits for the run: on a loaded host the stats command could
# otherwise start after the run and read the new stats.json, whose report is then rightly written.
cat >"$T/wait_py" <<SH
#!/bin/sh
touch "$T/started"
while [ ! -e "$T/go" ]; do sleep 0.05; done
echo '<html></html>' >"\$3"
SH
chmod +x "$T/wait_py"
rm -f "$T/go" "$T/started"
TRNSIM_PYTHON=$T/wait_py "$TRNSIM" stats "$T/H/stats.json" --html="$T/H/late.html" >"$T/late.out" 2>&1 &
sp=$!
while [ ! -e "$T/started" ] && kill -0 $sp 2>/dev/null; do sleep 0.05; done
"$TRNSIM" run "$W" --out "$T/H" >/dev/null 2>&1
touch "$T/go"
wait $sp
rc=$?
check "a report whose stats.json a run replaced meanwhile is not written (rc $rc): $(cat "$T/late.out")" \
  '[[ $rc == 1 && ! -e $T/H/late.html ]] && grep -q "the file changed while the report was drawn" "$T/late.out"'

# A `stats --html` killed at any step of its write, over the report an earlier `stats --html` drew into the
# run's set: the record names whichever report is there, so the next run removes it with the earlier set
# (tester22i: killed after its rename, the new report stayed beside the later run's stats.json, the record
# naming the first report's inode). The same for a first report killed after its rename.
for first in yes no; do
  for step in 1 2 3 4 5 6 7 8; do
    rm -rf "$T/KH"
    "$TRNSIM" run "$W" --out "$T/KH" >/dev/null 2>&1
    [[ $first == yes ]] && "$TRNSIM" stats "$T/KH/stats.json" --html="$T/KH/stats.html" >/dev/null 2>&1
    { TRNSIM_TEST_KILL_AT_WRITE_STEP=$step "$TRNSIM" stats "$T/KH/stats.json" --html="$T/KH/stats.html" >/dev/null 2>&1; } 2>/dev/null
    "$TRNSIM" run "$W" --out "$T/KH" --set params.n=5120 >"$T/kh.out" 2>&1
    rc=$?
    check "a stats --html killed at step $step (earlier report: $first): the next run removes its report (rc $rc): $(ls -A "$T/KH" | tr '\n' ' ')" \
      '[[ $rc == 0 && ! -e $T/KH/stats.html && -z $(ls -A "$T/KH" | grep "stats.html") ]]'
    # Killed before its rename (a first report: the temporary made, the journal, the file filled): the next
    # run names the command whose set it rolls back (before: "a trnsim run was killed").
    [[ $first == no && $step == 2 ]] && check "... and names the killed command (step $step, earlier report: $first): $(grep killed "$T/kh.out")" \
      'grep -q "$T/KH: a trnsim stats --html was killed while replacing its files" "$T/kh.out"'
  done
done
# A report beside a chain stage's stats.json joins the chain's set (tester22i: it joined only the stage's
# .trnsim-written, and the chain's next run left it there).
sed -e 's/"name": "vector_add_stream_free_dim_2"/"name": "va"/' "$W" >"$T/va_stage.json"
echo '{"name": "pl", "stages": ["va_stage.json"]}' >"$T/pl.json"
(cd "$T" && "$TRNSIM" run pl.json --out CH >/dev/null 2>&1)
"$TRNSIM" stats "$T/CH/va/stats.json" --html="$T/CH/va/stats.html" >"$T/ch.out" 2>&1
check "stats --html into a chain stage: recorded in the chain's set ($(cat "$T/ch.out"))" \
  '[[ -s $T/CH/va/stats.html ]] && grep -q "\"va/stats.html\"" "$T/CH/.trnsim-files"'
"$TRNSIM" stats "$T/CH/va/stats.json" >/dev/null 2>"$T/ch.err"
rc=$?
check "... under the report's inode: trnsim stats on the stage notes nothing (rc $rc: $(cat "$T/ch.err"))" '[[ $rc == 0 && ! -s $T/ch.err ]]'
(cd "$T" && "$TRNSIM" run pl.json --out CH >"$T/ch.out" 2>&1)
rc=$?
check "... and the chain's next run removes it (rc $rc: $(tail -1 "$T/ch.out"))" '[[ $rc == 0 && ! -e $T/CH/va/stats.html ]]'
# A report written through another name of the run's folder (a symlink to it, H/../Hl, or the stats.json
# read through the link) joins the set as one written by its own name does (tester22j: the folders were
# compared by their paths' text, so these went only into .trnsim-written, and the next run left them).
"$TRNSIM" run "$W" --out "$T/A" >/dev/null 2>&1
ln -s A "$T/Al"
"$TRNSIM" stats "$T/A/stats.json" --html="$T/Al/a1.html" >"$T/a.out" 2>&1
"$TRNSIM" stats "$T/A/stats.json" --html="$T/A/../Al/a2.html" >>"$T/a.out" 2>&1
"$TRNSIM" stats "$T/Al/stats.json" --html="$T/A/a3.html" >>"$T/a.out" 2>&1
check "stats --html through an alias of the run's folder: recorded in the run's set ($(cat "$T/a.out"))" \
  'grep -q "\"a1.html\"" "$T/A/.trnsim-files" && grep -q "\"a2.html\"" "$T/A/.trnsim-files" && grep -q "\"a3.html\"" "$T/A/.trnsim-files"'
"$TRNSIM" run "$W" --out "$T/A" --set params.n=5120 >"$T/a.out" 2>&1
rc=$?
check "... and the next run removes them (rc $rc: $(tail -3 "$T/a.out"))" \
  '[[ $rc == 0 && ! -e $T/A/a1.html && ! -e $T/A/a2.html && ! -e $T/A/a3.html ]]'
# The same for run --report (tester27r: through Al, A/../A, or --out Al with A/r.html, the report went only
# into .trnsim-written and the next run left it beside the new stats.json): each run removes the one before's.
"$TRNSIM" run "$W" --out "$T/A" --no-numerics --report "$T/Al/r1.html" >"$T/a.out" 2>&1
check "run --report through a link to the folder: recorded in the run's set ($(tail -2 "$T/a.out"))" \
  '[[ -s $T/A/r1.html ]] && grep -q "\"r1.html\"" "$T/A/.trnsim-files"'
"$TRNSIM" run "$W" --out "$T/A" --no-numerics --report "$T/A/../A/r2.html" >"$T/a.out" 2>&1
check "... the next run (--report A/../A/r2.html) removes it and records its own ($(tail -2 "$T/a.out"))" \
  '[[ ! -e $T/A/r1.html && -s $T/A/r2.html ]] && grep -q "\"r2.html\"" "$T/A/.trnsim-files"'
"$TRNSIM" run "$W" --out "$T/Al" --no-numerics --report "$T/A/r3.html" >"$T/a.out" 2>&1
check "... the next (--out Al --report A/r3.html) too ($(tail -2 "$T/a.out"))" \
  '[[ ! -e $T/A/r2.html && -s $T/A/r3.html ]] && grep -q "\"r3.html\"" "$T/A/.trnsim-files"'
"$TRNSIM" run "$W" --out "$T/A" --no-numerics --set params.n=4096 >"$T/a.out" 2>&1
rc=$?
check "... and a run without --report removes the last (rc $rc: $(tail -2 "$T/a.out"))" '[[ $rc == 0 && ! -e $T/A/r3.html ]]'
# A path through a folder that is not there (A/sub) is refused as the kernel refuses it (tester27r: --html=
# A/./sub/../r4.html wrote A/r4.html, normalised, and left it out of the set).
"$TRNSIM" stats "$T/A/stats.json" --html="$T/A/./sub/../r4.html" >"$T/a.out" 2>&1
rc=$?
check "stats --html through a missing folder: refused (exit $rc), naming it ($(cat "$T/a.out"))" \
  '[[ $rc != 0 && ! -e $T/A/r4.html ]] && grep -q "A/./sub/..'"'"' cannot be opened (No such file or directory)" "$T/a.out"'
# A symlinked folder below the run's folder on the way to the report is named (tester22i: "cannot open the
# directory: Not a directory").
ln -s . "$T/H/self"
msg=$("$TRNSIM" stats "$T/H/stats.json" --html="$T/H/self/r.html" 2>&1)
rc=$?
check "stats --html through a symlinked folder in the run's folder names it (rc $rc): $msg" \
  '[[ $rc == 1 && $msg == *"--html '"'"'$T/H/self/r.html'"'"': cannot write: $T/H/self is a symlink (to .): trnsim does not write through links"* && ! -e $T/H/r.html ]]'

# 5. A matplotlibrc in the current folder (any folder the user runs trnsim in: a download, a shared folder)
# changes nothing: the page is the same bytes as one drawn elsewhere, and no backend it names is loaded.
mkdir -p "$T/clean" "$T/planted"
"$TRNSIM" run "$W" --out "$T/M" >/dev/null 2>&1
(cd "$T/clean" && "$TRNSIM" stats "$T/M/stats.json" --html="$T/clean.html" >/dev/null 2>&1)
cat >"$T/planted/matplotlibrc" <<RC
lines.linewidth: 12
axes.facecolor: red
svg.hashsalt: planted
backend: module://plantedbk
RC
echo "open('$T/planted_ran', 'w')" >"$T/planted/plantedbk.py"
msg=$(cd "$T/planted" && "$TRNSIM" stats "$T/M/stats.json" --html="$T/planted.html" 2>&1)
rc=$?
check "a planted ./matplotlibrc changes nothing (rc $rc): $msg" \
  '[[ $rc == 0 && -s $T/planted.html && ! -e $T/planted_ran ]] && cmp -s "$T/clean.html" "$T/planted.html"'
finish
