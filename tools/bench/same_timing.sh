#!/usr/bin/env bash
# Checks that a change to the timing model's host code keeps every simulated figure: runs every shipped
# workload (configs/workloads, recursively) timing-only with two builds and compares their stats.json byte
# for byte (stats.json holds no host times; the one path it holds, the hardware config's, is in each build's
# source tree, which is replaced by ROOT) and their printed report (the host times left out). Prints one
# line per workload and a summary; exits 1 on any difference.
# Usage: tools/bench/same_timing.sh BASE_BUILD NEW_BUILD [WORKLOAD.json|FOLDER ...]   (default: configs/workloads)
set -uo pipefail
base=${1:?usage: $0 BASE_BUILD NEW_BUILD [WORKLOAD.json|FOLDER ...]}
new=${2:?usage: $0 BASE_BUILD NEW_BUILD [WORKLOAD.json|FOLDER ...]}
shift 2
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[[ $# -gt 0 ]] || set -- "$root/configs/workloads"
workloads=()
for a in "$@"; do
  if [[ -d $a ]]; then
    while IFS= read -r f; do workloads+=("$f"); done < <(find "$a" -name '*.json' | sort)
  else
    workloads+=("$a")
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

same=0 differ=0 failed=0
for w in "${workloads[@]}"; do
  for side in base new; do
    b=$base
    [[ $side == new ]] && b=$new
    rm -rf "$tmp/$side"
    "$b/trnsim" run "$w" --no-numerics --out "$tmp/$side" > "$tmp/$side.stdout" 2> "$tmp/$side.stderr"
    echo $? > "$tmp/$side.rc"
    src=$(cd "$b/.." && pwd)  # the build's source tree: its configs/hw holds the hardware configs
    grep -v 'host time' "$tmp/$side.stdout" | sed -E "s|$tmp/$side|OUT|g; s|$src|ROOT|g; s|\(([0-9.]+) s\)$|(T s)|" \
      > "$tmp/$side.report"
    # Every stats.json of the run (a chain writes one per step), each under its path in the output folder.
    (cd "$tmp/$side" 2> /dev/null && find . -name stats.json | sort | while IFS= read -r f; do
      echo "== $f"
      sed "s|$src|ROOT|g" "$f"
    done) > "$tmp/$side.stats"
  done
  name=${w#"$root/"}
  if ! cmp -s "$tmp/base.rc" "$tmp/new.rc" || [[ $(cat "$tmp/base.rc") != 0 ]]; then
    echo "FAILED  $name (exit base $(cat "$tmp/base.rc"), new $(cat "$tmp/new.rc"))"
    failed=$((failed + 1))
  elif [[ ! -s $tmp/new.stats ]]; then
    echo "FAILED  $name (no stats.json)"
    failed=$((failed + 1))
  elif cmp -s "$tmp/base.stats" "$tmp/new.stats" && cmp -s "$tmp/base.report" "$tmp/new.report"; then
    n=$(grep -c '^== ' "$tmp/new.stats")
    t=$(grep -m1 -E '"total_time_ns": [0-9]' "$tmp/new.stats" | tr -d ' ,')
    echo "same    $name ($n stats.json; first $t)"
    same=$((same + 1))
  else
    echo "DIFFER  $name"
    diff "$tmp/base.stats" "$tmp/new.stats" | head -5
    diff "$tmp/base.report" "$tmp/new.report" | head -5
    differ=$((differ + 1))
  fi
done
echo "same_timing: ${#workloads[@]} workloads: $same identical, $differ differ, $failed failed"
[[ $differ == 0 && $failed == 0 ]]
