"""A masked call's result used again (tester23l, issue 23): its .ap(...), its part kept in a variable, a 1-D
result as a per-partition operand under a mask; each test fails on the build before its fix, with exact bytes
against NumPy."""

import os

import numpy as np

from runner import line_of, main, raises, same_f32, warned

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
THREE = np.float32(3)


def line(marker):
    return line_of(__file__, marker)


# ---- .ap(...) of a masked result addresses the call's whole index space, as its indices do


@nki.jit
def ap_of_a_masked_result(x, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    if case == "rows":  # rows 64-127 held: the pattern's rows 80-111
        e = nl.multiply(t, 3.0, mask=(i_p >= 64))
        out = nl.ndarray((32, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, e.ap([[64, 32], [1, 64]], offset=80 * 64))
        return out
    e = nl.multiply(t, 3.0, mask=(i_f >= 16) & (i_f < 48))  # MARK-ap-mask
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    if case == "cols":
        nl.store(out, e.ap([[64, 128], [1, 8]], offset=20))
    elif case == "strided":
        nl.store(out, e.ap([[64, 128], [2, 8]], offset=30))
    else:
        nl.store(out, e.ap([[64, 128], [1, 8]], offset=44))  # MARK-ap-past
    return out


@nki.jit
def ap_of_a_masked_load(x):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_p >= 32))  # a whole-shape tile, rows 32-127 loaded
    out = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, t.ap([[64, 64], [1, 64]], offset=40 * 64))
    return out


def test_ap_of_a_masked_result_addresses_the_whole_index_space():
    # It addressed the held part: offset 20 of a result holding columns 16-47 read columns 36-43.
    same_f32(tnki.simulate_kernel(ap_of_a_masked_result, X, "cols"), X[:, 20:28] * THREE)
    same_f32(tnki.simulate_kernel(ap_of_a_masked_result, X, "strided"), X[:, 30:46:2] * THREE)
    same_f32(tnki.simulate_kernel(ap_of_a_masked_result, X, "rows"), X[80:112] * THREE)
    same_f32(tnki.simulate_kernel(ap_of_a_masked_load, X), X[40:104])
    # Columns 44-51 reach past the held part (columns 16-47): as in NKI, whose masked call's tile has the whole
    # index space's shape, they read the tile there, columns 48-51 where no instruction wrote (NaN here) with
    # the simulator's warning at the read (tester23ac F3: it was the looser-mask error).
    got, said = warned(tnki.simulate_kernel, ap_of_a_masked_result, X, "past")
    same_f32(got[:, :4], X[:, 44:48] * THREE)
    assert np.isnan(got[:, 4:]).all(), got[0]
    assert said == [f"{THIS}:{line('MARK-ap-past')}: nl.store: its dma_copy (made by trnsim's lowering of nl.store) "
                    f"reads sbuf 'e' [128, 8] float32 allocated at {THIS}:{line('MARK-ap-mask')} where no instruction "
                    "wrote before (partition 0, byte 16 of the read is the first such): its values are undefined (a "
                    "tile starts uninitialised, as numpy.empty's contents; trnsim's memory starts as NaN)"], said


# ---- a masked call's result has the whole index space's tile: a read past its held part is legal (undefined)


R, C, W = 300, 600, 256


@nki.jit
def row_tiled_cumsum(x):
    # y = cumsum(x, axis=1) for x [300, 600]: row tiles of 128 (the last holds 44 rows), column tiles of 256 (the
    # last 88 columns), each scanned under the mask of both tails and carried into the next column tile by its
    # last column, read whole (all 128 rows) whatever the row tile holds.
    y = nl.ndarray((R, C), nl.float32, buffer=nl.shared_hbm)
    pi, fi = nl.mgrid[0:128, 0:W]
    ones = nl.ones((128, W), dtype=nl.float32)
    n = (C + W - 1) // W
    for i in nl.affine_range((R + 127) // 128):
        init = nl.zeros((128, 1), dtype=nl.float32)
        for j in nl.sequential_range(n):
            mask = (i * 128 + pi < R) & (j * W + fi < C)
            data = nl.load(x[i * 128 + pi, j * W + fi], mask=mask)
            result = nisa.tensor_tensor_scan(data0=ones, data1=data, initial=init, op0=np.multiply, op1=np.add,
                                             mask=mask)
            nl.store(y[i * 128 + pi, j * W + fi], result, mask=mask)
            init[:, :] = nl.copy(result[:, W - 1], mask=j + 1 < n)  # MARK-carry-rows
    return y


SEEN = {}


@nki.jit
def masked_shapes(x):
    # The shapes the kernel sees of masked calls' results: the whole index space's, as NKI's tiles have it.
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    e = nl.multiply(t, 3.0, mask=(i_p < 44))
    SEEN["multiply"] = tuple(e.shape)
    s = nisa.tensor_tensor_scan(data0=t, data1=t, initial=0.0, op0=np.multiply, op1=np.add, mask=(i_f < 10))
    SEEN["scan"] = tuple(s.shape)
    out = nl.ndarray((44, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[i_p, i_f], e, mask=(i_p < 44))
    return out


@nki.jit
def assigned_then_reloaded(x, y):
    # buf rows 0-43: 2 * x, assigned from a masked multiply (its instruction retargeted to write buf), then
    # overwritten by a load of y: the load must come after the multiply, which writes buf.
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    buf = nl.full((128, 64), 7.0, nl.float32)
    buf[i_p, i_f] = nl.multiply(t, 2.0, mask=(i_p < 44))
    buf[0:44, :] = nl.load(y[0:44, :])
    nl.store(out, buf)
    return out


def test_an_assigned_masked_result_writes_where_it_is_assigned():
    # With the masked call's tile made whole, the view given back was not the one its instruction wrote, so the
    # assignment moved the instruction's dst to buf but not its writes: the schedule issued the load of y
    # first and the multiply overwrote it (rows 0-43 were 2 * x).
    want = np.full((128, 64), 7.0, np.float32)
    want[:44] = -X[:44]
    same_f32(tnki.simulate_kernel(assigned_then_reloaded, X, -X), want)


def test_a_read_past_a_masked_results_held_rows():
    # tester23ac F3 (nki-samples' cumsum of 300 rows stopped at its carry): the last row tile's scan holds rows
    # 0-43 of [128, 256]; `result[:, W - 1]` reads all 128 rows. It was the looser-mask error ("holds only
    # [0, 44) of it"); the tile now has the whole shape, as NKI's, so the read is legal, rows 44-127 undefined
    # (here what the earlier row tiles' scans left at that place: no warning), never stored. Small integers:
    # every partial sum is exact in float32.
    x = np.random.default_rng(5).integers(-9, 10, (R, C)).astype(np.float32)
    y = tnki.simulate_kernel(row_tiled_cumsum, x)
    assert y.tobytes() == np.cumsum(x, axis=1, dtype=np.float32).tobytes()
    # In the kernel such a result's .shape is the whole index space's (it was the held part's, [44, 64] here).
    same_f32(tnki.simulate_kernel(masked_shapes, X), X[:44] * THREE)
    assert SEEN == {"multiply": (128, 64), "scan": (128, 64)}, SEEN


# ---- a [P] per-partition operand (a keepdims=False reduction's result) under a partition mask


@nki.jit
def vector_operand_under_a_mask(x, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(out, 0.0)
    if case == "held":  # [96], a masked reduction's
        s = nl.max(t, axis=1, mask=(i_p < 96))
    else:  # [128]
        s = nl.max(t, axis=1)
    if case == "bias":
        y = nisa.activation(op=nl.copy, data=t[i_p, i_f], bias=nl.multiply(s, -1.0), mask=(i_p < 96))
    else:
        y = nisa.tensor_scalar(t[i_p, i_f], np.subtract, s, mask=(i_p < 96))
    nl.store(out[i_p, i_f], y, mask=(i_p < 96))
    return out


def test_a_vector_operand_under_a_partition_mask():
    # Unmasked it ran; with mask=(i_p < 96): "mask: operand [96] does not match the masked operand [128, 64]"
    # (tester23l #2). Its one dim is the partition dim, cut by the mask as a [P, 1] column's.
    want = np.zeros((128, 64), np.float32)
    want[:96] = X[:96] - X[:96].max(axis=1, keepdims=True)
    for case in ("held", "whole", "bias"):
        same_f32(tnki.simulate_kernel(vector_operand_under_a_mask, X, case), want)


# ---- a view past a masked result's held part, kept in a variable: checked where the kernel uses it


@nki.jit
def kept_view_of_a_masked_sum(x, loop, masked=True):
    out = nl.ndarray((200, 1), nl.float32, buffer=nl.shared_hbm)
    i_p0 = nl.arange(128)[:, None]
    for i in (nl.affine_range(2) if loop == "affine" else range(2)):
        i_p = i * 128 + i_p0
        a = nl.load(x[i_p, nl.arange(64)[None, :]], mask=(i_p < 200))
        s = nl.sum(a, axis=1, keepdims=True, mask=(i_p < 200))  # the tail tile: [72, 1]
        col = s[i_p0, 0]  # rows 0-127 of the index space: bounded by the store's mask
        if masked:
            nl.store(out[i_p, 0], col, mask=(i_p < 200))
        else:
            nl.store(out[i_p, 0], col)  # MARK-kept-unmasked
    return out


def test_a_kept_view_past_the_held_part_is_checked_where_it_is_used():
    # Kept in `col` (not inlined), it raised its out-of-bounds error at the `for` line (affine_range) or at
    # simulate_kernel's line (a Python loop): the loop's end and the kernel's end looked at the variables
    # (tester23l #3).
    x = (np.arange(200 * 64, dtype=np.float32).reshape(200, 64) % 5) - 2  # integer sums: exact
    for loop in ("affine", "python"):
        same_f32(tnki.simulate_kernel(kept_view_of_a_masked_sum, x, loop), x.sum(axis=1, keepdims=True))
    # Used without a mask that bounds it, the error is at the line using it.
    e = raises(tnki.NkiError, tnki.simulate_kernel, kept_view_of_a_masked_sum, x, "affine", False)
    assert str(e).startswith(f"{THIS}:{line('MARK-kept-unmasked')}: "), e


# ---- .ap(..., dtype=) of a masked result: the same whole index space, counted in the new dtype's elements


@nki.jit
def ap_dtype_of_a_masked_result(x, case):
    i_f = nl.arange(64)[None, :]
    t = nl.load(x)
    e = nl.multiply(t, 3.0, mask=(i_f >= 16) & (i_f < 48))  # MARK-apdt-mask
    if case == "int32":  # the same element size: columns 20-27
        out = nl.ndarray((128, 8), nl.int32, buffer=nl.shared_hbm)
        nl.store(out, e.ap([[64, 128], [1, 8]], offset=20, dtype=nl.int32))
    elif case == "int16":  # two int16 per float32: int16 elements 40-55 of 128 are columns 20-27
        out = nl.ndarray((128, 16), nl.int16, buffer=nl.shared_hbm)
        nl.store(out, e.ap([[128, 128], [1, 16]], offset=40, dtype=nl.int16))
    else:  # int16 elements 90-105: columns 45-52, past the held part
        out = nl.ndarray((128, 16), nl.int16, buffer=nl.shared_hbm)
        nl.store(out, e.ap([[128, 128], [1, 16]], offset=90, dtype=nl.int16))  # MARK-apdt-past
    return out


def test_ap_with_a_dtype_of_a_masked_result_addresses_the_whole_index_space():
    # With dtype= it addressed the held part: offset 20 read columns 36-43 (as .ap without dtype= did before
    # nkifix2).
    want = (X[:, 20:28] * THREE).astype(np.float32)
    got = tnki.simulate_kernel(ap_dtype_of_a_masked_result, X, "int32")
    assert got.dtype == np.int32 and got.tobytes() == want.view(np.int32).tobytes(), got[0, :4]
    got = tnki.simulate_kernel(ap_dtype_of_a_masked_result, X, "int16")
    assert got.dtype == np.int16 and got.tobytes() == want.view(np.int16).tobytes(), got[0, :4]
    # int16 elements 90-105 are columns 45-52: 45-47 held, 48-52 never written (the warning at the read).
    got, said = warned(tnki.simulate_kernel, ap_dtype_of_a_masked_result, X, "past")
    assert got[:, :6].tobytes() == np.ascontiguousarray((X[:, 45:48] * THREE).view(np.int16)).tobytes(), got[0]
    assert len(said) == 1 and said[0].startswith(
        f"{THIS}:{line('MARK-apdt-past')}: nl.store: its dma_copy (made by trnsim's lowering of nl.store) reads sbuf "
        f"'e' [128, 16] int16 allocated at {THIS}:{line('MARK-apdt-mask')} where no instruction wrote before "), said


# ---- a view of a view of a masked result: the second index is the first view's own


@nki.jit
def view_of_a_view(x, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    if case == "held":
        e = nl.multiply(t, 3.0, mask=(i_f >= 16) & (i_f < 48))  # holds columns 16-47
        out = nl.ndarray((128, 3), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, e[:, 20:30][:, 0:3])  # columns 20-22
        return out
    w = nl.load(x[i_p, i_f], mask=(i_p >= 32))  # a whole-shape tile, rows 32-127 loaded
    out = nl.ndarray((8, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, w[40:104][0:8])  # rows 40-47
    return out


def test_a_view_of_a_view_of_a_masked_result_indexes_the_first_view():
    # e[:, 20:30][:, 0:3] was the looser-mask error ("slice 0:3 reads [0, 3) of dim 1, but operand ... holds
    # only [16, 48)"): the second index was taken against the call's index space again; of a masked load's
    # whole-shape tile, w[40:104][0:8] read rows 0-7 (never loaded) instead of rows 40-47.
    same_f32(tnki.simulate_kernel(view_of_a_view, X, "held"), X[:, 20:23] * THREE)
    same_f32(tnki.simulate_kernel(view_of_a_view, X, "load"), X[40:48])


if __name__ == "__main__":
    main(globals())
