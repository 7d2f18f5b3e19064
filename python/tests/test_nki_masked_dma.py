"""DMAs around masked tiles and PSUM (issue 23, tester23aj F3): nl.store of PSUM rows from a partition no engine
instruction may start at. Each test fails on the build before its fix, with exact bytes against NumPy and exact
messages."""

import os

import numpy as np

from runner import line_of, main, raises, same_f32, warned

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki
import nki.isa as nisa
import nki.language as nl

THIS = os.path.basename(__file__)
# integer values: every FP32 sum of products is exact, whatever the order
XT = (np.arange(128 * 64) % 7).astype(np.float32).reshape(128, 64)
YT = (np.arange(128 * 100) % 5).astype(np.float32).reshape(128, 100)


def line(marker):
    return line_of(__file__, marker)


# ---- tester23aj F3: nl.store of PSUM rows starting at partition 8


@nki.jit
def store_psum_rows(x, y, case):
    i_m, i_f = nl.arange(64)[:, None], nl.arange(100)[None, :]
    out = nl.ndarray((64, 100), nl.float32, buffer=nl.shared_hbm)
    nl.store(out[0:8, :], nl.full((8, 100), -1.0, nl.float32))
    if case == "dma":  # rows 8-63 of a PSUM tile written by a DMA: rows 0-7 never written
        acc = nl.ndarray((64, 100), nl.float32, buffer=nl.psum)
        nisa.dma_copy(dst=acc[8:64], src=y[8:64, :])
        nl.store(out[8:64], acc[8:64])  # MARK-store-dma
        return out
    acc = nl.matmul(nl.load(x), nl.load(y), transpose_x=True)  # [64, 100] in PSUM
    if case == "slice":
        nl.store(out[8:64], acc[8:64])  # MARK-store-slice
    else:
        nl.store(out[i_m, i_f], acc[i_m, i_f], mask=(i_m >= 8))  # MARK-store-mask
    return out


def test_a_store_of_psum_rows_from_partition_8_copies_from_a_legal_start():
    # Both were "nl.store: its tensor_copy on ACT (made by trnsim's lowering of nl.store, ...): partition start:
    # src spans 56 partitions from 8 (33-64 must start at 0 or 64)": the store's own PSUM-to-SBUF copy broke the
    # rule. The copy now starts at partition 0 and the DMA stores rows 8-63 of it.
    want = np.concatenate([np.full((8, 100), -1.0, np.float32), (XT.T @ YT)[8:]])
    for case in ("slice", "mask"):
        got, ws = warned(tnki.simulate_kernel, store_psum_rows, XT, YT, case)
        same_f32(got, want)
        assert not ws, ws  # (rows 0-7 of acc hold the matmul's product: nothing undefined is read)
    # rows 0-7 of the PSUM tile no instruction wrote: the copy reads them (not stored), and its warning says so
    got, ws = warned(tnki.simulate_kernel, store_psum_rows, XT, YT, "dma")
    same_f32(got, np.concatenate([np.full((8, 100), -1.0, np.float32), YT[8:64]]))
    assert ws == [
        f"{THIS}:{line('MARK-store-dma')}: nl.store: its tensor_copy (made by trnsim's lowering of nl.store) reads "
        f"psum 'acc' [64, 100] float32 allocated at {THIS}:{line('MARK-store-dma') - 2} where no instruction wrote "
        "before (partition 0, byte 0 of the read is the first such): its values are undefined (a tile starts "
        "uninitialised, as numpy.empty's contents; trnsim's memory starts as NaN); partitions 0-7, before the "
        "stored 8-63, are read because the copy to SBUF starts at partition 0, the nearest start an engine "
        "instruction may have for these rows: not stored"], ws


if __name__ == "__main__":
    main(globals())
