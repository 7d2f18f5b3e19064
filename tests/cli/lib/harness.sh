# Sourced by the CLI end-to-end scripts (tests/cli/*.sh, run as `script <trnsim-binary> <source-dir>`):
# TRNSIM and SRC from the arguments, a scratch folder T (the working directory; removed on exit, made
# writable first), the pass/fail counters, check NAME CONDITION (a condition for eval) and finish, which
# prints the counts and returns non-zero when a check failed.
set -uo pipefail
TRNSIM=$1
SRC=$2
T=$(mktemp -d)
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT
cd "$T" || exit 1
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() {
  failed=$((failed + 1))
  echo "FAIL: $*" >&2
}
check() { if eval "$2"; then ok; else bad "$1"; fi; }
finish() {
  echo "$passed passed, $failed failed"
  [[ $failed == 0 ]]
}
