"""trnsim's implementation of NKI (``import nki`` resolves here once trnsim.nki is imported).

The language side: nki.language, nki.isa, nki.jit, dtypes, indexing, allocation and scheduling
(docs/nki.md); the platform side gives the entry points simulate_kernel and benchmark (trnsim/nki/_entry.py).
"""

from . import _aliases

_aliases.install()

from ._entry import benchmark, simulate_kernel, typed  # noqa: E402,F401  # platform

from . import compiler, isa, language  # noqa: E402,F401
from . import typing  # noqa: E402,F401
from ._errors import NkiError, NkiUnsupported  # noqa: E402,F401
from ._jit import JitKernel, jit  # noqa: E402,F401
from ._hooks_fill import install as _install_hooks  # noqa: E402

_install_hooks()

# NKI's names for the same things.
trace = jit
baremetal_kernel = jit


def baremetal(kernel=None, **kwargs):
    """nki.baremetal(kernel)(*arrays): runs the kernel on the simulator and returns its outputs."""
    if kernel is None:
        return lambda k: baremetal(k, **kwargs)

    def run(*args, **kw):
        return simulate_kernel(kernel, *args, **kw)

    return run


simulate = baremetal

def _as_returned(outs):
    """The outputs in the shapes of the views the kernel returned (NKI returns `out.reshape(...)` as is)."""
    from ._jit import returned_shapes

    res = []
    for i, o in enumerate(outs):
        if i < len(returned_shapes) and o is not None and o.size == _math_prod(returned_shapes[i]):
            o = o.reshape(returned_shapes[i])
        res.append(o)
    return res


def _math_prod(s):
    n = 1
    for x in s:
        n *= x
    return n


_platform_simulate_kernel = simulate_kernel
_platform_benchmark_fn = benchmark


def simulate_kernel(kernel, *args, **kwargs):  # noqa: F811
    """As trnsim.nki._entry.simulate_kernel; outputs in the shapes of the views the kernel returned."""
    out = _platform_simulate_kernel(kernel, *args, **kwargs)
    if out is None:
        return None
    if isinstance(out, tuple):
        return tuple(_as_returned(list(out)))
    return _as_returned([out])[0]


def _platform_benchmark(kernel, *args, **kwargs):
    r = _platform_benchmark_fn(kernel, *args, **kwargs)
    r.outputs = _as_returned(list(r.outputs))
    return r


class _Benchmarked:
    """What nki.benchmark(kernel, warmup=..., iters=...) returns in NKI: call it with the arrays, then read
    `.benchmark_result.nc_latency.get_latency_percentile(p)` (a simulated run is deterministic: one run)."""

    def __init__(self, kernel, trace):
        self.kernel = kernel
        self.trace = trace
        self.benchmark_result = None

    def __call__(self, *args, **kwargs):
        self.benchmark_result = _platform_benchmark(self.kernel, *args, trace=self.trace, **kwargs)
        return self.benchmark_result.outputs[0] if len(self.benchmark_result.outputs) == 1 else tuple(
            self.benchmark_result.outputs)


_NKI_BENCH_OPTIONS = ("warmup", "iters", "save_neff_name", "save_trace_name", "additional_compile_opt",
                      "device_count")


def benchmark(kernel=None, *args, **kwargs):  # noqa: F811
    """trnsim.nki.benchmark(kernel, *arrays, hardware=..., trace=...) -> BenchmarkResult; NKI's form
    nki.benchmark(kernel, warmup=.., iters=.., save_trace_name=..) (or as a decorator) returns the kernel
    to call with the arrays, its result in `.benchmark_result`."""
    nki_style = {k: kwargs.pop(k) for k in list(kwargs) if k in _NKI_BENCH_OPTIONS}
    if kernel is None:
        return lambda k: _Benchmarked(k, nki_style.get("save_trace_name"))
    if not args and not any(hasattr(v, "shape") for v in kwargs.values()):
        trace_name = nki_style.get("save_trace_name")
        if trace_name and not trace_name.endswith((".pftrace", ".json")):
            trace_name = None  # an .ntff profile has no counterpart here
        return _Benchmarked(kernel, trace_name)
    return _platform_benchmark(kernel, *args, **kwargs)


def __getattr__(name):
    """Any other public name of ``nki``: NkiUnsupported at the kernel line, as nki.language's (an
    AttributeError too: hasattr() is False)."""
    if name.startswith("_"):
        raise AttributeError(f"module 'nki' has no attribute '{name}'")
    from ._errors import unsupported_name

    raise unsupported_name("nki", name)
