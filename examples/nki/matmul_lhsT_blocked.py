"""result[M, N] = lhsT[K, M]^T @ rhs[K, N] in BF16: the NKI Python twin of
kernels/calibration/matmul_lhsT_blocked (nki-autotune's hand-written lhsT @ rhs kernel), our code. Loops N
blocks, K blocks, M blocks; per m-tile a PSUM tile is zeroed, accumulated over the K block, copied to an SBUF
tile and added into the BF16 output set, which is stored after each N block. Compiled with the scheduler off
(program order), as the published kernel is; buffers are explicit sets, as the port states them: 4 output
sets, 2 x 4 lhsT sets and 2 rhs sets (declared once, each N block reusing them), `psum_bufs` PSUM tiles in
turn, the SBUF copies declared per m-tile (two buffers).
"""

import nki
import nki.isa as nisa
import nki.language as nl

P, TN = 128, 512


@nki.jit(additional_compile_opt="--enable-instruction-scheduling=false")
def matmul_lhsT_blocked(lhsT, rhs, block_m=512, block_n=512, block_k=1024, psum_bufs=8):
    K, M = lhsT.shape
    N = rhs.shape[1]
    result = nl.ndarray((M, N), dtype=nl.bfloat16, buffer=nl.shared_hbm, name="result")
    kts, mts, nts = block_k // P, block_m // P, block_n // TN
    nbn, nbk, nbm = N // block_n, K // block_k, M // block_m
    # Block dims before nl.par_dim: one tensor holding every set (each set its own region, never shared).
    outputs = nl.ndarray((min(4, nbn), nl.par_dim(P), M // P, block_n), dtype=nl.bfloat16, buffer=nl.sbuf)
    lhsT_sets = nl.ndarray((min(2, nbk), min(4, nbm), nl.par_dim(P), kts, block_m), dtype=nl.bfloat16,
                           buffer=nl.sbuf)
    rhs_sets = nl.ndarray((min(2, nbk), nl.par_dim(P), kts, block_n), dtype=nl.bfloat16, buffer=nl.sbuf)
    psum_tiles = [nl.ndarray((P, TN), dtype=nl.float32, buffer=nl.psum) for _ in range(psum_bufs)]
    turn = 0
    for d2 in range(nbn):
        out = outputs[d2 % 4]
        for mt in range(M // P):
            nisa.memset(dst=out[:, mt], value=0.0)
        n0 = d2 * block_n
        for d0 in range(nbk):
            r = rhs_sets[d0 % 2]
            for kt in range(kts):
                k0 = d0 * block_k + kt * P
                nisa.dma_copy(dst=r[:, kt], src=rhs[k0:k0 + P, n0:n0 + block_n])
            for d1 in range(nbm):
                lt = lhsT_sets[d0 % 2, d1 % 4]
                for kt in range(kts):
                    k0 = d0 * block_k + kt * P
                    nisa.dma_copy(dst=lt[:, kt], src=lhsT[k0:k0 + P, d1 * block_m:(d1 + 1) * block_m])
                for mt in range(mts):
                    for nt in range(nts):
                        ps = psum_tiles[turn % psum_bufs]
                        turn += 1
                        acc = nl.ndarray((P, TN), dtype=nl.bfloat16, buffer=nl.sbuf)
                        nisa.memset(dst=ps, value=0.0)
                        for kt in range(kts):
                            nisa.nc_matmul(dst=ps, stationary=lt[:, kt, mt * P:(mt + 1) * P],
                                           moving=r[:, kt, nt * TN:(nt + 1) * TN])
                        nisa.tensor_copy(dst=acc, src=ps)
                        o = out[:, d1 * mts + mt, nt * TN:(nt + 1) * TN]
                        nisa.tensor_tensor(dst=o, data1=o, data2=acc, op=nl.add)
        for mt in range(M // P):
            nisa.dma_copy(dst=result[mt * P:(mt + 1) * P, n0:n0 + block_n], src=out[:, mt])
    return result


def matmul_lhsT_blocked_ref(lhsT, rhs, **_):
    return lhsT.astype("float64").T @ rhs.astype("float64")
