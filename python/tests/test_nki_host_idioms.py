"""How NKI users call kernels from the host (tester23n, issue 23): user classes on nl.NKIObject, nki.typed with
NKI's dtype objects, launch grids with an explicit lnc=. Each test fails on integ9's build (exact bytes or the
exact message)."""

from dataclasses import dataclass

import numpy as np

from runner import line_of, main, raises, same_f32

import trnsim.nki as tnki

import nki
import nki.isa as nisa
import nki.language as nl
import nki.typing as nt


@dataclass
class Scale(nl.NKIObject):
    # The NKI Language Guide's "Classes": a dataclass on NKIObject, passed to the kernel.
    factor: float = 2.0
    shift: float = 0.0


@nki.jit
def scaled(a, cfg: Scale):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(a), cfg.factor), cfg.shift))
    return out


def test_nki_object_classes_reach_the_kernel():
    # F2: `class Scale(nl.NKIObject)` was NkiUnsupported at class definition (every nki-library kernel failed
    # at import); an instance given to simulate_kernel is the kernel's parameter as passed.
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    same_f32(tnki.simulate_kernel(scaled, a, Scale(3.0, 0.5)), a * 3.0 + 0.5)
    assert isinstance(Scale(), nl.NKIObject) and Scale() == Scale(2.0, 0.0)


class Params(nl.NKIObject):
    # tester23x F5: a plain subclass with class attributes, built with keywords (NKI's NKIObject.__init__ takes
    # **kwargs, each set as an attribute).
    scale = None
    bias = None


@nki.jit
def with_params(a):
    p = Params(scale=2.0, bias=1.0)
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.multiply(nl.load(a), p.scale), p.bias))
    return out


def test_nki_object_takes_keyword_arguments():
    a = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    same_f32(tnki.simulate_kernel(with_params, a), a * 2.0 + 1.0)
    p = Params(scale=3.0)
    assert (p.scale, p.bias) == (3.0, None), (p.scale, p.bias)  # bias: the class attribute
    o = nl.NKIObject(a=1, b="x")
    assert (o.a, o.b) == (1, "x")
    e = raises(TypeError, Params, 3.0)  # keywords only, as NKI's signature
    assert "positional argument" in str(e), str(e)


@nki.jit
def widen(a):
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a))
    return out


def test_typed_takes_nki_dtype_objects():
    # F1: nki.typed(x, nl.bfloat16) was "ValueError: unknown dtype nl.bfloat16" (only the string worked).
    # Each spelling rounds the float32 values to bfloat16 (nearest even): 1 + 2^-8 -> 1, 1 + 3 * 2^-8 -> 1 + 2^-6.
    x = np.tile(np.array([1.0, 1.00390625, 1.01171875, -2.0], np.float32), (128, 2))
    want = np.tile(np.array([1.0, 1.0, 1.015625, -2.0], np.float32), (128, 2))
    for d in (nl.bfloat16, "bfloat16"):
        same_f32(tnki.simulate_kernel(widen, tnki.typed(x, d)), want)
    same_f32(tnki.simulate_kernel(widen, tnki.typed(x, np.float32)), x)
    e = raises(ValueError, lambda: tnki.typed(x, "bfloat61"))  # MARK-bad-name
    assert str(e) == "test_nki_host_idioms.py:%d: nki.typed: unknown dtype 'bfloat61'" % line_of(
        __file__, "MARK-bad-name"), str(e)
    e = raises(ValueError, lambda: tnki.typed(x, np.float64))  # MARK-f64
    assert str(e) == ("test_nki_host_idioms.py:%d: nki.typed: dtype float64 has no Trainium numerics in trnsim "
                      "(docs/nki.md lists the dtypes)" % line_of(__file__, "MARK-f64")), str(e)


PROGRAMS = []  # (program_id(0), program_id(1)) of each program as it is traced: core 0's, then core 1's


@nki.jit
def spmd_add(a, b):
    # The SPMD tensor-addition tutorial's grid: one [128, 512] column block per program of grid dim 1.
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    PROGRAMS.append((i, j))
    cols = slice(j * 512, (j + 1) * 512)
    nl.store(out[:, cols], nl.add(nl.load(a[:, cols]), nl.load(b[:, cols])))
    return out


def test_a_grid_along_dim_1_with_lnc_2_runs_on_both_cores():
    # kernel[1, 2] with an explicit lnc=2 was "launch grid [1, 2] gives no program to core 1 of 2" (without
    # lnc= it runs on one core). Grid dim 0 has one index for two cores, so the programs go to the cores in
    # turn in grid order: core 0 runs (0, 0), core 1 runs (0, 1); kernel[1, 3]: core 0 (0, 0), (0, 2).
    a = np.arange(128 * 1536, dtype=np.float32).reshape(128, 1536)
    b = np.full((128, 1536), 0.5, np.float32)
    for grid, n in (((1, 2), 1024), ((1, 3), 1536)):
        del PROGRAMS[:]
        same_f32(tnki.simulate_kernel(spmd_add[grid], a[:, :n], b[:, :n], lnc=2), a[:, :n] + b[:, :n])
        want = [(0, 0), (0, 1)] if n == 1024 else [(0, 0), (0, 2), (0, 1)]
        assert PROGRAMS == want, (grid, PROGRAMS)
    r = tnki.benchmark(spmd_add[1, 2], a[:, :1024], b[:, :1024], lnc=2)
    one = tnki.benchmark(spmd_add[1, 2], a[:, :1024], b[:, :1024])
    assert r.stats["cores"] == 2 and one.stats["cores"] == 1, (r.stats["cores"], one.stats["cores"])
    same_f32(r.outputs[0], a[:, :1024] + b[:, :1024])


@nki.jit
def copies(a, form):
    o = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm, name="o")
    nl.store(o, nl.load(a))
    return {"bare": o, "tuple": (o,), "list": [o]}[form]


def test_a_tuple_of_one_output_comes_back_as_a_tuple():
    # F7: `return (o,)` gave a bare array, so `(y,) = simulate_kernel(...)` unpacked its rows. What the kernel
    # returns shapes what comes back: one array for `return o`, a tuple of one for `(o,)` and `[o]`.
    x = np.arange(3 * 4, dtype=np.float32).reshape(3, 4)
    assert isinstance(tnki.simulate_kernel(copies, x, "bare"), np.ndarray)
    for form in ("tuple", "list"):
        r = tnki.simulate_kernel(copies, x, form)
        assert type(r) is tuple and len(r) == 1 and r[0].tobytes() == x.tobytes(), (form, r)


@nki.jit
def optional_bias(x, bias=None):
    # nki-library's conv1d: `has_bias = bias != None`, host Python on the kernel's argument.
    has_bias, no_bias = bias != None, bias == None  # noqa: E711
    assert has_bias is not no_bias
    t = nl.load(x)
    if has_bias:
        t = nl.add(t, nl.load(bias))
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, t)
    return out


def test_a_tensor_compared_with_none_is_the_python_test():
    # tester23o F1: `bias != None` was NkiUnsupported "a comparison ... of a tile" (advising nl.not_equal).
    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    same_f32(tnki.simulate_kernel(optional_bias, x), x)
    same_f32(tnki.simulate_kernel(optional_bias, x, x), x + x)


@nki.jit
def dma_with_dge(x, mode):
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x, dge_mode=mode)  # MARK-dge
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_dge_mode_takes_its_integer_value():
    # tester23o F8: nki-library passes `dge_mode=3` (`_DGE_MODE_NONE = 3`, static DMA); it was "dge_mode must be
    # an nki.isa.dge_mode, got 3". 0-3 are unknown, swdge, hwdge, none in the page's order: 3 runs as
    # dge_mode.none (the same simulated time, which the default's differs from) and 0 as the default.
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    runs = {m: tnki.benchmark(dma_with_dge, x, m) for m in (3, nisa.dge_mode.none, 0, nisa.dge_mode.unknown)}
    for m, r in runs.items():
        same_f32(r.outputs[0], x)
    assert runs[3].latency_ns == runs[nisa.dge_mode.none].latency_ns != runs[0].latency_ns, runs
    assert runs[0].latency_ns == runs[nisa.dge_mode.unknown].latency_ns, runs
    for bad in (4, True):
        e = raises(tnki.NkiError, tnki.simulate_kernel, dma_with_dge, x, bad)
        want = "must be an nki.isa.dge_mode or its integer value 0-3 (unknown, swdge, hwdge, none), got 4"
        if bad is True:
            want = "must be an nki.isa.dge_mode, got True"
        assert str(e) == "test_nki_host_idioms.py:%d: nki.isa.dma_copy: dge_mode %s" % (
            line_of(__file__, "MARK-dge"), want), str(e)


@nki.jit
def annotated(x, out_dtype: nki.dtype = nl.bfloat16, scratch: nt.mutable_tensor = None):
    # nki-library's annotations: `dtype: nki.dtype = nl.bfloat16` (cross_entropy, mlp_cte, moe_cte, ...) and
    # `nt.mutable_tensor` (router_topk); evaluated when the def line runs.
    assert isinstance(out_dtype, nki.dtype) and isinstance(out_dtype, nl.DType)
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(nl.load(x), dtype=out_dtype))
    return out


def test_dtype_and_mutable_tensor_annotations_resolve():
    # tester23o F2, F10: `nki.dtype` was NkiUnsupported and `nt.mutable_tensor` an AttributeError while the def
    # line's annotations were evaluated (the module could not be imported). 1 + 2^-8 rounds to 1 in bfloat16
    # (nearest even), stays in float32.
    x = np.full((128, 4), 1.00390625, np.float32)
    same_f32(tnki.simulate_kernel(annotated, x), np.ones((128, 4), np.float32))
    same_f32(tnki.simulate_kernel(annotated, x, nl.float32), x)
    assert isinstance(x, nt.mutable_tensor) is False and not isinstance("float32", nki.dtype)


if __name__ == "__main__":
    main(globals())
