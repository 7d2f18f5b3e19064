"""Tiny kernels written against trnsim._core directly (no nki.language): the platform's own tests."""

import numpy as np

from trnsim import _core
from trnsim._core import nki as isa


def copy_kernel(x):
    """out = x through an SBUF tile: a DMA in, a DMA out."""
    k = _core.Kernel.current()
    out = k.output("out", x.dtype, list(x.shape))
    t = k.sbuf(list(x.shape), x.dtype, "t")
    isa.dma_copy(t, x)
    isa.dma_copy(out, t)
    return out


def add_kernel(a, b, scale=1.0):
    """out = (a + b) * scale on the Vector engine, one [128, F] tile per program (LNC2: rows split)."""
    k = _core.Kernel.current()
    rows, cols = a.shape
    out = k.output("out", _core.DType.F32, [rows, cols])
    per = rows // k.num_programs()
    r0 = k.program_id() * per
    for r in range(r0, r0 + per, 128):
        ta = k.sbuf([128, cols], a.dtype, "ta")
        tb = k.sbuf([128, cols], b.dtype, "tb")
        to = k.sbuf([128, cols], _core.DType.F32, "to")
        isa.dma_copy(ta, a[r:r + 128])
        isa.dma_copy(tb, b[r:r + 128])
        isa.tensor_tensor(to, ta, tb, _core.AluOp.Add)
        if scale != 1.0:
            isa.tensor_scalar(to, to, _core.AluOp.Multiply, scale)
        isa.dma_copy(out[r:r + 128], to)
    return out


def add_ref(a, b, scale=1.0):
    return (a.astype(np.float64) + b) * scale


def copy_ref(x):
    return x


def wrong_ref(x):
    return x + 1.0


def raises_kernel(x):
    k = _core.Kernel.current()
    t = k.sbuf(list(x.shape), x.dtype, "t")
    isa.dma_copy(t, x)
    return helper_that_fails(t)


def helper_that_fails(t):
    return 1 / 0


def too_many_partitions(x):
    k = _core.Kernel.current()
    t = k.sbuf([256, 4], x.dtype, "t")  # a tile of 256 partitions: the core has 128
    isa.dma_copy(t, x)
    return None


def psum_too_big(x):
    k = _core.Kernel.current()
    out = k.output("out", x.dtype, list(x.shape))
    big = k.psum([128, 8192], _core.DType.F32, "big")  # 32 KiB per partition: PSUM holds 16 KiB
    return out


def unwritten_kernel(x):
    """Declares an output and never writes it (simulate_kernel warns: it reads as NaN)."""
    k = _core.Kernel.current()
    return k.output("out", x.dtype, list(x.shape))
