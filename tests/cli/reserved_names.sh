#!/usr/bin/env bash
# Files of the user's at the names trnsim gives its temporaries: usage reserved_names.sh <trnsim-binary>
# <source-dir>. Issue 22, tester22g's finding 6: a user's file named as a killed run's leftover
# (O/.trnsim-files.old, a record's temporary, a probe, each with the PID of no live process) was removed by
# the next run without a word. Only what holds trnsim's own content (a record, or nothing) goes now; any other
# stays, noted once.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$T/va.json
sed 's/"n": 25600/"n": 2560/' "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >"$W"
names=(.trnsim-files.old ..trnsim-files.tmp.99999.0 ..trnsim-written.tmp.99999.0 ..trnsim-journal.tmp.99999.0
  .trnsim-probe.99999.0)
"$TRNSIM" run "$W" --out "$T/O" >/dev/null 2>&1
for n in "${names[@]}"; do echo "user data" >"$T/O/$n"; done
"$TRNSIM" run "$W" --out "$T/O" --set params.n=5120 >"$T/out" 2>"$T/err"
rc=$?
for n in "${names[@]}"; do
  check "a user's $n stays (rc $rc)" '[[ $rc == 0 && $(cat "$T/O/$n" 2>/dev/null) == "user data" ]]'
  check "a user's $n is noted once: $(cat "$T/err")" '[[ $(grep -cF "$T/O/$n: left as it is" "$T/err") == 1 ]]'
done
# trnsim's own leftovers still go: a killed record write (a record's bytes, or none) and an empty probe. An
# empty file could be a user's too: its removal is noted (tester22h 5: before, removed without a word).
rm -f "${names[@]/#/$T/O/}"
cp "$T/O/.trnsim-files" "$T/O/.trnsim-files.old"
cp "$T/O/.trnsim-files" "$T/O/..trnsim-files.tmp.99999.0"
: >"$T/O/..trnsim-journal.tmp.99999.0"
: >"$T/O/.trnsim-probe.99999.0"
"$TRNSIM" run "$W" --out "$T/O" >"$T/out" 2>"$T/err"
rc=$?
check "trnsim's own leftovers are removed (rc $rc): $(cat "$T/err")" \
  '[[ $rc == 0 && ! -e $T/O/.trnsim-files.old && ! -e $T/O/..trnsim-files.tmp.99999.0 && ! -e $T/O/..trnsim-journal.tmp.99999.0 && ! -e $T/O/.trnsim-probe.99999.0 ]] && ! grep -q "left as it is" "$T/err"'
check "... a record's silently, each empty one with a note" \
  '[[ $(grep -c "removed" "$T/err") == 2 ]] && grep -qF "$T/O/..trnsim-journal.tmp.99999.0: removed: an empty file at the name of a temporary of a trnsim that was killed" "$T/err" && grep -qF "$T/O/.trnsim-probe.99999.0: removed: an empty file" "$T/err"'
# An empty .trnsim-files.old is not trnsim's (its backup is a link to a record, never empty): kept, noted.
: >"$T/O/.trnsim-files.old"
"$TRNSIM" run "$W" --out "$T/O" --set params.n=5120 >"$T/out" 2>"$T/err"
rc=$?
check "an empty .trnsim-files.old stays, noted (rc $rc): $(cat "$T/err")" \
  '[[ $rc == 0 && -e $T/O/.trnsim-files.old && ! -s $T/O/.trnsim-files.old ]] && grep -qF "$T/O/.trnsim-files.old: left as it is" "$T/err"'
# A FIFO, a folder or a symlink at such a name is never trnsim's: kept, with the same note (tester22i: kept
# without a word).
rm -f "$T/O/.trnsim-files.old"
mkfifo "$T/O/..trnsim-files.tmp.99999.1"
mkdir "$T/O/.trnsim-probe.99999.2" "$T/O/.trnsim-files.old"
ln -s "$T/va.json" "$T/O/..trnsim-written.tmp.99999.3"
"$TRNSIM" run "$W" --out "$T/O" >"$T/out" 2>"$T/err"
rc=$?
for n in ..trnsim-files.tmp.99999.1 .trnsim-probe.99999.2 ..trnsim-written.tmp.99999.3 .trnsim-files.old; do
  check "a FIFO, folder or symlink $n stays, noted once (rc $rc): $(cat "$T/err")" \
    '[[ $rc == 0 && ( -e $T/O/$n || -L $T/O/$n ) && $(grep -cF "$T/O/$n: left as it is" "$T/err") == 1 ]]'
done
finish
