"""nl.no_reorder / nki.compiler.no_reorder (nki.language.no_reorder: the operations inside the block execute
in program order): trnsim's default schedule moves only loads, issuing one as early as its dependencies allow;
inside the block loads keep their program position; so in a loop given `directives=nki.compiler.no_reorder()`
(attention_fwd v11). Both calls raised NkiUnsupported on integ9's build, and the directive was ignored."""

import warnings

import numpy as np

from runner import main

import trnsim.nki as tnki
from trnsim.nki import _schedule

import nki
import nki.compiler as ncc
import nki.language as nl

ORDERS = []  # the emitted order of each build: (instruction name, program index)


def _spy(trace, mode="pipelined", after=None):
    ops = _order(trace, mode, after)
    ORDERS.append([(o.name, o.index) for o in ops])
    return ops


_order, _schedule.order = _schedule.order, _spy


def body(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.load(x[0:128, :])
    nl.store(out[0:128, :], nl.exp(nl.exp(a)))
    b = nl.load(x[128:256, :])  # independent of the store above: the default schedule issues it earlier
    nl.store(out[128:256, :], nl.exp(b))
    return out


@nki.jit
def pipelined(x):
    return body(x)


@nki.jit
def in_order(x):
    with nl.no_reorder():
        return body(x)


@nki.jit
def in_order_compiler(x):
    with ncc.no_reorder():
        return body(x)


@nki.jit(additional_compile_opt="--enable-instruction-scheduling=false")
def scheduler_off(x):
    return body(x)


def test_no_reorder_keeps_the_blocks_loads_in_program_order():
    x = np.linspace(-1, 1, 256 * 64, dtype=np.float32).reshape(256, 64)
    written = [("dma_copy", 0), ("activation", 1), ("activation", 2), ("dma_copy", 3), ("dma_copy", 4),
               ("activation", 5), ("dma_copy", 6)]
    del ORDERS[:]
    runs = [tnki.benchmark(k, x) for k in (pipelined, in_order, in_order_compiler, scheduler_off)]
    assert ORDERS[0] == [written[i] for i in (0, 1, 4, 2, 3, 5, 6)], ORDERS[0]  # b's load moved up
    assert ORDERS[1:] == [written] * 3, ORDERS[1:]
    for r in runs[1:]:
        assert r.outputs[0].tobytes() == runs[0].outputs[0].tobytes()
        assert r.latency_ns == runs[3].latency_ns, (r.latency_ns, runs[3].latency_ns)


def rows(x, directives):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.sequential_range(2, **directives):
        a = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], nl.exp(nl.exp(a)))
    return out


@nki.jit
def loop_pipelined(x):
    return rows(x, {})


@nki.jit
def loop_in_order(x):
    # attention_fwd v11's form: the directive on the loop (it was ignored with a warning).
    return rows(x, {"directives": ncc.no_reorder()})


def test_a_loop_directive_keeps_its_instructions_in_program_order():
    x = np.linspace(-1, 1, 256 * 64, dtype=np.float32).reshape(256, 64)
    written = [("dma_copy", 0), ("activation", 1), ("activation", 2), ("dma_copy", 3), ("dma_copy", 4),
               ("activation", 5), ("activation", 6), ("dma_copy", 7)]
    del ORDERS[:]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        pipe, ordered = (tnki.simulate_kernel(k, x) for k in (loop_pipelined, loop_in_order))
    assert not w, [str(m.message) for m in w]  # (integ9: "keyword argument 'directives' is ignored")
    assert ORDERS[0] == [written[i] for i in (0, 4, 1, 2, 3, 5, 6, 7)], ORDERS[0]  # iteration 1's load moved up
    assert ORDERS[1] == written, ORDERS[1]
    assert pipe.tobytes() == ordered.tobytes()


if __name__ == "__main__":
    main(globals())
