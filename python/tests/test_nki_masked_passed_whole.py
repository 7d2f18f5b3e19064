"""A masked call's result passed whole, or sliced, into other calls (tester23af F1 addenda, F6, F9, F10, issue
23): each works on the tile's whole shape, as its `.shape` says, reading the undefined rest with the
simulator's warning, never a shape the kernel never sees; each test fails on the build before its fix, with
exact bytes against NumPy and exact messages."""

import os

import numpy as np

from runner import line_of, main, raises, same_f32, warned

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / np.float32(1024)


def line(marker):
    return line_of(__file__, marker)


# ---- F6: a masked call on a view the kernel's index made of a masked result


@nki.jit
def masked_call_on_a_view(x, case):
    i_p = nl.arange(128)[:, None]
    t = nl.load(x)
    e = nl.multiply(t, 2.0, mask=(i_p < 100))  # holds rows 0-99 of [128, 64]
    if case == "col":
        c = nl.full((128, 1), 9.0, nl.float32)
        c[...] = nl.copy(e[:, 49], mask=(i_p < 80))
    else:
        c = nl.full((128, 32), 9.0, nl.float32)
        m = nl.multiply(e[:, 0:32], 3.0, mask=(i_p < 80))
        c[...] = nl.add(m, 1.0, mask=(i_p < 80))
    out = nl.ndarray(c.shape, nl.float32, buffer=nl.shared_hbm)
    nl.store(out, c)
    return out


def test_a_masked_call_on_a_view_of_a_masked_result():
    # `c[...] = nl.copy(e[:, 49], mask=(i_p < 80))` was "cannot assign a [80, 1] tile to a [128, 1] region": the
    # view's index space was taken as e's [128, 64] (its result a [128, 64] tile), not the view's own [128, 1].
    want = np.full((128, 1), 9.0, np.float32)
    want[:80] = X[:80, 49:50] * np.float32(2)
    same_f32(tnki.simulate_kernel(masked_call_on_a_view, X, "col"), want)
    want = np.full((128, 32), 9.0, np.float32)
    want[:80] = X[:80, :32] * np.float32(2) * np.float32(3) + np.float32(1)
    same_f32(tnki.simulate_kernel(masked_call_on_a_view, X, "slice"), want)


# ---- F1 addenda: a masked result passed whole into a call that cannot work on its held part alone


@nki.jit
def passed_whole(x, y, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x)
    if case == "matmul":  # t as x.T [K, M] with K rows 0-63 held; y [128, 64] holds all 128 K rows
        u = nl.load(y)
        xe = nl.multiply(t, 2.0, mask=(i_p < 64))
        out = nl.ndarray((64, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nl.matmul(xe, u, transpose_x=True)))  # MARK-whole-matmul
        return out
    if case == "add":
        e1 = nl.multiply(t, 2.0, mask=(i_p < 100))
        e2 = nl.add(t, 1.0, mask=(i_p < 50))
        s = nl.add(e1, e2)  # MARK-whole-add
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, s, mask=(i_p < 50))
        return out
    e = nl.multiply(t, 2.0, mask=(i_f < 32))
    r = e.reshape((128, 2, 32))
    res = nl.full((128, 2, 32), 5.0, nl.float32)
    res[:, 0, :] = nl.copy(r[:, 0, :])
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, res.reshape((128, 64)))
    return out


def test_a_masked_result_passed_whole_is_its_whole_tile():
    # nl.matmul of an x holding K rows 0-63 was "contraction dims differ: x.T is [64, 128]" (x.shape is
    # (128, 64)): NKI's nc_matmul contracts all 128 partitions, rows 64-127 unwritten: NaN, with the warning.
    Y = np.ones((128, 64), np.float32)
    got, ws = warned(tnki.simulate_kernel, passed_whole, X, Y, "matmul")
    assert np.isnan(got).all(), got[:2, :2]
    assert [w for w in ws if w.startswith(f"{THIS}:{line('MARK-whole-matmul')}: nc_matmul reads sbuf 'xe' [128, 64] "
                                          f"float32 allocated at {THIS}:{line('MARK-whole-matmul') - 2} where no "
                                          f"instruction wrote before (partition 64,")], ws
    # nl.add of rows < 100 and rows < 50 was "operands [100, 64] and [50, 64] do not broadcast": the add of the
    # whole tiles, defined where both were written (rows 0-49), the rest read with the warning.
    got, ws = warned(tnki.simulate_kernel, passed_whole, X, Y, "add")
    want = X * np.float32(2) + (X + np.float32(1))
    same_f32(got[:50], want[:50])
    assert [w for w in ws if w.startswith(f"{THIS}:{line('MARK-whole-add')}: nl.add: its tensor_tensor (made by "
                                          f"trnsim's lowering of nl.add) reads sbuf ")], ws
    # e.reshape((128, 2, 32)) of e holding columns 0-31 was "reshape: [128, 32] (4096 elements) cannot become
    # [128, 2, 32]": the reshape of the whole [128, 64] tile, its held columns r[:, 0, :].
    want = np.full((128, 64), 5.0, np.float32)
    want[:, :32] = X[:, :32] * np.float32(2)
    same_f32(tnki.simulate_kernel(passed_whole, X, Y, "reshape"), want)


# ---- F9: an unmasked compute call on a tile whose held rows start where no instruction may


@nki.jit
def held_from_row_3(x):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_p >= 3) & (i_p < 100))
    e = nl.multiply(t, 2.0)  # MARK-from-3
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[i_p, i_f], e, mask=(i_p >= 3) & (i_p < 100))
    return out


def test_an_unmasked_call_on_rows_held_from_a_mid_tile_start():
    # Was "RuleError: ... partition start: dst spans 97 partitions from 3 (more than 64 must start at 0)":
    # trnsim's narrowing to the held rows broke the rule, not the kernel. Computed from partition 0 (as NKI's
    # whole-tile instruction), rows 0-2 read undefined, with the warning; rows 0-99 only (the read names them, as
    # a matmul's contraction on such rows does), as docs/nki.md says, since tester23aj F4.
    got, ws = warned(tnki.simulate_kernel, held_from_row_3, X)
    same_f32(got[3:100], X[3:100] * np.float32(2))
    assert [w for w in ws if w.startswith(f"{THIS}:{line('MARK-from-3')}: nl.multiply: its tensor_scalar (made by "
                                          f"trnsim's lowering of nl.multiply) reads sbuf 't' [100, 64] float32 "
                                          f"allocated at {THIS}:{line('MARK-from-3') - 1} where no instruction wrote "
                                          f"before (partition 0,")], ws


W = (np.arange(128 * 96, dtype=np.float32).reshape(128, 96) % 7 - 3) / np.float32(8)


@nki.jit
def mid_start_pe(x, w, call):
    # tester23ai F5: unmasked PE calls of tiles whose held rows (or, for a transpose or a matmul's M, columns)
    # start where no instruction may start follow the nearest-start rule above, not a partition-start RuleError
    # about trnsim's own instruction.
    i_p, i_f = nl.mgrid[0:128, 0:64]
    if call == "matmul":
        t = nl.load(x[i_p, i_f], mask=(i_p >= 3) & (i_p < 100))
        i_k, i_n = nl.mgrid[0:128, 0:96]
        ww = nl.load(w[i_k, i_n], mask=(i_k >= 3) & (i_k < 100))
        p = nl.matmul(t, ww, transpose_x=True)  # MARK-mid-mm
        out = nl.ndarray((64, 96), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, p)
        return out
    if call == "matmul_mk":  # x [M, K] holding K columns 8-39, y K rows 8-39
        t = nl.load(x[i_p, i_f], mask=(i_f >= 8) & (i_f < 40))
        i_k, i_n = nl.mgrid[0:64, 0:96]
        ww = nl.load(w[i_k, i_n], mask=(i_k >= 8) & (i_k < 40))
        out = nl.ndarray((128, 96), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.matmul(t, ww))
        return out
    if call in ("iadd", "iadd_isa", "iadd_twice"):  # tester23au: the same product accumulated by `+=`
        t = nl.load(x[i_p, i_f], mask=(i_f >= 8) & (i_f < 40))  # M columns 8-39
        acc = nl.zeros((64, 96), nl.float32, buffer=nl.psum)
        y = nl.load(w)
        if call == "iadd_isa":
            acc[...] += nisa.nc_matmul(t, y)  # MARK-isa-iadd
        else:
            acc += nl.matmul(t, y, transpose_x=True)  # MARK-mid-iadd
            if call == "iadd_twice":
                acc += nl.matmul(t, y, transpose_x=True)
        out = nl.ndarray((64, 96), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, acc)
        return out
    if call == "product_copy":  # the product kept at its held rows 8-39 ([32, 96], from partition 0)
        t = nl.load(x[i_p, i_f], mask=(i_f >= 8) & (i_f < 40))
        p = nl.matmul(t, nl.load(w), transpose_x=True)
        e = nl.copy(p)
        out = nl.ndarray((64, 96), nl.float32, buffer=nl.shared_hbm)
        j_p, j_f = nl.mgrid[0:64, 0:96]
        nl.store(out[j_p, j_f], nl.multiply(e, 2.0), mask=(j_p >= 8) & (j_p < 40))
        return out
    if call == "nc_matmul":
        t = nl.load(x[i_p, i_f], mask=(i_f >= 8) & (i_f < 40))  # M columns 8-39
        acc = nl.ndarray((64, 96), nl.float32, buffer=nl.psum)
        nisa.memset(dst=acc, value=0.0)
        nisa.nc_matmul(dst=acc, stationary=t, moving=nl.load(w))  # MARK-mid-nc
        out = nl.ndarray((64, 96), nl.float32, buffer=nl.shared_hbm)
        nl.store(out, acc)
        return out
    t = nl.load(x[i_p, i_f], mask=(i_f >= 8) & (i_f < 40))
    tt = nl.transpose(t) if call == "transpose" else nisa.nc_transpose(t)  # MARK-mid-tr
    out = nl.ndarray((64, 128), nl.float32, buffer=nl.shared_hbm)
    j_p, j_f = nl.mgrid[0:64, 0:128]
    nl.store(out[j_p, j_f], tt, mask=(j_p < 40))
    return out


def test_unmasked_pe_calls_on_a_part_held_from_a_mid_tile_start():
    got, ws = warned(tnki.simulate_kernel, mid_start_pe, X, W, "matmul")
    assert got.shape == (64, 96) and np.isnan(got).all()  # K rows 0-2 undefined: every sum reads them
    assert any(m.startswith(f"{THIS}:{line('MARK-mid-mm')}: nl.matmul: its nc_matmul (made by trnsim's lowering "
                            f"of nl.matmul) reads sbuf 't' [100, 64] float32") for m in ws), ws
    got, ws = warned(tnki.simulate_kernel, mid_start_pe, X, W, "matmul_mk")
    assert got.shape == (128, 96) and np.isnan(got).all()  # K 0-7 undefined
    got, ws = warned(tnki.simulate_kernel, mid_start_pe, X, W, "nc_matmul")
    want = np.zeros((64, 96), np.float32)
    want[8:40] = (X[:, 8:40].astype(np.float64).T @ W.astype(np.float64)).astype(np.float32)
    same_f32(got[8:40], want[8:40])
    assert np.isnan(got[:8]).all() and not got[40:].any()  # (rows 0-7: from columns no instruction wrote)
    # tester23au: `acc += nl.matmul(t, y, transpose_x=True)` (and `acc[...] += nisa.nc_matmul(t, y)`) of that t
    # into a whole-shape PSUM accumulator was "RuleError: nc_matmul on PE: partition start: dst spans 32
    # partitions from 8": the product accumulates from the nearest start (rows 0-39), as the dst= call writes.
    dst_form = got
    for call, mark in (("iadd", "MARK-mid-iadd"), ("iadd_isa", "MARK-isa-iadd"), ("iadd_twice", "MARK-mid-iadd")):
        got, ws = warned(tnki.simulate_kernel, mid_start_pe, X, W, call)
        if call == "iadd_twice":
            same_f32(got[8:40], want[8:40] * np.float32(2))
            assert np.isnan(got[:8]).all() and not got[40:].any()
        else:
            assert got.tobytes() == dst_form.tobytes(), call
        assert any(m.startswith(f"{THIS}:{line(mark)}: nc_matmul reads sbuf 't' [128, 40] float32") and
                   "where no instruction wrote before (partition 0, byte 0 " in m for m in ws), (call, ws)
    # An unmasked call on such a product, a tile of its held rows' shape from its partition 0, keeps them: the
    # copy took the nearest start of the whole shape (row 0) for rows it holds from its partition 0, and held
    # rows 0-31 of products of columns 8-39 (a store of rows 0-31 was silently shifted; of rows 8-39, an error).
    got = tnki.simulate_kernel(mid_start_pe, X, W, "product_copy")
    same_f32(got[8:40], want[8:40] * np.float32(2))
    for call in ("transpose", "nc_transpose"):
        got, ws = warned(tnki.simulate_kernel, mid_start_pe, X, W, call)
        same_f32(got[8:40], X[:, 8:40].T)
        assert np.isnan(got[:8]).all(), got[0, :4]
        assert any(m.startswith(f"{THIS}:{line('MARK-mid-tr')}: ") and "where no instruction wrote before" in m
                   for m in ws), ws


@nki.jit
def earlier_affine_select_pad(x):
    # tester23ai F7: the tail-padding idiom of the earlier style, on_true_tile a masked load passed whole
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x[i_p, i_f], mask=(i_f < 40))
    t2 = nisa.affine_select(pred=(i_f < 40), on_true_tile=t, on_false_value=0.0)  # MARK-affsel
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, t2)
    return out


def test_an_earlier_style_affine_select_of_a_masked_result_passed_whole_selects_on_its_whole_tile():
    # Was "affine_select: pred's index variable i1[64] spans 64, on_true_tile's axis 1 is 40" (t.shape is
    # (128, 64)); now as on_true_tile=t[i_p, i_f]: columns 40-63 the 0.0. The select reads t's unwritten rest
    # nowhere its predicate keeps, so no warning (test_nki_affine_select_predicates.py).
    got, ws = warned(tnki.simulate_kernel, earlier_affine_select_pad, X)
    want = X.copy()
    want[:, 40:] = 0.0
    same_f32(got, want)
    assert ws == [], ws


# ---- F10: an axis-1 mask on a matmul of tiles passed whole bounds the free dim that has its range


@nki.jit
def m_tail_mask(aT, b, form, loaded):
    N = b.shape[1]
    i_k, i_m = nl.arange(128)[:, None], nl.arange(128)[None, :]
    if loaded:
        x = nl.load(aT[i_k, i_m], mask=(i_m < 96))  # M rows 0-95 of [128 (K), 128 (M)]
    else:
        x = nl.load(aT)
    y = nl.load(b)
    acc = nl.zeros((128, N), nl.float32, buffer=nl.psum)
    if form == "nl":
        acc += nl.matmul(x, y, transpose_x=True, mask=(i_m < 96))  # MARK-m-tail
    else:
        acc += nisa.nc_matmul(x, y, mask=(i_m < 96))
    out = nl.ndarray((128, N), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def neither_free_dim(aT, b):
    i_j = nl.arange(64)[None, :]
    x = nl.load(aT)
    y = nl.load(b)
    out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(nl.matmul(x, y, transpose_x=True, mask=(i_j < 30))))  # MARK-neither
    return out


def test_an_m_tail_mask_on_whole_tiles_bounds_m_only():
    # `mask=(i_m < 96)` repeating x's M-tail load cut N to 96 as well when N was 128 (columns 96-127 silently
    # 0), and was "dim 1 of operand sbuf tile x [128, 512] ... is neither the mask variable's range" (y's
    # shape, x's name) when N was 512. Now rows 0-95, every column, for both N and both forms.
    rs = np.random.RandomState(23)
    aT = rs.randint(-3, 4, (128, 128)).astype(np.float32)
    for n in (128, 512):
        b = rs.randint(-3, 4, (128, n)).astype(np.float32)
        want = np.zeros((128, n), np.float32)
        want[:96] = aT[:, :96].T @ b
        for form in ("nl", "nisa"):
            same_f32(tnki.simulate_kernel(m_tail_mask, aT, b, form, True), want)
    # Loads unmasked: a variable of range 128 indexes only x's M when N is 512 ...
    same_f32(tnki.simulate_kernel(m_tail_mask, aT, b, "nl", False), want)
    # ... and when N is 128 too nothing tells M from N: the error, never a cut of both.
    e = raises(NkiError, tnki.simulate_kernel, m_tail_mask, aT, aT, "nl", False)
    assert str(e) == (
        f"{THIS}:{line('MARK-m-tail')}: nl.matmul: mask=(i_m < 96) bounds a variable of axis 1 to [0, 96): of tiles "
        "passed whole, that is a free dim, M of x or N of y (a matmul's mask is that of nisa.nc_matmul(stationary="
        "x.T, moving=y) (nki.language.matmul: matmul(x, y) lowers to nc_matmul(transpose(x), y)): of tiles, a "
        "variable of axis 0 (nl.arange(n)[:, None]) bounds the contraction dim K of both operands and one of axis 1 "
        "(nl.arange(n)[None, :]) the free dims, M of x and N of y; a K, M or N tail held by masked loads needs no "
        "mask here), and both have its range (128; x holds M [0, 128), y holds N [0, 128)), so it cannot tell which "
        "one it bounds: index the operands with their own variables (x[i_k, i_m] with mask=(i_m < M), y[i_k, i_n] "
        "with mask=(i_n < N)), or leave the M and N tails to the masked loads and the store"), e
    # A variable of neither range was "dim 1 of operand sbuf tile x [128, 128] ... is neither the mask variable's
    # range (64) nor the extent ...", naming the tile by the label its line gave it: now x's M and y's N by role.
    e = raises(NkiError, tnki.simulate_kernel, neither_free_dim, aT, np.ones((128, 512), np.float32))
    assert str(e).startswith(f"{THIS}:{line('MARK-neither')}: nl.matmul: mask=(i_j < 30) bounds a variable of axis 1 "
                             "of 64 values to [0, 30): of tiles passed whole, that is a free dim, M of x or N of y ("), e
    assert str(e).endswith("but neither x's M (128) nor y's N (512) has its range, so it indexes neither: use a "
                           "variable of the dim it bounds (nl.arange(128)[None, :] for M, nl.arange(512)[None, :] for "
                           "N), or index the operands with their own variables"), e


# ---- tester23ag F1: a reduction masked as its operand reads the held part on the device too


@nki.jit
def masked_reduction(x, case):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x[i_p, i_f], mask=(i_f < 40))
    if case == "sum":
        r = nl.sum(t, axis=1, keepdims=True, mask=(i_f < 40))
    elif case == "indexed":
        r = nl.sum(t[i_p, i_f], axis=1, keepdims=True, mask=(i_f < 40))
    elif case == "nisa":
        r = nisa.tensor_reduce(op=nl.add, data=t, axis=1, keepdims=True, mask=(i_f < 40))
    elif case == "rows":
        r = nl.sum(t, axis=1, keepdims=True, mask=(i_p < 128))  # MARK-rows-only
    else:
        r = nl.sum(nl.exp(t, mask=(i_f < 40)), axis=1, keepdims=True)  # MARK-same-line
    out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, r)
    return out


def test_a_reduction_masked_as_its_operand_is_not_warned():
    # Each warned "the device reduces all 64, 24 of them written by no instruction ... mask this call as the one
    # that made the operand", though it was so masked; a mask bounding only another dim, or the mask of another
    # call on the same line, still warns.
    want = X[:, :40].astype(np.float64).sum(axis=1, keepdims=True)  # (exact: k / 1024 summed)
    for case in ("sum", "indexed", "nisa"):
        got, ws = warned(tnki.simulate_kernel, masked_reduction, X, case)
        same_f32(got, want)
        assert not [w for w in ws if "reduces dim 1" in w], (case, ws)
    for case, mark in (("rows", "MARK-rows-only"), ("line", "MARK-same-line")):
        got, ws = warned(tnki.simulate_kernel, masked_reduction, X, case)
        assert [w for w in ws if w.startswith(f"{THIS}:{line(mark)}: tensor_reduce reduces dim 1 of ")], (case, ws)


# ---- tester23ag F4: a slice of an HBM tensor past its end, kept inside by the call's mask


@nki.jit
def sliced_tail(x, case):
    n = x.shape[0]
    out = nl.ndarray(x.shape, nl.float32, buffer=nl.shared_hbm)
    for t in nl.affine_range(2):
        i_p = t * 128 + nl.arange(128)[:, None]
        if case == "dma_copy":
            s = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(src=x[t * 128:(t + 1) * 128, :], dst=s, mask=(i_p < n))
        elif case == "load":
            s = nl.load(x[t * 128:(t + 1) * 128, :], mask=(i_p < n))
        elif case == "unmasked":
            s = nl.load(x[t * 128:(t + 1) * 128, :])  # MARK-slice-unmasked
        else:
            s = nl.load(x[t * 128:(t + 1) * 128, :], mask=(i_p < n + 10))  # MARK-slice-loose
        nl.store(out[t * 128:(t + 1) * 128, :], value=s, mask=(i_p < n))
    return out


def test_a_slice_past_the_end_under_a_mask_that_keeps_it_inside():
    # `x[t * 128:(t + 1) * 128, :]` of a [200, 8] x was "slice 128:256 is out of bounds for dim 0 of size 200"
    # where it was written, though the call's mask kept the tail tile's 72 rows inside (nki-samples' reference
    # adaptive_avg_pool2d bounds its slices so).
    x = np.arange(200 * 8, dtype=np.float32).reshape(200, 8)
    for case in ("dma_copy", "load"):
        same_f32(tnki.simulate_kernel(sliced_tail, x, case), x)
    e = raises(NkiError, tnki.simulate_kernel, sliced_tail, x, "unmasked")
    assert str(e) == (f"{THIS}:{line('MARK-slice-unmasked')}: slice 128:256 is out of bounds for dim 0 of size 200 "
                      "(tensor [200, 8])"), e
    e = raises(NkiError, tnki.simulate_kernel, sliced_tail, x, "loose")
    assert str(e) == (f"{THIS}:{line('MARK-slice-loose')}: nl.load: mask: mask=(i_p < n + 10) keeps [128, 210) of a "
                      "view whose slice 128:256 is out of bounds for dim 0 of size 200 (tensor [200, 8]): bound a "
                      "variable of axis 0 (of the view's length) so that the masked-in indices stop by 200"), e


# ---- tester23ag F6: a masked result given as dst= (or assigned whole) is its whole tile


@nki.jit
def masked_result_as_dst(x, y, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_f < 40))  # holds columns 0-39 of [128, 64]
    u = nl.load(y)
    if case == "memset":
        nisa.memset(dst=t, value=1.0)
    elif case == "tensor_copy":
        nisa.tensor_copy(dst=t, src=u)
    elif case == "tensor_scalar":
        nisa.tensor_scalar(dst=t, data=u, op0=nl.multiply, operand0=2.0)
    elif case == "dma_copy":
        nisa.dma_copy(dst=t, src=u)
    else:
        t[...] = 1.0
    out = nl.ndarray((128, 65), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[:, 0:64], t)
    nl.store(out[:, 64:65], nl.sum(t, axis=1, keepdims=True))
    return out


def test_a_masked_result_written_whole_holds_it_all():
    # `nisa.memset(dst=t, value=1.0)` (tensor_copy, tensor_scalar, dst= of a masked load's t) wrote only the 40
    # columns the load held, and nl.sum(t, axis=1) then summed those, warning of the rest; dma_copy(dst=t)
    # was the looser-mask error; `t[...] = 1.0` wrote the 40 columns and the store of t was that error.
    Y = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / np.float32(64)
    for case, tile in (("memset", np.ones((128, 64), np.float32)), ("tensor_copy", Y),
                       ("tensor_scalar", Y * np.float32(2)), ("dma_copy", Y), ("assign", np.ones((128, 64), np.float32))):
        want = np.concatenate([tile, tile.astype(np.float64).sum(axis=1, keepdims=True)], axis=1)
        got, ws = warned(tnki.simulate_kernel, masked_result_as_dst, X, Y, case)
        same_f32(got, want)
        assert not ws, (case, ws)


@nki.jit
def masked_load_of_slices(x):
    i_p = nl.arange(128)[:, None]
    s = nl.load(x[0:128, 8:16], mask=(i_p < 72))  # a view without index variables: the mask cuts it as a tile
    out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[0:128, :], value=nl.multiply(s, 2.0), mask=(i_p < 72))
    return out


def test_a_masked_load_of_slices_inside_the_tensor():
    # The mask cuts the [128, 8] slice to rows 0-71 (it was "src [72, 8] has 576 elements, dst [128, 8] has
    # 1024"); rows 72-127 of out are written by no instruction (NaN, with the simulator's warning).
    out, ws = warned(tnki.simulate_kernel, masked_load_of_slices, X)
    same_f32(out[:72], X[:72, 8:16] * np.float32(2))
    assert np.isnan(out[72:]).all()
    assert len(ws) == 1 and "no instruction writes rows 72-127 of its 128" in ws[0], ws


# ---- tester23ag F6 addendum 3: a write reaching outside the part a masked result holds fills its tile


@nki.jit
def padded_tail(x, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_f < 40))  # MARK-pad-load: holds columns 0-39 of [128, 64]
    if case == "memset":
        nisa.memset(dst=t[:, 40:64], value=0.0)
    elif case == "slice":
        t[:, 40:64] = nl.load(x[:, 40:64])
    elif case == "masked":
        t[i_p, i_f] = nl.load(x[i_p, i_f], mask=(i_f >= 40))
    else:
        nisa.memset(dst=t[:, 40:50], value=0.0)  # columns 50-63 written by nothing
    out = nl.ndarray((128, 129), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[:, 0:64], t)  # MARK-pad-store
    nl.store(out[:, 64:65], nl.max(t, axis=1, keepdims=True))  # MARK-pad-max
    nl.store(out[:, 65:129], nl.add(t, 1.0))  # MARK-pad-add
    return out


def test_a_write_past_the_held_part_fills_the_tile():
    # Padding a tail tile (`nisa.memset(dst=t[:, 40:64], value=0.0)` after `t = nl.load(..., mask=(i_f < 40))`)
    # left t the 40 columns the load held: nl.max(t, axis=1) was the data's max, not the pad's 0.0, with a
    # warning of the rest, nl.add(t, 1.0) computed 40 columns; `t[:, 40:64] = nl.load(...)` and the load of
    # columns 40-63 masked with (i_f >= 40) into t made `nl.store(o, t)` the looser-mask error.
    x = -X - np.float32(1)
    padded = x.copy()
    padded[:, 40:] = 0
    for case, tile in (("memset", padded), ("slice", x), ("masked", x)):
        want = np.concatenate([tile, tile.max(axis=1, keepdims=True), tile + np.float32(1)], axis=1)
        got, ws = warned(tnki.simulate_kernel, padded_tail, x, case)
        same_f32(got, want)
        assert not ws, (case, ws)
    # Columns 50-63 no instruction wrote: each whole-tile read of t reads them undefined, with the warning.
    got, ws = warned(tnki.simulate_kernel, padded_tail, x, "partial")
    tile = padded.copy()
    tile[:, 50:] = np.nan
    want = np.concatenate([tile, np.full((128, 1), np.nan), tile + np.float32(1)], axis=1).astype(np.float32)
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all() and got[~nan].tobytes() == want[~nan].tobytes()
    undefined = ("{} reads sbuf 't' [128, 64] float32 allocated at {}:{} where no instruction wrote before (partition "
                 "0, byte 200 of the read is the first such): its values are undefined (a tile starts uninitialised, "
                 "as numpy.empty's contents; trnsim's memory starts as NaN)")
    assert ws == [f"{THIS}:{line('MARK-pad-' + mark)}: " + undefined.format(op, THIS, line("MARK-pad-load"))
                  for mark, op in (("store", "nl.store: its dma_copy (made by trnsim's lowering of nl.store)"),
                                   ("max", "tensor_reduce"), ("add", "tensor_scalar"))], ws


@nki.jit
def select_padded(x, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_f < 40))  # MARK-select-load: holds columns 0-39 of [128, 64]
    s = t if case == "in_place" else nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
    # 39 - f >= 0: t where f < 40, -5.0 in the rest
    nisa.affine_select(dst=s, pattern=[[-1, 64]], offset=39, channel_multiplier=0, on_true_tile=t,  # MARK-the-select
                       on_false_value=-5.0, cmp_op=nl.greater_equal)
    out = nl.ndarray((128, 65), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[:, 0:64], s)
    nl.store(out[:, 64:65], nl.max(s, axis=1, keepdims=True))
    return out


def test_an_affine_select_padding_a_tail_tile_writes_all_of_dst():
    # tester23ag F6 addendum 4: the select's dst was cut to the 40 columns t holds and the kernel's 64-wide
    # pattern was then 'pattern [[-1, 64]] does not match dst's free dims [40]'. The select is on all of t, and
    # its predicate puts -5.0 in the columns no instruction wrote (no warning: it keeps none of them).
    x = -X - np.float32(1)
    tile = x.copy()
    tile[:, 40:] = -5
    for case in ("new_tile", "in_place"):
        got, ws = warned(tnki.simulate_kernel, select_padded, x, case)
        same_f32(got, np.concatenate([tile, tile.max(axis=1, keepdims=True)], axis=1))
        assert ws == [], (case, ws)


@nki.jit
def product_overwritten(a, b):
    i_k, i_m = nl.mgrid[0:128, 0:128]
    x, y = nl.load(a), nl.load(b)
    p = nisa.nc_matmul(x[i_k, i_m], y, mask=(i_m < 96))  # MARK-masked-product: rows 0-95 of [128, 256]
    nisa.nc_matmul(dst=p, stationary=x, moving=y, accumulate=False)  # MARK-overwrite
    out = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, p)
    return out


def test_a_masked_products_tile_given_whole_to_nc_matmul_names_its_cause():
    # tester23ag F6 addendum 2: 'nc_matmul: dst [96, 256] must be [128, 256]', a dst the kernel never has.
    e = raises(NkiError, tnki.simulate_kernel, product_overwritten, X[:, :64].repeat(2, axis=1),
               np.ones((128, 256), np.float32))
    at = f"{THIS}:{line('MARK-masked-product')}"
    assert str(e) == (f"{THIS}:{line('MARK-overwrite')}: nc_matmul: dst, psum tile p [96, 256] float32 allocated at "
                      f"{at}, is the product of the matmul that mask=(i_m < 96) at {at} cut, which trnsim keeps at "
                      "the [96, 256] it holds of the [128, 256] this call writes (NKI's tile is the whole): give "
                      "this call a PSUM tile of its own (nl.ndarray((128, 256), nl.float32, buffer=nl.psum))"), e


# ---- tester23ai F9 / F10: calls indexing their data by position read a masked result's whole tile


@nki.jit
def positional(x, case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    if case == "rows":
        t = nl.load(x[i_p, i_f], mask=(i_p < 100))  # MARK-pos-rows: holds rows 0-99 of [128, 64]
    else:
        t = nl.load(x[i_p, i_f], mask=(i_f >= 8) & (i_f < 40))  # MARK-pos-load: holds columns 8-39
    if case in ("n_gather", "rows"):
        idx = nl.ndarray((128, 8), nl.uint32, buffer=nl.sbuf)
        nisa.iota(dst=idx, pattern=[[2, 8]], offset=10, channel_multiplier=0)  # columns 10, 12, ..., 24
        got = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.nc_n_gather(dst=got, data=t, indices=idx)  # MARK-pos-gather
        out = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    else:
        m = nisa.max8(src=t[:, 8:40])
        if case == "find_index8":
            got = nisa.nc_find_index8(data=t, vals=m)  # MARK-pos-find
        elif case == "find_index8_dst":
            got = nl.ndarray((128, 8), nl.uint32, buffer=nl.sbuf)
            nisa.nc_find_index8(dst=got, data=t, vals=m)  # MARK-pos-find-dst
        else:
            got = nisa.nc_match_replace8(data=t, vals=m, imm=-1.0e9)[:, 8:40]  # MARK-pos-replace
        out = nl.ndarray(got.shape, got.dtype, buffer=nl.shared_hbm)
    nl.store(out, got)
    return out


def test_positional_calls_index_the_whole_tile():
    # nc_n_gather / nc_find_index8 of a masked load holding columns 8-39 indexed the held part: the gather of
    # columns 10..24 gave columns 18..32, the indices were 8 too low, with no sign (tester23ai F9, F10); NKI's
    # instruction indexes the [128, 64] tile it is given.
    x = np.random.default_rng(23).standard_normal((128, 64)).astype(np.float32)
    cols = list(range(10, 26, 2))
    undefined = ("{}:{}: {} reads sbuf 't' [128, 64] float32 allocated at {}:{} where no instruction wrote before "
                 "(partition {}, byte {} of the read is the first such): its values are undefined (a tile starts "
                 "uninitialised, as numpy.empty's contents; trnsim's memory starts as NaN)")
    got, ws = warned(tnki.simulate_kernel, positional, x, "n_gather")
    same_f32(got, x[:, cols])
    assert ws == [undefined.format(THIS, line("MARK-pos-gather"), "nc_n_gather", THIS, line("MARK-pos-load"), 0,
                                   0)], ws
    got, ws = warned(tnki.simulate_kernel, positional, x, "rows")
    want = x[:, cols].copy()
    want[100:] = np.nan
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all() and got[~nan].tobytes() == want[~nan].tobytes()
    assert ws == [undefined.format(THIS, line("MARK-pos-gather"), "nc_n_gather", THIS, line("MARK-pos-rows"), 100,
                                   0)], ws
    top = np.argsort(-x[:, 8:40], axis=1, kind="stable")[:, :8] + 8
    for case, op in (("find_index8", "find"), ("find_index8_dst", "find-dst")):
        got, ws = warned(tnki.simulate_kernel, positional, x, case)
        assert got.dtype == np.uint32 and (got == top).all(), (case, got[0], top[0])
        assert ws == [undefined.format(THIS, line("MARK-pos-" + op), "nc_find_index8", THIS, line("MARK-pos-load"),
                                       0, 0)], ws
    got, ws = warned(tnki.simulate_kernel, positional, x, "match_replace8")
    want = x[:, 8:40].copy()
    np.put_along_axis(want, top - 8, np.float32(-1.0e9), axis=1)
    same_f32(got, want)


@nki.jit
def padded_earlier_style_result(case):
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    if case == "memset":  # columns 0-39 hold 1.0, the pad 2.0
        t = nisa.memset(shape=(128, 64), value=1.0, dtype=nl.float32, mask=(i_f < 40))
    else:  # columns 0-39 hold 0..39, the pad 2.0
        t = nisa.iota(i_f + 0 * i_p, dtype=nl.float32, mask=(i_f < 40))
    nisa.memset(dst=t[:, 40:64], value=2.0)  # fills the tail: t is its whole tile from here
    out = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.sum(t, axis=1, keepdims=True))
    return out


def test_a_padded_earlier_style_memset_or_iota_result_is_reduced_whole():
    # tester23aj F5: the pad was ignored (sums 40 and 780, unwarned): 40 * 1 + 24 * 2 = 88; 0 + ... + 39 = 780,
    # + 24 * 2 = 828.
    for case, want in (("memset", 88.0), ("iota", 828.0)):
        got, ws = warned(tnki.simulate_kernel, padded_earlier_style_result, case)
        same_f32(got, np.full((128, 1), want, np.float32))
        assert not ws, (case, ws)


if __name__ == "__main__":
    main(globals())
