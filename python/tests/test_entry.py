"""trnsim.nki.simulate_kernel / benchmark, and the nki module names."""

import os

import numpy as np

from runner import main, raises, tmpdir

import trnsim
import trnsim.nki as nki
from tiny import add_kernel, add_ref, copy_kernel, raises_kernel, too_many_partitions, unwritten_kernel


def test_unwritten_output_warns():
    # An output no instruction writes reads as NaN: simulate_kernel says so (a RuntimeWarning naming it).
    import warnings

    x = np.ones((128, 8), dtype=np.float32)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        y = nki.simulate_kernel(unwritten_kernel, x)
    assert np.isnan(y).all()
    msgs = [str(m.message) for m in w if issubclass(m.category, RuntimeWarning)]
    assert any("output 'out'" in m and "all NaN" in m and "unwritten_kernel" in m for m in msgs), msgs
    with warnings.catch_warnings(record=True) as w:  # a written output: no warning
        warnings.simplefilter("always")
        nki.simulate_kernel(copy_kernel, x)
    assert not [m for m in w if "NaN" in str(m.message)], [str(m.message) for m in w]


def test_simulate_copy():
    x = np.random.default_rng(1).standard_normal((128, 96)).astype(np.float32)
    y = nki.simulate_kernel(copy_kernel, x)
    assert y.dtype == np.float32 and np.array_equal(x, y)


def test_simulate_add_bf16_keywords():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal((256, 64)).astype(np.float32)
    out = nki.simulate_kernel(add_kernel, nki.typed(a, "bfloat16"), b=b, scale=0.5)
    # a rounded to bfloat16 (RNE), then FP32 math
    a16 = (a.view(np.uint32) + 0x7FFF + ((a.view(np.uint32) >> 16) & 1)) & 0xFFFF0000
    want = (a16.view(np.float32) + b) * np.float32(0.5)
    assert np.array_equal(out, want), np.abs(out - want).max()


def test_typed_float64_is_rounded_once():
    # float64 values for a narrower dtype are rounded once to nearest even, not to float32 first and then again
    # (tester23an F2: 1 + 2^-8 + 2^-40 became bfloat16 1.0; nki.typed hands the float64 array to the C++
    # conversion of .npy inputs, fixed there).
    x = np.array([[1 + 2.0 ** -8 + 2.0 ** -40, -(1 + 2.0 ** -8 + 2.0 ** -30), 1.0, 3.0]])
    bits = nki.benchmark(copy_kernel, nki.typed(x, "bfloat16")).raw_outputs[0]
    assert bits.ravel().tolist() == [0x3F81, 0xBF81, 0x3F80, 0x4040], [hex(b) for b in bits.ravel()]
    h = np.array([[1 + 2.0 ** -11 + 2.0 ** -40, 1.0]])
    out = nki.simulate_kernel(copy_kernel, nki.typed(h, "float16"))
    assert out.dtype == np.float16 and np.array_equal(out, h.astype(np.float16)), out


def test_benchmark():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal((256, 64)).astype(np.float32)
    trace = os.path.join(tmpdir(), "t.pftrace")
    r = nki.benchmark(add_kernel, a, b, trace=trace, reference=add_ref)
    assert r.latency_ns == r.stats["total_time_ns"] > 0
    assert r.nc_latency.get_latency_percentile(50) == r.latency_us
    assert os.path.getsize(trace) > 0 and r.trace == trace
    assert r.passed and r.checks[0]["output"] == "out"
    assert np.array_equal(r.outputs[0], a + b)
    # the same run on trn3 takes another time; timing only gives no outputs
    t3 = nki.benchmark(add_kernel, a, b, hardware="trn3", numerics=False)
    assert t3.latency_ns > 0 and t3.latency_ns != r.latency_ns and t3.checks == [] and t3.outputs == []


def test_frontend_hooks():
    """The language layer's hooks: call() runs the kernel, stats() becomes stats.json "nki"."""
    from trnsim.nki import _hooks
    seen = []
    saved = (_hooks.call, _hooks.stats)
    try:
        def call(func, inputs, params):
            seen.append((len(inputs), sorted(params)))
            return func(*inputs, **params)
        _hooks.call = call
        _hooks.stats = lambda: {"schedule": "written order"}
        a = np.ones((128, 8), dtype=np.float32)
        r = nki.benchmark(add_kernel, a, b=a, scale=3.0)
    finally:
        _hooks.call, _hooks.stats = saved
    assert seen == [(2, ["scale"])], seen  # the inputs a and b (leading parameters) positionally
    assert r.stats["nki"] == {"schedule": "written order"}, r.stats.get("nki")
    assert np.array_equal(r.outputs[0], (a + a) * 3)
    assert "nki" not in nki.benchmark(add_kernel, a, a).stats


def test_errors_from_python():
    x = np.zeros((128, 4), dtype=np.float32)
    raises(ZeroDivisionError, nki.simulate_kernel, raises_kernel, x)
    e = raises(trnsim.InputError, nki.simulate_kernel, too_many_partitions, x)
    assert "tiny.py:" in str(e) and "256 partitions" in str(e), e
    raises(TypeError, nki.simulate_kernel, copy_kernel, np.zeros((4, 4), dtype=np.float64))
    raises(TypeError, nki.simulate_kernel, copy_kernel, x, x)


def test_nki_module_names():
    import importlib
    for name in ("nki", "neuronxcc.nki"):
        m = importlib.import_module(name)
        assert m is nki, (name, m)
    from neuronxcc import nki as n2
    assert n2 is nki



@nki.jit
def exp_add(x, c):
    import nki.language as nl

    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        nl.store(out[i * 128:(i + 1) * 128], nl.add(nl.exp(nl.load(x[i * 128:(i + 1) * 128])), c))
    return out


def test_runs_from_several_threads_take_turns():
    # tester23o F11: simulate_kernel / benchmark from a thread pool crashed (segfault), hung, or failed with
    # SystemC's "insert port failed: simulation running" (one SystemC kernel per process). They take turns:
    # each thread's outputs are the bytes of the same call made serially.
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    xs = [rng.standard_normal((512, 256)).astype(np.float32) for _ in range(16)]

    def call(i):
        if i % 2:
            return nki.benchmark(exp_add, xs[i], float(i)).outputs[0]
        return nki.simulate_kernel(exp_add, xs[i], float(i))

    serial = [call(i) for i in range(len(xs))]
    with ThreadPoolExecutor(8) as pool:
        threaded = list(pool.map(call, range(len(xs))))
    for i, (got, want) in enumerate(zip(threaded, serial)):
        assert got.tobytes() == want.tobytes(), i

if __name__ == "__main__":
    main(globals())
