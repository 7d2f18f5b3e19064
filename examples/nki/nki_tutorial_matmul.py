"""result[M, N] = lhsT[K, M]^T @ rhs[K, N]: the NKI Python twin of kernels/calibration/nki_tutorial_matmul,
the four steps of the NKI matmul optimisation guide written as NKI kernels (our code, the guide's loop
structure): `tiled`, `hoisted`, `free_dim_blocked`, `fully_optimized`. Tiles 128 (M) x 128 (K) x 512 (N).
Every tile is declared where the guide declares it; the allocation rule gives each in-loop declaration two
buffers per tile it keeps alive, and the default schedule issues the loads ahead (docs/nki.md).
"""

import nki
import nki.isa as nisa
import nki.language as nl

TM, TK, TN = 128, 128, 512


def _tiled(lhsT, rhs, result):
    K, M = lhsT.shape
    N = rhs.shape[1]
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                lt = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                rt = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lt, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
                nisa.dma_copy(dst=rt, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=lt, moving=rt)
            sb = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=acc)
            nisa.dma_copy(dst=result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=sb)


def _hoisted(lhsT, rhs, result):
    K, M = lhsT.shape
    N = rhs.shape[1]
    for m in nl.affine_range(M // TM):
        lts = []
        for k in nl.affine_range(K // TK):
            lt = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lt, src=lhsT[k * TK:(k + 1) * TK, m * TM:(m + 1) * TM])
            lts.append(lt)
        for n in nl.affine_range(N // TN):
            rts = []
            for k in nl.affine_range(K // TK):
                rt = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rt, src=rhs[k * TK:(k + 1) * TK, n * TN:(n + 1) * TN])
                rts.append(rt)
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TK):
                nisa.nc_matmul(dst=acc, stationary=lts[k], moving=rts[k])
            sb = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=sb, src=acc)
            nisa.dma_copy(dst=result[m * TM:(m + 1) * TM, n * TN:(n + 1) * TN], src=sb)


def _free_dim_blocked(lhsT, rhs, result, block_m, block_n):
    K, M = lhsT.shape
    N = rhs.shape[1]
    kt = K // TK
    for m in nl.affine_range(M // (block_m * TM)):
        lts = []
        for bm in nl.affine_range(block_m):
            row = []
            for k in nl.affine_range(kt):
                lt = nl.ndarray((TK, TM), dtype=lhsT.dtype, buffer=nl.sbuf)
                c0 = (m * block_m + bm) * TM
                nisa.dma_copy(dst=lt, src=lhsT[k * TK:(k + 1) * TK, c0:c0 + TM])
                row.append(lt)
            lts.append(row)
        for n in nl.affine_range(N // (block_n * TN)):
            rts = []
            for bn in nl.affine_range(block_n):
                row = []
                for k in nl.affine_range(kt):
                    rt = nl.ndarray((TK, TN), dtype=rhs.dtype, buffer=nl.sbuf)
                    c0 = (n * block_n + bn) * TN
                    nisa.dma_copy(dst=rt, src=rhs[k * TK:(k + 1) * TK, c0:c0 + TN])
                    row.append(rt)
                rts.append(row)
            for bm in nl.affine_range(block_m):
                for bn in nl.affine_range(block_n):
                    acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                    for k in nl.affine_range(kt):
                        nisa.nc_matmul(dst=acc, stationary=lts[bm][k], moving=rts[bn][k])
                    sb = nl.ndarray((TM, TN), dtype=result.dtype, buffer=nl.sbuf)
                    nisa.tensor_copy(dst=sb, src=acc)
                    r0, c0 = (m * block_m + bm) * TM, (n * block_n + bn) * TN
                    nisa.dma_copy(dst=result[r0:r0 + TM, c0:c0 + TN], src=sb)


def _fully_optimized(lhsT, rhs, result, block_m, block_n, block_k):
    K, M = lhsT.shape
    N = rhs.shape[1]
    BM, BN, BK = block_m * TM, block_n * TN, block_k * TK
    for n in nl.affine_range(N // BN):
        # SBUF accumulators of this N block, in the input dtype, zeroed.
        acc_sb = []
        for m in range(M // BM):
            per_m = []
            for bm in range(block_m):
                per_bm = []
                for bn in range(block_n):
                    t = nl.ndarray((TM, TN), dtype=lhsT.dtype, buffer=nl.sbuf)
                    nisa.memset(dst=t, value=0.0)
                    per_bm.append(t)
                per_m.append(per_bm)
            acc_sb.append(per_m)
        for kb in nl.sequential_range(K // BK):
            rts = []
            for bk in range(block_k):
                rt = nl.ndarray((TK, BN), dtype=rhs.dtype, buffer=nl.sbuf)
                r0 = (kb * block_k + bk) * TK
                nisa.dma_copy(dst=rt, src=rhs[r0:r0 + TK, n * BN:(n + 1) * BN])
                rts.append(rt)
            for m in nl.affine_range(M // BM):
                lts = []
                for bk in nl.affine_range(block_k):
                    lt = nl.ndarray((TK, BM), dtype=lhsT.dtype, buffer=nl.sbuf)
                    r0 = (kb * block_k + bk) * TK
                    nisa.dma_copy(dst=lt, src=lhsT[r0:r0 + TK, m * BM:(m + 1) * BM])
                    lts.append(lt)
                for bn in nl.affine_range(block_n):
                    for bm in nl.affine_range(block_m):
                        ps = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
                        for bk in nl.affine_range(block_k):
                            nisa.nc_matmul(dst=ps, stationary=lts[bk][:, bm * TM:(bm + 1) * TM],
                                           moving=rts[bk][:, bn * TN:(bn + 1) * TN])
                        t = acc_sb[m][bm][bn]
                        nisa.tensor_tensor(dst=t, data1=t, data2=ps, op=nl.add)
        for m in nl.affine_range(M // BM):
            for bm in nl.affine_range(block_m):
                packed = nl.ndarray((TM, BN), dtype=nl.float32, buffer=nl.sbuf)
                for bn in nl.affine_range(block_n):
                    nisa.tensor_copy(dst=packed[:, bn * TN:(bn + 1) * TN], src=acc_sb[m][bm][bn])
                r0 = m * BM + bm * TM
                nisa.dma_copy(dst=result[r0:r0 + TM, n * BN:(n + 1) * BN], src=packed)


@nki.jit
def nki_tutorial_matmul(lhsT, rhs, variant="fully_optimized", block_m=16, block_n=2, block_k=8):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out_dtype = nl.float32 if variant in ("hoisted", "fully_optimized") else lhsT.dtype
    result = nl.ndarray((M, N), dtype=out_dtype, buffer=nl.shared_hbm, name="result")
    if variant == "tiled":
        _tiled(lhsT, rhs, result)
    elif variant == "hoisted":
        _hoisted(lhsT, rhs, result)
    elif variant == "free_dim_blocked":
        _free_dim_blocked(lhsT, rhs, result, block_m, block_n)
    elif variant == "fully_optimized":
        _fully_optimized(lhsT, rhs, result, block_m, block_n, block_k)
    else:
        raise ValueError(f"unknown variant {variant!r}")
    return result


def nki_tutorial_matmul_ref(lhsT, rhs, **_):
    return lhsT.astype("float64").T @ rhs.astype("float64")
