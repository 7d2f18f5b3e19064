"""Keyword arguments of trnsim.nki.simulate_kernel / benchmark reach the kernel (and the reference) as the
objects the caller passed, as NKI passes them: they went through JSON, so an nl dtype, a NumPy dtype or a
function was a TypeError, a tuple came as a list and np.float32(0.1) as the double 0.10000000149011612.
And benchmark(kernel, n=32) for a kernel without array inputs runs it (it returned NKI's deferred form)."""

import numpy as np

from runner import line_of, main

import trnsim.nki as tnki
import nki
import nki.language as nl

import nki_kwargs as K

X = np.linspace(-1, 1, 128 * 64, dtype=np.float32).reshape(128, 64)


def test_objects_reach_the_kernel_as_given():
    scale = np.float32(0.1)
    for dt in (nl.bfloat16, np.dtype("float32")):
        K.seen.clear()
        y = tnki.simulate_kernel(K.cast_apply, X, dt=dt, fn=nl.exp, shape=(128, 64), scale=scale)
        assert len(K.seen) == 1, K.seen
        got = K.seen[0]
        assert got["dt"] is dt and got["fn"] is nl.exp, got
        assert type(got["shape"]) is tuple and got["shape"] == (128, 64), got
        assert type(got["scale"]) is np.float32 and got["scale"] is scale, got
        assert y.shape == (128, 64)
    # The values: exp(0.1 * x) on the Scalar engine; bfloat16 output (as float32 values) within its rounding.
    want = np.exp(np.float32(0.1) * X)
    assert np.abs(y - want).max() <= 1e-5 * np.abs(want).max() + 1e-6, np.abs(y - want).max()


def test_reference_gets_the_same_objects():
    K.seen.clear()
    r = tnki.benchmark(K.cast_apply, X, reference=K.cast_apply_ref, dt=nl.float32, fn=nl.exp, shape=(128, 64))
    refs = [s for s in K.seen if s.get("ref")]
    assert len(refs) == 1 and refs[0]["dt"] is nl.float32 and refs[0]["fn"] is nl.exp, K.seen
    assert type(refs[0]["shape"]) is tuple, refs
    assert r.passed, r.checks
    # stats.json "params" describes them (no object addresses, so the same run gives the same stats).
    p = r.stats["params"]
    assert p["dt"] == "nl.float32" and p["shape"] == [128, 64], p
    assert p["fn"] == "nl.exp", p


def test_benchmark_without_array_inputs_runs():
    K.seen.clear()
    r = tnki.benchmark(K.filled, n=32)
    assert isinstance(r, tnki._entry.BenchmarkResult), r
    assert K.seen == [{"n": 32}], K.seen
    assert r.outputs[0].shape == (128, 32) and (r.outputs[0] == 32).all()
    # Options only: NKI's form, the kernel to call (with its arguments), its result in .benchmark_result.
    b = tnki.benchmark(K.filled, warmup=2, iters=3)
    assert not isinstance(b, tnki._entry.BenchmarkResult), b
    out = b(n=16)
    assert out.shape == (128, 16) and b.benchmark_result.iters == 3
    assert not isinstance(tnki.benchmark(K.filled, hardware="trn2"), tnki._entry.BenchmarkResult)


SEEN = {}


@nki.jit
def named_like_options(a, hardware="mine", trace="t.txt"):  # MARK-named-like-options
    SEEN["got"] = (hardware, trace)
    o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(o, nl.load(a))
    return o


def test_a_kernel_parameter_named_like_an_option_is_warned_about():
    # tester23ab F12: hardware= went to trnsim (a trn3 run) and the kernel's own hardware kept "mine", silently.
    import warnings

    a = np.ones((128, 8), dtype=np.float32)
    here = "test_nki_kwargs.py:%d" % line_of(__file__, "MARK-named-like-options")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = tnki.simulate_kernel(named_like_options, a, hardware="trn3")
        tnki.simulate_kernel(named_like_options, a, "set", hardware="trn2")  # positionally: no warning
    assert np.array_equal(out, a)
    assert [str(w.message) for w in caught] == [
        "simulate_kernel: hardware='trn3' is trnsim's option (the hardware to run on), not the parameter hardware "
        "of named_like_options (%s), which keeps its default 'mine'; pass the kernel's value positionally to set "
        "it" % here], [str(w.message) for w in caught]
    assert caught[0].category is RuntimeWarning and caught[0].filename == __file__, caught[0]
    assert SEEN["got"] == ("set", "t.txt"), SEEN


@nki.jit
def scaled_copy(x, scale=2.0, hardware=None):
    o = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(o, nl.multiply(nl.load(x), scale))
    return o


def test_a_functools_partial_of_a_kernel_runs():
    # tester23ae F8: simulate_kernel / benchmark of functools.partial(kernel, scale=3.0) stopped inside trnsim
    # ("'functools.partial' object has no attribute '__name__'"); called directly, the partial ran.
    import functools
    import warnings

    k3 = functools.partial(scaled_copy, scale=3.0)
    assert tnki.simulate_kernel(k3, X).tobytes() == (X * np.float32(3.0)).tobytes()
    r = tnki.benchmark(k3, X, reference=lambda x: x * 3.0)
    assert r.passed and r.outputs[0].tobytes() == (X * np.float32(3.0)).tobytes(), r.checks
    # The option warning names the kernel the partial binds, at its def line (the partial's keyword makes the
    # parameters after scale keyword-only, as inspect.signature shows them).
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        tnki.simulate_kernel(k3, X, hardware="trn2")
    assert [str(m.message) for m in w] == [
        "simulate_kernel: hardware='trn2' is trnsim's option (the hardware to run on), not the parameter hardware "
        "of scaled_copy (test_nki_kwargs.py:%d), which keeps its default None; it is keyword-only, so no call of "
        "simulate_kernel can set it: rename it" % line_of(__file__, "def scaled_copy")], [str(m.message) for m in w]


if __name__ == "__main__":
    main(globals())
