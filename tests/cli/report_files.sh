#!/usr/bin/env bash
# The HTML reports' files and processes: usage report_files.sh <trnsim-binary> <source-dir>. Issue 22,
# tester22g's findings: a --report that cannot be drawn replaced the run's set and removed its earlier report
# (2); a signal while a report is drawn left the Python script running and its staging folder in $TMPDIR (4);
# a matplotlibrc in the current folder changed the page and could run code (5).
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
check "first run with --report" '[[ $? == 0 && -s $T/G/r.html ]]'
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
check "a failed --report into a new folder leaves no folder: $msg" '[[ $? == 1 && ! -e $T/G2 && ! -e $T/G2.html ]]'
check "no staging folder is left" '[[ -z $(ls -A "$T/tmp") ]]'

# 4. A signal while the report script runs: the script is killed and its staging folder removed, for a signal
# to trnsim alone (SIGTERM, SIGHUP) and for one to its process group (timeout, Slurm).
cat >"$T/slow_py" <<SH
#!/bin/sh
echo \$\$ >"$T/script.pid"
exec sleep 60
SH
chmod +x "$T/slow_py"
for how in TERM HUP group; do
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
check "a planted ./matplotlibrc changes nothing: $msg" \
  '[[ $? == 0 && -s $T/planted.html && ! -e $T/planted_ran ]] && cmp -s "$T/clean.html" "$T/planted.html"'
finish
