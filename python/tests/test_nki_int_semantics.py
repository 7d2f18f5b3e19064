"""Integer semantics that differ from NumPy's and follow NKI's ISA (issue 23, tester23k; docs/nki.md "What
differs"): nl.sum of an int32 tile is tensor_reduce on the Vector engine, which computes arithmetic in FP32
(nki.isa.tensor_reduce: arithmetic operators cast to float32), so sums past 2^24 round; nl.right_shift is
the ALU's only right shift, a logical one (NKI's math operator table has no arithmetic shift-right), so a
negative int32 shifts in zeros where NumPy's >> copies the sign bit."""

import sys

import numpy as np

from runner import main, raises, raises_at

import trnsim.nki as tnki
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def row_sums(x):
    y = nl.ndarray((x.shape[0], 1), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.sum(nl.load(x), axis=1, keepdims=True))
    return y


def elementwise(fn, dtype=None):
    """A kernel storing fn(tile of x) into an output of `dtype` (x's by default)."""

    @nki.jit
    def k(x):
        y = nl.ndarray(x.shape, dtype=dtype or x.dtype, buffer=nl.shared_hbm)
        nl.store(y, fn(nl.load(x)))
        return y

    return k


shift_right_by_one = elementwise(lambda t: nl.right_shift(t, 1))
times_a_half = elementwise(lambda t: nl.multiply(t, 0.5), nl.float32)


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


@nki.jit
def mixed_sums(a, b):
    o1 = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    o2 = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    ta, tb = nl.load(a), nl.load(b)
    s1, s2 = nl.add(ta, tb), nl.add(tb, ta)
    assert s1.dtype == s2.dtype, (s1.dtype, s2.dtype)
    nl.store(o1, s1)
    nl.store(o2, s2)
    return o1, o2


def test_mixed_integer_dtypes_promote_as_numpy_whatever_the_order():
    # tester23m F5: the first operand's dtype won (int8 + uint8 was int8, uint8 + int8 uint8): a + b gave
    # [-50, 127, -1, 127] and b + a [0, 255, 0, 255] for NumPy's [-50, 300, -1, 255]. Now the smallest integer
    # dtype holding both (int16 here; int32 for int16 / uint16, float32 for int32 / uint32: no int64).
    a = np.array([[-100, 100, -1, 5]] * 128, np.int8)
    b = np.array([[50, 200, 0, 250]] * 128, np.uint8)
    for x, y in ((a, b), (a.astype(np.int16), b.astype(np.uint16) * 300)):
        o1, o2 = tnki.simulate_kernel(mixed_sums, x, tnki.typed(y, y.dtype))  # (uint values, not bits)
        want = x.astype(np.int64) + y
        assert o1.tobytes() == o2.tobytes() == want.astype(np.int32).tobytes(), (o1[0], o2[0], want[0])
    # A float number with an integer tile is a float result (nl.multiply(int32 tile, 0.5) was int32: 0, 2, ...).
    i = np.array([[1, 3, -3, 7]] * 128, np.int32)
    assert tnki.simulate_kernel(times_a_half, i).tobytes() == (i * np.float32(0.5)).astype(np.float32).tobytes()


MEAN_DTYPES = []


@nki.jit
def row_means(x):
    y = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
    m = nl.mean(nl.load(x), axis=1, keepdims=True)
    MEAN_DTYPES.append(m.dtype)
    nl.store(y, m)
    return y


def test_mean_of_an_integer_tile_is_float32():
    # tester23n F4: nl.mean of an int32 tile was an int32 tile (3 and 4 for means 22/7 and 27/7); the page of
    # the signature trnsim models says float32 return values for integer inputs. The sum, then times 1/n in FP32.
    x = np.array([[1, 2, 3, 3, 4, 4, 5], [9, 9, 9, 0, 0, 0, 0]] * 64, np.int32)
    del MEAN_DTYPES[:]
    got = tnki.simulate_kernel(row_means, x)
    want = x.sum(axis=1, keepdims=True).astype(np.float32) * np.float32(1.0 / 7)
    assert got.tobytes() == want.tobytes(), (got[:2, 0], want[:2, 0])
    assert MEAN_DTYPES == [nl.float32], MEAN_DTYPES


@nki.jit
def row_vars(x, dtype=None):
    v = nl.var(nl.load(x), axis=1, dtype=dtype)
    y = nl.ndarray((x.shape[0], 1), dtype=v.dtype, buffer=nl.shared_hbm)
    nl.store(y, v.reshape((x.shape[0], 1)))
    return y


def test_var_of_an_integer_tile_keeps_its_dtype():
    # Unlike nl.mean's, nl.var's page says the result defaults to the input tile's dtype (no float32 clause for
    # integer inputs): the FP32 variance (exact here: sums and squares of small integers, divided by 4) is
    # written to int32 rounding to nearest even: 1.25 -> 1, 6.25 -> 6, 1.6875 -> 2, 0.6875 -> 1, 0 -> 0.
    # dtype=nl.float32 keeps numpy.var's value.
    x = np.array([[1, 2, 3, 4], [0, 5, 0, 5], [0, 0, 0, 3], [0, 0, 1, 2]] * 32, np.int32)
    want = np.var(x, axis=1, keepdims=True).astype(np.float32)
    assert want[:4, 0].tolist() == [1.25, 6.25, 1.6875, 0.6875]
    got = tnki.simulate_kernel(row_vars, x)
    assert got.dtype == np.int32 and got.tobytes() == np.rint(want).astype(np.int32).tobytes(), got[:4, 0]
    got = tnki.simulate_kernel(row_vars, x, dtype=nl.float32)
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes(), got[:4, 0]


def test_bitvec_masks_past_24_bits_keep_every_bit():
    # tester23p F8: the number went to the instruction as an FP32 immediate, so 0x7FFFFFFF became 2^31 and
    # t & 0x7FFFFFFF gave t & 0x80000000. Now a [P, 1] vector of the tile's dtype, filled exactly by a memset.
    vals = np.array([1, 2, 0x7FFFFFFF, -1, 16777217, 0x12345678, -5, 3], np.int32)
    x = np.tile(vals, (128, 1))
    for fn, want in ((lambda t: nisa.tensor_scalar(t, nl.bitwise_and, 0x7FFFFFFF), vals & 0x7FFFFFFF),
                     (lambda t: nl.bitwise_and(t, 0x7FFFFFFF), vals & 0x7FFFFFFF),
                     (lambda t: t ^ 0x12345679, vals ^ 0x12345679),
                     (lambda t: t & 0x01FFFFFF, vals & 0x01FFFFFF),
                     (lambda t: t & 0xFFFFFFF1, vals & np.int32(-15)),  # the same 32 bits as an int32
                     (lambda t: nisa.tensor_scalar(t, nl.bitwise_or, 0x7FFFFFF0, op1=nl.bitwise_xor,
                                                   operand1=0x12345679), (vals | 0x7FFFFFF0) ^ 0x12345679)):
        out = tnki.simulate_kernel(elementwise(fn), x)
        assert out.tobytes() == np.tile(want.astype(np.int32), (128, 1)).tobytes(), out[0]
    u = np.tile(np.array([0xFFFFFFFF, 0x80000001, 7, 0], np.uint32), (128, 1))
    out = tnki.simulate_kernel(elementwise(lambda t: t & 0xFFFFFFF0), u)
    assert out.tobytes() == (u & np.uint32(0xFFFFFFF0)).tobytes(), out[0]
    e = raises(tnki.NkiError, lambda: tnki.simulate_kernel(elementwise(lambda t: t & (1 << 40) - 1), x))
    assert str(e).endswith(":%d: nl.bitwise_and: its tensor_scalar (made by trnsim's lowering of nl.bitwise_and, "
                           "not a call of the kernel): bitwise_and's operand 1099511627775 is a bit pattern of more "
                           "than 32 bits (data is int32)" % (sys._getframe().f_lineno - 3)), str(e)


@nki.jit
def iota_past_24_bits(offset):
    o = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nisa.iota(nl.arange(8)[None, :] + 100 * nl.arange(128)[:, None] + offset, dtype=nl.int32)
    nl.store(o, t)
    return o


@nki.jit
def iota_dst_past_24_bits(offset, channel_multiplier=1):
    o = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=t, pattern=[[1, 8]], offset=offset, channel_multiplier=channel_multiplier)  # MARK-iota
    nl.store(o, t)
    return o


def test_an_integer_iota_offset_past_24_bits_is_exact():
    # tester23p F8 then an NkiError: the offset was the instruction's FP32 immediate, so 33554433 silently became
    # 33554432. Now the ISA splits it (imm0 = its FP32 rounding, imm3 the rest, as memset's fill), so every value
    # is exact: 2^24 + 1 and 2^31 - 5 (whose last values wrap past INT32_MAX, as int32 arithmetic does).
    for off in (2 ** 24 + 1, 2 ** 31 - 5, 33554433, -2 ** 31 + 3):
        want = (np.arange(8)[None, :] + 100 * np.arange(128)[:, None] + off).astype(np.int64).astype(np.int32)
        got = tnki.simulate_kernel(iota_past_24_bits, off)
        assert got.tobytes() == want.tobytes(), (off, got[0, :3], want[0, :3])
        want = (np.arange(8)[None, :] + np.arange(128)[:, None] + off).astype(np.int64).astype(np.int32)
        got = tnki.simulate_kernel(iota_dst_past_24_bits, off)
        assert got.tobytes() == want.tobytes(), (off, got[0, :3], want[0, :3])


def test_an_integer_iota_channel_multiplier_fp32_does_not_hold_is_refused():
    # The channel multiplier is still one FP32 immediate (no room to split it): an NkiError at the line.
    raises_at(tnki.NkiError, "iota: channel_multiplier 33554433 is not exact in FP32, the instruction's immediate "
              "(more than 24 significant bits): make the iota with a smaller channel_multiplier and add the rest "
              "with nl.add of int32 tiles (integer tile arithmetic is exact)", __file__, "MARK-iota",
              tnki.simulate_kernel, iota_dst_past_24_bits, 0, channel_multiplier=33554433)


@nki.jit
def affine_select_fill(x, fill):
    o = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.affine_select(dst=t, pattern=[[-1, x.shape[1]]], channel_multiplier=1, on_true_tile=nl.load(x),
                       on_false_value=fill, cmp_op=nl.greater_equal)
    nl.store(o, t)
    return o


def test_an_integer_affine_select_fill_past_24_bits_is_exact():
    # on_false_value is imm2 + imm3 (split as memset's fill): 2^24 + 1 was written as 2^24 before.
    x = np.arange(128 * 64, dtype=np.int32).reshape(128, 64)
    keep = np.arange(128)[:, None] - np.arange(64)[None, :] >= 0  # partition - column >= 0 (the pattern)
    for fill in (2 ** 24 + 1, 2 ** 31 - 5, -2 ** 31 + 1):
        got = tnki.simulate_kernel(affine_select_fill, x, fill)
        assert got.tobytes() == np.where(keep, x, np.int32(fill)).astype(np.int32).tobytes(), (fill, got[0, :3])


if __name__ == "__main__":
    main(globals())
