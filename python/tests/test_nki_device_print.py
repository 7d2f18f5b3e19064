"""nl.device_print: the tile's values at that point of the kernel, printed after the run as print(prefix, values)
to stdout, each by one DMA to an HBM output of its own that simulate_kernel drops from what it returns; the
kernel's own outputs and values are unchanged."""

import contextlib
import io
import os

import numpy as np

from runner import KERNELS, main, raises_at

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


if __name__ == "__main__":
    main(globals())
