"""NKI kernels with indirect DMAs (rows of an HBM tensor picked by an SBUF tile of indices, read when the DMA
runs), for test_nki_indirect.py. Written for this project."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gather_load(x, idx):
    # out[i, :] = x[idx[i, 0], :] with nl.load and an index expression for the columns.
    out = nl.ndarray((idx.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    it = nl.load(idx)
    i_f = nl.arange(x.shape[1])[None, :]
    nl.store(out, nl.load(x[it, i_f]))
    return out


@nki.jit
def gather_cols(x, idx, lo=8, hi=24, oob_mode=nisa.oob_mode.error):
    # out[i, :] = x[idx[i, 0], lo:hi] with nisa.dma_copy on the software DGE; rows the DMA skips stay 0.
    out = nl.ndarray((idx.shape[0], hi - lo), dtype=x.dtype, buffer=nl.shared_hbm)
    it = nl.load(idx)
    t = nl.zeros((idx.shape[0], hi - lo), dtype=x.dtype)
    nisa.dma_copy(dst=t, src=x[it, lo:hi], dge_mode=nisa.dge_mode.swdge, oob_mode=oob_mode)  # gather
    nl.store(out, t)
    return out


@nki.jit
def gather_ap(x, idx):
    # The same gather written with an access pattern: [[row stride, rows], [1, columns]].
    out = nl.ndarray((idx.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    it = nl.load(idx)
    t = nl.ndarray((idx.shape[0], x.shape[1]), dtype=x.dtype)
    nisa.dma_copy(dst=t, src=x.ap([[x.shape[1], idx.shape[0]], [1, x.shape[1]]], vector_offset=it),
                  dge_mode=nisa.dge_mode.swdge)
    nl.store(out, t)
    return out


@nki.jit
def scatter_store(x, v, idx):
    # out = x, then out[idx[i, 0], :] = v[i, :] (a store whose destination rows come from idx).
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(x))
    it = nl.load(idx)
    nl.store(out[it, :], nl.load(v))
    return out


@nki.jit
def index_on_chip(x, idx):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    it = nl.load(idx)
    nl.store(out, nl.copy(t[it, :]))  # refused: indices pick rows of an HBM tensor
    return out


@nki.jit
def float_indices(x, idx):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    it = nl.load(idx)
    nl.store(out, nl.load(x[it, :]))  # refused: the indices are float32
    return out


@nki.jit
def rows_at_offset(x, off, oob_mode=nisa.oob_mode.skip):
    # out [32, 8] int32 of -1, then x's 16 rows copied to rows off .. off + 15 by one dma_copy whose dst an
    # .ap(scalar_offset=) moves at run time (nki-library's indexed_flatten); with oob_mode skip the rows
    # outside out are skipped.
    out = nl.ndarray((32, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    init = nl.ndarray((32, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=init, value=-1)
    nisa.dma_copy(dst=out, src=init)
    t = nl.ndarray((16, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=off)
    nisa.dma_copy(dst=out.ap(pattern=[[8, 16], [1, 8]], offset=0, scalar_offset=s, indirect_dim=0), src=t,
                  oob_mode=oob_mode)  # moved
    return out


@nki.jit
def cols_at_offset(x, off):
    # out[r, :] = x[r, off : off + 4] for rows 2..5 of x [8, 16] f32: one dma_copy whose src an
    # .ap(scalar_offset=, indirect_dim=1) moves along x's columns at run time (nki-library's cross_entropy
    # picks each row's target logit so).
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=off)
    t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[16, 4], [1, 4]], offset=2 * 16, scalar_offset=s,
                                  indirect_dim=1))  # read moved
    out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def cols_written_at_offset(x, off):
    # out [3, 6, 8] int32 of -1, then x [1, 5] written to out[1, 2, off : off + 5] by one dma_copy whose dst an
    # .ap(scalar_offset=, indirect_dim=2) moves at run time (nki-library's find_nonzero_indices writes each
    # column's indices so, indirect_dim=1 of its [C, T]); then read back whole.
    out = nl.ndarray((3, 6, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    init = nl.ndarray((18, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=init, value=-1)
    nisa.dma_copy(dst=out.reshape((18, 8)), src=init)
    t = nl.ndarray((1, 5), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=off)
    nisa.dma_copy(dst=out.ap(pattern=[[8, 1], [1, 5]], offset=(1 * 6 + 2) * 8, scalar_offset=s, indirect_dim=2),
                  src=t)  # write moved
    return out


@nki.jit
def rows_ap_dim1(x, off):
    # x [4, 3, 8]: rows 0..1 of x[:, off, :] by `indirect_dim=1` (the dim's stride, 8 elements).
    s = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=off)
    t = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[24, 2], [1, 8]], offset=0, scalar_offset=s, indirect_dim=1))
    out = nl.ndarray((2, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def gather_dim1(x, idx):
    t = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap(pattern=[[16, 4], [1, 4]], offset=0, vector_offset=idx, indirect_dim=1),
                  dge_mode=nisa.dge_mode.swdge)  # refused: vector_offset on dim 1
    out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out
