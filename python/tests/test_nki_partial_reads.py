"""Calls combining the elements along a dim an operand holds only in part (a masked call's result passed whole):
warned as the reductions are (tester23ah F7), quiet when the call's own mask bounds the dim to the held part."""

import warnings

import numpy as np

from runner import line_of, main, raises, same_f32

import trnsim.nki as tnki
from trnsim.nki import NkiError


@tnki.jit
def _along_a_partly_held_dim(x, form):
    import nki.isa as nisa
    import nki.language as nl

    o = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    if form.startswith("scan"):
        held = (i_f < 40) if form != "scan" else (i_f >= 24)
        t = nl.load(x[i_p, i_f], mask=held)  # MARK-pr-scan-load
        ones = nl.full((128, 64), 1.0, nl.float32)
        if form == "scan_masked":
            s = nisa.tensor_tensor_scan(data0=ones, data1=t, initial=0.0, op0=nl.multiply, op1=nl.add,
                                        mask=(i_f < 40))
            nl.store(o[i_p, i_f], s, mask=(i_f < 40))
            return o
        s = nisa.tensor_tensor_scan(data0=ones, data1=t, initial=0.0, op0=nl.multiply, op1=nl.add)  # MARK-pr-scancall
        nl.store(o, s)
        return o
    i_8 = nl.arange(8)[None, :]
    if form == "max8_new_rows":  # a tile holding rows 0-99 of columns 0-39, a dst of all 128 rows
        u = nl.load(x[i_p, i_f], mask=(i_p < 100) & (i_f < 40))  # MARK-pr-rows-load
        m = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=m, src=u)  # MARK-pr-rowsmax
        nl.store(o[i_p, i_8], m)
        return o
    t = nl.load(x[i_p, i_f], mask=(i_f < 40))  # MARK-pr-load
    if form == "bn":
        st = nisa.bn_stats(t)  # MARK-pr-bn
        nl.store(o[i_p, nl.arange(6)[None, :]], st)
    elif form == "bn_new":
        st = nl.ndarray((128, 6), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=st, data=t)  # MARK-pr-bn-new
        nl.store(o[i_p, nl.arange(6)[None, :]], st)
    elif form == "bn_masked":
        ag = nisa.bn_aggr(nisa.bn_stats(t, mask=(i_f < 40)))
        nl.store(o[i_p, nl.arange(2)[None, :]], ag)
    elif form == "max8":
        nl.store(o[i_p, i_8], nisa.max8(src=t))  # MARK-pr-max8
    elif form == "max8_new":
        m = nl.ndarray((128, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=m, src=t)  # MARK-pr-max8-new
        nl.store(o[i_p, i_8], m)
    elif form == "max8_masked":
        nl.store(o[i_p, i_8], nisa.max8(src=t, mask=(i_f < 40)))
    elif form == "index8":
        m = nisa.max8(src=t, mask=(i_f < 40))
        idx = nisa.nc_find_index8(data=t, vals=m)  # MARK-pr-index8
        nl.store(o[i_p, i_8], nl.copy(idx, dtype=nl.float32))
    elif form in ("rms", "rms_masked"):
        w = nl.full((128, 64), 2.0, nl.float32)
        if form == "rms":
            r = nl.rms_norm(t, w, 1, 64)  # MARK-pr-rms
        else:
            r = nl.rms_norm(t, w, 1, 64, mask=(i_f < 40))
        nl.store(o[i_p, i_f], r, mask=(i_f < 40))
    return o


def _said(caught):
    return [str(w.message) for w in caught if "written by no instruction" in str(w.message)]


def _run(x, form):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tnki.simulate_kernel(_along_a_partly_held_dim, x, form)
    return got, _said(caught)


def _warning(mark, call, verb, operand, held, full, made, mask):
    line = lambda m: line_of(__file__, m)
    lo, hi = held
    return ("test_nki_partial_reads.py:%d: %s %s dim 1 of %s of sbuf tile %s[128, 64] float32 allocated at "
            "test_nki_partial_reads.py:%d, which holds only [%d, %d) of its %d (the part mask=(%s) at "
            "test_nki_partial_reads.py:%d selected): trnsim %s that part; the device %s all %d, %d of them written "
            "by no instruction (undefined): mask this call as the one that made the operand"
            % (line(mark), call, verb, operand, "t ", line(made), lo, hi, full, mask, line(made), verb, verb, full,
               full - (hi - lo)))


def _undefined(mark, call, made, byte):
    line = lambda m: line_of(__file__, m)
    return ("test_nki_partial_reads.py:%d: %s reads sbuf 't' [128, 64] float32 allocated at test_nki_partial_reads.py:%d "
            "where no instruction wrote before (partition 0, byte %d of the read is the first such): its values are "
            "undefined (a tile starts uninitialised, as numpy.empty's contents; trnsim's memory starts as NaN)"
            % (line(mark), call, line(made), byte))


def _run_all(x, form):
    """The kernel's outputs and every warning but the one of o's columns it leaves unwritten."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tnki.simulate_kernel(_along_a_partly_held_dim, x, form)
    return got, [str(w.message) for w in caught if "output o" not in str(w.message)]


def test_statistics_and_top8_of_a_partly_held_tile_read_the_whole_tile():
    # tester23ah F7 gave bn_stats / max8 of a tile loaded with mask=(i_f < 40), called unmasked, the 40 held
    # columns' statistics / top 8 with no warning; then (fix23aw) the held part's with trnsim's warning that the
    # device reads all 64. Without a mask of its own, the call is one instruction over each partition's 64
    # elements, as nc_find_index8 of such a tile already was: the 24 no instruction wrote read undefined (NaN here:
    # bn_stats' means and variances; NaN ranks below every number, so max8's top 8 are the held ones), with the
    # simulator's warning of the read.
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 7 - 3) / np.float32(8)
    x[:, 50] = 100.0  # never loaded
    held = x[:, :40]
    top8 = -np.sort(-held, axis=1)[:, :8]
    for form, call, mark in (("bn", "bn_stats", "MARK-pr-bn"), ("bn_new", "bn_stats", "MARK-pr-bn-new"),
                             ("max8", "max8", "MARK-pr-max8"), ("max8_new", "max8", "MARK-pr-max8-new")):
        got, said = _run_all(x, form)
        assert said == [_undefined(mark, call, "MARK-pr-load", 160)], (form, said)
        if form.startswith("bn"):
            # count, mean, variance * count of the even and of the odd elements: 32 of each, means NaN
            assert (got[:, [0, 3]] == 32).all() and np.isnan(got[:, [1, 2, 4, 5]]).all(), form
        else:
            same_f32(got[:, :8], top8)
    # A dst= of the whole tile's partitions: the instruction reads all of them (it was a RuleError "dst must be
    # [100, 8]" of the kernel's [128, 64] tile), rows 100-127 and columns 40-63 no instruction wrote.
    got, said = _run_all(x, "max8_new_rows")
    assert said == [_undefined("MARK-pr-rowsmax", "max8", "MARK-pr-rows-load", 0).replace("'t'", "'u'").replace(
        "(partition 0,", "(partition 100,")], said
    same_f32(got[:100, :8], top8[:100])
    assert np.isnan(got[100:, :8]).all()
    # nc_find_index8 counts positions in the tile it is given: it searches t's whole tile, as NKI's instruction
    # does, the 24 columns no instruction wrote with the warning of such a read (tester23ai F10).
    got, said = _run_all(x, "index8")
    assert said == [_undefined("MARK-pr-index8", "nc_find_index8", "MARK-pr-load", 160)], said
    assert np.array_equal(got[:, :8], np.argsort(-held, axis=1, kind="stable")[:, :8].astype(np.float32))
    # The call's own mask bounds the dim: the device reads columns 0-39 too, all written: quiet.
    for form in ("bn_masked", "max8_masked"):
        got, said = _run_all(x, form)
        assert said == [], (form, said)
    same_f32(_run_all(x, "max8_masked")[0][:, :8], top8)
    h = held.astype(np.float64)
    got = _run_all(x, "bn_masked")[0]
    assert np.allclose(got[:, 0], h.mean(1), atol=1e-6) and np.allclose(got[:, 1], h.var(1), atol=1e-5)


def test_an_rms_norm_of_a_partly_held_tile_is_warned():
    # tester23ai F8: nl.rms_norm(t, w, 1, 64) of a tile holding columns 0-39 summed their squares only, silently,
    # where nl.var / nl.mean of it are warned; the device sums all 64, 24 undefined.
    x = np.random.default_rng(18).standard_normal((128, 64)).astype(np.float32)
    h = x[:, :40].astype(np.float64)
    want = h / np.sqrt((h * h).sum(axis=1, keepdims=True) / 64 + 1e-6) * 2
    for form, warns in (("rms", [_warning("MARK-pr-rms", "tensor_reduce", "reduces", "[128, 40]", (0, 40), 64,
                                          "MARK-pr-load", "i_f < 40")]), ("rms_masked", [])):
        got, said = _run(x, form)
        assert said == warns, (form, said)
        assert np.allclose(got[:, :40], want, rtol=1e-5, atol=1e-6), form


def test_a_scan_of_a_partly_held_tile_scans_the_whole_tile():
    # tester23ah F7 addendum: the unmasked scan of a tile holding columns 24-63 restarted its prefix sum at column
    # 24 with no warning; then (fix23aw) with trnsim's warning that the device scans from column 0. Without a mask
    # of its own it is one instruction over all 64 columns, from column 0: the columns no instruction wrote read
    # undefined (NaN here), with the simulator's warning, and the sum carries them on; masked to the held columns,
    # it scans those, quietly.
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 7 - 3) / np.float32(8)
    got, said = _run_all(x, "scan")
    assert said == [_undefined("MARK-pr-scancall", "tensor_tensor_scan", "MARK-pr-scan-load", 0)], said
    assert np.isnan(got).all()
    got, said = _run_all(x, "scan_head")  # holds columns 0-39: those are defined, the rest NaN
    assert said == [_undefined("MARK-pr-scancall", "tensor_tensor_scan", "MARK-pr-scan-load", 160)], said
    same_f32(got[:, :40], np.cumsum(x[:, :40], axis=1))
    assert np.isnan(got[:, 40:]).all()
    got, said = _run_all(x, "scan_masked")
    assert said == [], said
    same_f32(got[:, :40], np.cumsum(x[:, :40], axis=1))


@tnki.jit
def _slice_of_a_row_masked_tile(x, made):
    import nki.language as nl

    o = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    i_p1 = nl.arange(128)[:, None]
    if made == "load":
        e = nl.load(x[i_p, i_f], mask=(i_p < 72))
    else:
        e = nl.exp(nl.load(x), mask=(i_p < 72))
    r = nl.sum(e[:, 8:40], axis=1, keepdims=True, mask=(i_p1 < 72))
    nl.store(o[i_p1, 0], r[i_p1, 0], mask=(i_p1 < 72))
    return o


def test_a_column_slice_of_a_row_masked_tile_reduced_under_its_row_mask_is_quiet():
    # tester23ah F1: e holds every column of rows 0-71; nl.sum(e[:, 8:40], ...) reads no undefined element, but
    # was warned "holds only [8, 40) of its 64 ... the device reduces all 64".
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 11) / np.float32(4)
    for made in ("load", "exp"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = tnki.simulate_kernel(_slice_of_a_row_masked_tile, x, made)
        assert [str(w.message) for w in caught if "output o" not in str(w.message)] == [], made
        v = x[:72, 8:40] if made == "load" else np.exp(x[:72, 8:40].astype(np.float64))
        assert np.allclose(got[:72, 0], v.sum(axis=1), rtol=1e-6), made


@tnki.jit
def _views_inside_the_held_part(x, form):
    import nki.isa as nisa
    import nki.language as nl

    o = nl.ndarray((128, 8), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    if form == "chunk":  # NKI's LayerNorm tutorial (v2): a 3-D grid's rows, a [512, 6] grid's chunk columns
        j_p, j_f, _ = nl.mgrid[0:128, 0:1000, 0:1]
        i_fb, _s = nl.mgrid[0:512, 0:6]
        t = nl.load(x[j_p, j_f], mask=(j_p < 128))  # bounds nothing: t holds all of [128, 1000]
        st = nisa.bn_stats(t[j_p, 512 + i_fb], mask=(512 + i_fb < 1000))
        nl.store(o[:, 0:2], nisa.bn_aggr(st))
        return o
    e = nl.load(x[i_p, i_f], mask=(i_f < 40))  # holds columns 0-39 of [128, 64]
    if form == "sos":
        r = nl.sum(e[:, 16:64][:, 0:24], axis=1, keepdims=True)
    elif form == "ap":
        r = nisa.max8(src=e.ap(pattern=[[64, 128], [1, 24]], offset=16))
    else:  # a view made before a pad that fills the tile
        v = e[:, 16:64][:, 0:48]
        nisa.memset(dst=e[:, 40:64], value=100.0)
        r = nl.max(v, axis=1, keepdims=True)
    nl.store(o[:, 0:r.shape[1]], r)
    return o


def test_a_view_inside_the_held_part_is_not_warned():
    # tester23ai F2 / F12: a slice of a slice, an .ap view, a view made before a pad filled the tile, and NKI's
    # LayerNorm tutorial's bn_stats chunk of a tile its row mask left whole were each warned "holds only [16, 40)
    # of its 64 ... the device reduces all 64": the device reduces the view's elements, all written.
    x = np.random.default_rng(19).standard_normal((128, 1000)).astype(np.float32)
    for form in ("sos", "ap", "pad", "chunk"):
        xs = x if form == "chunk" else np.ascontiguousarray(x[:, :64])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = tnki.simulate_kernel(_views_inside_the_held_part, xs, form)
        assert [str(w.message) for w in caught if "output o" not in str(w.message)] == [], form
        if form == "sos":
            assert np.allclose(got[:, 0], x[:, 16:40].sum(axis=1), rtol=1e-5, atol=1e-5)
        elif form == "ap":
            assert np.array_equal(got, -np.sort(-x[:, 16:40], axis=1)[:, :8])
        elif form == "pad":
            assert (got[:, 0] == 100.0).all()
        else:
            h = x[:, 512:].astype(np.float64)
            assert np.allclose(got[:, 0], h.mean(1), atol=1e-6) and np.allclose(got[:, 1], h.var(1), atol=1e-5)


@tnki.jit
def _copy_past_the_held_part(x, form):
    import nki.isa as nisa
    import nki.language as nl

    o = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:128]
    if form == "transpose":
        e = nl.load(x[i_p, i_f], mask=(i_f < 100))  # MARK-pr8-made-t
        tt = nl.transpose(e)  # MARK-pr8-tt
        nl.store(o, tt)  # MARK-pr8-store-t
    elif form == "unnamed":
        e = nl.load(x[i_p, i_f], mask=(i_p < 100))  # MARK-pr8-made-u
        nl.store(o, nl.copy(e))  # MARK-pr8-store-u
    else:
        u = nl.load(x[i_p, i_f], mask=(i_f < 30))  # MARK-pr8-made-d
        nisa.dma_copy(dst=o, src=u)  # MARK-pr8-dma (to HBM: an on-chip dst reads u whole, tester23ah F4)
    return o


def test_the_looser_mask_advice_names_the_tile_and_fits_the_call():
    # tester23ah F8: the advice said "mask the copy as that call, or index the result (e[i_p, i_f] ...)" for a
    # tile called tt, an unnamed result, and nisa.dma_copy, whose current signature takes no mask.
    x = np.zeros((128, 128), np.float32)
    line = lambda m: line_of(__file__, m)
    why = " (a result computed without a mask holds its operand's part)"
    for form, at, what, operand, tile, made, held, mask, fix in (
            ("transpose", "MARK-pr8-store-t", "nl.store: the copy reads [0, 128) of dim 0", "[100, 128]",
             "psum tile tt", "MARK-pr8-tt", 100, "i_f < 100", "mask the store as that call, or index tt "
             "(tt[i_p, i_f]: its undefined rest is read with a warning)"),
            ("unnamed", "MARK-pr8-store-u", "nl.store: the copy reads [0, 128) of dim 0", "[100, 128]",
             "sbuf tile", "MARK-pr8-store-u", 100, "i_p < 100", "mask the store as that call, or index the "
             "result (with index variables: its undefined rest is read with a warning)"),
            ("dma", "MARK-pr8-dma", "nki.isa.dma_copy: the copy reads [0, 128) of dim 1", "[128, 30]",
             "sbuf tile u", "MARK-pr8-made-d", 30, "i_f < 30", "index u (u[i_p, i_f]: its undefined rest is "
             "read with a warning), or copy only the part it holds (both sides cut to it)")):
        e = raises(NkiError, tnki.simulate_kernel, _copy_past_the_held_part, x, form)
        src = {"transpose": "MARK-pr8-made-t", "unnamed": "MARK-pr8-made-u", "dma": "MARK-pr8-made-d"}[form]
        assert str(e) == (
            "test_nki_partial_reads.py:%d: %s, but operand %s of %s [128, 128] float32 allocated at "
            "test_nki_partial_reads.py:%d holds only [0, %d) of it, the part mask=(%s) at test_nki_partial_reads.py:%d "
            "selected%s: %s" % (line(at), what, operand, tile, line(made), held, mask, line(src),
                                why if made != src else "", fix)), (form, str(e))


@tnki.jit
def _k_bound_on_different_k_rows(a, b, form):
    import nki.language as nl

    o = nl.ndarray((128, 256), nl.float32, buffer=nl.shared_hbm)
    i_k, i_m = nl.mgrid[0:128, 0:128]
    j_k, j_n = nl.mgrid[0:128, 0:256]
    x = nl.load(a[i_k, i_m], mask=(i_k < 64))
    y = nl.load(b[j_k, j_n], mask=(j_k < 100))
    if form == "whole":
        p = nl.matmul(x, y, transpose_x=True, mask=(i_k < 64))  # MARK-pr3-whole
    else:
        i_n = nl.arange(256)[None, :]
        p = nl.matmul(x[i_k, i_m], y[i_k, i_n], transpose_x=True, mask=(i_k < 64))
    nl.store(o, p)
    return o


def test_a_k_bound_on_whole_tiles_holding_different_k_rows_is_told_to_index_both_by_one_k_variable():
    # tester23ah F3: the error's only advice was about a bound on M; the indexed form it now names runs.
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, (128, 128)).astype(np.float32)
    b = rng.integers(-3, 4, (128, 256)).astype(np.float32)
    e = raises(NkiError, tnki.simulate_kernel, _k_bound_on_different_k_rows, a, b, "whole")
    assert str(e).startswith("test_nki_partial_reads.py:%d: nl.matmul: mask=(i_k < 64) bounds a variable of axis 0 "
                             "to [0, 64): of tiles passed whole, that is the contraction dim K ("
                             % line_of(__file__, "MARK-pr3-whole")), str(e)
    assert str(e).endswith(
        "but y holds K rows [0, 100) of its 128: on tiles passed whole, trnsim cannot tell a bound narrower than the "
        "K rows an operand holds from one on the result's rows (M). To bound K (operands holding different K rows, "
        "or fewer than they hold), index both operands by the same K variable (x[i_k, i_m], y[i_k, i_n] with "
        "mask=(i_k < K)); to bound M, x[i_k, i_m] with mask=(i_m < M)"), str(e)
    got = tnki.simulate_kernel(_k_bound_on_different_k_rows, a, b, "indexed")
    assert np.array_equal(got, a[:64].T @ b[:64]), np.abs(got - a[:64].T @ b[:64]).max()


@tnki.jit
def _mask_on_the_dim_its_variable_indexes(x, form):
    import nki.isa as nisa
    import nki.language as nl

    o = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:64]
    if form == "column_of_axis_0":  # a 2-D grid's axis-0 variable indexing the free dim
        t = nl.load(x[i_p, i_f], mask=(i_f < 40))
        j = nl.arange(64)[:, None]
        nl.store(o[:, 0:1], nl.sum(t[0:128, j], axis=1, keepdims=True, mask=(j < 40)))
    elif form == "row_iota_on_3d":  # a [None, :] iota on the last free dim of a 3-D tile
        b_p, b_a, b_f = nl.mgrid[0:128, 0:4, 0:16]
        t = nl.load(x.reshape((128, 4, 16))[b_p, b_a, b_f], mask=(b_f < 10))
        jf = nl.arange(16)[None, :]
        nl.store(o[:, 0:4], nl.sum(t[0:128, 0:4, jf], axis=2, mask=(jf < 10)))
    elif form == "tile_beside_3d_grid":  # t passed whole beside an operand indexed by a 3-D grid's variables
        t = nl.load(x[i_p, i_f], mask=(i_f < 40))
        ones = nl.full((128, 64), 1.0, nl.float32)
        k_p, _k, k_f = nl.mgrid[0:128, 0:1, 0:64]
        s = nisa.tensor_tensor_scan(data0=ones[k_p, k_f], data1=t, initial=0.0, op0=nl.multiply, op1=nl.add,
                                    mask=(k_f < 40))
        nl.store(o[:, 0:40], s[:, 0:40])
    else:  # "axis_2_on_dim_1": a 3-D grid's axis-2 variable indexing dim 1; dim 2 of t, held in part, unbounded
        b_p, b_a, b_f = nl.mgrid[0:128, 0:4, 0:16]
        t = nl.load(x.reshape((128, 4, 16))[b_p, b_a, b_f], mask=(b_f < 10))  # MARK-pr9-load
        ones = nl.full((128, 4, 16), 1.0, nl.float32)
        a_p, _a, a_f = nl.mgrid[0:128, 0:1, 0:4]
        s = nisa.tensor_tensor_scan(data0=ones[a_p, a_f, 0:10], data1=t, initial=0.0, op0=nl.multiply,  # MARK-pr9-scan
                                    op1=nl.add, mask=(a_f < 3))
        nl.store(o.reshape((128, 4, 16))[:, 0:3, 0:10], s[:, 0:3, 0:10])
    return o


def test_a_mask_bounds_the_dim_its_variable_indexes_for_the_partial_read_warning():
    # fix23aw: the warning's test of the call's own mask took a variable of axis a as bounding dim a (axis 0: the
    # partitions) whatever dim it indexed: a reduction masked to the held columns by a [:, None] iota on dim 1,
    # by a [None, :] iota on the last dim of a 3-D tile, or a scan of a tile beside a 3-D grid's operand, was
    # warned "the device reduces all 64"; a 3-D grid's axis-2 variable on dim 1 hid dim 2, which the scan reads
    # whole on the device, 6 of its 16 columns unwritten.
    x = (np.arange(128 * 64, dtype=np.float32).reshape(128, 64) % 7 - 3) / np.float32(8)
    x3 = x.reshape(128, 4, 16)
    quiet = {"column_of_axis_0": (slice(0, 1), x[:, :40].sum(axis=1, keepdims=True)),
             "row_iota_on_3d": (slice(0, 4), x3[:, :, :10].sum(axis=2)),
             "tile_beside_3d_grid": (slice(0, 40), np.cumsum(x[:, :40], axis=1))}
    for form, (cols, want) in quiet.items():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = tnki.simulate_kernel(_mask_on_the_dim_its_variable_indexes, x, form)
        assert [str(w.message) for w in caught if "output o" not in str(w.message)] == [], form
        assert got[:, cols].astype(np.float32).tobytes() == want.astype(np.float32).tobytes(), form
    got, said = _run_k(x, "axis_2_on_dim_1")
    line = lambda m: line_of(__file__, m)
    assert said == [
        "test_nki_partial_reads.py:%d: tensor_tensor_scan scans dim 2 of [128, 3, 10] of sbuf tile t [128, 4, 16] "
        "float32 allocated at test_nki_partial_reads.py:%d, which holds only [0, 10) of its 16 (the part "
        "mask=(b_f < 10) at test_nki_partial_reads.py:%d selected): trnsim scans that part; the device scans all "
        "16, 6 of them written by no instruction (undefined): mask this call as the one that made the operand"
        % (line("MARK-pr9-scan"), line("MARK-pr9-load"), line("MARK-pr9-load"))], said
    got3 = got.reshape(128, 4, 16)
    # (the scan runs along the free elements in order: the 3 x 10 held ones, one prefix sum per partition)
    want = np.cumsum(x3[:, :3, :10].reshape(128, 30), axis=1).reshape(128, 3, 10)
    assert got3[:, :3, :10].tobytes() == want.astype(np.float32).tobytes()


def _run_k(x, form):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = tnki.simulate_kernel(_mask_on_the_dim_its_variable_indexes, x, form)
    return got, _said(caught)


if __name__ == "__main__":
    main(globals())
