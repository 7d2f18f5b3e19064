"""A mask that selects nothing (tester23n F8: the SPMD tail idiom, LNC2 row-sharded kernels whose row-tile
count is odd or below the program count): NKI emits no instruction for the call, and the call's tile, which
no instruction wrote, makes every later call that uses it emit nothing too (docs/nki.md "Masks"; _void.py).
It was an NkiError at the masked nl.load ("the mask selects no element ... cannot be empty here")."""

import os

import numpy as np

from runner import KERNELS, line_of, main

import trnsim.nki as tnki

import nki_empty_masks as K

SRC = os.path.join(KERNELS, "nki_empty_masks.py")


def rows(n):
    """[n, 16] small integers (every sum below exact in FP32)."""
    return (np.arange(n * 16) % 7 - 3).astype(np.float32).reshape(n, 16)


def test_lnc2_row_tiles_with_empty_tails():
    # row_tiles makes 7 instructions per row tile that holds rows: the load, the multiply, the sum
    # (tensor_reduce), the add of the [P, 1] sum (tensor_scalar), the earlier-style tensor_scalar, the store and
    # the dma_copy; a tile past N makes none. Tiles per program: ceil(ceil(N / 128) / 2).
    # N = 300: 3 row tiles, 2 per program: core 0 tiles 0 (rows 0-127) and 2 (rows 256-299), core 1 tile 1
    # (rows 128-255) and none (rows 384-511): 14 and 7. N = 200 and 130: 2 tiles, one each (core 1: rows
    # 128-199, 128-129): 7 and 7. N = 1: one tile, row 0 on core 0 and nothing on core 1: 7 and 0.
    for n, counts in ((300, [14, 7]), (200, [7, 7]), (130, [7, 7]), (1, [7, 0])):
        x = rows(n)
        r = tnki.benchmark(K.row_tiles[2], x)
        out, twice = r.outputs
        e = 2 * x
        assert out.tobytes() == ((e + e.sum(axis=1, keepdims=True)) * 3).tobytes(), n
        assert twice.tobytes() == e.tobytes(), n
        assert [a["instructions"] for a in r.stats["nki"]["allocation"]] == counts, (n, r.stats["nki"]["allocation"])
        # One program runs every tile: 7 per tile that holds rows.
        r1 = tnki.benchmark(K.row_tiles, x)
        assert r1.outputs[0].tobytes() == out.tobytes(), n
        assert [a["instructions"] for a in r1.stats["nki"]["allocation"]] == [7 * -(-n // 128)], n


def test_a_void_matmul_operand_adds_nothing():
    # Three row tiles of a [256, 32] x: the third, past N, is void, so its nc_matmul and `acc +=` make nothing:
    # the instruction count is two tiles' (w=2).
    x = np.arange(256 * 32, dtype=np.float32).reshape(256, 32) % 5
    r3, r2 = tnki.benchmark(K.column_sums, x, 3), tnki.benchmark(K.column_sums, x, 2)
    assert r3.outputs[0].tobytes() == x.sum(axis=0, keepdims=True).tobytes(), r3.outputs[0]
    counts = [a["instructions"] for a in r3.stats["nki"]["allocation"]]
    assert counts == [a["instructions"] for a in r2.stats["nki"]["allocation"]], counts


def test_unwritten_rows_read_as_any_unwritten_tile():
    # The void tile written in rows 0-3 is an ordinary tile; its rows 4-127 no instruction wrote: the store
    # reads them as trnsim's memory starts (NaN) and warns at the store, as for any tile nobody wrote.
    import warnings

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = tnki.simulate_kernel(K.partly_written, np.ones((128, 8), np.float32))
    assert y[:4].tobytes() == np.full((4, 8), 5.0, np.float32).tobytes() and np.isnan(y[4:]).all(), y[:6, 0]
    at = "nki_empty_masks.py:%d: nl.store: its dma_copy" % line_of(SRC, "MARK-unwritten")
    msgs = [str(m.message) for m in w]
    assert len(msgs) == 1 and msgs[0].startswith(at) and "where no instruction wrote before (partition 4, byte 0" \
        in msgs[0], msgs


if __name__ == "__main__":
    main(globals())
