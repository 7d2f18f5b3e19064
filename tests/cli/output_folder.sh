#!/usr/bin/env bash
# The output folder keeps the user's files: usage output_folder.sh <trnsim-binary> <source-dir>.
# Issue 22's findings on the folder a run writes into, each a case here: a file moved or copied there under an
# earlier output's name is never removed as that run's output (1), nor a file reached through a symlinked
# folder (2); the manifest .trnsim-files gets the checks of any output (3); stats.json as a device or FIFO
# (13); a leftover probe of a killed run with the same PID (18).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json

# 1. Identity, not modification time. A first run writes outputs and dumped inputs; the user then puts files
# of their own there under the same names, with old modification times (mv, cp -p, tar x, rsync -a keep
# them), or changes one in place; a run that does not write those names removes none of them.
"$TRNSIM" run "$SMALL" --out "$T/a" --dump-inputs >/dev/null 2>&1
printf 'user data, moved in\n' >"$T/mine.npy"
touch -d 2000-01-01 "$T/mine.npy"
mv "$T/mine.npy" "$T/a/input_grad.npy"
printf 'user data, copied with cp -p\n' >"$T/copy.npy"
touch -d 2000-01-01 "$T/copy.npy"
cp -p "$T/copy.npy" "$T/a/weight_grad.npy"
# In place, same size, the old time put back: the same inode, other bytes.
printf 'X' | dd of="$T/a/inputs/weights.npy" bs=1 seek=200 conv=notrunc status=none
touch -d 2000-01-01 "$T/a/inputs/weights.npy"
"$TRNSIM" run "$SMALL" --out "$T/a" --no-numerics >"$T/out" 2>&1
rc=$?
check "rerun after the user's files moved in (exit $rc)" '[[ $rc == 0 ]]'
check "a file moved in under an output's name stays" '[[ $(cat "$T/a/input_grad.npy") == "user data, moved in" ]]'
check "a file copied in with cp -p stays" '[[ $(cat "$T/a/weight_grad.npy") == "user data, copied with cp -p" ]]'
check "a file changed in place stays" '[[ -f $T/a/inputs/weights.npy ]]'
check "the run's own untouched files go" '[[ ! -e $T/a/inputs/output_grad.npy && ! -e $T/a/inputs/input_activation.npy ]]'
check "only those are reported" '! grep -q "removed.*\(input_grad\|weight_grad\|weights\)" "$T/out"'

# 2. A symlinked folder on the way is never followed by a removal: the dumped inputs moved to the user's
# folder (same files, same inodes, same bytes), a symlink in their place.
"$TRNSIM" run "$SMALL" --out "$T/b" --dump-inputs >/dev/null 2>&1
mkdir -p "$T/data"
mv "$T/b/inputs" "$T/data/inputs"
ln -s "$T/data/inputs" "$T/b/inputs"
"$TRNSIM" run "$SMALL" --out "$T/b" --no-numerics >"$T/out" 2>&1
rc=$?
check "rerun with a symlinked inputs folder (exit $rc)" '[[ $rc == 0 ]]'
check "nothing removed through the symlink" \
  '[[ -f $T/data/inputs/weights.npy && -f $T/data/inputs/output_grad.npy && -f $T/data/inputs/input_activation.npy && -L $T/b/inputs ]]'

# 3. The manifest: a FIFO, a directory, a symlink to a user's file or to /dev/zero in its place are refused
# at once (before anything runs), named, and left as they are.
want_manifest() {  # want_manifest CASE: the run is refused at once with the manifest named
  local rc=$1 what=$2
  check "manifest $what: refused (exit $rc: $(head -c 300 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "/.trnsim-files: .*trnsim keeps its record of the files it wrote" "$T/out"'
}
mkdir -p "$T/m1" "$T/m2" "$T/m3" "$T/m4"
mkfifo "$T/m1/.trnsim-files"
timeout 60 "$TRNSIM" run "$SMALL" --out "$T/m1" --no-numerics >"$T/out" 2>&1
want_manifest $? "a FIFO"
check "the FIFO stays" '[[ -p $T/m1/.trnsim-files ]]'
mkdir "$T/m2/.trnsim-files"
timeout 60 "$TRNSIM" run "$SMALL" --out "$T/m2" --no-numerics >"$T/out" 2>&1
want_manifest $? "a directory"
check "refused before the simulation" '! grep -q "simulated time" "$T/out"'
echo "the user's notes" >"$T/notes.txt"
ln -s "$T/notes.txt" "$T/m3/.trnsim-files"
timeout 60 "$TRNSIM" run "$SMALL" --out "$T/m3" --no-numerics >"$T/out" 2>&1
want_manifest $? "a symlink to a user's file"
check "the linked file is untouched" '[[ $(cat "$T/notes.txt") == "the user'"'"'s notes" && -L $T/m3/.trnsim-files ]]'
ln -s /dev/zero "$T/m4/.trnsim-files"
timeout 60 "$TRNSIM" run "$SMALL" --out "$T/m4" --no-numerics >"$T/out" 2>&1
want_manifest $? "a symlink to /dev/zero"
# A damaged manifest (a regular file) is noted and replaced; nothing is removed on its word.
"$TRNSIM" run "$SMALL" --out "$T/m5" >/dev/null 2>&1
printf '{"trnsim_files": 2, "state": "complete", "files": [{"path": "../../etc/passwd"}]}' >"$T/m5/.trnsim-files"
# Without a record it can read, the run cannot tell its earlier files from the user's: it replaces none of
# them unless --overwrite (sim/io/replace_check.h).
msg=$("$TRNSIM" run "$SMALL" --out "$T/m5" --no-numerics 2>&1)
check "a damaged manifest: stats.json not replaced without --overwrite: $msg" \
  '[[ $? == 1 && $msg == *"stats.json'"'"': cannot write: a file is there that trnsim will not replace: no trnsim record lists it"*"--overwrite"* ]]'
"$TRNSIM" run "$SMALL" --out "$T/m5" --no-numerics --overwrite >"$T/out" 2>&1
rc=$?
check "a damaged manifest: noted, the run goes on, earlier files kept (exit $rc: $(head -c 300 "$T/out"))" \
  '[[ $rc == 0 && -f $T/m5/input_grad.npy ]] && grep -q "trnsim: note: .*m5/.trnsim-files: files\[0\].path: .* is not a path inside the folder" "$T/out"'
# Garbage that is not JSON reads as an older trnsim's list of paths: noted too, earlier files kept.
printf 'garbage \001 not a record\n' >"$T/m5/.trnsim-files"
"$TRNSIM" run "$SMALL" --out "$T/m5" --no-numerics --overwrite >"$T/out" 2>&1
rc=$?
check "a garbage manifest: noted, earlier files kept (exit $rc: $(head -c 300 "$T/out"))" \
  '[[ $rc == 0 && -f $T/m5/input_grad.npy ]] && grep -q "trnsim: note: .*m5/.trnsim-files: not JSON: read as an older trnsim'"'"'s record" "$T/out" && grep -q "\"state\": \"complete\"" "$T/m5/.trnsim-files"'

# 13. stats.json through a symlink to a device, or a FIFO: written through, the summary printed from the run's
# own report (it once read the file back and failed).
mkdir -p "$T/d1" "$T/d2"
ln -s /dev/null "$T/d1/stats.json"
"$TRNSIM" run "$SMALL" --out "$T/d1" --no-numerics >"$T/out" 2>&1
rc=$?
check "stats.json -> /dev/null: exit $rc, the summary" '[[ $rc == 0 && -L $T/d1/stats.json ]] && grep -q "simulated time" "$T/out"'
mkfifo "$T/d2/stats.json"
timeout 60 cat "$T/d2/stats.json" >"$T/fifo.json" &
reader=$!
timeout 60 "$TRNSIM" run "$SMALL" --out "$T/d2" --no-numerics >"$T/out" 2>&1
rc=$?
wait $reader
check "stats.json a FIFO: exit $rc, the summary, the reader got the JSON" \
  '[[ $rc == 0 && -p $T/d2/stats.json ]] && grep -q "simulated time" "$T/out" && grep -q "\"total_time_ns\"" "$T/fifo.json"'

# The HTML report is drawn from the run's own stats too, not from stats.json read back (here /dev/null), and
# written with the run's files as one set.
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  "$TRNSIM" run "$SMALL" --out "$T/d1" --no-numerics --report "$T/d1.html" >"$T/out" 2>&1
  rc=$?
  check "--report with stats.json -> /dev/null: exit $rc, the page names the workload" \
    '[[ $rc == 0 && -L $T/d1/stats.json ]] && grep -q "trnsim run: $(basename "$SMALL" .json)" "$T/d1.html"'
fi

# No output is written through a symlink below OUT (the link's target would be replaced outside every record,
# and a kill could leave it new beside old outputs): a link at an output's name (to a regular file or to
# nothing) or a linked subfolder is refused before the run simulates, named with where it points; nothing is
# written and the linked files are untouched. OUT itself may be a link.
mkdir -p "$T/l1" "$T/l2/x" "$T/home/data"
echo "my results" >"$T/home/x.json"
ln -s "$T/home/x.json" "$T/l1/stats.json"
msg=$("$TRNSIM" run "$SMALL" --out "$T/l1" 2>&1)
rc=$?
check "OUT/stats.json -> a user's file: refused (exit $rc): $msg" \
  '[[ $rc == 1 && $msg == *"stats.json '"'"'$T/l1/stats.json'"'"': cannot write: $T/l1/stats.json is a symlink (to $T/home/x.json): trnsim does not write through links"* && $msg != *"simulated time"* ]]'
check "the linked file is untouched, nothing written" \
  '[[ $(cat "$T/home/x.json") == "my results" && -L $T/l1/stats.json && -z $(ls -A "$T/l1" | grep -v "^stats.json$") ]]'
ln -s "$T/home/missing.json" "$T/l2/x/stats.json"
ln -s "$T/l2/x" "$T/l2out"
msg=$("$TRNSIM" run "$SMALL" --out "$T/l2out" --no-numerics 2>&1)
check "a dangling OUT/stats.json link, OUT a link itself: refused: $msg" \
  '[[ $? == 1 && $msg == *"$T/l2out/stats.json is a symlink (to $T/home/missing.json)"* && ! -e $T/home/missing.json ]]'
echo "my data" >"$T/home/data/weights.npy"
mkdir -p "$T/l3"
ln -s "$T/home/data" "$T/l3/inputs"
msg=$("$TRNSIM" run "$SMALL" --out "$T/l3" --dump-inputs 2>&1)
rc=$?
check "OUT/inputs -> a user's folder with --dump-inputs: refused (exit $rc): $msg" \
  '[[ $rc == 1 && $msg == *"cannot write: $T/l3/inputs is a symlink (to $T/home/data): trnsim does not write through links below the output folder"* ]]'
check "the linked folder is untouched, nothing written" \
  '[[ $(cat "$T/home/data/weights.npy") == "my data" && $(ls "$T/home/data") == weights.npy && $(ls -A "$T/l3") == inputs ]]'
mkdir -p "$T/l4"
ln -s "$T/l4" "$T/l4link"
"$TRNSIM" run "$SMALL" --out "$T/l4link" --no-numerics >"$T/out" 2>&1
check "OUT itself a symlink: written into its target (exit $?)" '[[ -f $T/l4/stats.json && -L $T/l4link ]]'
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "my page" >"$T/home/page.html"
  ln -s "$T/home/page.html" "$T/page.html"
  msg=$("$TRNSIM" run "$SMALL" --out "$T/l5" --no-numerics --report "$T/page.html" 2>&1)
  check "--report through a link: refused before the run: $msg" \
    '[[ $? == 1 && $msg == *"--report '"'"'$T/page.html'"'"': cannot write: $T/page.html is a symlink (to $T/home/page.html)"* && ! -e $T/l5 && $(cat "$T/home/page.html") == "my page" ]]'
  msg=$("$TRNSIM" stats "$T/l4/stats.json" --html="$T/page.html" 2>&1)
  check "stats --html through a link: refused: $msg" \
    '[[ $? == 1 && $msg == *"$T/page.html is a symlink (to $T/home/page.html)"* && $(cat "$T/home/page.html") == "my page" ]]'
fi

# 18. A probe left by a killed run with this run's PID (a container reuses PIDs): stepped over. The subshell's
# PID is the run's: exec keeps it.
mkdir -p "$T/p"
(
  : >"$T/p/.trnsim-probe.$BASHPID"
  : >"$T/p/.trnsim-probe.$BASHPID.0"
  exec "$TRNSIM" run "$SMALL" --out "$T/p" --no-numerics
) >"$T/out" 2>&1
rc=$?
check "a leftover probe with the same PID (exit $rc: $(tail -1 "$T/out"))" '[[ $rc == 0 && -f $T/p/stats.json ]]'

# Removals stay inside the folder whatever the manifest says (a manifest someone wrote by hand).
"$TRNSIM" run "$SMALL" --out "$T/h" --no-numerics >/dev/null 2>&1
echo victim >"$T/victim.txt"
sum=$(sha256sum "$T/victim.txt" | cut -d' ' -f1)
ino=$(stat -c %i "$T/victim.txt")
printf '{"trnsim_files": 2, "state": "complete", "files": [{"path": "victim.txt", "bytes": 7, "inode": "%s", "sha256": "%s"}]}' \
  "$ino" "$sum" >"$T/h/.trnsim-files"
ln -s "$T/victim.txt" "$T/h/victim.txt"
# (The hand-made manifest does not list the run's own files: --overwrite, so that the run goes on to its
# removals.)
"$TRNSIM" run "$SMALL" --out "$T/h" --no-numerics --overwrite >"$T/out" 2>&1
check "a hand-made manifest naming a symlinked file: the file stays" '[[ -f $T/victim.txt && -L $T/h/victim.txt ]]'

# A manifest another user wrote (a shared folder) is never acted on, even when it names a file of this user's
# with its very identity.
if [[ $(id -u) == 0 ]]; then
  "$TRNSIM" run "$SMALL" --out "$T/o" --no-numerics >/dev/null 2>&1
  echo "my notes" >"$T/o/notes.txt"
  sum=$(sha256sum "$T/o/notes.txt" | cut -d' ' -f1)
  printf '{"trnsim_files": 2, "state": "complete", "files": [{"path": "notes.txt", "bytes": 9, "inode": "%s", "sha256": "%s"}]}' \
    "$(stat -c %i "$T/o/notes.txt")" "$sum" >"$T/o/.trnsim-files"
  chown 65534:65534 "$T/o/.trnsim-files"
  # Another user's record vouches for no file either: the run's files are replaced with --overwrite only.
  msg=$("$TRNSIM" run "$SMALL" --out "$T/o" --no-numerics 2>&1)
  check "a manifest another user wrote: stats.json not replaced without --overwrite: $msg" \
    '[[ $? == 1 && $msg == *"stats.json'"'"': cannot write: a file is there that trnsim will not replace"*"--overwrite"* ]]'
  "$TRNSIM" run "$SMALL" --out "$T/o" --no-numerics --overwrite >"$T/out" 2>&1
  rc=$?
  check "a manifest another user wrote: not acted on (exit $rc: $(head -c 300 "$T/out"))" \
    '[[ $rc == 0 && -f $T/o/notes.txt ]] && grep -q "written by another user (uid 65534): trnsim acts only on its own records" "$T/out"'
  # Another user's run killed while it replaced its files (its record in state "writing": the folder may be a
  # mix, with its temporaries and backups beside): only that user can settle it, and this run's record would
  # erase the only sign of the mix. Refused, naming the record and its owner; nothing there changes.
  "$TRNSIM" run "$SMALL" --out "$T/ko" --no-numerics >/dev/null 2>&1
  { (TRNSIM_TEST_KILL_AT_WRITE_STEP=3 exec "$TRNSIM" run "$SMALL" --out "$T/ko" --no-numerics --set params.M=1024) >/dev/null 2>&1; } 2>/dev/null
  chown -R 65534:65534 "$T/ko"
  before=$(cd "$T/ko" && ls -A && sha256sum $(ls -A))
  "$TRNSIM" run "$SMALL" --out "$T/ko" --no-numerics >"$T/out" 2>&1
  rc=$?
  check "another user's killed run: refused, naming the record and owner (exit $rc: $(head -c 400 "$T/out"))" \
    '[[ $rc == 1 ]] && grep -q "$T/ko/.trnsim-files: written by another user (uid 65534), in state \"writing\"" "$T/out"'
  check "another user's killed run: the folder is as it was, record and leftovers included" \
    '[[ $(cd "$T/ko" && ls -A && sha256sum $(ls -A)) == "$before" ]] && grep -q "\"state\": \"writing\"" "$T/ko/.trnsim-files"'
fi

# An output named like a record would replace it or be replaced by it: refused before any work.
msg=$("$TRNSIM" run "$SMALL" --out "$T/rec" --no-numerics --trace "$T/rec/.trnsim-files" 2>&1)
check "--trace OUT/.trnsim-files: $msg" '[[ $? == 1 && $msg == *"--trace '"'"'$T/rec/.trnsim-files'"'"': cannot write: .trnsim-files is the name of trnsim'"'"'s record"* && ! -e $T/rec ]]'
"$TRNSIM" run "$SMALL" --out "$T/q" --dump-inputs --no-numerics >/dev/null 2>&1
msg=$("$TRNSIM" quantize "$T/q/inputs/weights.npy" --format e4m3 --rule te --axis row --data "$T/q/.trnsim-journal" \
  --scales "$T/q/s.npy" 2>&1)
check "quantize --data .trnsim-journal: $msg" '[[ $? == 1 && $msg == *".trnsim-journal is the name of trnsim'"'"'s record"* && ! -e $T/q/s.npy ]]'

# --out through a symlink loop: the reason, not "File exists".
ln -s "$T/loop" "$T/loop"
msg=$("$TRNSIM" run "$SMALL" --out "$T/loop" --no-numerics 2>&1)
check "--out a symlink loop: $msg" '[[ $msg == "trnsim: error: --out $T/loop: Too many levels of symbolic links" ]]'

# `trnsim stats --html` onto a file of a run's recorded set (host.json) is refused: the set stays whole.
"$TRNSIM" run "$SMALL" --out "$T/h" --no-numerics >/dev/null 2>&1
cp "$T/h/host.json" "$T/host.before"
msg=$("$TRNSIM" stats "$T/h/stats.json" --html="$T/h/host.json" 2>&1)
check "stats --html onto a recorded output: refused: $msg" \
  '[[ $? == 1 && $msg == *"--html '"'"'$T/h/host.json'"'"': cannot write: it is one of the files a run wrote into $T/h"* ]]'
check "stats --html onto a recorded output: host.json kept" 'cmp -s "$T/host.before" "$T/h/host.json"'

# A garbage .trnsim-journal in a folder written into: the reason and what to do, nothing written.
mkdir "$T/jg"
echo "{\"trnsim_files\": 2, garbage" >"$T/jg/.trnsim-journal"
msg=$("$TRNSIM" quantize "$T/q/inputs/weights.npy" --format e4m3 --rule te --axis row --data "$T/jg/d.npy" \
  --scales "$T/jg/s.npy" 2>&1)
check "garbage .trnsim-journal: the hint to remove it: $msg" \
  '[[ $? == 1 && $msg == *"$T/jg/.trnsim-journal"*"then remove it"* && ! -e $T/jg/d.npy ]]'

# A damaged record in state "writing" naming hidden files of the user's as a file's temporary and backup (the
# rollback removes a temporary and renames a backup over its file), beside a complete record's backup
# (.trnsim-files.old) naming one as an output: the record is refused as not trnsim's, no file of the user's
# is removed, renamed or replaced (before: the rollback removed .secret). The same for a journal elsewhere.
"$TRNSIM" run "$SMALL" --out "$T/dm" --no-numerics >/dev/null 2>&1
echo secret >"$T/dm/.secret" && echo keep >"$T/dm/.keep"
sha=$(sha256sum <"$T/dm/stats.json" | cut -c1-64)
size=$(stat -c %s "$T/dm/stats.json")
printf '{"trnsim_files": 2, "state": "writing", "files": [{"path": "stats.json", "bytes": %s, "sha256": "%s", "temporary": ".secret", "backup": ".keep"}]}' \
  "$size" "$sha" >"$T/dm/.trnsim-files"
printf '{"trnsim_files": 2, "state": "complete", "files": [{"path": ".secret", "bytes": 7, "inode": "%s", "sha256": "%s"}]}' \
  "$(stat -c %i "$T/dm/.secret")" "$(sha256sum <"$T/dm/.secret" | cut -c1-64)" >"$T/dm/.trnsim-files.old"
before=$(cd "$T/dm" && sha256sum .secret .keep stats.json host.json)
msg=$("$TRNSIM" run "$SMALL" --out "$T/dm" --no-numerics 2>&1)
rc=$?
check "a damaged writing record naming the user's hidden files: refused as not trnsim's (exit $rc): $msg" \
  '[[ $msg == *"$T/dm/.trnsim-files: files[0]: '"'"'.secret'"'"' is not a name trnsim gives a temporary beside '"'"'stats.json'"'"'"* ]]'
check "... the user's hidden files and the run's files stay as they were" \
  '[[ $(cd "$T/dm" && sha256sum .secret .keep stats.json host.json) == "$before" ]]'
msg=$("$TRNSIM" run "$SMALL" --out "$T/dm" --no-numerics --overwrite 2>&1)
rc=$?
check "... with --overwrite the run replaces its outputs only (exit $rc)" \
  '[[ $rc == 0 && $(cat "$T/dm/.secret") == secret && $(cat "$T/dm/.keep") == keep ]]'
mkdir "$T/dj" && echo secret >"$T/dj/.secret"
printf '{"trnsim_files": 2, "state": "writing", "files": [{"path": "d.npy", "bytes": 7, "sha256": "%s", "temporary": ".secret"}]}' \
  "$(sha256sum <"$T/dj/.secret" | cut -c1-64)" >"$T/dj/.trnsim-journal"
msg=$("$TRNSIM" quantize "$T/q/inputs/weights.npy" --format e4m3 --rule te --axis row --data "$T/dj/d.npy" \
  --scales "$T/dj/s.npy" 2>&1)
check "a journal naming the user's hidden file: refused, the file stays: $msg" \
  '[[ $? == 1 && $msg == *"$T/dj/.trnsim-journal"*"then remove it"* && $(cat "$T/dj/.secret") == secret && ! -e $T/dj/d.npy ]]'

# --out / : the root is never a run's folder.
msg=$("$TRNSIM" run "$SMALL" --out / --no-numerics 2>&1)
check "--out /: refused: $msg" '[[ $? == 1 && $msg == *"--out /: is the root of the file system"* && ! -e /stats.json ]]'

# A run as another user into a folder with the sticky bit (a shared /tmp-like folder) over root's earlier set:
# the kernel refuses the renames over root's files, so the run is refused before it simulates, naming the
# first such file, even with --overwrite (before: it simulated, then failed with a bare "Operation not
# permitted"). Needs root (to run as nobody) and setpriv; skipped otherwise.
if [[ $(id -u) == 0 ]] && command -v setpriv >/dev/null; then
  ST=$(mktemp -d /tmp/trnsim-sticky.XXXXXX)
  chmod 1777 "$ST"
  sed -e 's/"n": 25600/"n": 2560/' "$SRC/configs/workloads/calibration/vector_add_stream_free_dim_2.json" >"$ST/va.json"
  chmod 644 "$ST/va.json"
  "$TRNSIM" run "$ST/va.json" --out "$ST/o" >/dev/null 2>&1
  chmod 1777 "$ST/o"
  before=$(sha256sum <"$ST/o/stats.json")
  msg=$(cd "$ST" && setpriv --reuid=65534 --regid=65534 --clear-groups "$TRNSIM" run va.json --out o --overwrite 2>&1)
  rc=$?
  check "a run as nobody over root's files in a sticky folder: refused before it simulates (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == *"trnsim: error: va.json: stats.json '"'"'o/stats.json'"'"': cannot write: it belongs to another user (uid 0) and its folder has the sticky bit"* && $msg != *"host time"* ]]'
  check "... root's files stay" '[[ $(sha256sum <"$ST/o/stats.json") == "$before" && -z $(find "$ST/o" -name ".*tmp*" -o -name ".*old*") ]]'
  # Another user's --trace into the shared folder where root's trace is recorded in root's .trnsim-written
  # (which the sticky bit keeps them from replacing): their trace is recorded in their own
  # .trnsim-written.65534, so their identical rerun replaces it without --overwrite (before: a note at the
  # first run, "cannot write: Operation not permitted", and the rerun refused, "no trnsim record lists it").
  "$TRNSIM" run "$ST/va.json" --out "$ST/o" --trace "$ST/root.pftrace" >/dev/null 2>&1 || bad "root's trace run"
  nobody() { (cd "$ST" && setpriv --reuid=65534 --regid=65534 --clear-groups "$TRNSIM" "$@"); }
  msg=$(nobody run va.json --out nb --trace nb.pftrace 2>&1)
  rc=$?
  check "nobody's --trace into the shared folder (exit $rc), no note: $(grep note <<<"$msg")" \
    '[[ $rc == 0 && $msg != *"note"* && $(stat -c %u "$ST/.trnsim-written.65534") == 65534 && $(stat -c %u "$ST/.trnsim-written") == 0 ]]'
  msg=$(nobody run va.json --out nb --trace nb.pftrace 2>&1)
  rc=$?
  check "nobody's identical rerun replaces their trace without --overwrite (exit $rc): $(grep error <<<"$msg")" \
    '[[ $rc == 0 ]] && grep -q "\"nb.pftrace\"" "$ST/.trnsim-written.65534" && ! grep -q "nb.pftrace" "$ST/.trnsim-written"'
  # Their record vouches only for their own files: root's copy of the same bytes under that name is not theirs.
  cp "$ST/nb.pftrace" "$ST/nb2" && chmod 666 "$ST/nb2" && rm -f "$ST/nb.pftrace" && mv "$ST/nb2" "$ST/nb.pftrace"
  msg=$(nobody run va.json --out nb --trace nb.pftrace 2>&1)
  rc=$?
  check "nobody's record does not vouch for root's file of the same bytes (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == *"nb.pftrace'"'"': cannot write: a file is there that trnsim will not replace: no trnsim record lists it"* && $(stat -c %u "$ST/nb.pftrace") == 0 ]]'
  # root's own rerun still replaces its trace (its record is root's).
  "$TRNSIM" run "$ST/va.json" --out "$ST/o" --trace "$ST/root.pftrace" >"$T/out" 2>&1
  rc=$?
  check "root's rerun of its trace (exit $rc): $(grep error "$T/out")" '[[ $rc == 0 ]]'
  # A record another user forged under root's name (.trnsim-written.0, in a shared folder whose .trnsim-written
  # is that user's) vouches for nothing, also after root's next trace is recorded there: root's own file it
  # lists stays refused (a tester: root's run took the forged entries over, and quantize then replaced
  # root's file without --overwrite).
  ST2=$(mktemp -d /tmp/trnsim-sticky.XXXXXX)
  chmod 1777 "$ST2"
  cp "$ST/va.json" "$ST2/va.json" && chmod 644 "$ST2/va.json"
  (cd "$ST2" && setpriv --reuid=65534 --regid=65534 --clear-groups "$TRNSIM" run va.json --out nb --trace n.pftrace) \
    >/dev/null 2>&1 || bad "nobody's first trace run"
  echo "ROOT PRECIOUS" >"$ST2/precious.npy"
  sum=$(sha256sum <"$ST2/precious.npy" | cut -d' ' -f1)
  setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "printf '%s' '{\"files\":[{\"bytes\":14,\"inode\":\"1\",\"path\":\"precious.npy\",\"sha256\":\"$sum\"}],\"state\":\"complete\",\"trnsim_files\":2}' >'$ST2/.trnsim-written.0'"
  "$TRNSIM" run "$ST2/va.json" --out "$ST2/o" --trace "$ST2/t.pftrace" >/dev/null 2>&1 || bad "root's trace run"
  msg=$("$TRNSIM" quantize "$SRC/examples/activations_bf16_256x1024.npy" --format e4m3 --rule te --axis row \
    --data "$ST2/precious.npy" --scales "$ST2/s.npy" 2>&1)
  rc=$?
  check "a record another user forged vouches for nothing (exit $rc): $msg" \
    '[[ $rc == 1 && $msg == *"no trnsim record lists it"* && $(cat "$ST2/precious.npy") == "ROOT PRECIOUS" ]]'
  rm -rf "$ST2"
  # A `{}` that one user (nobody) put at another's record name (.trnsim-written.1, where .trnsim-written is
  # root's): uid 1's trace run gets one note naming the owner and what is not recorded (before: "cannot
  # write: Operation not permitted" after a note that the record was "rewritten").
  setpriv --reuid=65534 --regid=65534 --clear-groups sh -c "printf '{}' >'$ST/.trnsim-written.1'"
  msg=$(cd "$ST" && setpriv --reuid=1 --regid=1 --clear-groups "$TRNSIM" run va.json --out d1 --trace d1.pftrace 2>&1 >/dev/null)
  rc=$?
  check "a forged record under uid 1's name: one clear note (exit $rc): $(grep note <<<"$msg")" \
    '[[ $rc == 0 && $(grep -c "note" <<<"$msg") == 1 && $msg == *"trnsim: note: ./.trnsim-written.1: another user (uid 65534) made this file under your record'"'"'s name, and trnsim cannot replace it (the folder'"'"'s sticky bit keeps another user'"'"'s file): d1.pftrace is not recorded, so a later write over it will ask for --overwrite; its owner or root can remove it"* && $msg != *"Operation not permitted"* && $(cat "$ST/.trnsim-written.1") == "{}" ]]'
  rm -rf "$ST"
else
  echo "output_folder: not root or no setpriv: the sticky-folder case is skipped"
fi

# Record layouts (sim/io/manifest.h; rel22t: written_by had come without a layout of its own). A killed set's
# manifest by hand, made from the folder's complete one (the earlier set as "previous", stats.json as a new
# file not yet in place): layout 3, and layout 2 with written_by as the trnsims of 2026-12-06 wrote it, are
# settled and name the killed command; a newer trnsim's (layout 4, with a key this trnsim does not know) is
# refused, and the folder stays as it was, record included.
killed_record() {  # FOLDER LAYOUT [EXTRA_KEY]
  python3 - "$1/.trnsim-files" "$2" "${3:-}" <<'PY'
import json, sys
path, layout, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3]
m = json.load(open(path))
stats = next(f for f in m["files"] if f["path"] == "stats.json")
r = {"trnsim_files": layout, "state": "writing", "previous": m["files"], "written_by": "quantize",
     "files": [{"path": "stats.json", "bytes": stats["bytes"], "sha256": "0" * 64,
                "temporary": ".stats.json.tmp.77.0"}]}
if extra:
    r[extra] = 1
json.dump(r, open(path, "w"), sort_keys=True)
PY
}
for layout in 2 3; do
  d=$T/layout$layout
  "$TRNSIM" run "$SMALL" --out "$d" --no-numerics >/dev/null 2>&1
  killed_record "$d" $layout
  msg=$("$TRNSIM" run "$SMALL" --out "$d" --no-numerics 2>&1)
  rc=$?
  check "a killed set's record of layout $layout: settled, naming its command (rc $rc): $msg" \
    '[[ $rc == 0 && $msg == *"$d: a trnsim quantize was killed while replacing its files: the earlier files are back (none had been replaced yet)"* ]] && grep -q "\"state\": \"complete\"" "$d/.trnsim-files"'
done
d=$T/layout4
"$TRNSIM" run "$SMALL" --out "$d" --no-numerics >/dev/null 2>&1
killed_record "$d" 4 fsync_mode
before=$(cd "$d" && find . -type f -print0 | sort -z | xargs -0 sha256sum)
msg=$("$TRNSIM" run "$SMALL" --out "$d" --no-numerics 2>&1)
rc=$?
check "a newer trnsim's record: refused, named so (rc $rc): $msg" \
  '[[ $rc == 1 && $msg == *"$d/.trnsim-files: written by a newer trnsim (record layout 4; this trnsim reads layouts 1 to 3): it is kept as it is; write into this folder with that trnsim, which settles its set, or remove the record (the files it names then stay as they are)" ]]'
check "... and the folder is as it was, record included" \
  '[[ $(cd "$d" && find . -type f -print0 | sort -z | xargs -0 sha256sum) == "$before" ]]'

# A dangling link on the way to --out, to a sweep's folder or to a trace's folder is named before anything
# is made (rel22t: "--out D/sub: cannot create the directory (File exists)", "D: cannot create: File
# exists", and for the trace "directory 'D/sub' does not exist" after the simulation).
ln -s "$T/nowhere" "$T/dang"
DANG="$T/dang is a symlink to $T/nowhere, which does not exist (a dangling link): trnsim does not create folders through links; create the target folder or remove the link"
msg=$("$TRNSIM" run "$SMALL" --no-numerics --out "$T/dang/sub" 2>&1)
rc=$?
check "--out through a dangling link: named (rc $rc): $msg" '[[ $rc == 1 && $msg == *"--out $T/dang/sub: $DANG" ]]'
msg=$("$TRNSIM" run "$SMALL" --no-numerics --out "$T/dt" --trace "$T/dang/sub/t.json" 2>&1)
rc=$?
check "--trace through a dangling link: named before the run (rc $rc): $msg" \
  '[[ $rc == 1 && $msg == *"cannot create trace file '"'"'$T/dang/sub/t.json'"'"': $DANG" && ! -e $T/dt ]]'
echo "{\"name\": \"sd\", \"workload\": \"$SMALL\", \"set\": {\"numerics\": false}, \"axes\": {\"params.M\": [512]}}" >"$T/sd.json"
msg=$("$TRNSIM" sweep "$T/sd.json" --out "$T/dang" 2>&1)
rc=$?
check "sweep --out a dangling link: named (rc $rc): $msg" '[[ $rc == 1 && $msg == *"$T/dang: $DANG" ]]'
# The folders a run makes for its trace go again when the trace is not written (here a file-size limit
# stops its first chunk), as the levels of --out do (rel22t: nd/sub stayed, empty).
msg=$(ulimit -f 1 && "$TRNSIM" run "$SMALL" --no-numerics --out "$T/fo" --trace "$T/nd/sub/t.json" 2>&1)
rc=$?
check "a trace that fails: its new folders are removed (rc $rc): $msg" \
  '[[ $rc == 1 && $msg == *"cannot write trace file '"'"'$T/nd/sub/t.json'"'"': File too large"* && ! -e $T/nd && ! -e $T/fo ]]'
"$TRNSIM" run "$SMALL" --no-numerics --out "$T/fo" --trace "$T/nd/sub/t.json" >/dev/null 2>&1
rc=$?
check "... and kept when it is written (rc $rc)" '[[ $rc == 0 && -s $T/nd/sub/t.json ]]'

finish
