"""RMSNorm, y = x / sqrt(mean(x^2) + eps) * gamma along the last dim, in NKI (current style).

gamma [D] is loaded once into all 128 partitions by one DMA whose HBM rows have stride 0 (`.ap`). Per block
of 128 rows: the sum of squares in one Scalar instruction (activation square with a sum into reduce_res), the
mean plus eps (tensor_scalar), the reciprocal square root (activation rsqrt), the scaling by it
(tensor_scalar with a per-row operand) and by gamma (tensor_tensor). x: [N, D] float32, N a multiple of 128.
"""

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def rmsnorm_kernel(x, gamma, eps=1e-6):
    n, d = x.shape
    p = nl.tile_size.pmax
    y = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm, name="y")
    g = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.ap([[0, p], [1, d]]))
    for b in nl.affine_range(n // p):
        rows = slice(b * p, (b + 1) * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[rows, :])
        sq = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        ss = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=sq, op=nl.square, data=t, reduce_op=nl.add, reduce_res=ss)
        ms = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=ms, data=ss, op0=nl.multiply, operand0=1.0 / d, op1=nl.add, operand1=eps)
        rstd = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=ms)
        scaled = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=scaled, data=t, op0=nl.multiply, operand0=rstd)
        out = nl.ndarray((p, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=out, data1=scaled, data2=g, op=nl.multiply)
        nisa.dma_copy(dst=y[rows, :], src=out)
    return y


def rmsnorm_ref(x, gamma, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * gamma.astype(np.float64)
