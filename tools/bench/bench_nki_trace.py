"""Tracing speed of the NKI front end: instructions per second from an NKI Python kernel to the builder's
program (trace, allocation, schedule, emission), the main job's kernel size as the case (its program has
20,160 instructions; this kernel, examples/nki/nki_tutorial_matmul.py `tiled` at M = N = K = 4096 BF16,
has 25,088). Prints the best of N builds, by CPU time and by wall time.

    PYTHONPATH=build/python /usr/bin/python3 tools/bench/bench_nki_trace.py [runs]
"""

import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "nki"))

from trnsim import _core  # noqa: E402
import trnsim.nki  # noqa: E402,F401

import nki_tutorial_matmul as tm  # noqa: E402

K, M, N = 4096, 4096, 4096


def build():
    def fn(k):
        lhsT = k.input("lhsT", _core.DType.BF16, [K, M])
        rhs = k.input("rhs", _core.DType.BF16, [K, N])
        return tm.nki_tutorial_matmul.func(lhsT, rhs, variant="tiled")

    return _core.build_program(fn, limits=_core.default_limits(_core.Generation.Trn2))


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    best_cpu = best_wall = float("inf")
    n = 0
    for _ in range(runs):
        c, w = time.process_time(), time.perf_counter()
        b = build()
        best_cpu = min(best_cpu, time.process_time() - c)
        best_wall = min(best_wall, time.perf_counter() - w)
        n = b.program.instruction_count()
    print("nki trace: %d instructions, best of %d: %.0f instructions/s (CPU), %.0f instructions/s (wall)"
          % (n, runs, n / best_cpu, n / best_wall))


if __name__ == "__main__":
    main()
