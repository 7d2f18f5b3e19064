#!/usr/bin/env bash
# Absurd hardware values end with a message, never a hang: usage hw_limits.sh <trnsim-binary> <source-dir>.
# Each of these once made `run` spin forever (simulated time past 2^64 ps) while `validate` said ok. Now
# `validate` and `run` both refuse them with exit 1, naming the config file, the key, the accepted range and
# the override, and `run` leaves no output directory. Every command runs under a timeout.
set -uo pipefail

TRNSIM=$1
SRC=$2
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
passed=0
failed=0

check() {
  if eval "$2"; then passed=$((passed + 1)); else
    failed=$((failed + 1))
    echo "FAIL: $1" >&2
  fi
}

# expect_refused OVERRIDE EXPECTED_TAIL: validate and run exit 1 with "...trn3.json: <EXPECTED_TAIL>".
expect_refused() {
  local override=$1 want=$2
  for cmd in validate run; do
    local args=("$cmd" "$SMALL" --set "hardware.overrides.$override")
    [[ $cmd == run ]] && args+=(--no-numerics --out "$T/out")
    local msg rc
    msg=$(timeout 60 "$TRNSIM" "${args[@]}" 2>&1)
    rc=$?
    check "$cmd $override: exit $rc (want 1): $msg" '[[ $rc == 1 ]]'
    check "$cmd $override message: $msg" \
      '[[ $msg == "trnsim: error: $SMALL: hardware: "*"/trn3.json: $want" ]]'
  done
  check "run $override left an output directory" '[[ ! -e $T/out ]]'
}

expect_refused hbm.bandwidth_GBps=1e-11 \
  "hbm.bandwidth_GBps.value: expected a number in [0.01, 1e+06], found 1e-11 (from the override hbm.bandwidth_GBps=1e-11)"
expect_refused hbm.bandwidth_GBps=1e-300 \
  "hbm.bandwidth_GBps.value: expected a number in [0.01, 1e+06], found 1e-300 (from the override hbm.bandwidth_GBps=1e-300)"
expect_refused dma.transpose_efficiency_hbm=1e-300 \
  "dma.transpose_efficiency_hbm.value: expected a number in [0.01, 1], found 1e-300 (from the override dma.transpose_efficiency_hbm=1e-300)"

# The lowest accepted values still run to the end (slowly in simulated time, not in host time).
msg=$(timeout 120 "$TRNSIM" run "$SMALL" --no-numerics --out "$T/slow" --set hardware.overrides.hbm.bandwidth_GBps=0.01 \
  --set hardware.overrides.dma.transpose_efficiency_hbm=0.01 2>&1)
rc=$?
check "run at the lowest accepted values: exit $rc: $msg" '[[ $rc == 0 && -f $T/slow/stats.json ]]'

echo "hw_limits: $passed passed, $failed failed"
[[ $failed == 0 ]]
