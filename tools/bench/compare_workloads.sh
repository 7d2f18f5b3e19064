#!/usr/bin/env bash
# Same-results check between two builds: runs every workload under the given folders (recursively) with
# --no-numerics on both trnsim binaries and compares their stats.json, leaving out the values that name a
# host path (hardware_config: where each binary's source tree is; the host's figures are in host.json). With
# NUMERICS=on
# it also runs with numerics and compares the sha256 of every .npy written. Prints one line per workload
# and exits 1 if any differs (the first differing keys are shown).
# Usage: tools/bench/compare_workloads.sh OLD_TRNSIM NEW_TRNSIM WORKLOAD.json|FOLDER ...
#        NUMERICS=on tools/bench/compare_workloads.sh ... configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json
set -euo pipefail
[[ $# -ge 3 ]] || { echo "usage: $0 OLD_TRNSIM NEW_TRNSIM WORKLOAD.json|FOLDER ..." >&2; exit 2; }
old=$1 new=$2
shift 2
workloads=()
for a in "$@"; do
  if [[ -d $a ]]; then mapfile -t -O "${#workloads[@]}" workloads < <(find "$a" -name '*.json' | sort)
  else workloads+=("$a"); fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
numerics=()
[[ ${NUMERICS:-off} == on ]] || numerics=(--no-numerics)

# Prints the stats.json of a run, one "key.path = value" per line, without values naming a host path.
stable_stats() {
  jq -r 'paths(scalars) as $p | select(getpath($p) | tostring | startswith("/") | not)
         | "\($p | map(tostring) | join(".")) = \(getpath($p))"' "$1"
}

status=0
for w in "${workloads[@]}"; do
  # Files under configs/workloads that are not workloads (e.g. a tuning space) are skipped when both reject.
  rc_old=0 rc_new=0
  "$old" run "$w" --out "$tmp/old" --overwrite "${numerics[@]}" > "$tmp/old.log" 2>&1 || rc_old=$?
  "$new" run "$w" --out "$tmp/new" --overwrite "${numerics[@]}" > "$tmp/new.log" 2>&1 || rc_new=$?
  if [[ $rc_old -ne 0 || $rc_new -ne 0 ]]; then
    if [[ $rc_old -eq $rc_new ]]; then
      echo "skip  $w (both exit $rc_old: $(tail -n1 "$tmp/old.log" | cut -c1-100))"
    else
      echo "DIFF  $w: exit $rc_old vs $rc_new"; status=1
    fi
    rm -rf "$tmp/old" "$tmp/new"; continue
  fi
  # Every stats file (stats.json; a chain's chain_stats.json and its stages' folders), then the .npy bytes.
  same=1
  files=$(cd "$tmp/old" && find . -name '*.json' ! -name host.json | sort)
  [[ $files == "$(cd "$tmp/new" && find . -name '*.json' ! -name host.json | sort)" ]] ||
    { echo "DIFF  $w: files differ"; same=0; }
  for f in $files; do
    [[ $same -eq 1 ]] || break
    if ! diff <(stable_stats "$tmp/old/$f") <(stable_stats "$tmp/new/$f") > "$tmp/diff" 2>&1; then
      echo "DIFF  $w ($f):"; head -n 8 "$tmp/diff"; same=0
    fi
  done
  if [[ $same -eq 1 && ${NUMERICS:-off} == on ]] &&
     ! diff <(cd "$tmp/old" && find . -name '*.npy' | sort | xargs -r sha256sum) \
            <(cd "$tmp/new" && find . -name '*.npy' | sort | xargs -r sha256sum) > "$tmp/diff"; then
    echo "DIFF  $w (.npy bytes):"; head -n 8 "$tmp/diff"; same=0
  fi
  if [[ $same -eq 1 ]]; then
    echo "same  $w ($(cd "$tmp/new" && jq -r '.total_time_ns // .total_ns // empty' $files 2>/dev/null | head -n1) ns," \
         "$(echo "$files" | wc -w) stats files$([[ ${NUMERICS:-off} == on ]] && echo ", $(cd "$tmp/new" && find . -name '*.npy' | wc -l) .npy"))"
  else
    status=1
  fi
  rm -rf "$tmp/old" "$tmp/new"
done
exit $status
