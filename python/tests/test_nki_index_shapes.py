"""Shapes of integer-indexed tiles and of mgrid iotas (docs/nki.md "nl.NkiTensor methods" and "Masks").

tester23aa F2: a slice of partitions with an integer on the free dim of an on-chip tile (`t[0:64, 0]`,
flash attention's `l_buffer[:, i]` of a (par_dim(128), n) tile, then `l_buffer[:, 0]` in its helper) was a
1-D [64] view, so the chained `[:, 0]` was "too many indices (2) for a tensor of 1 dims". NKI's
err_1d_arange_not_supported gives `tmp[0:64, 0]` as the slicing form of `tmp[nl.arange(64)[:, None], 0]`, a
[64, 1] tile: a tile has a partition dim and a free dim.
tester23aa F2 addendum: `nl.load(sinks[b, h])`, one element of a [bs, nheads] HBM tensor (nki-samples'
flash_attn_bwd), was "an sbuf tensor needs at least a partition dim": it loads as a [1, 1] tile, as a 1-D view
loads as [N, 1].
tester23aa F8: `nisa.iota(3 * g.y + g.z)` of `g = nl.mgrid[0:128, 0:4, 0:3, 0:3]` was a [1, 1, 3, 3] tile
(nl.mgrid is NumPy's dense mgrid, so the expression has the grid's shape), and a uint32 one could then not
meet a full tile (nki-samples' select_and_scatter).
tester23ad F5: a variable whose coefficient is 0 (`i_p + 0 * i_f`) lost its axis from the expression's shape."""

import numpy as np

from runner import main

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl
from nki.language import par_dim

SHAPES = {}


def _add_column(col, x):
    # flash attention's helper: the [P, 1] column it is given, read and written through `[:, 0]`
    col[:, 0] = nl.add(col[:, 0], x)


@nki.jit
def columns(x):
    o = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
    o2 = nl.ndarray((64, 1), nl.float32, buffer=nl.shared_hbm)
    buf = nl.full((par_dim(128), 4), fill_value=2.0, dtype=nl.float32)
    xt = nl.load(x)
    SHAPES["buf[:, 1]"] = tuple(buf[:, 1].shape)
    SHAPES["buf[0:64, 3]"] = tuple(buf[0:64, 3].shape)
    SHAPES["buf[nl.arange(64)[:, None], 3]"] = tuple(buf[nl.arange(64)[:, None], 3].shape)
    SHAPES["buf[:, 1][:, 0]"] = tuple(buf[:, 1][:, 0].shape)
    SHAPES["buf[3, :]"] = tuple(buf[3, :].shape)
    for i in nl.affine_range(4):
        _add_column(buf[:, i], xt[:, i])
    nl.store(o, buf)
    nl.store(o2, nl.multiply(buf[0:64, 3], xt[0:64, 0]))
    return o, o2


def test_an_integer_on_the_free_dim_of_a_tile_keeps_a_size_1_dim():
    x = np.random.default_rng(1).integers(-50, 50, (128, 4)).astype(np.float32)
    o, o2 = tnki.simulate_kernel(columns, x)
    assert SHAPES == {"buf[:, 1]": (128, 1), "buf[0:64, 3]": (64, 1), "buf[nl.arange(64)[:, None], 3]": (64, 1),
                      "buf[:, 1][:, 0]": (128, 1), "buf[3, :]": (1, 4)}, SHAPES
    # Small integers: every sum and product is exact in float32.
    assert o.tobytes() == (x + np.float32(2)).tobytes()
    assert o2.tobytes() == ((x[:64, 3:4] + np.float32(2)) * x[:64, 0:1]).tobytes()


@nki.jit
def one_element(s):
    o = nl.ndarray((2, 128, 4), nl.float32, buffer=nl.shared_hbm)
    for b in nl.affine_range(2):
        for h in nl.affine_range(4):
            v = nl.load(s[b, h])
            SHAPES["load(s[b, h])"] = tuple(v.shape)
            nl.store(o[b, :, h], nl.add(nl.zeros((par_dim(128), 1), dtype=nl.float32), v))
    return o


def test_loading_one_element_by_integers_is_a_1x1_tile():
    s = np.arange(8, dtype=np.float32).reshape(2, 4) * np.float32(1.5)
    o = tnki.simulate_kernel(one_element, s)
    assert SHAPES["load(s[b, h])"] == (1, 1), SHAPES
    # each [1, 1] value broadcast over 128 partitions
    assert o.tobytes() == np.broadcast_to(s[:, None, :], (2, 128, 4)).tobytes()


@nki.jit
def grid_iota(x):
    o = nl.ndarray((128, 4, 3, 3), nl.uint32, buffer=nl.shared_hbm)
    window = nl.mgrid[0:128, 0:4, 0:3, 0:3]
    xt = nl.load(x)
    sel = nl.equal(xt, 1.0, dtype=nl.int8)
    lin = nisa.iota(3 * window.y + window.z, dtype=nl.uint32)
    SHAPES["iota(3 * y + z)"] = tuple(lin.shape)
    i_p, i_f = nl.mgrid[0:128, 0:8]
    SHAPES["iota(2 * i_f)"] = tuple(nisa.iota(2 * i_f, dtype=nl.int32).shape)
    SHAPES["iota(arange)"] = tuple(nisa.iota(nl.arange(8)[None, :], dtype=nl.int32).shape)
    nl.store(o, nl.where(sel, lin, 9, dtype=nl.uint32))
    return o


def test_iota_of_an_mgrid_expression_has_the_grid_shape():
    x = (np.random.default_rng(0).random((128, 4, 3, 3)) > 0.5).astype(np.float32)
    y = tnki.simulate_kernel(grid_iota, x)
    assert SHAPES["iota(3 * y + z)"] == (128, 4, 3, 3) and SHAPES["iota(2 * i_f)"] == (128, 8) and \
        SHAPES["iota(arange)"] == (1, 8), SHAPES
    g = np.mgrid[0:128, 0:4, 0:3, 0:3]
    ref = np.where(x == 1.0, 3 * g[2] + g[3], 9).astype(np.uint32)
    assert y.dtype == np.uint32 and y.tobytes() == ref.tobytes()


@nki.jit
def rows(x, y):
    o = nl.ndarray((6, 64), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    t3 = nl.load(y)
    i_f = nl.arange(64)[None, :]
    SHAPES["t[3, :]"] = tuple(t[3, :].shape)
    SHAPES["t[3]"] = tuple(t[3].shape)
    SHAPES["t[3, 0]"] = tuple(t[3, 0].shape)
    SHAPES["t[3, 8:16]"] = tuple(t[3, 8:16].shape)
    SHAPES["t[3, i_f]"] = tuple(t[3, i_f].shape)
    SHAPES["t3[5, :, :]"] = tuple(t3[5, :, :].shape)
    SHAPES["t3[5, 1, :]"] = tuple(t3[5, 1, :].shape)
    SHAPES["x[3, :]"] = tuple(x[3, :].shape)  # an HBM view keeps NumPy's rule
    nl.store(o[0], t[3, :])  # stores into a 1-D region and into a row region
    nl.store(o[1:2, :], t[5, :])
    nl.store(o[2], nl.add(t[32, :], t[64, :]))  # engine calls of one partition at the allowed starts
    r = nl.ndarray((1, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=r, data=t[96, :], op0=nl.multiply, operand0=3.0)
    nisa.dma_copy(dst=o[3], src=r)
    p = nl.ndarray((128, 64), nl.float32, buffer=nl.psum)
    nisa.tensor_copy(dst=p, src=t)
    nl.store(o[4], nl.copy(p[64, :]))  # a PSUM row
    u = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=u[7, :], src=x[9])  # a 1-D HBM row into a one-partition row
    nl.store(o[5], u[7, :])
    return o


def test_an_integer_partition_index_of_a_tile_keeps_one_partition():
    # tester23ac F1's rest: t[3, :] of an on-chip tile was a 1-D [64] view with no partition dim, which every
    # engine call refused; it is the [1, 64] tile of partition 3, as t[3, i_f] is.
    x = np.random.default_rng(2).integers(-50, 50, (128, 64)).astype(np.float32)
    y = np.arange(128 * 2 * 8, dtype=np.float32).reshape(128, 2, 8)
    SHAPES.clear()
    o = tnki.simulate_kernel(rows, x, y)
    assert SHAPES == {"t[3, :]": (1, 64), "t[3]": (1, 64), "t[3, 0]": (1, 1), "t[3, 8:16]": (1, 8),
                      "t[3, i_f]": (1, 64), "t3[5, :, :]": (1, 2, 8), "t3[5, 1, :]": (1, 8), "x[3, :]": (64,)}, SHAPES
    want = np.stack([x[3], x[5], x[32] + x[64], x[96] * np.float32(3), x[64], x[9]])
    assert o.tobytes() == want.tobytes()


@nki.jit
def zero_coefficient_iota():
    # i_p + 0 * i_f: i_f's coefficient is 0, but its axis stays in the expression's broadcast shape.
    o = nl.ndarray((128, 8), nl.int32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(8)[None, :]
    e = i_p + 0 * i_f
    SHAPES["i_p + 0 * i_f"] = tuple(e.shape)
    SHAPES["2 * i_f - i_f - i_f + i_p"] = tuple((2 * i_f - i_f - i_f + i_p).shape)
    nl.store(o, nisa.iota(e, dtype=nl.int32))
    return o


def test_a_zero_coefficient_keeps_its_axis():
    # tester23ad F5: `i_p + 0 * i_f` had shape (128, 1) (the term dropped with its axis), so the iota of it was
    # [128, 1] and its store into [128, 8] failed; NumPy's broadcast is (128, 8), as a cancelled term's.
    y = tnki.simulate_kernel(zero_coefficient_iota)
    assert SHAPES["i_p + 0 * i_f"] == (128, 8) and SHAPES["2 * i_f - i_f - i_f + i_p"] == (128, 8), SHAPES
    want = (np.arange(128)[:, None] + 0 * np.arange(8)[None, :]).astype(np.int32)
    assert y.dtype == np.int32 and y.tobytes() == want.tobytes()


if __name__ == "__main__":
    main(globals())
