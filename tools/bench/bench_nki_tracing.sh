#!/usr/bin/env bash
# Tracing speed of Python kernels (instructions emitted per host second while a Python kernel builds its
# program), on a case of the main job's size: the instruction count of configs/workloads/
# llama3_8b_mlp_down_bwd_mxfp8.json on its trnsim_optimized schedule (about 20,000; the default, nki-library's
# stream, makes about 77,000) as `trnsim validate` prints it. Target: >= 100,000 instructions/s.
# Usage: tools/bench/bench_nki_tracing.sh [BUILD_DIR] [REPEATS]   (the cases: bench_nki_tracing.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
reps=${2:-3}
[[ -x "$build/trnsim" && -d "$build/python/trnsim" ]] || { echo "bench_nki_tracing: build $build first" >&2; exit 1; }
line=$("$build/trnsim" validate configs/workloads/llama3_8b_mlp_down_bwd_mxfp8.json \
  --set params.schedule=trnsim_optimized)
count=$(sed -E 's/.* ([0-9]+) instructions$/\1/' <<<"$line")
PYTHONPATH="$build/python:tools/bench${PYTHONPATH:+:$PYTHONPATH}" /usr/bin/python3 tools/bench/bench_nki_tracing.py \
  "$count" "$reps"
