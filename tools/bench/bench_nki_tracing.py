"""Tracing speed of Python kernels: instructions per host second while a Python kernel builds its program
(the Python kernel function runs once per core and every builder call emits an instruction, with its
dependency tracking and its Python source line), the case sized as the main job's program.

Usage (bench_nki_tracing.sh sets PYTHONPATH): bench_nki_tracing.py INSTRUCTIONS [REPEATS] [MODULE:FUNCTION]
INSTRUCTIONS: the main job's instruction count (the script passes `trnsim validate`'s); the default kernel is
a tiled BF16 matmul on Trn3 LNC2 written against trnsim._core (DMA loads of both operands, nc_matmul
accumulating over K, the PSUM copy and the store), its K sized so that it emits at least that many. A
MODULE:FUNCTION taking (k, target) is timed instead (e.g. a kernel written with nki.language).
"""

import importlib
import sys
import time

from trnsim import _core
from trnsim._core import nki as isa

BF16, F32 = _core.DType.BF16, _core.DType.F32


def tiled_matmul(k, kt, M=4096, N=4096):
    """Y[M, N] = X^T[K, M]^T @ W[K, N] in [128 x 512] output tiles, K in kt steps of 128: per output tile
    3 kt + 2 instructions (per K step: two loads and a matmul; then the PSUM copy and the store)."""
    K = 128 * kt
    xT = k.input("xT", BF16, [K, M])
    w = k.input("w", BF16, [K, N])
    y = k.output("y", BF16, [M, N])
    lhs = k.sbuf_pool([128, 128], BF16, "lhs", 3)
    rhs = k.sbuf_pool([128, 512], BF16, "rhs", 3)
    acc = k.psum_pool([128, 512], F32, "acc", 2)
    res = k.sbuf_pool([128, 512], BF16, "res", 2)
    half = N // k.num_programs()
    n0 = k.program_id() * half
    for m in range(0, M, 128):
        for n in range(n0, n0 + half, 512):
            p = acc.next()
            for kk in range(0, K, 128):
                a = lhs.next()
                b = rhs.next()
                isa.dma_copy(a, xT[kk:kk + 128, m:m + 128])
                isa.dma_copy(b, w[kk:kk + 128, n:n + 512])
                isa.nc_matmul(p, a, b, accumulate=kk > 0)
            r = res.next()
            isa.tensor_copy(r, p, engine=_core.Engine.ACT)
            isa.dma_copy(y[m:m + 128, n:n + 512], r)


def main():
    target = int(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if len(sys.argv) > 3:
        mod, fn = sys.argv[3].split(":")
        kernel = getattr(importlib.import_module(mod), fn)
        body = lambda k: kernel(k, target)  # noqa: E731
    else:
        tiles = 4096 // 128 * 4096 // 512  # output tiles (both cores)
        kt = max(1, -(-(target // tiles - 2) // 3))
        body = lambda k: tiled_matmul(k, kt)  # noqa: E731
    limits = _core.load_hw_config("trn3", {}).limits()
    best, best_cpu, n = None, None, 0
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        b = _core.build_program(body, limits=limits, num_programs=2)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        n = b.program.instruction_count()
        best = dt if best is None else min(best, dt)
        best_cpu = dc if best_cpu is None else min(best_cpu, dc)
    # Wall time is the speed a user sees; CPU time (the process's) is the figure to trust on a busy machine.
    print("python tracing: %d instructions (main job: %d), best of %d: %.3f s wall, %.3f s CPU: "
          "%.0f instructions/s wall, %.0f per CPU second (target >= 100000)"
          % (n, target, reps, best, best_cpu, n / best, n / best_cpu))


if __name__ == "__main__":
    main()
