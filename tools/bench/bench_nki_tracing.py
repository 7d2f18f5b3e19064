"""Tracing speed of Python kernels: instructions per host second while a Python kernel builds its program
(the kernel function runs once per core and every builder call emits an instruction, with its dependency
tracking, rule checks and Python source line), on a case of the main job's size.

Usage (bench_nki_tracing.sh sets PYTHONPATH): bench_nki_tracing.py INSTRUCTIONS [REPEATS]
INSTRUCTIONS: the main job's instruction count (the shell script passes `trnsim validate`'s). Two cases, each
a tiled BF16 matmul with K sized so that it emits at least that many instructions (per [128 x 512] output
tile: two loads and a matmul per K step of 128, then the PSUM copy and the store):
  - "nki.language": the kernel written with nki.language (nl.load / nl.matmul / nl.copy / nl.store), run
    the way `trnsim run` runs a Python kernel (trnsim._runner on one core); skipped, with a note, when this
    tree has no nki.language;
  - "_core": the same loops calling the builder bindings directly (trnsim._core.nki), both cores of the
    LNC2 pair: the bindings' own cost;
  - "loads first": every load of the K loop first (into slices of two SBUF tensors), then every matmul
    accumulating into one PSUM tile (about INSTRUCTIONS / 3 K steps): a run of loads with nothing to wait for,
    which the default schedule once ordered in quadratic time (13 s at the main job's size).
"""

import sys
import time

from trnsim import _core
from trnsim._core import nki as isa

BF16, F32 = _core.DType.BF16, _core.DType.F32
M, N = 4096, 4096  # the main job's M and N
TARGET = 100_000  # instructions per CPU second (issue 23)


def core_matmul(k, kt):
    """Y[M, N] = XT[K, M]^T @ W[K, N] with the builder calls, each core half of N."""
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


def nki_matmul(xT, w):
    """The same matmul in nki.language (one core; traced as an nki.jit kernel)."""
    import nki.language as nl

    K, Mx = xT.shape
    _, Nx = w.shape
    y = nl.ndarray((Mx, Nx), dtype=nl.bfloat16, buffer=nl.shared_hbm, name="y")
    for m in nl.affine_range(Mx // 128):
        for n in nl.affine_range(Nx // 512):
            acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // 128):
                a = nl.load(xT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                b = nl.load(w[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(y[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=nl.copy(acc, dtype=nl.bfloat16))
    return y


def nki_loads_first(xT, w):
    """Every K step's loads, then every matmul into one PSUM tile (one core)."""
    import nki.language as nl

    K, Mx = xT.shape
    _, Nx = w.shape
    kt = K // 128
    y = nl.ndarray((Mx, Nx), dtype=nl.float32, buffer=nl.shared_hbm, name="y")
    xs = nl.ndarray((128, kt, Mx), dtype=xT.dtype, buffer=nl.sbuf)
    ws = nl.ndarray((128, kt, Nx), dtype=w.dtype, buffer=nl.sbuf)
    for k in nl.affine_range(kt):
        xs[:, k, :] = nl.load(xT[k * 128:(k + 1) * 128, :])
        ws[:, k, :] = nl.load(w[k * 128:(k + 1) * 128, :])
    acc = nl.zeros((Mx, Nx), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(kt):
        acc += nl.matmul(xs[:, k, :], ws[:, k, :], transpose_x=True)
    nl.store(y, value=nl.copy(acc))
    return y


def timed(name, body, programs, target, reps, limits):
    best, best_cpu, n = None, None, 0
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        b = _core.build_program(body, limits=limits, num_programs=programs)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        n = b.program.instruction_count()
        best = dt if best is None else min(best, dt)
        best_cpu = dc if best_cpu is None else min(best_cpu, dc)
    # Wall time is the speed a user sees; CPU time (the process's) is the figure to trust on a busy machine.
    rate = n / best_cpu
    print("python tracing (%s): %d instructions (main job: %d), best of %d: %.3f s wall, %.3f s CPU: "
          "%.0f instructions/s wall, %.0f per CPU second (target >= %d: %s)"
          % (name, n, target, reps, best, best_cpu, n / best, rate, TARGET,
             "met" if rate >= TARGET else "NOT met, %.2fx short" % (TARGET / rate)))


def main():
    target = int(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    limits = _core.load_hw_config("trn3", {}).limits()
    tiles = (M // 128) * (N // 512)  # output tiles
    kt = max(1, -(-(target // tiles - 2) // 3))
    try:
        import trnsim.nki  # noqa: F401  (the nki module names)
        import nki.language  # noqa: F401
    except ImportError as e:
        print("python tracing (nki.language): skipped: %s" % e)
    else:
        from trnsim import _runner

        import nki

        func, _ = _runner.resolve_kernel(nki.jit(nki_matmul))
        run = _runner.CoreRunner(func, [("xT", BF16, [128 * kt, M]), ("w", BF16, [128 * kt, N])], {})
        timed("nki.language", run, 1, target, reps, limits)
        # (4 columns each: the K steps' tiles fit in SBUF side by side)
        func, _ = _runner.resolve_kernel(nki.jit(nki_loads_first))
        kl = 128 * (target // 3)
        run = _runner.CoreRunner(func, [("xT", BF16, [kl, 4]), ("w", BF16, [kl, 4])], {})
        timed("loads first", run, 1, target, reps, limits)
    timed("_core", lambda k: core_matmul(k, kt), 2, target, reps, limits)


if __name__ == "__main__":
    main()
