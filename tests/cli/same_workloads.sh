#!/usr/bin/env bash
# tools/bench/same_workloads.py on one workload, with "builds" that are wrappers of the given trnsim: usage
# same_workloads.sh <trnsim-binary> <source-dir>. A config file whose text changed (a `source` note edited)
# changes stats.json's hardware_config_sha256 and nothing simulated: the line says "same" with the config
# text named apart, exit 0; a changed simulated time is still DIFFERENT, exit 1.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
TOOL=$SRC/tools/bench/same_workloads.py
W=$SRC/configs/workloads/calibration/vector_add_stream_free_dim_200_trn1.json
# wrapper DIR EXTRA_ARGS EDIT: DIR/trnsim runs the real one with EXTRA_ARGS added, then runs the Python
# statement EDIT on its stats.json (loaded as j).
wrapper() {
  mkdir -p "$1"
  cat >"$1/trnsim" <<SH
#!/usr/bin/env bash
"$TRNSIM" "\$@" $2 || exit
out=""; prev=""
for x in "\$@"; do [[ \$prev == --out ]] && out=\$x; prev=\$x; done
python3 -c "import json; p='\$out/stats.json'; j=json.load(open(p)); $3; json.dump(j, open(p, 'w'))"
SH
  chmod +x "$1/trnsim"
}
wrapper a "" "pass"
wrapper note "" "j['hardware_config_sha256'] = '0' * 64"
wrapper slower "--set hardware.overrides.sync.kernel_launch_ns=20000" "pass"
run_tool() { python3 "$TOOL" "$1" "$2" "$W" >out 2>err; }

run_tool a a
rc=$?
check "the same build twice: exit 0, 'same', no config note (rc $rc: $(cat out err))" \
  '[[ $rc == 0 ]] && grep -q "^same  .*calibration/vector_add_stream_free_dim_200_trn1.json  *2 files" out &&
   ! grep -q "config text" out && grep -q "^1 workloads, 0 differ$" out'

run_tool a note
rc=$?
check "only the config text changed: exit 0, 'same', the config text named (rc $rc: $(cat out err))" \
  '[[ $rc == 0 ]] && grep -q "^same  .*free_dim_200_trn1.json .*(config text changed: stats.json)$" out &&
   grep -q "^1 workloads, 0 differ$" out'

run_tool a slower
rc=$?
# The launch is on the path: the time moves by 20000 ns less the shipped launch (configs/hw/trn1.json).
launch=$(python3 -c "import json; print(json.load(open('$SRC/configs/hw/trn1.json'))['sync']['kernel_launch_ns']['value'])")
moved=$(sed -n 's/^DIFFERENT .*stats.json, stats.json total_time_ns \([0-9.]*\) -> \([0-9.]*\) .*/\2 - \1/p' out)
check "a simulated time changed: exit 1, DIFFERENT with both times, 20000 - $launch ns apart (rc $rc: $(cat out err))" \
  '[[ $rc == 1 && -n $moved ]] && python3 -c "import sys; sys.exit(abs($moved - (20000 - $launch)) > 1e-6)" &&
   grep -q "^1 workloads, 1 differ$" out'
finish
