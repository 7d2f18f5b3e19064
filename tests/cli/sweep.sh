#!/usr/bin/env bash
# End-to-end test of trnsim sweep and trnsim tune: usage sweep.sh <trnsim-binary> <source-dir>.
# A small sweep of the 512^3 MXFP8 backward (timing only, a few points a second) writes CSV and JSON lines
# rows with the axes, an invalid point with trnsim validate's reason, a failed point with trnsim run's error;
# a rerun keeps every row; Ctrl-C keeps the finished points and leaves no scratch; tune finds the grid's best
# on a space it can exhaust; bad sweep files give exact errors and exit 1.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
W=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
export TRNSIM_PYTHON=/nonexistent  # the HTML report has its own test (reports.sh)

# 1. 2 loop orders x 3 TILES_IN_BLOCK_M x numerics on/off, less nmk with 2 (a constraint): 10 points. 16 tiles
# of 128 is more than twice M = 512: invalid (4 points). Numerics runs fail at run time (the host memory
# figure is pinned far too low: 3 points), timing-only runs pass (3 points).
cat >"$T/s.json" <<JSON
{"name": "small", "workload": "$W",
 "axes": [{"name": "order", "path": "params.tile_loop_order", "values": ["mnk", "nmk"]},
          {"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1, 2, 16]},
          {"name": "numerics", "path": "numerics", "values": [false, true]}],
 "constraints": ["not (order == 'nmk' and bm == 2)"]}
JSON
TRNSIM_HOST_MEMORY_BYTES=1000 "$TRNSIM" sweep "$T/s.json" --out "$T/o" -j 2 >"$T/run.txt" 2>"$T/err.txt"
rc=$?
check "sweep exit 0 ($rc): $(tail -3 "$T/err.txt")" '[[ $rc == 0 ]]'
check "summary counts: $(head -1 "$T/run.txt")" \
  'grep -qF "small: 10 points: 3 ok, 4 invalid, 3 failed, 0 numerics failed, 0 not run" "$T/run.txt"'
check "constraint skipped 2 points" 'grep -qF "10 points (2 of the product skipped by the constraints)" "$T/err.txt"'
check "csv and jsonl written" '[[ -f $T/o/results.csv && -f $T/o/results.jsonl ]]'
check "warning without a report" 'grep -qF "trnsim: warning: no HTML report: /nonexistent is missing" "$T/err.txt"'
nl=$(wc -l <"$T/o/results.jsonl")
check "10 rows in results.jsonl ($nl)" '[[ $nl == 10 ]]'
head=$(head -1 "$T/o/results.csv")
check "csv header: $head" '[[ $head == index,label,order,bm,numerics,status,total_time_ns,roofline_lower_bound_ns,* ]]'
# Row 0: mnk, bm 1, timing only: ok with a simulated time; row 1 the same with numerics: the run's refusal.
row() { sed -n "$(($1 + 2))p" "$T/o/results.csv"; }
check "row 0 ok: $(row 0 | cut -c1-80)" '[[ $(row 0) == 0,,mnk,1,false,ok,[0-9]* ]]'
check "row 1 failed with trnsim run's message" \
  '[[ $(row 1) == 1,,mnk,1,true,error,*"this run needs at least"*"of host memory"* ]]'
# bm = 16: 16 tiles of 128 is more than twice M = 512: trnsim validate's reason, the point not run.
check "row 4 invalid with validate's reason" \
  '[[ $(row 4) == 4,,mnk,16,false,invalid,*"matmul_mxfp8_bwd_512_trn3.json: params: kernel '"'"'matmul_mxfp8_backward'"'"' (input_grad phase, dX = dY W): M = 512 (per core) is less than half a block"* ]]'
# The same tiling in both loop orders is one result each. Each block has one N tile (N = 512 = tile_n), so
# nki-library's stream (the kernel's default schedule) emits the tiles in the same order either way: same
# time. (trnsim_optimized's epilogue order differs, and so did its time.)
t0=$(row 0 | cut -d, -f7)
t6=$(row 6 | cut -d, -f7)
check "order keeps the time with one N tile per block ($t0 vs $t6)" '[[ -n $t0 && -n $t6 && $t0 == "$t6" ]]'
nrows=$(ls "$T/o/points" | wc -l)
check "6 rows kept under points/ ($nrows: 3 ok, 3 failed)" '[[ $nrows == 6 ]]'
check "no scratch left" '[[ ! -e $T/o/.runs ]] && ! ls -A "$T/o" | grep -q "\.tmp\."'

# 2. A rerun keeps the 3 ok rows and redoes the 3 failed ones (they pass now: no memory limit).
cp "$T/o/points/$(row 0 | awk -F, '{print $(NF-1)}').json" "$T/row0.json"
"$TRNSIM" sweep "$T/s.json" --out "$T/o" -j 2 >"$T/run2.txt" 2>"$T/err2.txt"
check "rerun: 3 kept, the 3 failed redone: $(grep 10/10 "$T/err2.txt")" \
  'grep -qF "10/10 points: 6 ok, 4 invalid, 0 failed, 3 kept" "$T/err2.txt"'
check "a kept row is untouched" 'cmp -s "$T/row0.json" "$T/o/points/$(row 0 | awk -F, '"'"'{print $(NF-1)}'"'"').json"'
check "rerun summary" 'grep -qF "small: 10 points: 6 ok, 4 invalid, 0 failed" "$T/run2.txt"'

# 3. Ctrl-C: a sweep of 40 slower points (the main job's timing) on one worker, interrupted once 2 rows are
# kept: exit 130, the finished rows kept, no scratch or temporaries; the rerun runs only the rest.
cat >"$T/big.json" <<JSON
{"name": "big", "workload": "$SRC/configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json", "set": {"numerics": false},
 "axes": [{"name": "seed", "path": "inputs.weights.seed", "values": [$(seq -s, 1 40)]}]}
JSON
# A background job of a script starts with SIGINT ignored, which trnsim keeps (as nohup's SIGHUP): Ctrl-C as
# from a terminal needs it back at its default.
(
  trap - INT
  exec "$TRNSIM" sweep "$T/big.json" --out "$T/b" -j 1
) >"$T/b.txt" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [[ $(ls "$T/b/points" 2>/dev/null | wc -l) -ge 2 ]] && break
  sleep 0.2
done
kill -INT $pid
wait $pid
rc=$?
kept=$(ls "$T/b/points" 2>/dev/null | wc -l)
check "interrupted sweep exits 130 ($rc)" '[[ $rc == 130 ]]'
check "interrupted: some rows kept ($kept of 40)" '[[ $kept -ge 1 && $kept -lt 40 ]]'
check "interrupted: no scratch or temporaries" '[[ ! -e $T/b/.runs ]] && [[ -z $(find "$T/b" -name ".*tmp*") ]]'
check "interrupted: no results written" '[[ ! -e $T/b/results.csv ]]'
"$TRNSIM" sweep "$T/big.json" --out "$T/b" -j 2 --no-report >"$T/b2.txt" 2>&1
check "resumed: the $kept kept rows not redone" 'grep -qF "40/40 points: 40 ok, 0 invalid, 0 failed, $kept kept" "$T/b2.txt"'

# 4. tune on the small space (6 valid timing-only points): a budget of 6 evaluates them all and finds the
# grid's best; the best workload file runs as it is.
cat >"$T/t.json" <<JSON
{"name": "tune_small", "workload": "$W", "set": {"numerics": false},
 "axes": [{"name": "order", "path": "params.tile_loop_order", "values": ["mnk", "nmk"]},
          {"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1, 2, 4]},
          {"name": "bk", "path": "params.input_grad_config.TILES_IN_BLOCK_K", "values": [1]}]}
JSON
"$TRNSIM" tune "$T/t.json" --budget 6 --out "$T/tn" >"$T/tune.txt" 2>"$T/tune_err.txt"
rc=$?
check "tune exit 0 ($rc): $(tail -2 "$T/tune_err.txt")" '[[ $rc == 0 ]]'
best_grid=$(grep -v invalid "$T/o/results.csv" >/dev/null; awk -F, 'NR>1 && $6=="ok" {print $7}' "$T/tn/results.csv" | sort -g | head -1)
got=$(sed -n 's/^best workload (total_time_ns = \([0-9.e+]*\)).*/\1/p' "$T/tune.txt")
check "tune's best ($got) is the grid's best ($best_grid)" '[[ -n $got && $got == "$best_grid" ]]'
check "best workload written" '[[ -f $T/tn/best_workload.json ]] && grep -qF "\"name\": \"matmul_mxfp8_bwd_512_trn3_tuned\"" "$T/tn/best_workload.json"'
out=$("$TRNSIM" run "$T/tn/best_workload.json" --out "$T/bw" 2>&1 | grep "simulated time")
check "the best workload runs: $out" '[[ -n $out ]]'
# tune --write never lands on a file the tune reads or writes, or one a run recorded: refused before it runs,
# the file unchanged (before: each was replaced by the best workload, exit 0).
cp "$W" "$T/wcopy.json"
printf '{"name": "tw", "workload": "%s", "set": {"numerics": false}, "axes": [{"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1]}]}' \
  "$T/wcopy.json" >"$T/tw.json"
mkdir -p "$T/twout" && printf 'mine\n' >"$T/twout/notes.txt"
for target in "$T/tw.json" "$T/wcopy.json" "$T/twout/notes.txt" "$T/bw/stats.json"; do
  cp -p "$target" "$T/before.copy"
  "$TRNSIM" tune "$T/tw.json" --budget 1 --out "$T/twout" --no-report --write "$target" >/dev/null 2>"$T/tw_err.txt"
  rc=$?
  check "tune --write $target refused (exit $rc): $(tail -1 "$T/tw_err.txt")" \
    '[[ $rc == 1 && $(cat "$T/tw_err.txt") == *"--write"* ]] && cmp -s "$target" "$T/before.copy"'
done

# A second sweep or tune into a folder another one holds (its lock, taken here by flock(1)) is refused at once,
# and writes nothing there; once the lock is free the sweep runs.
if command -v flock >/dev/null; then
  before=$(ls -A "$T/o" | sort | tr '\n' ' ')
  flock "$T/o" sleep 3 &
  holder=$!
  sleep 0.5
  msg=$("$TRNSIM" sweep "$T/s.json" --out "$T/o" 2>&1)
  check "a locked sweep folder is refused: $msg" \
    '[[ $? == 1 && $msg == *"$T/o: another trnsim sweep or tune is writing into this folder"* ]]'
  msg=$("$TRNSIM" tune "$T/s.json" --budget 2 --out "$T/o" 2>&1)
  check "tune too: $msg" '[[ $? == 1 && $msg == *"another trnsim sweep or tune is writing into this folder"* ]]'
  check "nothing written into the locked folder" '[[ $(ls -A "$T/o" | sort | tr "\n" " ") == "$before" ]]'
  wait $holder
fi

# 5. Bad sweep files: exact messages, exit 1.
badfile() {  # badfile NAME JSON EXPECTED [extra args]
  printf '%s' "$2" >"$T/bad.json"
  local msg rc want=$3
  msg=$(timeout 120 "$TRNSIM" sweep "$T/bad.json" --out "$T/bad_out" "${@:4}" 2>&1)
  rc=$?
  check "$1: exit 1 ($rc) and '$want' in: $msg" '[[ $rc == 1 && $msg == *"$want"* ]]'
  check "$1: nothing created" '[[ ! -e $T/bad_out ]]'
}
A='{"name": "x", "workload": "'$W'", '
badfile "unknown parameter" "$A"'"axes": {"params.input_grad_config.tile_q": [1, 2]}}' \
  "bad.json: axes.params.input_grad_config.tile_q: unknown path 'params.input_grad_config.tile_q': kernel 'matmul_mxfp8_backward' has no parameter 'input_grad_config.tile_q' (the fields of input_grad_config: tile_m,"
badfile "unknown key" "$A"'"axes": {"parms.M": [1]}}' "bad.json: axes.parms.M: unknown path 'parms.M': a workload has no key 'parms'"
badfile "unknown hardware parameter" "$A"'"axes": {"hardware.overrides.hbm.bandwdth_GBps": [600]}}' \
  "unknown path 'hardware.overrides.hbm.bandwdth_GBps': hardware config 'trn3' has no parameter 'hbm.bandwdth_GBps'"
badfile "unknown input entry" "$A"'"axes": {"inputs.wieghts.seed": [1]}}' "the workload has no input entry 'wieghts'"
badfile "empty axis" "$A"'"axes": [{"name": "o", "path": "params.tile_loop_order", "values": []}]}' \
  "bad.json: axes[0].values: empty list: an axis needs at least one value"
badfile "contradictory constraints" "$A"'"axes": [{"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1, 2, 4]}], "constraints": ["bm > 2", "bm < 2"]}' \
  'bad.json: constraints: they exclude every one of the 3 points of the axes (constraints[0] "bm > 2" is the first broken on 2; constraints[1] "bm < 2" is the first broken on 1): they contradict each other or the axes'"'"' values'
ten='[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]'
badfile "a million points" "$A"'"axes": {"params.input_grad_config.tile_m": '"$ten"', "params.input_grad_config.tile_n": '"$ten"', "params.input_grad_config.tile_k": '"$ten"', "params.weight_grad_config.tile_m": '"$ten"', "params.weight_grad_config.tile_n": '"$ten"', "params.weight_grad_config.tile_k": '"$ten"'}}' \
  "bad.json: axes: the product of the axes has 1000000 points, more than 20000 (pass --yes to run it anyway)"
badfile "constraint syntax" "$A"'"axes": [{"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1]}], "constraints": ["bm >"]}' \
  'bad.json: constraints[0]: "bm >" does not parse: constraints[0]:2: unexpected symbol near '"')'"
badfile "constraint unknown name" "$A"'"axes": [{"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1]}], "constraints": ["bn > 1"]}' \
  "bad.json: constraints[0]: \"bn > 1\": constraints[0]:1: unknown name 'bn' (constraints read the axis names)"
badfile "constraint not a boolean" "$A"'"axes": [{"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [1]}], "constraints": ["bm + 1"]}' \
  'constraints[0]: "bm + 1" gives a number, expected true or false'
badfile "value twice" "$A"'"axes": {"params.tile_loop_order": ["mnk", "mnk"]}}' 'bad.json: axes.params.tile_loop_order[1]: "mnk" is listed twice (also [0])'
badfile "name twice" "$A"'"axes": [{"name": "a", "path": "params.M", "values": [512]}, {"name": "a", "path": "params.N", "values": [512]}]}' \
  "bad.json: axes[1].name: name 'a' is used twice"
badfile "reserved name" "$A"'"axes": [{"name": "status", "path": "params.M", "values": [512]}]}' "'status' names a column of the results"
# A constraint that never finishes (Lua lets an expression call a looping function) is an error, not a hang.
badfile "constraint that loops" "$A"'"axes": {"params.tile_loop_order": ["mnk"]}, "constraints": ["(function() while true do end end)()"]}' \
  'bad.json: constraints[0]: "(function() while true do end end)()": constraints[0]:1: does not finish within 10000000 Lua instructions (a loop?)'
# A constraint that builds a huge string fails at the Lua state's 64 MiB cap, not at the machine's memory
# (ulimit -v: a regression fails with Lua's plain "not enough memory" instead of taking the host's memory).
printf '%s' "$A"'"axes": {"params.tile_loop_order": ["mnk"]}, "constraints": ["(function() local s = \"x\" for i = 1, 40 do s = s .. s end return true end)()"]}' >"$T/bomb.json"
# (Without the address-space limit under AddressSanitizer, which reserves terabytes of shadow memory.)
if grep -q __asan_init "$TRNSIM"; then
  msg=$(timeout 120 "$TRNSIM" sweep "$T/bomb.json" --dry-run --out "$T/bomb" 2>&1)
else
  msg=$(ulimit -v 4000000; timeout 120 "$TRNSIM" sweep "$T/bomb.json" --dry-run --out "$T/bomb" 2>&1)
fi
check "constraint that takes memory: $msg" '[[ $? == 1 && $msg == *"bomb.json: constraints[0]: "*": takes more than 64 MiB of memory"* ]]'
# Two axes on one path (or one inside the other): a point would silently keep only the later axis's value.
badfile "one path in two axes" "$A"'"axes": [{"name": "a", "path": "params.tile_loop_order", "values": ["mnk"]}, {"name": "b", "path": "params.tile_loop_order", "values": ["nmk"]}]}' \
  "bad.json: axes[1]: sets 'params.tile_loop_order', as axes[0] does: a point would keep only this axis's value"
badfile "a path inside another axis's" "$A"'"axes": [{"name": "tn", "values": [{"params.input_grad_config.tile_n": 256, "params.weight_grad_config.tile_n": 256}]}, {"name": "cfg", "path": "params.input_grad_config", "values": [null]}]}' \
  "bad.json: axes[1]: sets 'params.input_grad_config', which replaces what axes[0] sets ('params.input_grad_config.tile_n')"
# The other way round, a path inside an earlier axis's refines it (hardware, then one of its overrides): fine.
printf '%s' "$A"'"axes": [{"name": "hw", "path": "hardware", "values": ["trn3"]}, {"name": "bw", "path": "hardware.overrides.hbm.bandwidth_GBps", "values": [600, 1200]}]}' >"$T/refine.json"
msg=$("$TRNSIM" sweep "$T/refine.json" --dry-run --out "$T/refine" 2>&1)
check "an axis inside an earlier one is accepted: $msg" '[[ $? == 0 && $msg == *"2 points (0 of the product skipped by the constraints): 2 valid"* ]]'
badfile "control character in a name" "$A"'"axes": [{"name": "a\u0000b", "path": "params.tile_loop_order", "values": ["mnk"]}]}' \
  "bad.json: axes[0].name: name 'a\x00b' holds a control character"
badfile "NUL in the workload path" '{"name": "x", "workload": "'$W'\u0000.json", "axes": {"params.M": [512]}}' \
  "': a path cannot hold a NUL byte"
# 2^64 - 1 is refused where it is read (JSON integers are 64-bit signed), never wrapped to -1 (it was: the
# duplicate check called [2^64 - 1, -1] "listed twice" and a constraint bm > 0 excluded it).
printf '%s' "$A"'"axes": [{"name": "bm", "path": "params.input_grad_config.TILES_IN_BLOCK_M", "values": [18446744073709551615, -1]}], "constraints": ["bm > 0 or bm == -1"]}' >"$T/big_int.json"
msg=$("$TRNSIM" sweep "$T/big_int.json" --dry-run --out "$T/big_int" 2>&1)
check "2^64 - 1 is refused, not wrapped: $msg" \
  '[[ $? == 1 && $msg == *"big_int.json: axes[0].values[0]: the integer 18446744073709551615 is out of range"* ]]'
badfile "no axes or points" "$A"'"set": {"numerics": false}}' 'bad.json: no points: give "axes"'
badfile "unknown sweep key" "$A"'"axis": {}}' "bad.json: axis: unknown key (expected name, description, workload, set, axes, points, constraints, objective, maximize)"
badfile "missing workload" '{"name": "x", "workload": "nope.json", "axes": {"params.M": [512]}}' "bad.json: workload: "
badfile "not JSON" '{"name": ' "bad.json: not valid JSON"
mkdir -p "$T/notsweep" && touch "$T/notsweep/mine.txt"
msg=$("$TRNSIM" sweep "$T/s.json" --out "$T/notsweep" 2>&1)
check "a folder that is not a sweep's is refused: $msg" \
  '[[ $? == 1 && $msg == *"notsweep: exists and is not a sweep folder (no plan.json): choose another --out"* && -f $T/notsweep/mine.txt ]]'
msg=$("$TRNSIM" sweep "$T/t.json" --out "$T/o" 2>&1)
check "another sweep's folder is refused: $msg" '[[ $msg == *"holds the results of sweep '"'"'small'"'"' (plan.json), not '"'"'tune_small'"'"'"* ]]'
msg=$("$TRNSIM" tune "$T/t.json" --objective speed --out "$T/tn2" 2>&1)
check "tune: unknown objective: $msg" '[[ $msg == *"--objective: objective '"'"'speed'"'"' is not a results column (one of: total_time_ns,"* ]]'
msg=$("$TRNSIM" sweep 2>&1)
check "sweep without a file: $msg" '[[ $msg == *"give a sweep file"* ]]'

# tune where validation refuses every point: the message gives validate's reason (invalid product points are
# not rows of tune's results, so "see results.csv" alone showed an empty file).
printf '%s' "$A"'"axes": {"params.input_grad_config.TILES_IN_BLOCK_M": [16, 32]}}' >"$T/all_invalid.json"
msg=$("$TRNSIM" tune "$T/all_invalid.json" --budget 4 --out "$T/tn_inv" --no-report 2>&1)
check "tune, every point invalid: exit 1 and validate's reason: $msg" \
  '[[ $? == 1 && $msg == *"no point ran successfully: see $T/tn_inv/results.csv; 2 points failed validation, the first: "*"is less than half a block"* ]]'

# Slurm: an sbatch that cannot reach a cluster (installed, not configured) is not "not on PATH": its reason.
mkdir -p "$T/fakebin" "$T/nobin"
printf '#!/bin/sh\necho "sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host" >&2\necho "sbatch: fatal: Could not establish a configuration source" >&2\nexit 1\n' >"$T/fakebin/sbatch"
chmod +x "$T/fakebin/sbatch"
msg=$(PATH=$T/fakebin "$TRNSIM" sweep "$T/t.json" --backend slurm --out "$T/sl1" 2>&1)
check "slurm, sbatch unconfigured: its reason: $msg" \
  '[[ $? == 1 && $msg == *"--backend slurm: '"'"'sbatch --version'"'"' failed (exit status 1): sbatch: fatal: Could not establish a configuration source (is Slurm configured"* ]]'
msg=$(PATH=$T/nobin "$TRNSIM" sweep "$T/t.json" --backend slurm --out "$T/sl2" 2>&1)
check "slurm, no sbatch: $msg" '[[ $? == 1 && $msg == *"--backend slurm: sbatch is not on PATH"* ]]'
finish
