"""NKI kernels whose masks select nothing in some program or iteration (the SPMD tail idiom), for
test_nki_empty_masks.py. Written for this project."""

import math

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def row_tiles(x):
    # Row tile t of program pid holds rows (t * npg + pid) * 128 + i_p; every call on it is masked to the rows
    # below N or works on a masked call's result. out = (2x + rowsum(2x)) * 3, a second output the tile's
    # dma_copy'd 2x.
    N, D = x.shape
    out = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    twice = nl.ndarray((N, D), dtype=x.dtype, buffer=nl.shared_hbm)
    pid, npg = nl.program_id(0), nl.num_programs(0)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(D)[None, :]
    for t in nl.affine_range(math.ceil(math.ceil(N / 128) / npg)):
        base = (t * npg + pid) * 128
        m = base + i_p < N
        xt = nl.load(x[base + i_p, i_f], mask=m)
        e = nl.multiply(xt, 2.0)  # (unmasked: the part xt holds)
        s = nl.sum(e, axis=1, keepdims=True, mask=m)
        y = nl.add(e, s)
        z = nisa.tensor_scalar(data=y, op0=np.multiply, operand0=3.0, mask=m)
        nl.store(out[base + i_p, i_f], value=z, mask=m)
        nisa.dma_copy(dst=twice[base + i_p, i_f], src=e, mask=m)
    return out, twice


@nki.jit
def column_sums(x, w):
    # acc [1, D] += ones^T @ x tile, for w row tiles of 128 rows of x [N, D] (N a multiple of 128): the tiles
    # past N are void matmul operands and add nothing.
    N, D = x.shape
    out = nl.ndarray((1, D), dtype=nl.float32, buffer=nl.shared_hbm)
    ones = nl.ones((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    acc = nl.zeros((1, D), dtype=nl.float32, buffer=nl.psum)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(D)[None, :]
    for t in nl.sequential_range(w):
        xt = nl.load(x[t * 128 + i_p, i_f], mask=(t * 128 + i_p < N))
        acc += nisa.nc_matmul(ones, xt)
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def partly_written(x):
    # A void tile written in part by a later call is an ordinary tile again; its other rows no instruction
    # wrote, and storing them reads what such rows hold.
    out = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    i_p, i_f = nl.arange(128)[:, None], nl.arange(8)[None, :]
    t = nl.load(x[128 + i_p, i_f], mask=(128 + i_p < x.shape[0]))
    t[0:4, :] = 5.0
    nl.store(out, value=t)  # MARK-unwritten
    return out
