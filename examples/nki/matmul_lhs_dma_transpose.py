"""result[M, N] = lhs[M, K] @ rhs[K, N] in BF16: the NKI Python twin of
kernels/calibration/matmul_lhs_dma_transpose (nki-autotune's hand-tuned lhs @ rhs kernel), our code. lhs is
transposed by DMA per K block (again for every N tile, as published); loops M blocks, N tiles, K blocks; per
m-tile a zeroed PSUM tile accumulates the K block, is copied to SBUF and added into the BF16 output set.
Program order (the scheduler off, as published); buffers as the port states them: one lhsT set per (K block
mod 4, M block mod 4), 8 rhs sets in turn, one output set, `psum_bufs` PSUM tiles in turn, the SBUF copies
declared per m-tile (two buffers).
"""

import nki
import nki.isa as nisa
import nki.language as nl

P, TN = 128, 512


@nki.jit(additional_compile_opt="--enable-instruction-scheduling=false")
def matmul_lhs_dma_transpose(lhs, rhs, m_tiles=8, k_tiles=8, rhs_sets=8, psum_bufs=8):
    M, K = lhs.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm, name="result")
    BM, BK = m_tiles * P, k_tiles * P
    nbm, nbn, nbk = M // BM, N // TN, K // BK
    # Block dims before nl.par_dim: one tensor holding every set. The lhsT sets are the (K block mod 4, M
    # block mod 4) pairs the loops touch.
    lhsT_sets = nl.ndarray((min(4, nbk), min(4, nbm), nl.par_dim(P), k_tiles, BM), dtype=nl.bfloat16,
                           buffer=nl.sbuf)
    rhs_bufs = nl.ndarray((rhs_sets, nl.par_dim(P), k_tiles, TN), dtype=nl.bfloat16, buffer=nl.sbuf)
    out = nl.ndarray((P, m_tiles, N), dtype=nl.bfloat16, buffer=nl.sbuf)
    psum_tiles = [nl.ndarray((P, TN), dtype=nl.float32, buffer=nl.psum) for _ in range(psum_bufs)]
    rturn = pturn = 0
    for d0 in range(nbm):
        for mt in range(m_tiles):
            nisa.memset(dst=out[:, mt], value=0.0)
        for d2 in range(nbn):
            cols = slice(d2 * TN, (d2 + 1) * TN)
            for d1 in range(nbk):
                lt = lhsT_sets[d1 % 4, d0 % 4]
                for kt in range(k_tiles):
                    k0 = d1 * BK + kt * P
                    nisa.dma_transpose(dst=lt[:, kt], src=lhs[d0 * BM:(d0 + 1) * BM, k0:k0 + P])
                r = rhs_bufs[rturn % rhs_sets]
                rturn += 1
                for kt in range(k_tiles):
                    k0 = d1 * BK + kt * P
                    nisa.dma_copy(dst=r[:, kt], src=rhs[k0:k0 + P, cols])
                for mt in range(m_tiles):
                    ps = psum_tiles[pturn % psum_bufs]
                    pturn += 1
                    acc = nl.ndarray((P, TN), dtype=nl.bfloat16, buffer=nl.sbuf)
                    nisa.memset(dst=ps, value=0.0)
                    for kt in range(k_tiles):
                        nisa.nc_matmul(dst=ps, stationary=lt[:, kt, mt * P:(mt + 1) * P], moving=r[:, kt])
                    nisa.tensor_copy(dst=acc, src=ps)
                    o = out[:, mt, cols]
                    nisa.tensor_tensor(dst=o, data1=o, data2=acc, op=nl.add)
            for mt in range(m_tiles):
                r0 = d0 * BM + mt * P
                nisa.dma_copy(dst=result[r0:r0 + P, cols], src=out[:, mt, cols])
    return result


def matmul_lhs_dma_transpose_ref(lhs, rhs, **_):
    return lhs.astype("float64") @ rhs.astype("float64")
