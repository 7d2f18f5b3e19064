"""out[N, M] = in[M, N]^T in FP32 by 128 x 128 tiles: the NKI Python twin of kernels/calibration/transpose_2d
(the CS149 transpose exercise): each tile is loaded, transposed on the Tensor engine into PSUM, copied to SBUF
(tensor_copy, the compiler's default engine: Scalar) and stored.
"""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def transpose_2d(in_):
    m_size, n_size = in_.shape
    t = nl.tile_size.pmax
    out = nl.ndarray((n_size, m_size), dtype=in_.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(m_size // t):
        for j in nl.affine_range(n_size // t):
            src = nl.ndarray((t, t), dtype=in_.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=in_[i * t:(i + 1) * t, j * t:(j + 1) * t])
            ps = nl.ndarray((t, t), dtype=in_.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=ps, data=src)
            dst = nl.ndarray((t, t), dtype=in_.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=dst, src=ps)
            nisa.dma_copy(dst=out[j * t:(j + 1) * t, i * t:(i + 1) * t], src=dst)
    return out


def transpose_2d_ref(in_):
    return in_.T
