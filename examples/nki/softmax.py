"""Fused row softmax, y = exp(x - max(x)) / sum(exp(x - max(x))) along the last dim, in NKI (current style).

Per block of 128 rows, one pass over SBUF: the row maxima on the Vector engine (tensor_reduce), the shifted
exponentials and their row sums in one Scalar instruction (activation with the negated maxima as bias and a
sum into reduce_res), the reciprocals of the sums, and one multiply by them (tensor_scalar with a per-row
operand). x: [N, D] float32, N a multiple of 128, D up to 8192 (the SBUF of one block).
"""

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def softmax_kernel(x):
    n, d = x.shape
    p = nl.tile_size.pmax
    y = nl.ndarray((n, d), dtype=x.dtype, buffer=nl.shared_hbm, name="y")
    for b in nl.affine_range(n // p):
        rows = slice(b * p, (b + 1) * p)
        t = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[rows, :])
        neg_max = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=t, axis=1, negate=True)
        e = nl.ndarray((p, d), dtype=nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=e, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total)
        inv = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv, op=nl.reciprocal, data=total)
        out = nl.ndarray((p, d), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=out, data=e, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=y[rows, :], src=out)
    return y


def softmax_ref(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)
