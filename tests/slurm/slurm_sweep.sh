#!/usr/bin/env bash
# The Slurm backend against a real Slurm (tests/slurm/local_slurm.sh: slurmctld + slurmd with munge on this
# machine, 4 slots): usage slurm_sweep.sh <trnsim-binary> <source-dir>. .ci/run installs slurm-wlm and munge
# and runs it after the default tier.
# A 48-point sweep of the main job's tiling (tests/slurm/tiling_48.json, a subset of
# configs/sweeps/llama3_8b_down_bwd_tiling_200.json kept small for CI's time) runs locally, then as one sbatch
# --array job array (8 points per task, at most 4 tasks at once): the rows are identical apart from the host times. Then 10 rows are removed: status counts them, resubmit runs only them,
# and the rows are identical again. Exit 77 (skipped, with a message) when Slurm is not installed.
for tool in slurmctld slurmd munged sbatch squeue sinfo scancel; do
  if ! command -v $tool >/dev/null; then
    echo "SKIPPED: slurm_sweep.sh needs Slurm and munge ($tool is missing: apt-get install slurmctld slurmd slurm-client munge)" >&2
    exit 77
  fi
done
# The harness works in a scratch folder: the paths given are made absolute first.
source "$(dirname "${BASH_SOURCE[0]}")/../cli/lib/harness.sh" "$(realpath "$1")" "$(realpath "$2")"
source "$SRC/tests/slurm/local_slurm.sh"
trap 'slurm_stop; rm -rf "$T"' EXIT
trap 'exit 130' INT TERM
SWEEP=$SRC/tests/slurm/tiling_48.json
slurm_start "$T/slurm" 4 || exit 1

start=$(date +%s)
timeout 600 "$TRNSIM" sweep "$SWEEP" --out "$T/local" -j 2 --no-report >"$T/local.txt" 2>&1
check "local sweep exit 0: $(tail -2 "$T/local.txt")" '[[ $? == 0 ]]'
echo "slurm_sweep: local sweep $(($(date +%s) - start)) s"
start=$(date +%s)
timeout 900 "$TRNSIM" sweep "$SWEEP" --out "$T/sl" --backend slurm --points-per-task 8 --max-running 4 --wait \
  --wait-timeout 600 --no-report >"$T/slurm.txt" 2>&1
rc=$?
echo "slurm_sweep: Slurm sweep $(($(date +%s) - start)) s"
check "slurm sweep exit 0 ($rc): $(tail -3 "$T/slurm.txt")" '[[ $rc == 0 ]]'
check "one array of 5 tasks of 8" 'grep -qE "submitted Slurm job [0-9]+: 38 points in 5 array tasks of 8 \(at most 4 at once\)" "$T/slurm.txt"'
check "job script asks for the array" 'grep -qF "#SBATCH --array=0-4%4" "$T/sl/slurm/1/job.sh"'
# The rows without the host time column.
strip() { /usr/bin/python3 -c '
import csv, sys
r = list(csv.reader(open(sys.argv[1])))
i = r[0].index("host_seconds")
w = csv.writer(sys.stdout, lineterminator="\n")
for row in r: w.writerow(row[:i] + row[i + 1:])' "$1"; }
strip "$T/local/results.csv" >"$T/local.csv"
strip "$T/sl/results.csv" >"$T/sl.csv"
check "48 rows each" '[[ $(wc -l <"$T/local.csv") == 49 && $(wc -l <"$T/sl.csv") == 49 ]]'
check "Slurm rows identical to local rows apart from host times: $(diff "$T/local.csv" "$T/sl.csv" | head -3)" \
  'cmp -s "$T/local.csv" "$T/sl.csv"'
check "38 ok, 10 invalid" '[[ $(grep -c ",ok," "$T/sl.csv") == 38 && $(grep -c ",invalid," "$T/sl.csv") == 10 ]]'
check "every task log says its points" '[[ $(grep -lE "^task [0-9]*: (8|6) points" "$T/sl/slurm/1"/task-*.log | wc -l) == 5 ]]'

# Resubmit: 10 rows lost.
ls "$T/sl/points" | head -10 | while read -r f; do rm "$T/sl/points/$f"; done
"$TRNSIM" sweep status "$T/sl" >"$T/status.txt" 2>&1
check "status counts 10 without a row: $(head -1 "$T/status.txt")" \
  'grep -qF "48 points: 28 done, 0 failed, 10 invalid, 10 without a row" "$T/status.txt"'
check "status names the finished submission" 'grep -qE "submission 1: job [0-9]+, 38 points: finished" "$T/status.txt"'
timeout 600 "$TRNSIM" sweep resubmit "$T/sl" --points-per-task 5 --wait --wait-timeout 300 --no-report >"$T/re.txt" 2>&1
check "resubmit exit 0: $(tail -2 "$T/re.txt")" '[[ $? == 0 ]]'
check "resubmit ran only the 10 missing points" 'grep -qE "submitted Slurm job [0-9]+: 10 points in 2 array tasks of 5" "$T/re.txt"'
strip "$T/sl/results.csv" >"$T/sl2.csv"
check "rows identical again after resubmit" 'cmp -s "$T/local.csv" "$T/sl2.csv"'
"$TRNSIM" sweep resubmit "$T/sl" >"$T/re2.txt" 2>&1
check "nothing to resubmit when every point has its row" 'grep -qF "every point has its row: nothing to submit" "$T/re2.txt"'
finish
