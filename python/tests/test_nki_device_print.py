"""nl.device_print: the tile's values at that point of the kernel, printed after the run as print(prefix, values)
to stdout, each by one DMA to an HBM output of its own that simulate_kernel drops from what it returns; the
kernel's own outputs and values are unchanged."""

import contextlib
import io
import json
import os
import subprocess

import numpy as np

from runner import HERE, KERNELS, main, raises_at, tmpdir, trnsim_exe

import trnsim.nki as tnki
from trnsim.nki import NkiError

import nki_print as K

SRC = os.path.join(KERNELS, "nki_print.py")
A = np.arange(12, dtype=np.float32).reshape(3, 4)


def test_printed_values():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        b = tnki.simulate_kernel(K.printing, A)
    assert b.tobytes() == (A + 1).tobytes()  # the kernel's one output, as without the prints
    # In trace order, each value as print(prefix, array) shows it: the tile after the load, the sum, the input.
    assert out.getvalue() == f"value of a: {A}\na + 1: {A + 1}\ninput: {A}\n", out.getvalue()


def test_cost_one_dma_each():
    # Three prints, three more instructions (one dma_copy each); the values and returned outputs are the same.
    with contextlib.redirect_stdout(io.StringIO()):
        with_prints = tnki.benchmark(K.printing, A)
    without = tnki.benchmark(K.printing, A, prints=False)
    n = [r.stats["nki"]["allocation"][0]["instructions"] for r in (with_prints, without)]
    assert n[0] == n[1] + 3, n
    assert len(with_prints.outputs) == 1 and with_prints.outputs[0].tobytes() == without.outputs[0].tobytes()


def test_lnc2_cores():
    # One output for both cores' print, core c's values at [c]: printed core by core with each core's prefix.
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        b = tnki.simulate_kernel(K.per_core[2], a)
    assert b.tobytes() == a.tobytes()
    assert out.getvalue() == f"core 0: {a[:2]}\ncore 1: {a[2:]}\n", out.getvalue()


def test_errors():
    raises_at(NkiError, "nl.device_print: psum tile p [3, 4] float32", SRC, "# a PSUM tile", tnki.simulate_kernel,
              K.bad_print, A, what="psum")
    raises_at(NkiError, "nl.device_print: print_prefix must be a constant string (evaluated when the kernel is "
              "traced), got int", SRC, "# not a string", tnki.simulate_kernel, K.bad_print, A, what="int")


def plus_one(a, prints=True):
    return a.astype(np.float64) + 1


def test_a_reference_gives_the_kernels_own_outputs_only():
    # tester23p F6: with prints, the reference had to return the device_print tensors too ("returned 1 array for
    # 4 kernel outputs"), so a debug print changed what the kernel's NumPy reference must be. Now only the
    # returned output is checked, with or without prints.
    for prints in (True, False):
        with contextlib.redirect_stdout(io.StringIO()):
            r = tnki.benchmark(K.printing, A, reference=plus_one, prints=prints)
        assert [(c["output"], c["pass"]) for c in r.checks] == [("out", True)], (prints, r.checks)
        assert len(r.outputs) == 1 and r.outputs[0].tobytes() == (A + 1).tobytes()
    d = tmpdir()
    with open(os.path.join(d, "w.json"), "w") as f:
        json.dump({"name": "p", "hardware": "trn2", "kernel": {"nki": SRC, "function": "printing"},
                   "inputs": {"a_tensor": {"generator": "normal", "seed": 1, "shape": [3, 4], "dtype": "float32"}},
                   "reference": {"nki": os.path.join(HERE, "test_nki_device_print.py"), "function": "plus_one"}}, f)
    out = os.path.join(d, "out")
    p = subprocess.run([trnsim_exe(), "run", os.path.join(d, "w.json"), "--out", out], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert sorted(n for n in os.listdir(out) if n.endswith(".npy")) == [
        "device_print_0.npy", "device_print_1.npy", "device_print_2.npy", "out.npy"], os.listdir(out)
    with open(os.path.join(out, "stats.json")) as f:
        numerics = json.load(f)["numerics"]
    assert [(n, c["pass"]) for n, c in numerics.items()] == [("out", True)], numerics


if __name__ == "__main__":
    main(globals())
