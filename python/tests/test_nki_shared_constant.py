"""nl.shared_constant: a constant given on the host is an HBM input of the kernel, its values converted to the
tensor's dtype as a given input's are (round to nearest even for floats); equal data and dtype give one tensor.
Checked byte for byte against NumPy; bad constants are errors naming the call and the line."""

import json
import os
import subprocess

import numpy as np

from runner import KERNELS, line_of, main, raises, tmpdir, trnsim_exe

import trnsim.nki as tnki
from trnsim.nki import language as nl

import nki_constants as K

SRC = os.path.join(KERNELS, "nki_constants.py")


def bf16(a):
    """float32 -> bfloat16 (round to nearest even; no NaN here), as float32."""
    b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return (((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)


def same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
    assert got.tobytes() == want.tobytes(), np.argwhere(got != want)[:5]


def back(c, **kw):
    K.given["c"] = c
    return tnki.simulate_kernel(K.read_back, np.zeros((1, 1), np.float32), **kw)


def test_values_converted_as_an_input():
    # float64 values to bfloat16 as a float64 input's: rounded once, to nearest even (not twice through
    # float32). 1 + 2^-8 is a tie (down to 1.0, even), 1 + 3 * 2^-8 a tie up (to 1 + 2^-6); 1 + 2^-8 + 2^-30 is
    # just above the tie, so 1 + 2^-7 (through float32's RNE first it would be the tie's 1.0); read back as
    # float32.
    c = np.array([[1.0, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -30], [-2.5, 3e38, 1e-3, 0.0]])
    want = np.array([[1.0, 1.0, 1 + 2 ** -6, 1 + 2 ** -7], [-2.5, 0, 0, 0.0]], np.float32)
    want[1, 1:3] = bf16(np.array([3e38, 1e-3], np.float32))  # (no bfloat16 tie near these: one rounding)
    same(back(c, dtype=nl.bfloat16), want)
    assert K.seen["shape"] == (2, 4) and K.seen["dtype"] == nl.bfloat16, K.seen
    # Integers: int16 values as an int32 tensor; an int8 array's own dtype when dtype= is not given.
    i = np.arange(-64, 64, dtype=np.int16).reshape(2, 64) * 300
    same(back(i, dtype=nl.int32, out_dtype=nl.int32), i.astype(np.int32))
    j = np.arange(-128, 128, dtype=np.int8).reshape(2, 128)
    same(back(j, dtype=None, out_dtype=nl.int32), j.astype(np.int32))
    assert K.seen["dtype"] == nl.int8, K.seen


def test_npy_file_path():
    path = os.path.join(tmpdir(), "c.npy")
    c = np.linspace(-1, 1, 256, dtype=np.float32).reshape(2, 128)
    np.save(path, c)
    same(back(path, dtype=nl.float32), c)


def test_one_tensor_per_data_and_dtype():
    # The attention tutorials' int8 identity as bfloat16: x + I exactly; asked for twice it is one tensor,
    # as float32 another.
    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128) / 8
    same(tnki.simulate_kernel(K.plus_identity, x), x + np.identity(128, dtype=np.float32))
    assert K.seen["names"] == ("shared_constant", "shared_constant", "shared_constant_1"), K.seen["names"]


def test_name_of_an_input_not_taken():
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    same(tnki.simulate_kernel(K.named_like_an_input, x), x + 2)
    assert K.seen["name"] == "shared_constant_1", K.seen["name"]


def test_an_input_of_the_run():
    # An input of the run like the caller's x: the trace names it as the DMA's source, and the stats count it
    # among the bytes the run must move: x, out (64 KiB each) and the bfloat16 identity (32 KiB); not the
    # float32 one (64 KiB), declared but never read (hbm_bytes_read has x and the bfloat16 one only), which
    # moves no byte (tester23ab F4: an input no instruction touches is no compulsory byte).
    x = np.arange(128 * 128, dtype=np.float32).reshape(128, 128)
    path = os.path.join(tmpdir(), "t.json")
    r = tnki.benchmark(K.plus_identity, x, trace=path)
    assert r.stats["compulsory_hbm_bytes"] == 65536 * 2 + 32768, r.stats["compulsory_hbm_bytes"]
    assert r.stats["hbm_bytes_read"] == 65536 + 32768, r.stats["hbm_bytes_read"]
    with open(path) as f:
        assert "src=hbm:shared_constant[128 rows]+0 [128] bfloat16" in f.read()


def test_lnc2_cores_share_it():
    x = np.arange(256 * 64, dtype=np.float32).reshape(256, 64)
    want = x.copy()
    want[:128] += 1
    want[128:] += 1000
    same(tnki.simulate_kernel(K.per_core_rows[2], x), want)


def test_errors_name_the_call_and_line():
    x = np.zeros((128, 64), np.float32)
    for what, kind, text in (
            ("fraction", tnki.NkiError, "dtype nl.int32 takes integers; the constant holds 0.5 at [0, 1]"),
            ("complex", tnki.NkiError, "the constant is a complex; it takes a NumPy array or a .npy file path"),
            ("float64", tnki.NkiError, "a float64 constant needs dtype= (the tensor's NKI dtype)"),
            ("scalar", tnki.NkiError, "the constant has shape []; it needs at least one element and one dim"),
            ("tile", tnki.NkiError, "the constant is a kernel tensor; it takes a NumPy array (or a .npy file "
                                    "path) whose values are known on the host")):
        e = raises(kind, tnki.simulate_kernel, K.bad, x, what=what)
        want = f"nki_constants.py:{line_of(SRC, 'MARK-' + what)}: nl.shared_constant: {text}"
        assert str(e) == want, (str(e), want)
    e = raises(tnki.NkiUnsupported, tnki.simulate_kernel, K.bad, x, what="x4")
    assert str(e) == (f"nki_constants.py:{line_of(SRC, 'MARK-x4')}: nl.shared_constant of dtype "
                      f"nl.float8_e4m3fn_x4 is not modelled by trnsim: its supported dtypes are the NKI page's "
                      f"unpacked ones (docs/nki.md lists the supported calls)"), str(e)


def test_value_out_of_range():
    # The input conversion's own check (sim/tensor/host_tensor.cpp), named by the call's line.
    e = raises(Exception, tnki.simulate_kernel, K.bad, np.zeros((128, 64), np.float32), what="range")
    assert type(e).__name__ == "InputError", type(e)
    assert str(e) == (f"nki_constants.py:{line_of(SRC, 'MARK-range')}: nl.shared_constant: element 0 = 300 is "
                      f"outside the int8 range [-128, 127] of int8 [1, 1]"), str(e)


def test_a_failed_build_leaves_no_constant():
    # A build that fails after making a constant; then a builder kernel (no nki.language) runs with its own
    # input only, no constant of the failed build bound to it.
    import tiny

    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    raises(ValueError, tnki.simulate_kernel, K.bad, x, what="late")
    same(tnki.simulate_kernel(tiny.copy_kernel, x), x)


def test_workload_run_binds_it():
    # `trnsim run` of a workload naming the kernel: the workload gives x only; the constant is bound by the
    # run (no "missing input"), and --dump-inputs writes it beside x, as bfloat16 raw bits (1.0 = 0x3F80).
    d = tmpdir()
    w = {"name": "c", "hardware": "trn2", "kernel": {"nki": os.path.join(KERNELS, "nki_constants.py"),
                                                     "function": "plus_identity"},
         "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 128], "dtype": "float32"}}}
    path = os.path.join(d, "w.json")
    with open(path, "w") as f:
        json.dump(w, f)
    p = subprocess.run([trnsim_exe(), "run", path, "--out", d, "--dump-inputs"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    ident = np.load(os.path.join(d, "inputs", "shared_constant.npy"))
    same(ident, (np.identity(128, dtype=np.uint16) * 0x3F80).astype(np.uint16))
    x = np.load(os.path.join(d, "inputs", "x.npy"))
    same(np.load(os.path.join(d, "out.npy")), x + np.identity(128, dtype=np.float32))


if __name__ == "__main__":
    main(globals())
