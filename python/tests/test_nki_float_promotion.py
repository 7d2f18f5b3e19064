"""NKI Type Promotion of two float tiles of one size and different formats (nki.language's type promotion
rules: "a new widened type that fits the values range"): float16 with bfloat16 is float32, float8_e4m3 with
float8_e5m2 is bfloat16 (tester23n F3: trnsim gave float32 for both)."""

import numpy as np

from runner import main

import trnsim.nki as tnki
import nki
import nki.language as nl

DTYPES = []  # the dtype of each sum, as the kernel sees it


@nki.jit
def fp8_sum(a, b):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    s = nl.add(nl.load(a), nl.load(b))
    DTYPES.append(s.dtype)
    nl.store(out, s)
    return out


def test_two_fp8_formats_add_in_bfloat16():
    # 240 (exact in float8_e4m3) + 1.5 (exact in float8_e5m2) = 241.5, which bfloat16 rounds to even: 242
    # (float32, as before, kept 241.5). Either operand order.
    a = np.full((128, 4), 240.0, np.float32)
    b = np.full((128, 4), 1.5, np.float32)
    del DTYPES[:]
    for x, y in (((a, nl.float8_e4m3), (b, nl.float8_e5m2)), ((b, nl.float8_e5m2), (a, nl.float8_e4m3))):
        out = tnki.simulate_kernel(fp8_sum, tnki.typed(*x), tnki.typed(*y))
        assert out.tobytes() == np.full((128, 4), 242.0, np.float32).tobytes(), out[0]
    assert DTYPES == [nl.bfloat16, nl.bfloat16], DTYPES
    # float16 with bfloat16 stays float32: 1 + 2^-10 (float16) + 256 (bfloat16) is exact there.
    del DTYPES[:]
    h = np.full((128, 4), 1 + 2 ** -10, np.float32)
    out = tnki.simulate_kernel(fp8_sum, tnki.typed(h, nl.float16), tnki.typed(np.full((128, 4), 256.0), "bfloat16"))
    assert out.tobytes() == np.full((128, 4), 257 + 2 ** -10, np.float32).tobytes(), out[0]
    assert DTYPES == [nl.float32], DTYPES


if __name__ == "__main__":
    main(globals())
