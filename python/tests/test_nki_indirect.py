"""Indirect DMA from Python (nki.isa.dma_copy's vector_offset): an HBM tensor indexed on dim 0 by an SBUF
tile of row indices (`nl.load(x[idx_tile, i_f])`, `nisa.dma_copy(src=x[idx_tile, :])`, a store to
`out[idx_tile, :]`, `.ap(..., vector_offset=)`) gathers or scatters rows, checked against NumPy, with both
oob_modes. On main such an index was refused as "unsupported index", and an .ap gather of more rows than the
tensor has as an access pattern "outside" the tensor."""

import os

import numpy as np

from runner import KERNELS, line_of, main, raises

import trnsim.nki as tnki
import nki.isa as nisa

import nki_indirect as K

SRC = os.path.join(KERNELS, "nki_indirect.py")
R = 100  # rows of x: fewer than the 128 gathered, so the indices repeat rows
X = np.arange(R * 64, dtype=np.float32).reshape(R, 64)
IDX = np.random.RandomState(1).randint(0, R, (128, 1)).astype(np.int32)


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert got.tobytes() == want.tobytes(), np.argwhere(got != want)[:5]


def test_gather_with_load_and_index_expression():
    same(tnki.simulate_kernel(K.gather_load, X, IDX), X[IDX[:, 0]])


def test_gather_columns_with_dma_copy():
    same(tnki.simulate_kernel(K.gather_cols, X, IDX), X[IDX[:, 0], 8:24])
    # uint32 indices too.
    same(tnki.simulate_kernel(K.gather_cols, X, IDX.astype(np.uint32)), X[IDX[:, 0], 8:24])


def test_gather_with_access_pattern():
    same(tnki.simulate_kernel(K.gather_ap, X, IDX), X[IDX[:, 0]])


def test_scatter_with_store():
    perm = np.random.RandomState(2).permutation(R).reshape(-1, 1).astype(np.int32)  # 100 distinct rows
    v = np.random.RandomState(3).randn(R, 64).astype(np.float32)
    want = X.copy()
    want[perm[:, 0]] = v
    same(tnki.simulate_kernel(K.scatter_store, X, v, perm), want)


def test_oob_mode():
    idx = IDX.copy()
    idx[5, 0] = R  # one past the last row
    want = X[np.minimum(idx[:, 0], R - 1), 8:24].copy()
    want[5] = 0  # skipped: the tile's memset value stays
    same(tnki.simulate_kernel(K.gather_cols, X, idx, oob_mode=nisa.oob_mode.skip), want)
    e = raises(Exception, tnki.simulate_kernel, K.gather_cols, X, idx)
    line = line_of(SRC, "# gather")
    assert f"nki_indirect.py:{line}:" in str(e) and "indirect bounds: vector_offset[5] = 100 is outside rows " \
        "[0, 100) of tensor 'x'" in str(e), e


def test_refusals_name_the_line():
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, K.index_on_chip, X[:64], IDX[:64])
    assert f"nki_indirect.py:{line_of(SRC, '# refused: indices pick')}:" in str(e), e
    assert "indexing an on-chip tensor by a tile of indices" in str(e), e
    e = raises(tnki.NkiError, tnki.simulate_kernel, K.float_indices, X, IDX.astype(np.float32))
    assert f"nki_indirect.py:{line_of(SRC, '# refused: the indices are float32')}:" in str(e), e
    assert "row indices must be an int32 or uint32 [P, 1] tile" in str(e), e


def test_oob_mode_skip_with_a_scalar_offset():
    # tester23ag F2: with oob_mode skip, the rows a run-time scalar_offset moves outside the tensor are skipped
    # (their destination keeps its value), as vector_offset rows are; it was a RuleError "scalar_offset = 20
    # moves dst by 20 rows of 32 bytes, outside tensor 'out' [32 rows]" (nki-library's indexed_flatten).
    x = np.arange(16 * 8, dtype=np.int32).reshape(16, 8)
    for b in (0, 16, 20, -3, 40, -16):
        want = np.full((32, 8), -1, np.int32)
        for i in range(16):
            if 0 <= b + i < 32:
                want[b + i] = x[i]
        same(tnki.simulate_kernel(K.rows_at_offset, x, np.array([[b]], np.int32)), want)
    # oob_mode error (the default): the run-time error at the DMA's line.
    e = raises(Exception, tnki.simulate_kernel, K.rows_at_offset, x, np.array([[20]], np.int32),
               oob_mode=nisa.oob_mode.error)
    line = line_of(SRC, "# moved") - 1
    assert f"nki_indirect.py:{line}:" in str(e) and "scalar_offset bounds: scalar_offset = 20 moves dst by 20 " \
        "rows of 32 bytes, outside tensor 'out' [32 rows]" in str(e), e


def test_scalar_offset_along_dim_1():
    # tester23al F2 / tester23am F1: `.ap(..., scalar_offset=s, indirect_dim=1)` (nki-library's cross_entropy
    # and find_nonzero_indices) was NkiUnsupported ".ap(indirect_dim=1) is not modelled"; the access now
    # moves by s times the dim's stride when the DMA runs (the DMA's scalar_offset_stride).
    x = np.random.RandomState(4).randn(8, 16).astype(np.float32)
    for off in (0, 5, 12):
        same(tnki.simulate_kernel(K.cols_at_offset, x, np.array([[off]], np.int32)), x[2:6, off:off + 4])
    v = np.arange(10, 15, dtype=np.int32).reshape(1, 5)
    for off in (0, 3):
        want = np.full((3, 6, 8), -1, np.int32)
        want[1, 2, off:off + 5] = v[0]
        same(tnki.simulate_kernel(K.cols_written_at_offset, v, np.array([[off]], np.int32)), want)
    x3 = np.random.RandomState(5).randn(4, 3, 8).astype(np.float32)
    same(tnki.simulate_kernel(K.rows_ap_dim1, x3, np.array([[2]], np.int32)), x3[0:2, 2, :])
    # Moved past the tensor's end (rows 2..5 at column 126: the last row's elements past its 128): the
    # run-time bounds error at the DMA's line; a move within the tensor into the next row is not checked.
    e = raises(Exception, tnki.simulate_kernel, K.cols_at_offset, x, np.array([[45]], np.int32))
    line = line_of(SRC, "# read moved") - 1
    assert f"nki_indirect.py:{line}:" in str(e) and "scalar_offset bounds: scalar_offset = 45 moves src by 45 " \
        "steps of 4 bytes (scalar_offset_stride), outside tensor 'x' [512 bytes]" in str(e), e
    e = raises(Exception, tnki.simulate_kernel, K.cols_written_at_offset, v, np.array([[-65]], np.int32))
    line = line_of(SRC, "# write moved") - 1
    assert f"nki_indirect.py:{line}:" in str(e) and "scalar_offset = -65 moves dst by -65 steps of 4 bytes" \
        in str(e), e
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, K.gather_dim1, x, IDX[:4] % 8)
    assert f"nki_indirect.py:{line_of(SRC, '# refused: vector_offset on dim 1') - 1}:" in str(e), e
    assert "a vector_offset picks whole rows of the HBM tensor's dim 0 only" in str(e), e


if __name__ == "__main__":
    main(globals())
