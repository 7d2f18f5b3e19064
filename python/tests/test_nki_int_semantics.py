"""Integer semantics that differ from NumPy's and follow NKI's ISA (issue 23, tester23k; docs/nki.md "What
differs"): nl.sum of an int32 tile is tensor_reduce on the Vector engine, which computes arithmetic in FP32
(nki.isa.tensor_reduce: arithmetic operators cast to float32), so sums past 2^24 round; nl.right_shift is
the ALU's only right shift, a logical one (NKI's math operator table has no arithmetic shift-right), so a
negative int32 shifts in zeros where NumPy's >> copies the sign bit."""

import numpy as np

from runner import main

import trnsim.nki as tnki
import nki
import nki.language as nl


@nki.jit
def row_sums(x):
    y = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.sum(nl.load(x), axis=1, keepdims=True))
    return y


@nki.jit
def shift_right_by_one(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.right_shift(nl.load(x), 1))
    return y


def test_int32_sum_goes_through_fp32():
    x = np.ones((128, 64), dtype=np.int32)
    x[:, 0] = 1 << 24  # 2^24 + 1 is not an FP32 value: each + 1 rounds back to 2^24 (to even)
    got = tnki.simulate_kernel(row_sums, x)
    assert np.array_equal(got, np.full((128, 1), 1 << 24, np.int32)), got[:2]
    assert not np.array_equal(got, x.sum(axis=1, keepdims=True, dtype=np.int32))  # NumPy: 2^24 + 63
    small = np.arange(128 * 64, dtype=np.int32).reshape(128, 64) - 4000  # exact below 2^24
    assert np.array_equal(tnki.simulate_kernel(row_sums, small), small.sum(axis=1, keepdims=True, dtype=np.int32))


def test_int32_right_shift_is_logical():
    x = np.arange(-64 * 128, 0, 64, dtype=np.int32).reshape(128, 1).repeat(4, axis=1)
    got = tnki.simulate_kernel(shift_right_by_one, x)
    assert np.array_equal(got, (x.view(np.uint32) >> 1).view(np.int32)), got[:2]
    assert not np.array_equal(got, x >> 1)  # NumPy's arithmetic shift keeps the sign


if __name__ == "__main__":
    main(globals())
