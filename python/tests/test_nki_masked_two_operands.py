"""A masked result combined, unmasked, with a tile of the whole index-space shape (issue 23, tester23aj F4, F2,
F1): the whole operand is cut to the part the call computes, as for one operand; each test fails on the build
before its fix, with exact bytes against NumPy and exact messages."""

import numpy as np

from runner import main, raises_at, warned

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki
import nki.isa as nisa
import nki.language as nl

X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / np.float32(1024)
B = (np.arange(128, dtype=np.float32) / np.float32(64)).reshape(128, 1)


# ---- F4: held rows starting where no compute instruction may start


@nki.jit
def mid_rows_with_a_whole_operand(x, b, lo, case):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    m = (i_p >= lo) & (i_p < 100)
    t = nl.load(x[i_p, i_f], mask=m)  # holds rows lo-99 of [128, 64]
    ones = nl.ones((128, 64), nl.float32, buffer=nl.sbuf)
    if case == "nl.add":
        r = nl.add(ones, t)
    elif case == "tensor_tensor":
        r = nisa.tensor_tensor(t, ones, op=nl.add)
    elif case == "scan":
        z = nl.zeros((128, 1), nl.float32, buffer=nl.sbuf)
        r = nisa.tensor_tensor_scan(ones, t, z, op0=nl.multiply, op1=nl.add)
    elif case == "acc":
        r = nl.zeros((128, 64), nl.float32, buffer=nl.sbuf)
        r += t
    else:  # a whole [128, 1] bias
        r = nisa.activation(op=nl.copy, data=t, bias=nl.load(b))
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[i_p, i_f], r, mask=m)
    return out


def test_mid_rows_combined_with_a_whole_tile_compute_from_a_legal_start():
    # Rows 40-99 and 3-99 start where no compute instruction may: the call computes from the nearest start below
    # (rows 32-99, 0-99), reading t's rows before lo with the warning, as nl.exp(t) does; it was "nl.add:
    # operands [100, 64] and [128, 64] do not broadcast" (the whole operand cut, t not).
    wants = {"nl.add": X + np.float32(1), "tensor_tensor": X + np.float32(1), "scan": np.cumsum(X, axis=1,
             dtype=np.float32), "acc": X, "activation": X + B}
    for lo in (40, 3):
        for case, want in wants.items():
            got, ws = warned(tnki.simulate_kernel, mid_rows_with_a_whole_operand, X, B, lo, case)
            assert got[lo:100].tobytes() == want[lo:100].tobytes(), (lo, case, got[lo:lo + 2, :3], want[lo, :3])
            assert any("where no instruction wrote before" in w for w in ws), (lo, case, ws)


# ---- F2: a [P, 1] row-masked result combined with a whole [P, F] tile


@nki.jit
def column_of_held_rows(x, lo, case):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    m = (i_p >= lo) & (i_p < 100)
    xs = nl.load(x)
    s = nl.max(nl.load(x[i_p, i_f], mask=m), axis=1, keepdims=True)  # [128, 1] holding rows lo-99
    if case == "nl.add":
        r = nl.add(xs, s)
    elif case == "nl.subtract":
        r = nl.subtract(s, xs)
    else:
        r = nisa.tensor_scalar(data=xs, op0=nl.add, operand0=s)
    out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[i_p, i_f], r, mask=m)
    return out


def test_a_column_of_held_rows_cuts_a_whole_tile_to_them():
    # `nl.add(xs, s)` was "operands [128, 64] and [100, 1] do not broadcast", the earlier-style tensor_scalar
    # "operand0 [100, 1] must be a scalar or a [128, 1] vector": xs is cut to s's rows (from the nearest legal
    # start for rows 40-99), as docs/nki.md "Masks" says.
    s = X.max(axis=1, keepdims=True)
    wants = {"nl.add": X + s, "nl.subtract": s - X, "tensor_scalar": X + s}
    for lo in (0, 40):
        for case, want in wants.items():
            got = tnki.simulate_kernel(column_of_held_rows, X, lo, case)
            assert got[lo:100].tobytes() == want[lo:100].tobytes(), (lo, case, got[lo, :3], want[lo, :3])


# ---- F1: a narrower dst= with a [P, 1] row-masked operand0=


@nki.jit
def narrow_dst_with_a_column(x, case):
    i_p, i_f = nl.mgrid[0:128, 0:64]
    xs = nl.load(x)
    if case == "masked":
        s = nl.max(nl.load(x[i_p, i_f], mask=(i_p < 100)), axis=1, keepdims=True)  # [128, 1] holding rows 0-99
    else:
        s = nl.max(xs, axis=1, keepdims=True)
    d = nl.ndarray((100, 64), nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=d, data=xs[0:100, :], op0=nl.add, operand0=s)  # MARK-narrow-dst
    out = nl.ndarray((100, 64), nl.float32, buffer=nl.shared_hbm)
    nl.store(out, d)
    return out


def test_a_narrower_dst_refuses_a_row_masked_column_as_a_whole_one():
    # s is a [128, 1] tile either way; the masked one ran quietly with a [100, 64] dst (rows 0-99 + s).
    for case in ("whole", "masked"):
        raises_at(NkiError, "tensor_scalar: operand0 [128, 1] must be a scalar or a [100, 1] vector", __file__,
                  "MARK-narrow-dst", tnki.simulate_kernel, narrow_dst_with_a_column, X, case)


if __name__ == "__main__":
    main(globals())
