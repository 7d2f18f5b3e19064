#!/usr/bin/env bash
# The README names every shipped kernel (issue 26: a newcomer finds each one there, with a workload to try):
# usage readme_kernels.sh <trnsim-binary> <source-dir>. Every kernel `trnsim list --json` registers is named
# in README.md's kernels table as `name`, and each example the table runs is a file that exists.
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
"$TRNSIM" list --json >"$T/list.json" 2>"$T/err"
check "trnsim list --json: exit $? ($(head -c 200 "$T/err"))" '[[ -s $T/list.json ]]'
table=$(sed -n '/^## Kernels and workloads/,/^## Configs/p' "$SRC/README.md")
names=$(/usr/bin/python3 -c "import json, sys; print('\n'.join(k['name'] for k in json.load(open(sys.argv[1]))))" "$T/list.json")
check "at least 16 kernels listed ($(echo "$names" | wc -l))" '[[ $(echo "$names" | wc -l) -ge 16 ]]'
for n in $names; do
  check "the README's kernels table names $n" 'grep -qF "\`$n\`" <<<"$table"'
done
for f in $(grep -o 'build/trnsim run [^ `]*' <<<"$table" | awk '{print $3}'); do
  check "the README's example $f exists" '[[ -f $SRC/$f ]]'
done
finish
