#!/usr/bin/env bash
# trnsim sweep and tune never write through a link in their folder and check the folder before any point
# runs (issue 22): usage sweep_folder.sh <trnsim-binary> <source-dir>. A symlinked plots/, points/,
# results.csv or results.jsonl is refused up front and the linked user files stay; a file named like a row
# that is no row is reported and kept; a file where a folder goes, or a plan.json that is no plan, is named.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
export TRNSIM_PYTHON=/nonexistent # the HTML report is not drawn: only the checks before it matter here

cat >"$T/s.json" <<JSON
{"name": "t22", "workload": "$W", "set": {"numerics": false},
 "axes": [{"name": "seed", "path": "inputs.output_grad.seed", "values": [1, 2, 3]}]}
JSON
sweep() { "$TRNSIM" sweep "$T/s.json" --out "$T/S" -j 1 >"$T/out.txt" 2>"$T/err.txt"; }
sweep
rc=$?
check "first sweep exit 0 ($rc): $(tail -2 "$T/err.txt")" '[[ $rc == 0 ]]'
key=$(sed -n 2p "$T/S/results.csv" | awk -F, '{print $(NF-1)}')
check "a row key ($key)" '[[ -n $key && -f $T/S/points/$key.json ]]'
cp -r "$T/S" "$T/S.good"
restore() { rm -rf "$T/S" && cp -r "$T/S.good" "$T/S"; }
# A rerun that must not start any point: one row removed, so a point would run were the folder accepted.
refused() { # refused NAME NEEDLE: exit 1, the message, and no point ran (the removed row is not back)
  [[ -L $T/S/points || ! -d $T/S/points ]] || rm -f "$T/S/points/$key.json"
  sweep
  local rc=$? needle=$2
  check "$1: exit 1 ($rc)" '[[ $rc == 1 ]]'
  check "$1: message '$2': $(tail -1 "$T/err.txt")" 'grep -qF -- "$needle" "$T/err.txt"'
  check "$1: checked before any point ran" '[[ ! -e $T/S/points/$key.json ]] || [[ -L $T/S/points ]]'
}

# 1. plots/ a symlink to the user's folder: refused, the user's plot untouched.
mkdir "$T/mine" && echo "user plot" >"$T/mine/roofline.svg"
rm -rf "$T/S/plots" && ln -s ../mine "$T/S/plots"
refused "symlinked plots" "$T/S/plots is a symlink (to ../mine): trnsim does not write through links"
check "user's plot untouched" '[[ $(cat "$T/mine/roofline.svg") == "user plot" ]]'

# 2. points/ a symlink to the user's folder holding a file under a row's name: refused, the file kept.
restore
mkdir "$T/rows" && echo "user rows" >"$T/rows/$key.json"
rm -rf "$T/S/points" && ln -s ../rows "$T/S/points"
refused "symlinked points" "$T/S/points is a symlink (to ../rows)"
check "user's file under a row's name untouched" '[[ $(cat "$T/rows/$key.json") == "user rows" ]]'

# 3. A row file that is no row (garbage): reported, kept, nothing run.
restore
key2=$(sed -n 3p "$T/S/results.csv" | awk -F, '{print $(NF-1)}')
echo "garbage" >"$T/S/points/$key2.json"
refused "garbage row" "$T/S/points/$key2.json: "
check "garbage row: says it is never overwritten" 'grep -qF "a sweep'"'"'s row is never overwritten unread" "$T/err.txt"'
check "garbage row kept" '[[ $(cat "$T/S/points/$key2.json") == garbage ]]'

# 4. results.csv / results.jsonl symlinked: refused before any point runs, the linked files kept.
for f in results.csv results.jsonl; do
  restore
  echo "user table" >"$T/mine/$f"
  rm "$T/S/$f" && ln -s ../mine/$f "$T/S/$f"
  refused "symlinked $f" "$T/S/$f is a symlink (to ../mine/$f)"
  check "user's $f untouched" '[[ $(cat "$T/mine/$f") == "user table" ]]'
done

# 5. points and plots as files: "is a file, not a folder", before running.
for d in points plots; do
  restore
  rm -rf "$T/S/$d" && echo x >"$T/S/$d"
  refused "$d as a file" "$T/S/$d: is a file, not a folder"
done

# 6. plan.json a symlink to a file that is no sweep plan: said so.
restore
echo '{"a": 1}' >"$T/other.json"
rm "$T/S/plan.json" && ln -s ../other.json "$T/S/plan.json"
refused "plan.json not a plan" "$T/S/plan.json: is not a trnsim sweep plan"
check "not quoted as sweep ''" '! grep -qF "sweep '"''"'" "$T/err.txt"'

# 7. tune checks the same folder the same way.
restore
rm -rf "$T/S/plots" && ln -s ../mine "$T/S/plots"
"$TRNSIM" tune "$T/s.json" --budget 2 --out "$T/S" >"$T/out.txt" 2>"$T/err.txt"
rc=$?
check "tune: symlinked plots refused ($rc): $(tail -1 "$T/err.txt")" \
  '[[ $rc == 1 ]] && grep -qF "$T/S/plots is a symlink" "$T/err.txt"'
check "tune: user's plot untouched" '[[ $(cat "$T/mine/roofline.svg") == "user plot" ]]'

# 8. A Slurm array task (run here by hand) checks the sweep folder too: no row through a symlinked points/.
restore
rm -rf "$T/S/points" && ln -s ../rows "$T/S/points"
mkdir "$T/sub"
cat >"$T/sub/tasks.json" <<JSON
{"points_per_task": 1, "points": [{"key": "$key", "sets": ["inputs.output_grad.seed=1"]}],
 "workload": "$W", "dir": "$T/S", "cwd": "$T"}
JSON
"$TRNSIM" sweep task "$T/sub" --task 0 >"$T/out.txt" 2>"$T/err.txt"
rc=$?
check "slurm task: symlinked points refused ($rc): $(tail -1 "$T/err.txt")" \
  '[[ $rc == 1 ]] && grep -qF "$T/S/points is a symlink" "$T/err.txt"'
check "slurm task: user's file under a row's name untouched" '[[ $(cat "$T/rows/$key.json") == "user rows" ]]'


# 9. The results and report a user annotates are replaced only as any output (recorded with their SHA-256,
# unchanged, or --overwrite): a rerun or `sweep collect` over an edited results.csv / results.jsonl /
# report.html is refused before any point runs, naming the file and --overwrite (tester22f: the edits were
# replaced with no word, exit 0).
for f in results.csv results.jsonl; do
  restore
  echo "my note" >>"$T/S/$f"
  edited=$(sha256sum <"$T/S/$f")
  refused "edited $f" "$T/S/$f': cannot write: a file is there that trnsim will not replace: it changed since"
  check "edited $f: names --overwrite" 'grep -qF -- "--overwrite" "$T/err.txt"'
  check "edited $f: kept" '[[ $(sha256sum <"$T/S/$f") == "$edited" ]]'
  "$TRNSIM" sweep collect "$T/S" >"$T/out.txt" 2>"$T/err.txt"
  rc=$?
  check "edited $f: collect refuses it ($rc): $(tail -1 "$T/err.txt")" \
    '[[ $rc == 1 && $(sha256sum <"$T/S/$f") == "$edited" ]] && grep -qF "$T/S/$f" "$T/err.txt"'
  "$TRNSIM" sweep collect "$T/S" --overwrite >"$T/out.txt" 2>"$T/err.txt"
  rc=$?
  check "edited $f: collect --overwrite writes it ($rc): $(tail -1 "$T/err.txt")" \
    '[[ $rc == 0 ]] && ! grep -q "my note" "$T/S/$f"'
  sweep
  rc=$?
  check "edited $f: written again by --overwrite, a rerun replaces it ($rc): $(tail -1 "$T/err.txt")" '[[ $rc == 0 ]]'
done
# The HTML report (drawn here: matplotlib), edited: a rerun refuses it; unedited, collect replaces it.
rm -rf "$T/R"
if env -u TRNSIM_PYTHON "$TRNSIM" sweep "$T/s.json" --out "$T/R" -j 1 >"$T/out.txt" 2>"$T/err.txt" &&
  [[ -f $T/R/report.html ]]; then
  env -u TRNSIM_PYTHON "$TRNSIM" sweep collect "$T/R" >"$T/out.txt" 2>"$T/err.txt"
  check "report unchanged: collect replaces it ($?): $(tail -1 "$T/err.txt")" '! grep -q "no HTML report" "$T/err.txt"'
  echo '<!-- my notes -->' >>"$T/R/report.html"
  edited=$(sha256sum <"$T/R/report.html")
  env -u TRNSIM_PYTHON "$TRNSIM" sweep "$T/s.json" --out "$T/R" -j 1 >"$T/out.txt" 2>"$T/err.txt"
  rc=$?
  check "edited report.html: a rerun refuses it ($rc): $(tail -1 "$T/err.txt")" \
    '[[ $rc == 1 && $(sha256sum <"$T/R/report.html") == "$edited" ]] && grep -qF "$T/R/report.html" "$T/err.txt" && grep -qF -- "--overwrite" "$T/err.txt"'
else
  bad "a sweep with its report ($(tail -2 "$T/err.txt"))"
fi

# 10. The tune's best_workload.json is replaced as any output too (before: by name, so a hand edit was lost
# without a word): an unchanged one by the next tune, an edited one only with --overwrite, the edit refused
# before any point runs.
tune() { "$TRNSIM" tune "$T/s.json" --budget 2 --out "$T/TU" "$@" >"$T/out.txt" 2>"$T/err.txt"; }
tune
rc=$?
check "tune: first run ($rc): $(tail -1 "$T/err.txt")" '[[ $rc == 0 && -f $T/TU/best_workload.json ]]'
tune
rc=$?
check "tune: an unchanged best_workload.json is replaced ($rc): $(tail -1 "$T/err.txt")" '[[ $rc == 0 ]]'
echo '// my notes' >>"$T/TU/best_workload.json"
tune
rc=$?
check "tune: an edited best_workload.json is refused before any point runs ($rc): $(tail -1 "$T/err.txt")" \
  '[[ $rc == 1 ]] && grep -qF "the tune'"'"'s best_workload.json '"'"'$T/TU/best_workload.json'"'"': cannot write: a file is there that trnsim will not replace: it changed since the run that wrote it" "$T/err.txt" && [[ $(tail -1 "$T/TU/best_workload.json") == "// my notes" ]]'
tune --overwrite
rc=$?
check "tune --overwrite replaces it ($rc)" '[[ $rc == 0 && $(tail -1 "$T/TU/best_workload.json") != "// my notes" ]]'

# 11. plan.json follows the may-replace rule too (tester22h 8: a hand edit was replaced by the next sweep
# without a word): an unedited plan is replaced silently; an edited one is kept aside as plan.edited.json,
# named in a note, and the sweep goes on; --overwrite replaces an edited one without keeping it.
restore
sweep
rc=$?
check "an unedited plan.json is replaced without a note ($rc): $(tail -1 "$T/err.txt")" \
  '[[ $rc == 0 && ! -e $T/S/plan.edited.json ]] && ! grep -q "plan.json" "$T/err.txt"'
echo " " >>"$T/S/plan.json"
edited=$(sha256sum <"$T/S/plan.json")
sweep
rc=$?
check "an edited plan.json is kept aside, noted ($rc): $(grep plan "$T/err.txt")" \
  '[[ $rc == 0 && $(sha256sum <"$T/S/plan.edited.json") == "$edited" ]] && grep -qF "$T/S/plan.json: kept as $T/S/plan.edited.json (it changed since the run that wrote it" "$T/err.txt"'
check "... and the sweep wrote its plan anew, recorded" \
  '[[ $(sha256sum <"$T/S/plan.json") != "$edited" ]] && grep -q "\"plan.json\"" "$T/S/.trnsim-written"'
echo " " >>"$T/S/plan.json"
"$TRNSIM" sweep "$T/s.json" --out "$T/S" -j 1 --overwrite >"$T/out.txt" 2>"$T/err.txt"
rc=$?
check "--overwrite replaces an edited plan.json ($rc)" '[[ $rc == 0 && ! -e $T/S/plan.edited.2.json ]]'
# 11b. A sweep killed while it writes its plan, just after it kept an edited plan.json aside (write steps
# 1-3), leaves no plan.json. Nothing records which kept file was plan.json, so no command puts one back by
# itself (tester22j: a rename of the highest plan.edited.N.json put a stranger's file in place, and
# --overwrite then replaced the edit): sweep, sweep --overwrite and sweep collect stop, change nothing, and
# name the kept plan and the `mv` that puts it back; after that mv the sweep keeps the edit aside and goes on.
kept_msg() { # kept_msg FILE...: the message naming the kept plans, the last one in the mv
  local names="" f
  for f in "$@"; do names+="${names:+, }$T/S/$f"; done
  echo "$T/S/plan.json: no such file, and the folder holds $([[ $# == 1 ]] && echo "a plan" || echo plans) kept aside ($names; a sweep keeps an edited plan.json there, and one killed before it wrote its own leaves no plan.json): nothing is changed; put the plan back with \`mv $T/S/${!#} $T/S/plan.json\`"
}
for step in 1 2 3; do
  restore
  echo " " >>"$T/S/plan.json"
  edited=$(sha256sum <"$T/S/plan.json")
  { TRNSIM_TEST_KILL_AT_WRITE_STEP=$step "$TRNSIM" sweep "$T/s.json" --out "$T/S" -j 1 >/dev/null 2>&1; } 2>/dev/null
  check "step $step: the killed sweep left no plan.json, the edit in plan.edited.json" \
    '[[ ! -e $T/S/plan.json && $(sha256sum <"$T/S/plan.edited.json") == "$edited" ]]'
  want=$(kept_msg plan.edited.json)
  msg=$("$TRNSIM" sweep collect "$T/S" --no-report 2>&1)
  check "step $step: sweep collect names the kept plan and the mv: $msg" '[[ $msg == *"$want"* ]]'
  for flag in "" --overwrite; do
    "$TRNSIM" sweep "$T/s.json" --out "$T/S" -j 1 $flag >"$T/out.txt" 2>"$T/err.txt"
    rc=$?
    check "step $step: sweep $flag refuses, the edit kept ($rc): $(tail -1 "$T/err.txt")" \
      '[[ $rc == 1 && ! -e $T/S/plan.json && $(sha256sum <"$T/S/plan.edited.json") == "$edited" ]] && grep -qF "$want" "$T/err.txt" && ! grep -q "was killed after" "$T/err.txt"'
  done
done
mv "$T/S/plan.edited.json" "$T/S/plan.json"
sweep
rc=$?
check "after the mv the sweep keeps the edit aside and goes on ($rc)" \
  '[[ $rc == 0 && $(sha256sum <"$T/S/plan.edited.json") == "$edited" && ! -e $T/S/plan.edited.2.json ]]'
# tester22j 1: no sweep was killed; the user removed plan.json after an edit was kept aside: --overwrite
# refuses and the kept edit stays (it renamed it back and replaced it).
rm "$T/S/plan.json"
"$TRNSIM" sweep "$T/s.json" --out "$T/S" -j 1 --overwrite >"$T/out.txt" 2>"$T/err.txt"
rc=$?
check "--overwrite with plan.json removed refuses, the kept edit stays ($rc)" \
  '[[ $rc == 1 && $(sha256sum <"$T/S/plan.edited.json") == "$edited" ]] && grep -qF "$(kept_msg plan.edited.json)" "$T/err.txt"'
# tester22j 4: another file at plan.edited.2.json is never put in place of plan.json; both are named.
echo "not a plan" >"$T/S/plan.edited.2.json"
sweep
rc=$?
check "two kept files: refused, both named, neither moved ($rc): $(tail -1 "$T/err.txt")" \
  '[[ $rc == 1 && ! -e $T/S/plan.json && $(cat "$T/S/plan.edited.2.json") == "not a plan" && $(sha256sum <"$T/S/plan.edited.json") == "$edited" ]] && grep -qF "$(kept_msg plan.edited.json plan.edited.2.json) (or the one of them that was plan.json)" "$T/err.txt"'

# 12. A row write (a Slurm array task's, run here by hand) killed after its renames leaves a journal in
# points/; the next writer there settles it and records nothing: rows are the sweep's own files, never listed
# in a .trnsim-written (closing9: the settled journal's files were taken into points/.trnsim-written).
restore
cat >"$T/sub/tasks.json" <<JSON
{"points_per_task": 1, "points": [{"key": "$key", "sets": ["inputs.output_grad.seed=1"]}],
 "workload": "$W", "dir": "$T/S", "cwd": "$T"}
JSON
{ TRNSIM_TEST_KILL_AT_WRITE_STEP=5 "$TRNSIM" sweep task "$T/sub" --task 0 >/dev/null 2>&1; } 2>/dev/null
check "a row write killed after its renames leaves its journal" '[[ -f $T/S/points/.trnsim-journal ]]'
"$TRNSIM" sweep task "$T/sub" --task 0 >"$T/out.txt" 2>"$T/err.txt"
rc=$?
check "the next row write settles it and records no row ($rc): $(tail -1 "$T/err.txt")" \
  '[[ $rc == 0 && -f $T/S/points/$key.json && ! -e $T/S/points/.trnsim-journal && ! -e $T/S/points/.trnsim-written ]]'

finish
