"""nisa.dma_transpose of a 3-D or 4-D src (tester23v F2): NKI's permutations (nki.isa.dma_transpose, 2.21-2.33:
[2, 1, 0] for a 3-D src, [3, 1, 2, 0] for a 4-D one, the only axes= it takes besides (1, 0)) run as the builder's
one outer-axes DmaTranspose instruction, in both calling styles; they were a RuleError demanding a 2-D dst."""

import os

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tn
import nki
import nki.isa as nisa
import nki.language as nl

HERE = os.path.abspath(__file__)
THIS = os.path.basename(HERE)
RNG = np.random.default_rng(231)
X = RNG.standard_normal((128, 128)).astype(np.float32)


def at(marker):
    return "%s:%d: " % (THIS, line_of(HERE, marker))


@nki.jit
def current_3d(x, axes=None):
    # src [4, 16, 8] from HBM -> dst [8, 16, 4] in SBUF (the tester's dt3.py shapes)
    o = nl.ndarray((8, 16, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, 16, 4), dtype=x.dtype, buffer=nl.sbuf)
    if axes is None:
        nisa.dma_transpose(dst=t, src=x.reshape((4, 16, 8)))
    else:
        nisa.dma_transpose(dst=t, src=x.reshape((4, 16, 8)), axes=axes)  # MARK-axes-3d
    nl.store(o, t)
    return o


@nki.jit
def earlier_3d(x):
    t = nisa.dma_transpose(x.reshape((4, 16, 8)))  # the result tile trnsim allocates: [8, 16, 4]
    o = nl.ndarray(t.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


@nki.jit
def earlier_3d_cast(x):
    t = nisa.dma_transpose(x.reshape((4, 16, 8)), dtype=nl.float32)  # the transpose, then a tensor_copy cast
    o = nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


@nki.jit
def current_4d_from_sbuf(x):
    # src [32, 4, 2, 16] in SBUF (32 partitions) -> dst [16, 4, 2, 32]
    s = nl.ndarray((32, 4, 2, 16), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x.reshape((32, 4, 2, 16)))
    t = nl.ndarray((16, 4, 2, 32), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=s, axes=(3, 1, 2, 0))
    o = nl.ndarray((16, 4, 2, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


@nki.jit
def earlier_4d(x):
    t = nisa.dma_transpose(x.reshape((2, 4, 4, 8)))
    o = nl.ndarray(t.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


@nki.jit
def middle_one(x):
    # src [4, 1, 128]: its permutation [128, 1, 4] is the 2-D swap; a 2-D dst [128, 4] is taken, as before
    t = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x.reshape((4, 1, 128)))
    o = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


def test_3d_is_numpys_transpose_2_1_0():
    for dtype in (np.float32, np.float16):  # 4- and 2-byte elements, both moved bit for bit
        x = X[:4].astype(dtype)
        want = x.reshape(4, 16, 8).transpose(2, 1, 0)
        for kernel, kw in ((current_3d, {}), (current_3d, {"axes": (2, 1, 0)}), (earlier_3d, {})):
            got = tn.simulate_kernel(kernel, x, **kw)
            assert got.shape == (8, 16, 4) and got.dtype == dtype, (kernel, got.shape, got.dtype)
            assert got.tobytes() == np.ascontiguousarray(want).tobytes(), (kernel, kw, dtype)
    x = X[:4].astype(np.float16)
    got = tn.simulate_kernel(earlier_3d_cast, x)
    assert got.tobytes() == np.ascontiguousarray(x.reshape(4, 16, 8).transpose(2, 1, 0), np.float32).tobytes()


def test_4d_is_numpys_transpose_3_1_2_0():
    x = X[:32].astype(np.float16)
    got = tn.simulate_kernel(current_4d_from_sbuf, x)
    assert got.tobytes() == np.ascontiguousarray(x.reshape(32, 4, 2, 16).transpose(3, 1, 2, 0)).tobytes()
    x = X[:2]
    got = tn.simulate_kernel(earlier_4d, x)
    assert got.shape == (8, 4, 4, 2)
    assert got.tobytes() == np.ascontiguousarray(x.reshape(2, 4, 4, 8).transpose(3, 1, 2, 0)).tobytes()
    got = tn.simulate_kernel(middle_one, X[:4])
    assert got.tobytes() == np.ascontiguousarray(X[:4].T).tobytes()


@nki.jit
def perm_3d(x):
    # src [128, 8, 16] -> dst [16, 8, 128]: 64 KiB of float32 into 16 partitions
    t = nl.ndarray((16, 8, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x.reshape((128, 8, 16)))
    o = nl.ndarray((16, 8, 128), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


@nki.jit
def swap_2d(x):
    # src [1024, 16] -> dst [16, 1024]: the same bytes into the same 16 partitions, the 2-D swap
    t = nl.ndarray((16, 1024), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x.reshape((1024, 16)))
    o = nl.ndarray((16, 1024), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


def test_one_instruction_timed_as_the_2d_swap():
    # The permutation is one DmaTranspose (its cost: bytes, dtype, the SBUF side's partitions, HBM or not:
    # docs/timing.md), so it takes what the 2-D swap of the same bytes into the same 16 partitions takes.
    a, b = tn.benchmark(perm_3d, X), tn.benchmark(swap_2d, X)
    ops = lambda r: sorted((o["opcode"], o["engine"], o["count"]) for o in r.stats["opcodes"])
    assert ops(a) == ops(b) == [("dma_copy", "ACT", 1), ("dma_transpose", "SP", 1)], (ops(a), ops(b))
    assert a.stats["total_time_ns"] == b.stats["total_time_ns"], (a.stats["total_time_ns"], b.stats["total_time_ns"])


@nki.jit
def bad_rank(x):
    t = nl.ndarray((8, 2, 2, 4, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x.reshape((4, 4, 2, 2, 8)))  # MARK-5d
    return t


@nki.jit
def bad_dst(x):
    t = nl.ndarray((8, 64), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x.reshape((4, 16, 8)))  # MARK-2d-dst
    o = nl.ndarray((8, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


@nki.jit
def load_3d(x):
    t = nl.load_transpose2d(x.reshape((4, 16, 8)))  # MARK-load-3d
    o = nl.ndarray(t.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, t)
    return o


def test_errors_name_the_call_and_the_rule():
    x = X[:4]
    e = raises(tn.NkiError, tn.simulate_kernel, current_3d, x, axes=(1, 0))
    assert str(e) == at("MARK-axes-3d") + (
        "dma_transpose: axes=(1, 0) for a 3-D src [4, 16, 8]: NKI's dma_transpose takes axes (2, 1, 0) for it "
        "(supported: (1, 0), (2, 1, 0), (3, 1, 2, 0))"), e
    e = raises(tn.NkiError, tn.simulate_kernel, current_3d, x, axes=(0, 2, 1))
    assert str(e) == at("MARK-axes-3d") + (
        "dma_transpose: axes=(0, 2, 1) for a 3-D src [4, 16, 8]: NKI's dma_transpose takes axes (2, 1, 0) for it "
        "(supported: (1, 0), (2, 1, 0), (3, 1, 2, 0))"), e
    e = raises(tn.NkiError, tn.simulate_kernel, bad_rank, x)
    assert str(e) == at("MARK-5d") + (
        "dma_transpose: src [4, 4, 2, 2, 8] has 5 dims: NKI's dma_transpose permutes a 2-, 3- or 4-D src ((1, 0), "
        "(2, 1, 0), (3, 1, 2, 0))"), e
    e = raises(tn.NkiError, tn.simulate_kernel, bad_dst, x)
    assert str(e) == at("MARK-2d-dst") + (
        "dma_transpose: dst [8, 64] must be src [4, 16, 8] permuted by axes (2, 1, 0): [8, 16, 4]"), e
    e = raises(tn.NkiUnsupported, tn.simulate_kernel, load_3d, x)
    assert str(e) == at("MARK-load-3d") + (
        "nl.load_transpose2d of a 3-D src [4, 16, 8] is not modelled by trnsim: its 2-D transpose is modelled for "
        "a 2-D src only (docs/nki.md lists the supported calls)"), e


if __name__ == "__main__":
    main(globals())
