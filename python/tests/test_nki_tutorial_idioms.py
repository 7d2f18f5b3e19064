"""Idioms of NKI's public tutorials that trnsim refused (tester23m, issue 23): each test fails on main, with
exact bytes against NumPy or the exact message."""

import warnings

import numpy as np

from runner import main

import trnsim.nki as tnki

import nki
import nki.language as nl


def same(got, want):
    want = np.asarray(want, np.float32)
    assert got.shape == want.shape and got.tobytes() == want.tobytes(), (got.ravel()[:4], want.ravel()[:4])


SHAPES = []  # .shape of each masked nl.load's tile as the kernel below sees it


@nki.jit
def rotate_half_tail(x, s):
    # nki-samples' rotary tutorial on a tail tile: its output tile sized from the masked load's .shape.
    n, d = x.shape
    out = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.mgrid[0:128, 0:d]
    for t in nl.affine_range((n + 127) // 128):
        m = t * 128 + i_p < n
        xt = nl.load(x[t * 128 + i_p, i_f], mask=m)
        st = nl.load(s[t * 128 + i_p, i_f], mask=m)
        SHAPES.append(xt.shape)
        o = nl.ndarray((nl.par_dim(xt.shape[0]), xt.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        o[:, :] = xt * st
        o[:, : d // 2] = o[:, : d // 2] + (-1 * xt[:, d // 2:] * st[:, : d // 2])
        nl.store(out[t * 128 + i_p, i_f], o[:, :], mask=m)
    return out


def test_a_masked_load_has_the_shape_of_its_index():
    # F7: a masked nl.load's tile said .shape (72, 64) in the tail iteration (the masked-in rows) while its
    # indices address the index's 128 rows, so the rotary tutorial's tile sized from it met `xt[:, 32:]`
    # ([128, 32]) in an nl.add: "operands [72, 32] and [128, 32] do not broadcast". In NKI the tile has the
    # index's shape (NKI API Masking: the mask selects the elements the instruction touches).
    rs = np.random.RandomState(13)
    x = rs.randint(-3, 4, (200, 64)).astype(np.float32)
    s = rs.randint(-3, 4, (200, 64)).astype(np.float32)
    want = x * s
    want[:, :32] += -1 * x[:, 32:] * s[:, :32]  # small integers: exact in float32
    del SHAPES[:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (rows 72-127 of the tail tile are read undefined, as in NKI)
        got = tnki.simulate_kernel(rotate_half_tail, x, s)
    assert SHAPES == [(128, 64)] * 2, SHAPES  # (the full tile, then the tail tile)
    same(got, want)


if __name__ == "__main__":
    main(globals())
