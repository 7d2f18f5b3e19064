#!/usr/bin/env bash
# Runs under the limits and signals of shared machines and schedulers: usage host_limits.sh <trnsim-binary>
# <source-dir>. Issue 22's findings, each a case: an address-space limit just above what the memory check
# asks for (9), every signal whose default action ends a run (10), a small stack limit (11), stats.json the
# same bytes whatever OPENBLAS_NUM_THREADS and the limits say (14).
source "$(dirname "${BASH_SOURCE[0]}")/lib/harness.sh"
SMALL=$SRC/configs/workloads/matmul_mxfp8_bwd_512_trn3.json
# About 1.5 s of setup and several seconds of simulation (as in interrupt.sh).
MOE=$SRC/configs/workloads/moe/qwen3_30b_a3b_fwd_mxfp8.json
MSETS=(--set params.T=1024 --set params.E=16 --set params.top_k=2)
asan=0
grep -q __asan_init "$TRNSIM" && asan=1

# 9. Address-space limits around what the memory check asks for: each run ends within a minute, either with its
# outputs or refused before any work with the figures (between 370 and 420 MB it once passed the check, then
# spun for ever in OpenBLAS's buffer allocation inside the references).
MM=$SRC/configs/workloads/matmul_bf16_2048_trn2_lnc1.json
if [[ $asan == 0 ]]; then
  for kb in 280000 340000 400000 460000; do
    (
      ulimit -v $kb
      timeout 60 "$TRNSIM" run "$MM" --out "$T/v$kb"
    ) >"$T/out" 2>&1
    rc=$?
    check "ulimit -v $kb: outputs or refused up front (exit $rc: $(tail -1 "$T/out"))" \
      '[[ ($rc == 0 && -f $T/v$kb/y.npy) || ($rc == 1 && ! -e $T/v$kb && $(cat "$T/out") == *"this run needs at least"*"of host memory"*) ]]'
  done
fi

# 10. Signals. A closed pipe does not end a run: its files are written, the messages it could not print are
# lost (2>&1 | head once killed it with SIGPIPE at its next progress line, leaving its folder).
"$TRNSIM" run "$MOE" "${MSETS[@]}" --out "$T/pipe" 2>&1 | head -1 >/dev/null
rc=${PIPESTATUS[0]}
check "a closed pipe: the run ends normally (exit $rc)" '[[ $rc == 0 && -f $T/pipe/stats.json ]]'
# A soft CPU-time limit (SIGXCPU), Slurm's warning signals (SIGUSR1, SIGUSR2) and SIGALRM end a run as Ctrl-C
# does: a message naming the signal, nothing left behind, the signal's exit status.
for sig in XCPU USR1 USR2 ALRM; do
  d=$T/sig_$sig
  mkdir -p "$d"
  if [[ $sig == XCPU ]]; then
    {
      (
        ulimit -S -t 2
        exec "$TRNSIM" run "$MOE" "${MSETS[@]}" --out "$d/out" --dump-inputs
      ) >"$d/log" 2>&1
    } 2>/dev/null  # the shell's own "CPU time limit exceeded"
    rc=$?
  else
    timeout --preserve-status -s "$sig" 2 "$TRNSIM" run "$MOE" "${MSETS[@]}" --out "$d/out" --dump-inputs >"$d/log" 2>&1
    rc=$?
  fi
  code=$((128 + $(kill -l "$sig")))
  check "SIG$sig: exit $code (was $rc: $(tail -2 "$d/log"))" '[[ $rc == $code ]]'
  check "SIG$sig: the message names it" 'grep -q "trnsim: interrupted (SIG$sig" "$d/log"'
  check "SIG$sig: no temporary, no folder left" '[[ ! -e $d/out && -z $(find "$d" -name "*.tmp.*" -o -name ".trnsim-trace.*") ]]'
done
# `ulimit -t N` sets the soft and the hard CPU-time limit alike: the hard one would end the run with SIGKILL, no
# message and its folder left; trnsim lowers its soft limit by a second, so SIGXCPU comes first.
d=$T/cpu_cap
mkdir -p "$d"
{
  (
    ulimit -t 2
    exec "$TRNSIM" run "$MOE" "${MSETS[@]}" --out "$d/out" --dump-inputs
  ) >"$d/log" 2>&1
} 2>/dev/null
rc=$?
check "ulimit -t 2: SIGXCPU's exit 152 (was $rc: $(tail -2 "$d/log"))" '[[ $rc == 152 ]]'
check "ulimit -t 2: the message names SIGXCPU" 'grep -q "trnsim: interrupted (SIGXCPU" "$d/log"'
check "ulimit -t 2: no temporary, no folder left" '[[ ! -e $d/out && -z $(find "$d" -name "*.tmp.*" -o -name ".trnsim-trace.*") ]]'
# A signal the caller ignores stays ignored (nohup): the run goes on.
(
  trap '' HUP
  "$TRNSIM" run "$SMALL" --out "$T/nohup" >"$T/nohup.log" 2>&1 &
  p=$!
  sleep 0.3
  kill -HUP $p
  wait $p
)
rc=$?
check "SIGHUP under nohup: ignored (exit $rc)" '[[ $rc == 0 && -f $T/nohup/input_grad.npy ]]'

# 11. A small stack limit: every thread's stack is set by trnsim, not by RLIMIT_STACK (the MoE references'
# thread once overflowed its 80 KiB).
BWD=$SRC/configs/workloads/moe/small_affinity_on_h_bwd_mxfp8.json
{
  (
    ulimit -s 80
    timeout 300 "$TRNSIM" run "$BWD" --out "$T/stack"
  ) >"$T/out" 2>&1
} 2>/dev/null
rc=$?
check "ulimit -s 80: the MoE backward runs with numerics (exit $rc: $(tail -1 "$T/out"))" \
  '[[ $rc == 0 && -f $T/stack/stats.json ]]'

# 14. The same stats.json bytes (the host's time is in host.json beside it, never in stats.json) and outputs
# whatever OPENBLAS_NUM_THREADS says and under an
# address-space limit (which once forced one BLAS thread).
run_as() {  # run_as NAME ENV...: the small workload with numerics into $T/det_NAME
  local name=$1
  shift
  env "$@" "$TRNSIM" run "$SMALL" --out "$T/det_$name" >/dev/null 2>&1
}
run_as unset
run_as one OPENBLAS_NUM_THREADS=1
run_as four OPENBLAS_NUM_THREADS=4
if [[ $asan == 0 ]]; then
  (
    ulimit -v 4000000
    run_as limited
  )
else
  cp -r "$T/det_unset" "$T/det_limited"
fi
run_as again
for n in again one four limited; do
  check "stats.json of the run '$n' (a second run, 1 or 4 BLAS threads, ulimit -v): the same bytes" 'cmp -s "$T/det_unset/stats.json" "$T/det_$n/stats.json"'
  check "outputs with $n: the same bytes" 'cmp -s "$T/det_unset/input_grad.npy" "$T/det_$n/input_grad.npy"'
done
check "the host time is in host.json, not in stats.json" \
  '/usr/bin/python3 -c "import json, sys; h = json.load(open(sys.argv[1])); assert h[\"trnsim_host\"] == 1 and h[\"wall_seconds\"] > 0" "$T/det_unset/host.json" && ! grep -q wall_seconds "$T/det_unset/stats.json"'
# Layout version 5: the first without wall_seconds.
check "stats.json says stats_version 5" 'grep -q "\"stats_version\": 5," "$T/det_unset/stats.json"'

# 15. The memory check's figures hold the run: a MoE forward's and backward's peak resident memory with
# numerics (references included) is at most what the process held at the check plus what the check asked for
# and the scratch pages it counts apart (--verbose says the three).
if [[ $asan == 0 ]]; then
  for w in fwd bwd; do
    args=("$BWD")
    [[ $w == fwd ]] && args=("$MOE" "${MSETS[@]}")
    "$TRNSIM" run "${args[@]}" --verbose --out "$T/mem_$w" >"$T/mem_$w.log" 2>&1
    rc=$?
    need=$(sed -nE 's/.*besides the ([0-9]+) MiB resident now: ([0-9]+) MiB .*, and ([0-9]+) MiB the OS can page.*/\1 + \2 + \3/p' "$T/mem_$w.log")
    peak=$(sed -nE 's/.*peak memory ([0-9]+) MiB.*/\1/p' "$T/mem_$w.log")
    check "MoE $w with numerics: peak memory '$peak' MiB within the check's resident + needed + paged MiB '$need' (exit $rc)" \
      '[[ $rc == 0 && -n $need && -n $peak ]] && ((peak <= need))'
  done
fi

# 16. A layer too big for the limit is still refused before any work, with both figures: the DeepSeek-V3 MoE
# backward with numerics (about 1.2 GB of heap and 23.6 GB of scratch files) under a 3 GB address space.
if [[ $asan == 0 ]]; then
  (
    ulimit -v 3000000
    timeout 120 "$TRNSIM" run "$SRC/configs/workloads/moe/deepseek_v3_bwd_mxfp8.json" --out "$T/ds" >"$T/ds.log" 2>&1
  )
  rc=$?
  check "DeepSeek-V3 bwd under ulimit -v 3000000: refused before work, both figures, no folder (exit $rc: $(tail -1 "$T/ds.log"))" \
    '[[ $rc == 1 && ! -e $T/ds && $(cat "$T/ds.log") == *"this run needs at least "*" GB of host memory"*"besides "*" GB that the OS can page"*"the address-space limit (ulimit -v) leaves"* ]]'
fi

finish
