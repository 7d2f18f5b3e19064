"""Tiled matmul, c[M, N] = a[M, K] @ b[K, N], in NKI's earlier style (neuronxcc.nki names, results returned
by nl.* calls): aT [K, M] comes in already transposed, each [128, 512] block of c accumulates its K tiles in
PSUM (`acc += nl.matmul(..., transpose_x=True)`), is copied to SBUF and stored.
"""

import numpy as np

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl


@nki.jit
def matmul_kernel(aT, b):
    K, M = aT.shape
    _, N = b.shape
    TK, TM, TN = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm, name="c")
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.zeros((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                a_t = nl.load(aT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                b_t = nl.load(b[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                acc += nl.matmul(a_t, b_t, transpose_x=True)
            c_t = nl.copy(acc, dtype=nl.float32)
            nl.store(c[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], value=c_t)
    return c


def matmul_ref(aT, b):
    return aT.astype(np.float64).T @ b.astype(np.float64)
