"""Bad NKI kernels: each error is clear, names the kernel's Python line, and `trnsim run` exits 1 (an
unsupported call, wrong shapes, an out-of-bounds slice, a PSUM tile over 2 KiB per partition, SBUF tiles alive
at once over the core's SBUF, a partition dim over 128, a hardware rule, a Python exception, a missing reference)."""

import json
import os
import subprocess

import numpy as np

from runner import KERNELS, main, raises, tmpdir, trnsim_exe

import trnsim
import trnsim.nki as tnki

BAD = os.path.join(KERNELS, "nki_bad.py")
X = np.zeros((128, 64), dtype=np.float32)


def line(marker):
    with open(BAD) as f:
        for i, text in enumerate(f, 1):
            if marker in text:
                return i
    raise AssertionError(marker)


def run_cli(function, **over):
    w = {"name": "bad", "hardware": "trn2", "kernel": {"nki": BAD, "function": function},
         "inputs": {"x": {"generator": "normal", "seed": 1, "shape": [128, 64], "dtype": "float32"}}}
    w.update(over)
    d = tmpdir()
    path = os.path.join(d, "w.json")
    with open(path, "w") as f:
        json.dump(w, f)
    p = subprocess.run([trnsim_exe(), "run", path, "--out", os.path.join(d, "out")], capture_output=True,
                       text=True)
    return p.returncode, p.stderr


def check(function, marker, words, exc=tnki.NkiError):
    import nki_bad

    e = raises(exc, tnki.simulate_kernel, getattr(nki_bad, function), X)
    where = "nki_bad.py:%d" % line(marker)
    if isinstance(e, tnki.NkiError) or isinstance(e, trnsim.Error):
        assert where in str(e), (where, str(e))
    else:  # the kernel's own exception, raised as it is: its traceback reaches the line
        import traceback

        frames = ["%s:%d" % (os.path.basename(f.filename), f.lineno) for f in traceback.extract_tb(e.__traceback__)]
        assert where in frames, (where, frames)
    for w in words:
        assert w in str(e), (w, str(e))
    rc, err = run_cli(function)
    assert rc == 1, (rc, err)
    assert where in err, (where, err)
    return err


def test_unsupported_call():
    check("unsupported_call", "MARK-unsupported", ["nki.isa.bn_stats", "not modelled"], tnki.NkiUnsupported)


def test_wrong_shapes():
    check("wrong_shapes", "MARK-shapes", ["tensor_tensor", "[128, 32]", "[128, 64]"])


def test_out_of_bounds_slice():
    check("out_of_bounds", "MARK-oob", ["32:96", "out of bounds", "size 64"])


def test_psum_tile_over_a_bank():
    check("psum_too_big", "MARK-psum", ["PSUM", "4096 bytes", "2048-byte PSUM bank"])


def test_sbuf_tiles_alive_at_once_over_the_core():
    # Two [128, 32768] FP32 tiles alive together: 2 x 128 KiB per partition, SBUF holds 224 KiB; the second
    # is named with what is free then (224 - 128 = 96 KiB).
    check("sbuf_too_full", "MARK-sbuf-full", ["SBUF", "does not fit", "131072 B per partition", "98304 B free"])


def test_partition_dim_over_128():
    check("partitions_over_128", "MARK-partitions", ["partition dim 256", "128 partitions"])


def test_python_exception():
    check("python_exception", "MARK-exception", ["division"], ZeroDivisionError)


def test_python_exception_cli_traceback():
    rc, err = run_cli("python_exception")
    assert rc == 1 and "ZeroDivisionError" in err and "Traceback" in err, err


def test_hardware_rule_names_the_line():
    check("hardware_rule", "MARK-rule", ["tensor_copy"], trnsim.Error)


def test_missing_reference():
    rc, err = run_cli("copy_kernel", reference={"nki": BAD, "function": "no_such_ref"})
    assert rc == 1, (rc, err)
    assert "no_such_ref" in err and "reference" in err, err


main(globals())
