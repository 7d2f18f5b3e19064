"""A mask applies to the call's index space (docs/nki.md "Masks"): an operand indexed along the same axis by
another nl.arange of the same extent is cut where the mask's variable is (tester23ak F5: nki-samples'
interpolate_bilinear_fwd stores its tail tile as `nl.store(o[i_p_hbm, ...], value=t[i_p_tile, ...],
mask=(i_p_hbm < n))`, which was "nl.store: cannot copy a [128, 64] tile to a [100, 64] region"). Where the mask
cannot cut both sides of a copy alike, the error names the mask. Exact bytes against NumPy, exact messages."""

import numpy as np

from runner import main, raises_at

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tail_store(x, case):
    # x [n, 64], n not a multiple of 128: tiles of 128 rows, the last one cut by the mask on the HBM index.
    n = x.shape[0]
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    i_f = nl.arange(64)[None, :]
    for p in nl.affine_range((n + 127) // 128):
        i_p_hbm = p * 128 + nl.arange(128)[:, None]
        i_p_tile = nl.arange(128)[:, None]
        if case == "store":
            t = nl.load(x[i_p_hbm, i_f], mask=(i_p_hbm < n))
            nl.store(o[i_p_hbm, i_f], value=t[i_p_tile, i_f], mask=(i_p_hbm < n))
        elif case == "load_into":
            t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
            t[i_p_tile, i_f] = nl.load(x[i_p_hbm, i_f], mask=(i_p_hbm < n))
            nl.store(o[i_p_hbm, i_f], value=t[i_p_tile, i_f], mask=(i_p_hbm < n))
        else:  # a DMA with the mask on its source's index only
            t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t[i_p_tile, i_f], src=x[i_p_hbm, i_f], mask=(i_p_hbm < n))
            nisa.dma_copy(dst=o[i_p_hbm, i_f], src=t[i_p_tile, i_f], mask=(i_p_hbm < n))
    return o


def test_the_mask_cuts_an_operand_indexed_by_a_twin_variable():
    for n in (100, 228, 256):
        x = np.arange(n * 64, dtype=np.float32).reshape(n, 64) / np.float32(64)
        for case in ("store", "load_into", "dma"):
            got = tnki.simulate_kernel(tail_store, x, case)
            assert got.tobytes() == x.tobytes(), (n, case)


@nki.jit
def ranks_store(x):
    # o's index space is 3-D, the value's 2-D: the mask's variable has no twin in the value's index.
    o = nl.ndarray((128, 1, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p3 = nl.arange(128)[:, None, None]
    i_one = nl.arange(1)[None, :, None]
    i_f3 = nl.arange(64)[None, None, :]
    i_p, i_f = nl.mgrid[0:128, 0:64]
    t = nl.load(x[i_p, i_f])
    nl.store(o[i_p3, i_one, i_f3], value=t[i_p, i_f], mask=(i_p3 < 100))  # MARK-ranks
    return o


def test_a_mask_that_cuts_one_side_of_a_copy_is_named():
    x = np.ones((128, 64), np.float32)
    raises_at(NkiError, "nl.store: mask=(i_p3 < 100) cuts dst [128, 1, 64] to [100, 1, 64] and leaves value at "
              "[128, 64], which no longer fit: a copy's mask cuts the axes its nl.arange variables index, and "
              "those of the other side that another nl.arange of the same axis and extent indexes, in an index "
              "space of as many dims: index both sides so", __file__, "MARK-ranks", tnki.simulate_kernel, ranks_store, x)


if __name__ == "__main__":
    main(globals())
