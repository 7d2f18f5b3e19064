#!/usr/bin/env bash
# A short run of one fuzz target on its seed corpus (the `fuzz` ctest label):
#   smoke.sh FUZZ_BINARY NAME SOURCE_DIR SECONDS
# New inputs go to a scratch folder, never into the repository's corpus. A crash, sanitizer report, leak,
# timeout (10 s per input) or out-of-memory (2 GiB) fails the test; the input that caused it is kept in the
# current directory (crash-*, leak-*, timeout-*, oom-*) and the fuzzer's report is printed.
set -uo pipefail
BIN=$1 NAME=$2 SRC=$3 SECONDS_=$4
case $NAME in
  npy | quantize) max_len=4096 ;;
  hw_config) max_len=16384 ;;
  stats) max_len=32768 ;;
  *) max_len=8192 ;;
esac
args=(-max_total_time="$SECONDS_" -timeout=10 -rss_limit_mb=2048 -max_len="$max_len" -print_final_stats=1
  -artifact_prefix="$PWD/")
[[ -f $SRC/tests/fuzz/dict/$NAME.dict ]] && args+=(-dict="$SRC/tests/fuzz/dict/$NAME.dict")
new=$(mktemp -d)
trap 'rm -rf "$new"' EXIT
"$BIN" "${args[@]}" "$new" "$SRC/tests/fuzz/corpus/$NAME" >"$new/log" 2>&1
rc=$?
if [[ $rc != 0 ]]; then
  tail -n 80 "$new/log"
  echo "fuzz_$NAME: exit $rc"
  exit 1
fi
echo "fuzz_$NAME: $(grep -E '^stat::number_of_executed_units' "$new/log") in $SECONDS_ s"
