"""nisa.quantize_mx and nisa.nc_matmul_mx through the Python front end against a NumPy reference written here
from the public facts alone (tester23f #4: the last two nisa calls without a numerics test):

- OCP MX v1.0: FP8 E4M3 (bias 7, max 448, no Inf) and E5M2 (bias 15, max 57344) elements, one E8M0 scale byte
  (2^(byte - 127)) per block of 32, conversion by round-to-nearest-even with saturation of normals.
- nki.isa.quantize_mx (NKI 2.32): a group is 8 partitions x 4 elements; the scale "is two times larger" than
  the OCP sample algorithm's 2^(floor(log2 amax) - emax), i.e. 2^(floor(log2 amax) - emax + 1), so the largest
  value of a group rounds without saturating; dst packs 4 consecutive FP8 values per x4 element; the scales of
  a quadrant's 4 groups go to its first partitions. An all-zero group gets the smallest scale, 2^-127.
- nki.isa.nc_matmul_mx: dst = stationary.T @ moving over the partitions and the 4 values of each x4 element,
  each value times its group's scale, accumulated in float32.

quantize_mx must give the same bytes; nc_matmul_mx the same float32 values where every partial sum is exact,
and within the error bound of any float32 summation order otherwise (n u sum|a b| with n the contraction
length and u = 2^-24: Higham, Accuracy and Stability of Numerical Algorithms, eq. 3.5)."""

import numpy as np

from runner import main

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl

# (exponent bits, mantissa bits, bias, emax, the code of the largest finite value)
FORMATS = {"e4m3": (4, 3, 7, 8, 0x7E), "e5m2": (5, 2, 15, 15, 0x7B)}
X4 = {"e4m3": "float8_e4m3fn_x4", "e5m2": "float8_e5m2_x4"}


def fp8_value(code, fmt):
    """The value of a positive FP8 code (0..max) as a Python float."""
    ebits, mbits, bias, _, _ = FORMATS[fmt]
    e, m = code >> mbits, code & ((1 << mbits) - 1)
    if e == 0:
        return m / (1 << mbits) * 2.0 ** (1 - bias)
    return (1 + m / (1 << mbits)) * 2.0 ** (e - bias)


def fp8_table(fmt):
    return np.array([fp8_value(c, fmt) for c in range(FORMATS[fmt][4] + 1)])


def fp8_encode(x, fmt):
    """float64 -> FP8 bytes: nearest value, ties to the even code, saturating past the largest value, the
    sign kept (a negative value that rounds to zero is 0x80)."""
    table = fp8_table(fmt)
    a = np.abs(x)
    hi = np.clip(np.searchsorted(table, a), 0, len(table) - 1)  # first value >= a (or the largest)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - table[lo], table[hi] - a
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(a >= table[-1], len(table) - 1, code)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def fp8_decode(codes, fmt):
    table = fp8_table(fmt)
    v = table[codes & 0x7F]
    return np.where(codes & 0x80, -v, v)


def bf16(x):
    """float32 values cut to bfloat16 (exact in both) and their raw bits."""
    bits = (np.asarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64), bits


def quantize_reference(x, fmt):
    """x [P, F] (float64, bfloat16 values) -> (bytes [P, F], scales [P // 8, F // 4]): group (g, f) is rows
    8g..8g+7, columns 4f..4f+3."""
    p, f = x.shape
    emax = FORMATS[fmt][3]
    groups = x.reshape(p // 8, 8, f // 4, 4)
    amax = np.abs(groups).max(axis=(1, 3))
    exp = np.frexp(np.where(amax > 0, amax, 1.0))[1] - 1  # floor(log2 amax), exact
    byte = np.where(amax > 0, np.clip(exp - (emax - 1) + 127, 0, 254), 0)
    scale = np.ldexp(1.0, byte - 127)
    q = fp8_encode(groups / scale[:, None, :, None], fmt)
    return q.reshape(p, f), byte.astype(np.uint8)


def scale_rows(p):
    """The dst_scale partitions of the P // 8 groups: a quadrant's 4 groups at its first 4 partitions."""
    return np.array([(g // 4) * 32 + g % 4 for g in range(p // 8)])


@nki.jit
def quantize(x, fmt):
    p, f = x.shape
    dt = nl.float8_e4m3fn_x4 if fmt == "e4m3" else nl.float8_e5m2_x4
    data = nl.ndarray((p, f // 4), dtype=dt, buffer=nl.shared_hbm)
    scales = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.shared_hbm)
    q = nl.ndarray((p, f // 4), dtype=dt, buffer=nl.sbuf)
    s = nl.ndarray((p, f // 4), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=s, value=0)
    nisa.quantize_mx(dst=q, src=nl.load(x), dst_scale=s)
    nl.store(data, q)
    nl.store(scales, s)
    return data, scales


def test_reference_fp8_codes():
    # The reference's own anchors (OCP MX v1.0 format tables): E4M3 max 448 = 0x7E, min subnormal 2^-9 = 0x01,
    # 1.0 = 0x38; E5M2 max 57344 = 0x7B, 1.0 = 0x3C; ties go to the even code; overflow saturates.
    assert fp8_value(0x7E, "e4m3") == 448 and fp8_value(0x01, "e4m3") == 2.0 ** -9
    assert fp8_value(0x7B, "e5m2") == 57344 and fp8_value(0x01, "e5m2") == 2.0 ** -16
    x = np.array([1.0, 448, 500, 1e9, 1.0625, 1.1875, -2.0 ** -11, 0.0, -3.0])
    assert fp8_encode(x, "e4m3").tolist() == [0x38, 0x7E, 0x7E, 0x7E, 0x38, 0x3A, 0x80, 0x00, 0xC4]
    assert fp8_encode(np.array([1.0, 57344, 1.125, 70000.0]), "e5m2").tolist() == [0x3C, 0x7B, 0x3C, 0x7B]


def _quantize_input(seed):
    """[128, 64] bfloat16 values, groups of every kind: magnitudes from 2^-30 to 2^30, a group whose max has
    a significand above 1.75 (OCP's sample scale would saturate it), an all-zero group, a group below the
    smallest scale (its amax under 2^-119), ties, negatives that round to zero."""
    rs = np.random.RandomState(seed)
    x = rs.standard_normal((128, 64)) * np.exp2(rs.randint(-30, 31, (16, 1, 16, 1)).repeat(8, 1).repeat(4, 3)
                                                .reshape(128, 64))
    x[0:8, 0:4] = 0.0
    x[8:16, 0:4] = rs.standard_normal((8, 4)) * 2.0 ** -124
    x[16:24, 0:4] = 1.0
    x[16, 0] = 1.96875  # max significand 1.97 (7 of the 7 bfloat16 fraction bits up to 1.96875)
    x[24:32, 0:4] = [1.0, 1.0625, 1.1875, -1.0]  # with max 1.0 (scale 2^-7): 128, 136 (tie), 152 (tie)
    x[24, 0] = 1.5
    x[32:40, 0:4] = 2.0 ** -20
    x[32, 0] = -2.0 ** 6  # the others are 2^-26 times the max: below half the smallest subnormal
    x[33, 1] = -2.0 ** -20
    return bf16(x.astype(np.float32))


def test_quantize_mx_bytes_match_the_reference():
    for fmt in ("e4m3", "e5m2"):
        x, bits = _quantize_input(3)
        data, scales = tnki.simulate_kernel(quantize, tnki.typed(bits, "bfloat16"), fmt, hardware="trn3")
        want_q, want_s = quantize_reference(x, fmt)
        got_q = data.view(np.uint8).reshape(128, 64)
        bad = np.argwhere(got_q != want_q)
        assert bad.size == 0, (fmt, len(bad), bad[:3].tolist(), got_q[tuple(bad[0])], want_q[tuple(bad[0])])
        got_s = scales[scale_rows(128)]
        assert got_s.tobytes() == want_s.tobytes(), (fmt, np.argwhere(got_s != want_s)[:3].tolist())
        # Spot values, by hand: the all-zero group's scale is 2^-127 (0x00) and its bytes 0; a max of 1.5
        # gives 2^(0 - 8 + 1) = 2^-7 (byte 120 for E4M3) and 1.0 / 2^-7 = 128 = 0x68.
        assert want_s[0, 0] == 0 and not want_q[0:8, 0:4].any()
        if fmt == "e4m3":
            assert want_s[3, 0] == 120 and want_q[25, 0] == 0x70 and want_q[16, 0] != 0x7E


@nki.jit
def matmul_mx(st, mv, st_scale, mv_scale, fmt):
    kp, m = st.shape
    n = mv.shape[1]
    dt = nl.float8_e4m3fn_x4 if fmt == "e4m3" else nl.float8_e5m2_x4
    out = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.shared_hbm)
    a = nl.ndarray((kp, m), dtype=dt, buffer=nl.sbuf)
    b = nl.ndarray((kp, n), dtype=dt, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=st)
    nisa.dma_copy(dst=b, src=mv)
    sa = nl.load(st_scale)
    sb = nl.load(mv_scale)
    acc = nl.ndarray((m, n), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul_mx(dst=acc, stationary=a, moving=b, stationary_scale=sa, moving_scale=sb)
    nl.store(out, nl.copy(acc))
    return out


def _operand(rs, kp, cols, fmt, codes, scale_bytes):
    """Random x4 operand [kp, cols] (its FP8 bytes [kp, cols, 4] from `codes`, signs random), its scale tile
    (one byte per group of 8 partitions x 1 x4 column, at the quadrant rows of scale_rows) and its values."""
    q = rs.choice(codes, (kp, cols, 4)).astype(np.uint8) | (rs.randint(0, 2, (kp, cols, 4)) * 0x80).astype(np.uint8)
    s = rs.choice(scale_bytes, (kp // 8, cols)).astype(np.uint8)
    tile = np.zeros((kp, cols), np.uint8)
    tile[scale_rows(kp)] = s
    values = fp8_decode(q, fmt) * np.ldexp(1.0, s.astype(int) - 127).repeat(8, axis=0)[:, :, None]
    return q.view(np.int32).reshape(kp, cols), tile, values


def _matmul(rs, fmt, codes, scale_bytes, kp=128, m=64, n=96):
    a, sa, va = _operand(rs, kp, m, fmt, codes, scale_bytes)
    b, sb, vb = _operand(rs, kp, n, fmt, codes, scale_bytes)
    out = tnki.simulate_kernel(matmul_mx, tnki.typed(a, X4[fmt]), tnki.typed(b, X4[fmt]), tnki.typed(sa, nl.uint8),
                               tnki.typed(sb, nl.uint8), fmt, hardware="trn3")
    # The contraction runs over the partitions and the 4 values of each x4 element.
    return out, np.einsum("kmj,knj->mn", va, vb), np.einsum("kmj,knj->mn", np.abs(va), np.abs(vb))


def test_nc_matmul_mx_exact_where_every_sum_is_exact():
    # Codes of 0..8 in steps of 0.5 and scales 2^-1..2^1: every value a multiple of 2^-2 up to 16, each product
    # a multiple of 2^-4 up to 256, every partial sum of the 512 a multiple of 2^-4 below 2^17 (21 bits): exact
    # in float32 whatever the order, so the bytes must match.
    rs = np.random.RandomState(5)
    for fmt in ("e4m3", "e5m2"):
        codes = [c for c in range(FORMATS[fmt][4] + 1) if fp8_value(c, fmt) * 2 == int(fp8_value(c, fmt) * 2)
                 and fp8_value(c, fmt) <= 8]
        out, want, _ = _matmul(rs, fmt, codes, [126, 127, 128])
        assert out.tobytes() == want.astype(np.float32).tobytes(), (fmt, np.abs(out - want).max())


def test_nc_matmul_mx_within_the_float32_summation_bound():
    # Every finite code and scales 2^-20..2^20: products exact in float32 (two 4-bit significands), the sum's
    # rounding error at most n u sum|a b| (n = 512 terms) whatever the order the engine adds them in.
    rs = np.random.RandomState(6)
    for fmt in ("e4m3", "e5m2"):
        out, want, mag = _matmul(rs, fmt, list(range(FORMATS[fmt][4] + 1)), list(range(107, 148)))
        nu = 512 * 2.0 ** -24
        bound = (nu / (1 - nu) + 512 * 2.0 ** -53) * mag  # (+ the float64 reference's own rounding)
        err = np.abs(out.astype(np.float64) - want)
        assert (err <= bound).all(), (fmt, (err / np.maximum(bound, 1e-300)).max())


if __name__ == "__main__":
    main(globals())
