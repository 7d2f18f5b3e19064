#!/usr/bin/env bash
# tools/fidelity's what-if options on a one-row table: usage fidelity.sh <trnsim-binary> <source-dir>.
# --param [GLOB:]KEY=VALUE sets params.KEY in the runs of the workloads GLOB matches (the simulated time is
# the one `trnsim run --set params.KEY=VALUE` gives), leaves the others alone, says so above the table, and a
# malformed or refused value fails with exit 2.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
FID=$SRC/tools/fidelity
W=vector_add_stream_free_dim_2
mkdir -p wl
cp "$SRC/configs/workloads/calibration/$W.json" wl/
cat >m.json <<JSON
{"workloads": "$T/wl",
 "rows": {"$W": {"ns": 186000, "source": "the CS149 FREE_DIM=2 row of configs/fidelity/measured.json"}},
 "fits": {"trn2:sync.kernel_launch_ns": {"rows": ["$W"], "bounds": [4000, 14000]},
          "trn1+trn2:dma.precomputed_issue_ns": {"rows": ["$W"], "bounds": [0, 1000]}}}
JSON

# sim_of ARGS...: the simulated column of the row, as the tool prints it ("194.130 us").
sim_of() { "$FID" --trnsim "$TRNSIM" --measured m.json --no-cv "$@" 2>err | awk -v w="$W" '$1 == w {print $5, $6}'; }
# run_time ARGS...: the simulated time `trnsim run` prints.
run_time() {
  "$TRNSIM" run "wl/$W.json" --no-numerics --out "$T/run" "$@" 2>/dev/null | awk '/simulated time/ {print $3, $4}'
}

base=$(sim_of)
check "baseline: tool $base, trnsim run $(run_time)" '[[ -n $base && $base == "$(run_time)" ]]'
four=$(sim_of --param "vector_add_*:bufs=4")
check "--param vector_add_*:bufs=4: tool $four, trnsim run $(run_time --set params.bufs=4)" \
  '[[ -n $four && $four != "$base" && $four == "$(run_time --set params.bufs=4)" ]]'
out=$("$FID" --trnsim "$TRNSIM" --measured m.json --no-cv --param "vector_add_*:bufs=4" 2>&1)
check "the table names the what-if: $out" '[[ $out == *"what-if: params vector_add_*:bufs = 4"* ]]'
check "--param without a glob applies to every workload" '[[ $(sim_of --param bufs=4) == "$four" ]]'
check "--param with a glob that matches nothing changes nothing" '[[ $(sim_of --param "matmul_*:bufs=4") == "$base" ]]'

"$FID" --trnsim "$TRNSIM" --measured m.json --no-cv --param "bufs=100" >out 2>err
rc=$?
check "a refused value: exit 2 and trnsim's message (rc $rc: $(cat err))" \
  '[[ $rc == 2 ]] && grep -q "parameter .bufs.: expected an integer in \[1, 64\]" err'
"$FID" --trnsim "$TRNSIM" --measured m.json --no-cv --param "bufs" >out 2>err
rc=$?
check "a malformed --param: exit 2 and the expected form (rc $rc: $(cat err))" \
  '[[ $rc == 2 ]] && grep -q "expected \[GLOB:\]KEY=VALUE" err'
finish
