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
