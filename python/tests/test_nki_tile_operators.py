"""Python operators on tiles (issue 23, tester23k): each NumPy operator whose nl function NKI documents as
"similar to" NumPy's ufunc lowers to that function (% to nl.mod), exact against NumPy in the simulated dtype;
the others are NkiUnsupported at the kernel line naming the nl function (they were bare TypeErrors)."""

import os

import numpy as np

from runner import line_of as _line_of, main, raises

import trnsim.nki as tnki
import nki
import nki.language as nl

THIS = os.path.basename(__file__)


def line_of(marker):
    return _line_of(__file__, marker)


def unary_kernel(fn):
    @nki.jit
    def k(x):
        y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(y, fn(nl.load(x)))
        return y

    return k


def binary_kernel(fn):
    @nki.jit
    def k(a, b):
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(y, fn(nl.load(a), nl.load(b)))
        return y

    return k


RNG = np.random.default_rng(23)
F = RNG.uniform(0.25, 4.0, (128, 64)).astype(np.float32)
FN = (F - 2.0).astype(np.float32)  # signs of both kinds
A = RNG.integers(-(1 << 30), 1 << 30, (128, 64), dtype=np.int32)
B = RNG.integers(-(1 << 30), 1 << 30, (128, 64), dtype=np.int32)
S = RNG.integers(0, 31, (128, 64), dtype=np.int32)


def same(got, want):
    assert got.dtype == want.dtype and np.array_equal(got, want), (got.dtype, want.dtype,
                                                                  np.argwhere(got != want)[:4])


def power(a, b):
    """FP32 power as the simulator's ALU computes it (sim/isa/alu.h): FP64 pow rounded once to FP32, the
    correctly rounded power on every host (the host's powf was one ulp off x * x on some x)."""
    return np.power(np.float64(a), np.float64(b)).astype(np.float32)


def test_power_is_nl_power():
    # `t ** 2` is NumPy's `F ** 2` (its square, x * x) bit for bit; the ALU's power was the host's powf,
    # which glibc 2.36 computes one ulp off x * x for some of these x (0x403c4a75: ...72 for ...71).
    same(tnki.simulate_kernel(unary_kernel(lambda t: t ** 2), F), F ** 2)
    same(tnki.simulate_kernel(unary_kernel(lambda t: 2.0 ** t), F), power(2, F))
    same(tnki.simulate_kernel(binary_kernel(lambda a, b: a ** b), F, FN), power(F, FN))


def test_bitwise_operators_are_nl_bitwise_calls():
    same(tnki.simulate_kernel(binary_kernel(lambda a, b: a ^ b), A, B), A ^ B)
    same(tnki.simulate_kernel(binary_kernel(lambda a, b: a & b), A, B), A & B)
    same(tnki.simulate_kernel(binary_kernel(lambda a, b: a | b), A, B), A | B)
    same(tnki.simulate_kernel(unary_kernel(lambda t: t ^ 0x5A5A), A), A ^ np.int32(0x5A5A))
    same(tnki.simulate_kernel(unary_kernel(lambda t: 0x0F0F & t), A), A & np.int32(0x0F0F))


def test_shifts_are_nl_shifts():
    small = (A >> 8).astype(np.int32)  # left shifts that stay inside int32
    same(tnki.simulate_kernel(binary_kernel(lambda a, s: a << s), np.abs(small) >> 8, S & 7),
         (np.abs(small) >> 8) << (S & 7))
    # nl.right_shift of non-negative int32 values (the sign question is in test_nki_int_semantics)
    pos = np.abs(A).astype(np.int32)
    same(tnki.simulate_kernel(binary_kernel(lambda a, s: a >> s), pos, S), pos >> S)


def test_mod_is_nl_mod():
    # numpy.mod's sign (the divisor's), exact for integer values below 2^24 (nl.mod computes in FP32)
    ints = RNG.integers(-5000, 5000, (128, 64), dtype=np.int32)
    divs = RNG.choice(np.array([-7, -3, 2, 5, 11], np.int32), (128, 64))
    same(tnki.simulate_kernel(unary_kernel(lambda t: t % 3), ints), ints % np.int32(3))
    same(tnki.simulate_kernel(unary_kernel(lambda t: 7 % t), divs), np.int32(7) % divs)
    same(tnki.simulate_kernel(binary_kernel(lambda a, b: a % b), ints, divs), ints % divs)
    same(tnki.simulate_kernel(binary_kernel(lambda a, b: nl.mod(a, b)), ints.astype(np.float32),
                              divs.astype(np.float32)), np.mod(ints, divs).astype(np.float32))


def test_abs_is_nl_abs():
    same(tnki.simulate_kernel(unary_kernel(lambda t: abs(t)), FN), np.abs(FN))
    same(tnki.simulate_kernel(unary_kernel(lambda t: -t), FN), -FN)


@nki.jit
def floordiv_op(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.load(x) // 2)  # MARK-floordiv
    return y


@nki.jit
def invert_op(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, ~nl.load(x))  # MARK-invert
    return y


def test_operators_without_a_modelled_nl_call_name_it():
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, floordiv_op, F)
    assert str(e).startswith(f"{THIS}:{line_of('MARK-floordiv')}: the tile operator // "), e
    assert "nl.floor(nl.divide(a, b))" in str(e), e
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, invert_op, A)
    assert str(e).startswith(f"{THIS}:{line_of('MARK-invert')}: the tile operator ~ "), e
    assert "nl.invert" in str(e) and "nl.bitwise_xor(t, -1)" in str(e), e


def test_invert_hint_is_exact():
    same(tnki.simulate_kernel(unary_kernel(lambda t: nl.bitwise_xor(t, -1)), A), ~A)


if __name__ == "__main__":
    main(globals())
