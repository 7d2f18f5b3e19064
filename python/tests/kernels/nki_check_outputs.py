"""Kernels whose outputs test_nki_reference_check.py checks against a NumPy reference (with nki_copy.copy)."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def flip_low_bit(x):
    # x ^ 1: every element one away from x.
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    r = nl.ndarray(x.shape, dtype=x.dtype)
    nisa.tensor_scalar(dst=r, data=nl.load(x), op0=nl.bitwise_xor, operand0=1)
    nl.store(o, r)
    return o


@nki.jit
def to_fp8(x):
    # One DMA casting FP32 to float8_e4m3: RNE, saturating at +-240.
    o = nl.ndarray(x.shape, dtype=nl.float8_e4m3, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=o, src=x)
    return o


def same(x):
    return x


def halves(x):
    return x + 0.5


def complex_of(x):
    return x + 5j * x
