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
# wait_stopped PID: until the process is stopped (SIGSTOP) or gone; 1 if it is gone.
wait_stopped() {
  local i
  for ((i = 0; i < 6000; i++)); do
    [[ -e /proc/$1 ]] || return 1
    [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == T ]] && return 0
    sleep 0.05
  done
  return 1
}
# wait_waiting LOG PID [TEXT]: until LOG says the process PID waits for another trnsim (or says TEXT), or PID
# is gone (60 s at most).
wait_waiting() {
  local i
  for ((i = 0; i < 1200; i++)); do
    grep -q "${3:-waiting for another trnsim}" "$1" && return 0
    [[ -e /proc/$2 ]] || return 1
    sleep 0.05
  done
  return 1
}
# wait_ended PID SECONDS: until the background process PID (a child of this shell) ends, SIGKILLing it after
# SECONDS; then its exit status as `wait` gives it (137 when it had to be killed). A test that waits on a
# process under test never hangs: a broken build makes it fail, not stall ctest.
wait_ended() {
  local i
  for ((i = 0; i < $2 * 20; i++)); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.05
  done
  kill -0 "$1" 2>/dev/null && kill -KILL "$1" 2>/dev/null
  wait "$1"
}
