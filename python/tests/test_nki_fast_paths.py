"""The tracer's short paths (python/trnsim/nki: nl.load's and nl.matmul's new tiles, HBM slices, the recorded
Op) make their objects without the class call, setting the fields themselves: each object they make must have
the same fields, with the same values, as the class's __init__ gives it, so a field added to Storage,
NkiTensor or Op later cannot be missed by them. Also: the kernel line of such a tile is the caller's, when the
call comes from the kernel function itself and from a helper it calls."""

import numpy as np

from runner import main

import trnsim.nki as tnki
from trnsim.nki import _emit, _trace
from trnsim.nki._tensor import NkiTensor, Storage

import nki
import nki.language as nl

SEEN = []


def _capture():
    """Keeps the trace of the next kernel built (its objects are released after the emission)."""
    orig = _emit.emit

    def emit(k, trace, mode, bufs_override=None):
        SEEN.append((trace, list(trace.ops), list(trace.storages)))
        return orig(k, trace, mode, bufs_override)

    _emit.emit = emit
    return orig


def _load_helper(t):
    return nl.load(t)


@nki.jit
def two_loads_and_matmuls(xT, w):
    y = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
    for k in nl.affine_range(3):
        a = nl.load(xT[k * 128:(k + 1) * 128, 0:128])
        b = nl.load(w[k * 128:(k + 1) * 128, :])
        acc += nl.matmul(a, b, transpose_x=True)
    c = _load_helper(w[0:128, :])
    nl.store(y, value=nl.add(nl.copy(acc), c))
    return y


def _fields(o):
    """{slot: value} of the slots set on o (unset slots are left out)."""
    out = {}
    for s in type(o).__slots__:
        if s == "__weakref__":
            continue
        try:
            out[s] = getattr(o, s)
        except AttributeError:
            pass
    return out


def _trace_it():
    SEEN.clear()
    orig = _capture()
    try:
        xT = np.ones((384, 128), dtype=np.float32)
        w = np.ones((384, 512), dtype=np.float32)
        out = tnki.simulate_kernel(two_loads_and_matmuls, xT, w)
    finally:
        _emit.emit = orig
    assert out.shape == (128, 512) and float(out[0, 0]) == 385.0, out[0, :4]
    (trace, ops, storages), = SEEN
    return trace, ops, storages


def test_ops_have_the_fields_of_op_init():
    trace, ops, _ = _trace_it()
    assert [o.name for o in ops].count("nc_matmul") == 3
    for o in ops:
        ref = _trace.Op(o.name, o.args, o.reads, o.writes, o.attrs, o.loc, o.index)
        ref.load = o.load
        assert _fields(o) == _fields(ref), (_fields(o), _fields(ref))
    assert [o.index for o in ops] == list(range(len(ops)))
    assert sum(o.load for o in ops) == 7  # the seven nl.load DMAs


def test_new_tiles_have_the_fields_of_storage_init_and_whole():
    trace, ops, storages = _trace_it()
    loads = [o.args["dst"] for o in ops if o.name == "dma_copy" and o.load]
    assert len(loads) == 7
    for v in loads:
        st = v.st
        assert storages[st.uid] is st
        ref_st = Storage(_FakeTrace(st), st.name, st.space, st.dtype, st.shape, 0, loc=st.loc)
        ref_st.site = st.site
        got, want = _fields(st), _fields(ref_st)
        for k in ("trace", "uid", "first", "last", "phys"):  # set (KeyError otherwise), the trace's own values
            got.pop(k), want.pop(k)
        assert got == want, (got, want)
        ref = NkiTensor.whole(st)
        ref.rect()
        assert _fields(v) == _fields(ref) | {"_bv": v._bv}, (_fields(v), _fields(ref))
    # the tile's kernel line: the nl.load line in the kernel, the helper's line for the helper's load
    lines = sorted({v.st.loc.line for v in loads})
    assert len(lines) == 3, lines


def test_hbm_slices_have_the_fields_of_nkitensor_init():
    trace, ops, _ = _trace_it()
    srcs = [o.args["src"] for o in ops if o.name == "dma_copy" and o.load]
    for v in srcs:
        ref = NkiTensor(v.st, v.dtype, v.boff, v.dims, v.pd, v.p0)
        ref.rect()  # computed by _rect_of
        assert _fields(v) == _fields(ref) | {"_bv": v._bv}, (_fields(v), _fields(ref))


@nki.jit
def same_tiles_twice(x):
    y = nl.ndarray((256, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(2):
        for r in nl.affine_range(2):  # each tile loaded twice: the same slicing of x both times
            t = nl.load(x[r * 128:(r + 1) * 128, 0:64])
            nl.store(y[r * 128:(r + 1) * 128, :], value=nl.add(t, 1.0))
    return y


def test_the_same_hbm_slicing_gives_the_same_view():
    # A tiled kernel slices the same tiles of its inputs again and again (the main job's matmul: each
    # [128, 128] tile of xT once per output column block): the view made for a slicing is given again for the
    # same slicing of the same view (views are never changed once made), so each costs one dict lookup
    # (main: a new view each time). Different bounds give different views; the values are unchanged.
    SEEN.clear()
    orig = _capture()
    try:
        x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
        out = tnki.simulate_kernel(same_tiles_twice, x)
    finally:
        _emit.emit = orig
    assert np.array_equal(out, x + 1)
    (trace, ops, _), = SEEN
    srcs = [o.args["src"] for o in ops if o.name == "dma_copy" and o.load]
    assert len(srcs) == 4 and srcs[0] is srcs[2] and srcs[1] is srcs[3] and srcs[0] is not srcs[1], srcs
    assert srcs[0].boff == 0 and srcs[1].boff == 128 * 64 * 4


class _FakeTrace:
    """What Storage.__init__ reads of a trace."""

    def __init__(self, st):
        self.storages = []
        self.outer = st.outer
        self.scope = st.scope


main(globals())
