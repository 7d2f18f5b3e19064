"""How a NumPy reference checks an NKI kernel's output. An integer output (indices, counts) is compared exactly:
a bit_exact check whose max_abs_err is the integer difference, not a float tolerance after rounding through FP32
(tester23v F1: every element of an int32 output off by one passed, with max_abs_err 65). A float output's
_vs_quantized metrics compare with the reference cast to the output's dtype as the engines cast (tester23v F6:
they were the exact metrics again, so a float8_e4m3 output that is exactly the saturating cast failed)."""

import numpy as np

from runner import main, raises

import trnsim

import trnsim.nki as tnki
import nki
import nki.language as nl

import nki_check_outputs as k
from nki_copy import copy

LINE_COMPLEX_OF = 34  # complex_of's def line in nki_check_outputs.py

# Values past 2^24, where FP32 no longer holds every integer: 2^31 - 2 - 2 i, even, for 128 x 64 elements.
BIG = (np.int64(2**31 - 2) - 2 * np.arange(128 * 64, dtype=np.int64)).astype(np.int32).reshape(128, 64)


def check(r):
    assert len(r.checks) == 1, r.checks
    c = r.checks[0]
    m = c["metrics"]
    kind = "bit_exact" if "bytes_differing" in m else "tolerance"
    return kind, c["pass"], m["max_abs_err"], m.get("elements_differing"), c["failures"]


def test_off_by_one_int32_fails_with_its_true_error():
    r = tnki.benchmark(k.flip_low_bit, BIG, reference=k.same)
    # Every element is even, so x ^ 1 = x + 1: all 8192 differ by exactly 1, in their low byte only.
    assert check(r) == ("bit_exact", False, 1.0, 8192.0,
                        ["8192 of 32768 bytes differ (8192 elements; first at element 0)"])


def test_exact_uint32_copy_passes_with_no_error():
    x = (np.uint64(4_000_000_000) - np.arange(128 * 64, dtype=np.uint64) * 3).astype(np.uint32).reshape(128, 64)
    r = tnki.benchmark(copy, x, reference=k.same)
    assert check(r) == ("bit_exact", True, 0.0, 0.0, [])


def test_a_reference_that_is_not_integer_fails_naming_the_value():
    r = tnki.benchmark(copy, BIG, reference=k.halves)
    kind, ok, err, differing, failures = check(r)
    assert (kind, ok, err, differing) == ("bit_exact", False, 0.5, 8192.0)
    assert failures[-1] == ("the reference's value 2147483646.5 at element 0 is not an int32 (an integer "
                            "output is compared exactly: the reference must give integers in its range)"), failures


def test_fp8_output_equal_to_the_saturating_cast_passes():
    # 8192 values evenly from -300 to 300: those past +-240 saturate; each is its dtype's RNE cast otherwise.
    x = np.linspace(-300, 300, 128 * 64, dtype=np.float32).reshape(128, 64)
    r = tnki.benchmark(k.to_fp8, x, reference=k.same)
    (c,) = r.checks
    m = c["metrics"]
    assert (c["pass"], m["rel_l2_vs_quantized"], m["max_abs_err_vs_quantized"], m["quantized_reference"]) == (
        True, 0.0, 0.0, 1.0), c
    assert m["max_abs_err"] == 60.0, m  # 300 -> 240


def test_a_complex_reference_is_refused():
    # float64 would keep the real part only (tester23x F6: it passed).
    x = np.ones((128, 64), dtype=np.float32)
    e = raises(trnsim.InputError, tnki.benchmark, copy, x, reference=k.complex_of)
    # (float32 inputs + 5j give complex64)
    assert str(e) == ("reference.function: complex_of (nki_check_outputs.py:%d) returned complex64 values: the check "
                      "compares real numbers: expected an array for 'out' [128, 64]" % LINE_COMPLEX_OF), str(e)


def test_a_reference_that_is_not_a_function_is_refused_before_the_run():
    e = raises(TypeError, tnki.benchmark, copy, np.ones((128, 64), dtype=np.float32), reference="ref")
    assert str(e) == ("benchmark: reference='ref' is a str, not a function (a NumPy function called with the "
                      "kernel's arguments)"), str(e)


@nki.jit
def copy_twice(x):
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(a, t)
    nl.store(b, t)
    return a, b


def forgot_its_return(x):
    x * 2  # MARK-forgot-return


def test_a_reference_returning_none_for_two_outputs_says_none():
    # tester23ab F2: "returned 1 array for 2 kernel outputs" for a reference with no return statement.
    from runner import line_of

    e = raises(trnsim.InputError, tnki.benchmark, copy_twice, np.ones((128, 64), dtype=np.float32),
               reference=forgot_its_return)
    assert str(e) == ("reference.function: forgot_its_return (test_nki_reference_check.py:%d) returned None: "
                      "expected a tuple of 2 arrays, in the kernel's return order, for 'out' [128, 64], 'out_1' "
                      "[128, 64]" % (line_of(__file__, "MARK-forgot-return") - 1)), str(e)


if __name__ == "__main__":
    main(globals())
