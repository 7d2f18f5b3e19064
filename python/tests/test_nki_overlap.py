"""An instruction whose dst overlaps its own source in other elements (python/trnsim/nki/_order.py): NKI's ISA
reference does not say in which order an engine reads and writes an instruction's elements, so the kernel
gets a warning at the line; in-place (element k onto element k) and disjoint parts of one tile do not."""

import warnings

import numpy as np

from runner import line_of as _line_of, main

import trnsim.nki as tnki
import nki
import nki.isa as nisa
import nki.language as nl

X = np.arange(128 * 16, dtype=np.float32).reshape(128, 16)


def kernel(kind):
    @nki.jit
    def k(x):
        y = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        if kind == "reverse":
            nisa.tensor_copy(dst=t[:, ::-1], src=t)  # MARK-reverse
        elif kind == "shift":
            nisa.tensor_copy(dst=t[:, 1:16], src=t[:, 0:15])  # MARK-shift
        elif kind == "scan":
            nisa.tensor_tensor(dst=t[:, 1:16], data1=t[:, 1:16], data2=t[:, 0:15], op=nl.add)  # MARK-scan
        elif kind == "in_place":
            nisa.tensor_copy(dst=t, src=t)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
            nisa.activation(dst=t, op=nl.exp, data=t, scale=0.0)
        elif kind == "halves":
            nisa.tensor_copy(dst=t[:, 0:8], src=t[:, 8:16])
        elif kind == "interleaved":
            nisa.tensor_copy(dst=t[:, 0::2], src=t[:, 1::2])
        nl.store(y, t)
        return y

    return k


def run(kind):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = tnki.simulate_kernel(kernel(kind), X)
    return out, [str(m.message) for m in w if issubclass(m.category, RuntimeWarning)]


def line_of(marker):
    return _line_of(__file__, marker)


def test_a_copy_over_its_own_source_in_other_elements_warns():
    for kind, op in (("reverse", "tensor_copy"), ("shift", "tensor_copy"), ("scan", "tensor_tensor")):
        _, msgs = run(kind)
        at = "test_nki_overlap.py:%d: %s writes " % (line_of("MARK-" + kind), op)
        hits = [m for m in msgs if m.startswith(at)]
        assert len(hits) == 1, (kind, msgs)
        assert "does not say in which order an engine reads and writes" in hits[0], hits[0]


def test_in_place_and_disjoint_parts_do_not_warn():
    for kind in ("in_place", "halves", "interleaved"):
        out, msgs = run(kind)
        assert not [m for m in msgs if "own source" in m], (kind, msgs)
    out, _ = run("halves")
    assert np.array_equal(out[:, 0:8], X[:, 8:16]) and np.array_equal(out[:, 8:16], X[:, 8:16])
    out, _ = run("interleaved")
    assert np.array_equal(out[:, 0::2], X[:, 1::2])


if __name__ == "__main__":
    main(globals())
