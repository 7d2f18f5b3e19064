"""nl.softmax, nl.rms_norm, nl.var, nl.logical_not and nisa.select_reduce(reduce_res=) (NkiUnsupported before;
issue 23 closing11): each lowered to existing instructions, byte-exact against NumPy doing the same FP32 steps
(the ALU's expf and 1 / sqrtf from the host libm, sums folded left to right: sim/isa/alu.h)."""

import ctypes
import ctypes.util
import os

import numpy as np

from runner import line_of as _line_of, main, raises

import trnsim.nki as tnki
import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
RNG = np.random.default_rng(11)
X = RNG.normal(0, 3, (128, 96)).astype(np.float32)
W = RNG.normal(1, 0.5, (128, 96)).astype(np.float32)
_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
_LIBM.expf.restype, _LIBM.expf.argtypes = ctypes.c_float, [ctypes.c_float]


def expf(a):
    return np.array([_LIBM.expf(v) for v in a.ravel()], dtype=np.float32).reshape(a.shape)


def fold_add(a):
    """Row sums in FP32, left to right (tensor_reduce's order), as [P, 1]."""
    return np.add.accumulate(a, axis=1, dtype=np.float32)[:, -1:]


@nki.jit
def softmax_k(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.softmax(nl.load(x), axis=1))
    return y


@nki.jit
def rms_norm_k(x, w):
    y = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(y, nl.rms_norm(nl.load(x), nl.load(w), axis=1, n=x.shape[1], dtype=nl.bfloat16))
    return y


@nki.jit
def logical_not_k(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.logical_not(nl.load(x)))
    return y


@nki.jit
def var_k(x):
    y = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    v = nl.var(nl.load(x), axis=1)
    assert tuple(v.shape) == (x.shape[0],), v.shape  # the axis removed, as NKI's page says
    nl.store(y, v.reshape((x.shape[0], 1)))
    return y


@nki.jit
def select_max(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    mx = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    tx, ty = nl.load(x), nl.load(y)
    pred = nl.ndarray((128, 64), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=pred, data1=tx, data2=ty, op=nl.greater)
    sel = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=sel, predicate=pred, on_true=tx, on_false=-1.0, reduce_res=red)
    nl.store(out, sel)
    nl.store(mx, red)
    return out, mx


@nki.jit
def select_sum(x, y):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    tx = nl.load(x)
    pred = nl.ndarray((128, 64), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=pred, data1=tx, data2=nl.load(y), op=nl.greater)
    sel = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    red = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.select_reduce(dst=sel, predicate=pred, on_true=tx, on_false=0.0, reduce_res=red, reduce_op=nl.add)  # MARK-sr
    nl.store(out, sel)
    return out


@nki.jit
def softmax_partition_axis(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.softmax(nl.load(x), axis=0))  # MARK-softmax-0
    return y


X3 = X.reshape(128, 6, 16)


@nki.jit
def composites_3d(x, w):
    # tester23l #6: on a 3-D tile these were refused ("reshape: [128, 6, 1] ... cannot become [128, 1]";
    # "operands [128, 6, 16] and [128, 1] differ in rank").
    sm2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    sm12 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    v2 = nl.ndarray(x.shape[:2], dtype=x.dtype, buffer=nl.shared_hbm)
    v12 = nl.ndarray(x.shape[:1], dtype=x.dtype, buffer=nl.shared_hbm)
    rms = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(sm2, nl.softmax(t, axis=2))
    nl.store(sm12, nl.softmax(t, axis=(1, 2)))
    nl.store(v2, nl.var(t, axis=2))
    nl.store(v12, nl.var(t, axis=(1, 2)))
    nl.store(rms, nl.rms_norm(t, nl.load(w), axis=2, n=x.shape[2]))
    return sm2, sm12, v2, v12, rms


@nki.jit
def rms_norm_row_weight_3d(x, w):
    # w [1, 1, F]: broadcast to the partitions (was NkiUnsupported "a partition broadcast of a 3-D tile").
    rms = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(rms, nl.rms_norm(nl.load(x), nl.load(w), axis=2, n=x.shape[2]))
    return rms


def test_softmax_var_rms_norm_on_a_3d_tile():
    w = W.reshape(X3.shape)

    def fold(a, axes):  # FP32 sums left to right over the trailing `axes` (kept as size-1 dims)
        flat = a.reshape(a.shape[:a.ndim - len(axes)] + (-1,))
        s = np.add.accumulate(flat, axis=-1, dtype=np.float32)[..., -1]
        return s.reshape(s.shape + (1,) * len(axes))

    want = []
    for axes in ((2,), (1, 2)):
        e = expf(X3 - X3.max(axis=axes, keepdims=True))
        want.append(e * (np.float32(1) / fold(e, axes)))
    for axes in ((2,), (1, 2)):
        n = np.float32(np.prod([X3.shape[a] for a in axes]))
        d = X3 - fold(X3, axes) / n
        want.append((fold(d * d, axes) / n).reshape(X3.shape[:3 - len(axes)]))
    ms = fold(X3 * X3, (2,)) / np.float32(16) + np.float32(1e-06)
    want.append((X3 * (np.float32(1) / np.sqrt(ms))) * w)
    got = tnki.simulate_kernel(composites_3d, X3, w)
    for name, g, wnt in zip(("softmax axis=2", "softmax axis=(1, 2)", "var axis=2", "var axis=(1, 2)",
                             "rms_norm axis=2"), got, want):
        assert g.shape == wnt.shape and g.tobytes() == wnt.tobytes(), (name, np.abs(g - wnt).max())
    assert np.allclose(got[2], X3.var(axis=2), rtol=1e-5) and np.allclose(got[3], X3.var(axis=(1, 2)), rtol=1e-5)
    row = W[:1, :16].reshape(1, 1, 16)
    got = tnki.simulate_kernel(rms_norm_row_weight_3d, X3, row)
    assert got.tobytes() == ((X3 * (np.float32(1) / np.sqrt(ms))) * row).tobytes()


def bf16(a):
    b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


def test_softmax():
    e = expf(X - X.max(axis=1, keepdims=True))
    want = e * (np.float32(1) / fold_add(e))
    got = tnki.simulate_kernel(softmax_k, X)
    assert got.tobytes() == want.tobytes(), np.argwhere(got != want)[:4]
    assert np.allclose(got.sum(axis=1), 1, atol=1e-5)


def test_rms_norm():
    ms = fold_add(X * X) / np.float32(X.shape[1]) + np.float32(1e-06)
    want = bf16((X * (np.float32(1) / np.sqrt(ms))) * W)
    got = tnki.simulate_kernel(rms_norm_k, X, W)
    assert got.tobytes() == want.tobytes(), np.argwhere(got != want)[:4]


def test_var():
    n = np.float32(X.shape[1])
    d = X - fold_add(X) / n
    want = fold_add(d * d) / n
    got = tnki.simulate_kernel(var_k, X)
    assert got.tobytes() == want.tobytes(), np.argwhere(got != want)[:4]
    assert np.allclose(got[:, 0], X.var(axis=1), rtol=1e-5)


def test_select_reduce_with_reduce_res():
    # reduce_res was NkiUnsupported; NKI's NumPy form: np.max(np.where(pred, on_true, on_false), axis=1).
    y = RNG.normal(0, 3, (128, 64)).astype(np.float32)
    x = X[:, :64].copy()
    sel, mx = tnki.simulate_kernel(select_max, x, y)
    want = np.where(x > y, x, np.float32(-1.0)).astype(np.float32)
    assert sel.tobytes() == want.tobytes()
    assert mx.tobytes() == want.max(axis=1, keepdims=True).tobytes()
    e = raises(tnki.NkiError, tnki.simulate_kernel, select_sum, x, y)
    assert str(e).startswith(f"{THIS}:{_line_of(__file__, 'MARK-sr')}: nki.isa.select_reduce: reduce_op must be "
                             "nl.maximum (NKI: reduce_op only supports max)"), e


def test_logical_not():
    x = np.where(RNG.random((128, 64)) < 0.5, 0, RNG.normal(0, 1, (128, 64))).astype(np.float32)
    got = tnki.simulate_kernel(logical_not_k, x)
    assert got.tobytes() == np.logical_not(x).astype(np.float32).tobytes()


def test_softmax_over_the_partition_dim_is_refused():
    e = raises(tnki.NkiError, tnki.simulate_kernel, softmax_partition_axis, X)
    assert str(e).startswith(f"{THIS}:{_line_of(__file__, 'MARK-softmax-0')}: nl.softmax: "), e
    assert "axis [0] must name free dims" in str(e), e


if __name__ == "__main__":
    main(globals())
