#!/usr/bin/env bash
# Remakes the sample traces in traces/ with a build's trnsim (the run traces/README.md describes), or with
# --check says whether the shipped ones are what that build writes (exit 1 and the files that differ if not).
# Run it after a change to the model's timing or to the trace writers, and commit the new samples.
# Usage: traces/make_samples.sh BUILD_DIR [--check]
set -euo pipefail
build=${1:?usage: traces/make_samples.sh BUILD_DIR [--check]}
check=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
name=sample_mlp_down_bwd_mxfp8_lnc2
for ext in pftrace json; do
  "$build/trnsim" run "$root/configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json" --set params.M=512 \
    --set params.K=1024 --set params.N=1024 --set params.schedule=trnsim_optimized --set name=$name \
    --no-numerics --out "$tmp/out_$ext" --trace "$tmp/$name.$ext" > /dev/null
done
status=0
for ext in pftrace json; do
  if [[ $check == --check ]]; then
    cmp -s "$tmp/$name.$ext" "$here/$name.$ext" || { echo "stale: traces/$name.$ext"; status=1; }
  else
    cp "$tmp/$name.$ext" "$here/$name.$ext"
  fi
done
[[ $check == --check && $status == 0 ]] && echo "traces/: the samples are what $build/trnsim writes"
exit $status
