#!/usr/bin/env bash
# Two outputs (or an output and an input) that are one file reached through one folder under two names (a
# bind mount) are refused before any work, also when the file does not exist yet (issue 22): usage
# same_file.sh <trnsim-binary> <source-dir>. Needs `mount --bind` (root): skipped (exit 77) without it,
# after the hard-link case (two names of one file, worded as such).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
X=$SRC/examples/activations_bf16_256x1024.npy
mkdir "$T/SA" "$T/SB" "$T/BA" "$T/BB"

# A hard link (no mount needed): --report H/r.html and the workload file w.json are one file under two names
# in two folders: refused, and the message says a hard link (before: "one folder under two names, e.g. a
# bind mount", which it is not).
mkdir "$T/H"
cp "$W" "$T/w.json"
ln "$T/w.json" "$T/H/r.html"
"$TRNSIM" run "$T/w.json" --no-numerics --out "$T/HO" --report "$T/H/r.html" >"$T/h.txt" 2>&1
rc=$?
check "hard link: refused (exit $rc): $(tail -1 "$T/h.txt")" '[[ $rc == 1 ]] && cmp -s "$W" "$T/w.json"'
check "hard link: the message says so" \
  'grep -qF -- "--report and the workload file are the same file ($T/H/r.html and $T/w.json: hard links to one file): an input is never overwritten" "$T/h.txt" && ! grep -q "bind mount" "$T/h.txt"'

mount --bind "$T/SA" "$T/SB" 2>/dev/null || {
  echo "skipped: mount --bind is not permitted here"
  exit 77
}
trap 'umount "$T/SB" "$T/BB" 2>/dev/null; chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
mount --bind "$T/BA" "$T/BB" || bad "the second bind mount"

# quantize: --data SA/d2.npy and --scales SB/d2.npy are one file: refused, nothing written.
"$TRNSIM" quantize "$X" --format e4m3 --rule te --axis row --data "$T/SA/d2.npy" --scales "$T/SB/d2.npy" \
  >"$T/q.txt" 2>&1
rc=$?
check "quantize: refused (exit $rc): $(cat "$T/q.txt")" '[[ $rc == 1 ]]'
check "quantize: the message names both paths" \
  'grep -qF -- "--data and --scales are the same file ($T/SA/d2.npy and $T/SB/d2.npy: one folder under two names" "$T/q.txt"'
check "quantize: nothing written" '[[ -z $(ls -A "$T/SA") ]]'

# run: --report BB/stats.json is --out BA's stats.json: refused before the run, nothing written.
"$TRNSIM" run "$W" --no-numerics --out "$T/BA" --report "$T/BB/stats.json" >"$T/r.txt" 2>&1
rc=$?
check "run: refused (exit $rc): $(tail -2 "$T/r.txt")" '[[ $rc == 1 ]]'
check "run: the message names both paths" \
  'grep -qF "stats.json and --report are the same file ($T/BA/stats.json and $T/BB/stats.json" "$T/r.txt"'
check "run: nothing written" '[[ -z $(ls -A "$T/BA") ]]'

# The input through the other name: --data SB/x.npy where the input is SA/x.npy.
cp "$X" "$T/SA/x.npy"
"$TRNSIM" quantize "$T/SA/x.npy" --format e4m3 --rule te --axis row --data "$T/SB/x.npy" \
  --scales "$T/s.npy" >"$T/q2.txt" 2>&1
rc=$?
check "quantize over its input: refused (exit $rc): $(cat "$T/q2.txt")" '[[ $rc == 1 ]]'
check "quantize over its input: the input kept" 'cmp -s "$X" "$T/SA/x.npy"'
finish
