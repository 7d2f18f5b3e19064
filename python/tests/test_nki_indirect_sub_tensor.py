"""A tile of row indices after integer indices: `x[b, idx_tile, i_f]` is the gather `x[b][idx_tile, i_f]`
(docs/nki.md "Indirect DMA").

tester23ag F5: nki-samples' resize_nearest_fixed_dma_kernel gathers `data_view_flattened[b, load_indices,
i_f_channel]` (b an affine_range index); trnsim said "a tile of indices on dim 1 is not modelled" although the
integers select the 2-D sub-tensor whose rows the tile picks, a gather it runs when written x[b][...]."""

import warnings

import numpy as np

from runner import main, raises_at, same_f32, warned

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

X = np.arange(2 * 3 * 300 * 8, dtype=np.float32).reshape(2, 3, 300, 8)
IDX = np.random.default_rng(5).integers(0, 300, (128, 1)).astype(np.int32)


@nki.jit
def gather_sub(x, idx, form):
    o = nl.ndarray((2, 3, 128, 8), nl.float32, buffer=nl.shared_hbm)
    it = nl.load(idx)
    i_f = nl.arange(8)[None, :]
    for b in nl.affine_range(2):
        for c in nl.affine_range(3):
            if form == "load":
                t = nl.load(x[b, c, it, i_f])
            elif form == "dma_copy":
                t = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
                nisa.dma_copy(dst=t, src=x[b, c, it, 2:6], dge_mode=nisa.dge_mode.swdge)
            else:  # a scatter: the rows of o[b, c] the tile names get x[b, c, 0:128]
                nl.store(o[b, c, it, i_f], value=nl.load(x[b, c, 0:128, :]))
                continue
            nl.store(o[b, c, :, 0:t.shape[1]], value=t)
    return o


def test_integers_before_the_index_tile_select_the_sub_tensor_it_gathers_from():
    want = X[:, :, IDX[:, 0], :]
    assert tnki.simulate_kernel(gather_sub, X, IDX, "load").tobytes() == want.tobytes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (columns 4-7 of o: no instruction writes them)
        got = tnki.simulate_kernel(gather_sub, X, IDX, "dma_copy")
    assert got[:, :, :, 0:4].tobytes() == want[:, :, :, 2:6].tobytes()


def test_integers_before_the_index_tile_select_the_sub_tensor_it_scatters_into():
    perm = np.random.default_rng(6).permutation(128).reshape(-1, 1).astype(np.int32)
    got = tnki.simulate_kernel(gather_sub, X, perm, "store")
    want = np.empty((2, 3, 128, 8), np.float32)
    want[:, :, perm[:, 0], :] = X[:, :, 0:128, :]
    assert got.tobytes() == want.tobytes()


@nki.jit
def masked_gather(x, idx, n, cols):
    # The tail tile of a gather (resize_nearest_fixed_dma_kernel's): rows p < n of the index tile are read, the
    # rest (here past the tensor) never; mask=(i_f < cols) cuts the columns too.
    o = nl.ndarray((2, 128, 8), nl.float32, buffer=nl.shared_hbm)
    it = nl.load(idx)
    i_p = nl.arange(128)[:, None]
    i_f = nl.arange(8)[None, :]
    for b in nl.affine_range(2):
        t = nl.load(x[b, 1, it, i_f], mask=(i_p + 100 < 100 + n) & (i_f < cols))
        assert t.shape == (128, 8)
        nl.store(o[b, i_p, i_f], value=t, mask=(i_p < n) & (i_f < cols))
    return o


def test_a_masked_gather_reads_the_masked_in_rows_of_the_index_tile():
    idx = IDX.copy()
    idx[72:] = 1000  # past the tensor's 300 rows: masked out, never read
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the rest of o: no instruction writes it)
        got = tnki.simulate_kernel(masked_gather, X, idx, 72, 5)
    assert got[:, :72, :5].tobytes() == X[:, 1, IDX[:72, 0], :5].tobytes()
    assert np.isnan(got[:, 72:]).all() and np.isnan(got[:, :, 5:]).all()


@nki.jit
def after_a_slice(x, idx):
    it = nl.load(idx)
    i_f = nl.arange(8)[None, :]
    return nl.load(x[0:1, 1, it, i_f])  # MARK-slice


def test_a_slice_before_the_index_tile_is_refused_naming_the_spelling_that_works():
    raises_at(tnki.NkiUnsupported, "a tile of indices on dim 2 after a non-integer index is not modelled by trnsim: "
              "run-time indices pick rows (dim 0) of an HBM tensor, or of the sub-tensor integers before them "
              "select (x[b, idx_tile, i_f] is x[b][idx_tile, i_f])", __file__, "MARK-slice", tnki.simulate_kernel,
              after_a_slice, X, IDX)


@nki.jit
def padded_gather(x, idx, how):
    # tester23ai F1: a pad reaching past the rows (or columns) a masked gather's tile holds makes the tile
    # whole, as the same pad of a masked plain load does; the reduction then sees the pad.
    o = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    it = nl.load(idx)
    i_p, i_f = nl.mgrid[0:128, 0:8]
    if how == "rows":
        t = nl.load(x[1, 2, it, i_f], mask=(i_p < 100))
        nisa.memset(dst=t[96:128, :], value=1.0)
    else:
        t = nl.load(x[1, 2, it, i_f], mask=(i_f < 5))
        t[:, 5:8] = 1.0e6
    nl.store(o, nl.max(t, axis=1, keepdims=True))
    return o


def test_a_pad_past_a_masked_gathers_part_makes_its_tile_whole():
    idx = IDX.copy()
    idx[100:] = 1000  # past the tensor's 300 rows: masked out, never read
    g = X[1, 2, np.clip(idx[:, 0], 0, 299)].copy()
    g[96:] = 1.0
    got, msgs = warned(tnki.simulate_kernel, padded_gather, X, idx, "rows")
    same_f32(got, g.max(axis=1, keepdims=True))
    assert msgs == [], msgs
    g = X[1, 2, IDX[:, 0]].copy()
    g[:, 5:] = 1.0e6
    got, msgs = warned(tnki.simulate_kernel, padded_gather, X, IDX, "cols")
    same_f32(got, g.max(axis=1, keepdims=True))
    assert msgs == [], msgs


if __name__ == "__main__":
    main(globals())
