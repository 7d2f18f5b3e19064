"""An output of a dtype NumPy lacks (bfloat16, FP8) comes from simulate_kernel / benchmark as float32 values;
its bits are BenchmarkResult.raw_outputs (tester23aa F10: an FP8 output carrying FP32 scales' bytes, as
nki-library's rmsnorm_quant stores them, lost every byte that is an FP8 NaN code: all read as one NaN)."""

import numpy as np

from runner import main

import trnsim.nki as tnki
import nki
import nki.language as nl


@nki.jit
def fp32_bytes_as_fp8(x):
    """Each row's one FP32 value stored as its 4 bytes in an FP8 (e4m3) output [P, 4], and x as bfloat16."""
    o = nl.ndarray((x.shape[0], 4), nl.float8_e4m3, buffer=nl.shared_hbm)
    h = nl.ndarray(x.shape, nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(o, t.view(nl.float8_e4m3))
    nl.store(h, nl.copy(t, dtype=nl.bfloat16))
    return o, h


def test_raw_outputs_keep_the_bits_of_fp8_and_bfloat16_outputs():
    # Low bytes 0x70-0x7F and 0xF0-0xFF, 4 times: in nl.float8_e4m3 (IEEE-style: exponent 1111 is +-inf with a
    # zero mantissa, NaN otherwise) 0x79-0x7F and 0xF9-0xFF are NaN codes, 14 of every 32 rows, 56 in all.
    words = np.array([0x3F800000 | b for b in list(range(0x70, 0x80)) + list(range(0xF0, 0x100))] * 4, np.uint32)
    x = words.view(np.float32).reshape(128, 1)
    r = tnki.benchmark(fp32_bytes_as_fp8, x)
    fp8, bf16 = r.raw_outputs
    assert fp8.dtype == np.uint8 and fp8.tobytes() == x.tobytes()
    # bfloat16 is float32's upper half rounded to nearest even: 0x3F80 for every value here (1.0000x).
    assert bf16.dtype == np.uint16 and bf16.tobytes() == np.full((128, 1), 0x3F80, np.uint16).tobytes()
    values = r.outputs[0]
    assert values.dtype == np.float32 and np.isnan(values[:, 0]).sum() == 56  # one float32 NaN for 14 codes
    assert r.outputs[1].tobytes() == np.ones((128, 1), np.float32).tobytes()


if __name__ == "__main__":
    main(globals())
