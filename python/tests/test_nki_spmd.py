"""LNC2 SPMD: a kernel launched as kernel[2] runs once per physical core; nl.program_id(0) is the core and
nl.num_programs() the launch size; a larger grid runs its programs in turn on the two cores."""

import numpy as np

from runner import main

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

X = np.arange(512 * 64, dtype=np.float32).reshape(512, 64) / 64


@nki.jit
def mark_rows(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid, n = nl.program_id(0), nl.num_programs()
    per = x.shape[0] // n
    for b in nl.affine_range(per // 128):
        r0 = pid * per + b * 128
        t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0:r0 + 128, :])
        u = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.add, operand0=1000.0 * (pid + 1))
        nisa.dma_copy(dst=out[r0:r0 + 128, :], src=u)
    return out


def expected(n):
    per = 512 // n
    add = np.repeat(1000.0 * (np.arange(n) + 1), per)[:, None]
    return (X + add).astype(np.float32)


def test_two_cores_each_run_their_half():
    r = tnki.benchmark(mark_rows[2], X)
    assert np.array_equal(r.outputs[0], expected(2))
    one = tnki.benchmark(mark_rows, X)
    assert np.array_equal(one.outputs[0], expected(1))
    # two cores share the work: the LNC2 run is faster than one core doing all of it
    assert r.latency_ns < one.latency_ns, (r.latency_ns, one.latency_ns)


def test_grid_of_four_on_two_cores():
    out = tnki.simulate_kernel(mark_rows[4], X)
    assert np.array_equal(out, expected(4))


main(globals())
