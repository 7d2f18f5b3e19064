"""A masked call's result passed whole, or sliced, into other calls (tester23af F1 addenda, F6, F9, F10, issue
23): each works on the tile's whole shape, as its `.shape` says, reading the undefined rest with the
simulator's warning, never a shape the kernel never sees; each test fails on the build before its fix, with
exact bytes against NumPy and exact messages."""

import os
import warnings

import numpy as np

from runner import line_of, main, raises

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64) / np.float32(1024)


def line(marker):
    return line_of(__file__, marker)


def warned(fn, *args):
    """fn(*args) and the messages of the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = fn(*args)
    return r, [str(w.message) for w in caught]


def same(got, want):
    want = np.asarray(want, np.float32)
    assert got.shape == want.shape and got.tobytes() == want.tobytes(), (got.ravel()[:4], want.ravel()[:4])


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
    same(tnki.simulate_kernel(masked_call_on_a_view, X, "col"), want)
    want = np.full((128, 32), 9.0, np.float32)
    want[:80] = X[:80, :32] * np.float32(2) * np.float32(3) + np.float32(1)
    same(tnki.simulate_kernel(masked_call_on_a_view, X, "slice"), want)


if __name__ == "__main__":
    main(globals())
