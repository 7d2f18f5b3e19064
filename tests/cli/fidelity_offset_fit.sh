#!/usr/bin/env bash
# tools/fidelity's launch fit on profiled rows: usage fidelity_offset_fit.sh <trnsim-binary> <source-dir>.
# A launch constant and a measurement method's offset both add to a profiled row, so on that row alone they
# trade off freely; the method's other rows pin the offset. Table: the Trn2 n = 256000 FREE_DIM=1000 row (A,
# fits the launch) and FREE_DIM=2000 (B), both profiled, each "measured" as its simulated time at the
# shipped launch (8785 ns) plus 2000 ns of offset. The offset is the weighted median (weights 1 / measured),
# so it follows A, the shorter row, wherever the launch is: judging A alone the fit took the first candidate
# (A's error is 0 at every one), the bound 4000 ns; judging B too, it finds 8785 ns and the 2000 ns offset.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
FID=$SRC/tools/fidelity
A=vector_add_stream_256000_free_dim_1000
B=vector_add_stream_256000_free_dim_2000
mkdir -p wl
cp "$SRC/configs/workloads/calibration/$A.json" "$SRC/configs/workloads/calibration/$B.json" wl/
sim_ns() {
  "$TRNSIM" run "wl/$1.json" --no-numerics --out "$T/run-$1" >/dev/null 2>&1
  python3 -c "import json; print(json.load(open('$T/run-$1/stats.json'))['total_time_ns'])"
}
a=$(sim_ns $A)
b=$(sim_ns $B)
launch=$(python3 -c "import json; print(json.load(open('$SRC/configs/hw/trn2.json'))['sync']['kernel_launch_ns']['value'])")
check "the shipped Trn2 launch is the 8785 ns this test is written for ($launch)" '[[ $launch == 8785 ]]'
cat >m.json <<JSON
{"workloads": "$T/wl",
 "methods": {"p": {"offset_ns": {"value": 0, "source": "[fitted] the test's profiler offset"}}},
 "rows": {"$A": {"ns": $(python3 -c "print($a + 2000)"), "source": "A", "method": "p"},
          "$B": {"ns": $(python3 -c "print($b + 2000)"), "source": "B", "method": "p"}},
 "fits": {"trn2:sync.kernel_launch_ns": {"rows": ["$A"], "bounds": [4000, 14000], "grid": 3,
                                         "why": "A alone: B pins the offset"},
          "trn1+trn2:dma.precomputed_issue_ns": {"rows": ["$A"], "bounds": [485, 485.001], "grid": 2},
          "method:p": {"rows": ["$A", "$B"], "bounds": [0, 8000]}}}
JSON
"$FID" --trnsim "$TRNSIM" --measured m.json >out 2>err
rc=$?
fit=$(awk '$1 == "trn2:sync.kernel_launch_ns:" {print $4}' out)
off=$(awk '$1 == "method:p:" {print $4}' out)
check "exit 0 (all rows exact in sample; rc $rc: $(cat err))" '[[ $rc == 0 ]]'
check "the launch fit is the shipped 8785 ns, not the bound (fit $fit)" '[[ $fit == "8785.0)" ]]'
check "the offset fit is the 2000 ns put in (fit $off)" '[[ $off == "2000.0)" ]]'
check "the fit's why is printed" 'grep -q "^    rows: A alone: B pins the offset$" out'
echo '{"workloads": "x", "rows": {"r": {"ns": 1}}, "fits": {"trn2:a.b": {"rows": ["r"], "bounds": [0, 1], "why": 3}}}' >bad.json
"$FID" --trnsim "$TRNSIM" --measured bad.json >out 2>err
rc=$?
check "a why that is not a string: exit 2 and the key named (rc $rc: $(cat err))" \
  '[[ $rc == 2 ]] && grep -q "bad.json: fits.trn2:a.b.why must be a note (a string): why these rows" err'
finish
