"""nisa.affine_select with a predicate constant over the tile (tester23ah F2: tail padding in a loop, a causal mask
on a tile pair above or below the diagonal, a predicate Python already evaluated to a bool), and the read of
on_true_tile where the predicate discards its elements (a tail tile padded from a masked load: no undefined-read
warning for the discarded elements, the warning kept for a kept element no instruction wrote). Exact bytes against
NumPy, exact messages."""

import os

import numpy as np

from runner import line_of, main, raises_at, same_f32, warned

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)


def line(marker):
    return line_of(__file__, marker)


# ---- a constant predicate (tester23ah F2)


@nki.jit
def pad_rows(x, style):
    # x [n, 64], n <= 384: out [384, 64] is x in its rows, -1.0 past them, tile by tile. The predicate of tiles
    # 0 and 1 (n = 300) holds on every row, of tile 2 on rows < 44; with n = 256, nowhere on tile 2.
    n = x.shape[0]
    out = nl.ndarray((384, 64), nl.float32, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    for i in nl.affine_range(3):
        t = nl.load(x[i * 128 + i_p, i_f], mask=(i * 128 + i_p < n))  # MARK-pad-load
        if style == "mask":
            s = nisa.affine_select(pred=(i * 128 + i_p < n), on_true_tile=t, on_false_value=-1.0)  # MARK-pad-sel
        elif style == "bool":
            # rows of the tile past n as a Python bool per tile (n a multiple of 128 here)
            s = nisa.affine_select(pred=(i * 128 < n), on_true_tile=t, on_false_value=-1.0)
        else:  # the current style: n - (i * 128 + p) > 0, on a tile of its own
            s = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
            nisa.affine_select(dst=s, pattern=[[0, 64]], offset=n - i * 128, channel_multiplier=-1, on_true_tile=t,
                               on_false_value=-1.0, cmp_op=nl.greater)
        nl.store(out[i * 128 + i_p, i_f], s)
    return out


def _padded(x):
    want = np.full((384, 64), -1.0, np.float32)
    want[:x.shape[0]] = x
    return want


def test_tail_padding_with_a_predicate_true_on_whole_tiles():
    # Was "affine_select: pred must be one comparison of nl.arange expressions, got a mask of several bounds" on
    # tile 0, whose `i * 128 + i_p < 300` holds on all 128 rows; the select now keeps the whole tile there.
    x = np.arange(300 * 64, dtype=np.float32).reshape(300, 64) / np.float32(64)
    for style in ("mask", "current"):
        got, ws = warned(tnki.simulate_kernel, pad_rows, x, style)
        same_f32(got, _padded(x))
        assert ws == [], (style, ws)


def test_tail_padding_with_a_predicate_false_on_a_whole_tile():
    # n = 256: tile 2 lies past the end, its predicate false on every row (and its load masked to nothing): all
    # of it is on_false_value. A Python bool (`i * 128 < n`) is the same constant predicate (was "got bool").
    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64) - np.float32(5000)
    for style in ("mask", "bool", "current"):
        got, ws = warned(tnki.simulate_kernel, pad_rows, x, style)
        same_f32(got, _padded(x))
        assert ws == [], (style, ws)


@nki.jit
def causal(q, style):
    # q [256, 256]: out = q where row >= column, -9984.0 above the diagonal, over 2 x 2 tiles of [128, 128]: tile
    # (1, 0) lies below the diagonal (the predicate holds on all of it), tile (0, 1) above (nowhere).
    out = nl.ndarray((256, 256), nl.float32, buffer=nl.shared_hbm)
    for qi in nl.affine_range(2):
        for ki in nl.affine_range(2):
            i_q = qi * 128 + nl.arange(128)[:, None]
            i_k = ki * 128 + nl.arange(128)[None, :]
            t = nl.load(q[i_q, i_k])
            if style == "around_zero":
                s = nisa.affine_select(pred=(i_q - i_k >= 0), on_true_tile=t, on_false_value=-9984.0)
            elif style == "two_sides":
                s = nisa.affine_select(pred=(i_q >= i_k), on_true_tile=t, on_false_value=-9984.0)
            else:  # "bool": the tile pair's relation, decided by Python, on the off-diagonal tiles
                pred = (i_q >= i_k) if qi == ki else (qi > ki)
                s = nisa.affine_select(pred=pred, on_true_tile=t, on_false_value=-9984.0)
            nl.store(out[i_q, i_k], s)
    return out


def test_a_causal_mask_on_tiles_above_and_below_the_diagonal():
    # `i_q - i_k >= 0` on tile (1, 0) is True while tracing and was "got bool"; on (0, 1) False.
    q = np.arange(256 * 256, dtype=np.float32).reshape(256, 256) / np.float32(256)
    want = np.where(np.arange(256)[:, None] >= np.arange(256)[None, :], q, np.float32(-9984.0))
    for style in ("around_zero", "two_sides", "bool"):
        same_f32(tnki.simulate_kernel(causal, q, style), want)


@nki.jit
def bad_pred(x, case):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x)
    pred = {"and": (i_p < 100) & (i_f < 40), "two_bounds": (i_p >= 10) & (i_p < 20), "expr": i_p + i_f,
            "tile": t, "int": 1, "size": nl.arange(64)[:, None] < 100}[case]
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nisa.affine_select(pred=pred, on_true_tile=t, on_false_value=0.0))  # MARK-bad
    return out


def test_a_predicate_that_is_no_affine_comparison_is_refused():
    x = np.zeros((128, 64), np.float32)
    one = "affine_select: pred must be one comparison of nl.arange expressions"
    for case, said in [
            ("and", one + " (NKI does not combine them with & or |), got a mask bounding i0[128] to [0, 100), "
                    "i1[64] to [0, 40)"),
            ("two_bounds", one + " (NKI does not combine them with & or |), got a mask bounding i0[128] to [10, 20)"),
            ("expr", one + " (e.g. i_q >= i_k, i_q - 2 * i_k > -7), affine in the partition and free indices, or a "
                     "bool, got the index expression i0[128] + i1[64], not a comparison"),
            ("tile", one + " (e.g. i_q >= i_k, i_q - 2 * i_k > -7), affine in the partition and free indices, or a "
                     "bool, got NkiTensor"),
            ("int", one + " (e.g. i_q >= i_k, i_q - 2 * i_k > -7), affine in the partition and free indices, or a "
                    "bool, got int"),
            # constant (true on all 64 rows of its variable), but of another size than the tile's 128 rows
            ("size", "affine_select: pred's index variable i0[64] spans 64, on_true_tile's axis 0 is 128")]:
        raises_at(NkiError, said, __file__, "MARK-bad", tnki.simulate_kernel, bad_pred, x, case)


# ---- the read of on_true_tile where the predicate discards it


@nki.jit
def pad_columns(x, case):
    # x [128, 64]: a tail tile of 40 columns padded with -5.0 by a select that keeps columns < 40 (or < 48, past
    # what the load holds: "too_wide"), then stored with its row max.
    i_p, i_f = nl.arange(128)[:, None], nl.arange(64)[None, :]
    t = nl.load(x[i_p, i_f], mask=(i_f < 40))  # MARK-col-load: holds columns 0-39 of [128, 64]
    if case == "earlier":
        s = nisa.affine_select(pred=(i_f < 40), on_true_tile=t, on_false_value=-5.0)
    elif case == "earlier_too_wide":
        s = nisa.affine_select(pred=(i_f < 48), on_true_tile=t, on_false_value=-5.0)  # MARK-wide-earlier
    else:
        s = t if case == "in_place" else nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        keep = 47 if case == "too_wide" else 39  # keep - f >= 0
        nisa.affine_select(dst=s, pattern=[[-1, 64]], offset=keep, channel_multiplier=0, on_true_tile=t,  # MARK-keep-48
                           on_false_value=-5.0, cmp_op=nl.greater_equal)
    out = nl.ndarray((128, 65), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[:, 0:64], s)
    nl.store(out[:, 64:65], nl.max(s, axis=1, keepdims=True))
    return out


def test_no_undefined_read_warning_for_elements_the_select_discards():
    # Was "affine_select reads sbuf 't' [128, 64] float32 allocated at ... where no instruction wrote before
    # (partition 0, byte 160 ...)": columns 40-63 of t, which the select replaces by -5.0 without using them.
    x = -np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / np.float32(1024) - np.float32(1)
    tile = x.copy()
    tile[:, 40:] = -5
    for case in ("new_tile", "in_place", "earlier"):
        got, ws = warned(tnki.simulate_kernel, pad_columns, x, case)
        same_f32(got, np.concatenate([tile, tile.max(axis=1, keepdims=True)], axis=1))
        assert ws == [], (case, ws)


def test_an_undefined_element_the_select_keeps_is_still_warned():
    # Keeping columns < 48 of a tile holding 40: columns 40-47 are t's unwritten rest (NaN in trnsim).
    x = np.ones((128, 64), np.float32)
    for case, mark in (("too_wide", "MARK-keep-48"), ("earlier_too_wide", "MARK-wide-earlier")):
        got, ws = warned(tnki.simulate_kernel, pad_columns, x, case)
        same_f32(got[:, 0:40], x[:, 0:40])
        assert np.isnan(got[:, 40:48]).all() and (got[:, 48:64] == -5).all(), case
        assert ws == [f"{THIS}:{line(mark)}: affine_select reads sbuf 't' [128, 64] float32 allocated at "
                      f"{THIS}:{line('MARK-col-load')} where no instruction wrote before (partition 0, byte 160 of "
                      "the read is the first such): its values are undefined (a tile starts uninitialised, as "
                      "numpy.empty's contents; trnsim's memory starts as NaN)"], (case, ws)


if __name__ == "__main__":
    main(globals())
