"""trnsim's implementation of NKI (``import nki`` resolves here once trnsim.nki is imported).

The language side: nki.language, nki.isa, nki.jit, dtypes, indexing, allocation and scheduling
(docs/nki.md); the platform side gives the entry points simulate_kernel and benchmark (trnsim/nki/_entry.py).
"""

import inspect as _inspect
import os as _os

from . import _aliases

_aliases.install()

from ._entry import benchmark, simulate_kernel, typed  # noqa: E402,F401  # platform

from . import compiler, isa, language  # noqa: E402,F401
from . import collectives, typing  # noqa: E402,F401
from ._errors import NkiError, NkiUnsupported  # noqa: E402,F401
from ._jit import JitKernel, jit  # noqa: E402,F401
from ._hooks_fill import install as _install_hooks  # noqa: E402

_install_hooks()

# The public names (what `from nki import *` gives; any other is NkiUnsupported, see __getattr__).
__all__ = ["benchmark", "simulate_kernel", "typed", "collectives", "compiler", "isa", "language", "typing", "NkiError",
           "NkiUnsupported", "JitKernel", "jit", "trace", "baremetal_kernel", "baremetal", "simulate", "profile",
           "execute", "tensor", "dtype"]

# NKI's names for the same things.
trace = jit
baremetal_kernel = jit
# nki.tensor, the tensor class of NKI's API reference (annotations `x: nki.tensor`, isinstance).
from ._tensor import NkiTensor as tensor  # noqa: E402
# nki.dtype, the type of the dtype objects (nki-library's annotations `dtype: nki.dtype = nl.bfloat16`).
from ._dtypes import DType as dtype  # noqa: E402


def _as_kernel(kernel):
    """A plain function wrapped in nki.jit: NKI's nki.simulate, nki.baremetal and nki.benchmark decorate a kernel
    function directly ("you may call the NKI kernel function directly", nki.baremetal)."""
    if not getattr(kernel, "__trnsim_jit__", False) and _inspect.isfunction(kernel):
        return jit(kernel)
    return kernel


def baremetal(kernel=None, **kwargs):
    """nki.baremetal(kernel)(*arrays) / @nki.baremetal(save_trace_name=...): runs the kernel on the simulator
    and returns its outputs. NKI's options as benchmark takes them: save_trace_name= writes the trace when it
    names a .pftrace or .json file, an NTFF name or save_neff_name is a RuntimeWarning at the decorator's line
    (nothing is written there). What it returns is also a kernel simulate_kernel, benchmark and a workload
    accept."""
    options = _bench_options(dict(kwargs), "nki.baremetal") if kwargs else None
    if kernel is None:
        return lambda k: _baremetal(_as_kernel(k), options)
    return _baremetal(_as_kernel(kernel), options)


class _Launch:
    """What nki.baremetal, nki.simulate and nki.profile return: call it with the arrays to run the kernel;
    `[grid]` gives the same with the kernel launched on that grid (nki-samples' harnesses write
    `baremetal(kernel)[bs, heads](...)`); a kernel simulate_kernel, benchmark and a workload accept
    (`__trnsim_kernel__`)."""

    def __init__(self, kernel, run):
        self.__trnsim_kernel__ = kernel
        self._run = run  # run(kernel, args, kwargs)

    def __call__(self, *args, **kwargs):
        return self._run(self.__trnsim_kernel__, args, kwargs)

    def __getitem__(self, grid):
        return _Launch(self.__trnsim_kernel__[grid], self._run)


def _baremetal(kernel, options):
    def run(kernel, args, kw):
        if options is None:
            return simulate_kernel(kernel, *args, **kw)
        outs = _platform_benchmark(kernel, *args, **dict(options, **kw)).outputs
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else tuple(outs)

    return _Launch(kernel, run)


def simulate(kernel):
    """nki.simulate(kernel)(*arrays): as baremetal (a plain function is wrapped in nki.jit first)."""
    return baremetal(kernel)


def execute(kernel, *args, **kwargs):
    """nki.execute(kernel, *args, **kwargs) (NKI 2.33: specialize and run on the device, returning what the
    kernel returns): runs it on the simulator, as simulate_kernel (a plain function is wrapped in nki.jit)."""
    return simulate_kernel(_as_kernel(getattr(kernel, "__trnsim_kernel__", kernel)), *args, **kwargs)

def _as_returned(outs):
    """The outputs in the shapes of the views the kernel returned (NKI returns `out.reshape(...)` as is)."""
    from ._jit import returned_shapes

    res = []
    for i, o in enumerate(outs):
        if i < len(returned_shapes) and o is not None and o.shape != tuple(returned_shapes[i]) and \
                o.size == _math_prod(returned_shapes[i]):
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
    opt = kwargs.pop("_compile_opt", None)
    if opt:
        kernel = _compiled_with(kernel, opt)
    r = _platform_benchmark_fn(kernel, *args, **kwargs)
    r.outputs = _as_returned(list(r.outputs))
    r.raw_outputs = _as_returned(list(r.raw_outputs))
    return r


class _Benchmarked:
    """What nki.benchmark(kernel, warmup=..., iters=...) returns in NKI: call it with the arrays, then read
    `.benchmark_result.nc_latency.get_latency_percentile(p)` (a simulated run is deterministic: one run)."""

    def __init__(self, kernel, options, parent=None):
        self.kernel = kernel
        self.options = options  # benchmark()'s keyword arguments besides the arrays, checked already
        self.benchmark_result = None
        self._parent = parent  # the object `[grid]` was taken of: its benchmark_result is this run's too

    def __call__(self, *args, **kwargs):
        self.benchmark_result = _platform_benchmark(self.kernel, *args, **dict(self.options, **kwargs))
        if self._parent is not None:
            self._parent.benchmark_result = self.benchmark_result
        return self.benchmark_result.outputs[0] if len(self.benchmark_result.outputs) == 1 else tuple(
            self.benchmark_result.outputs)

    def __getitem__(self, grid):
        """The kernel launched on `grid` (nki-samples: `bench = benchmark(warmup=5, iters=10)(kernel);
        bench[bs, heads](...)`, then `bench.benchmark_result`)."""
        return _Benchmarked(self.kernel[grid], self.options, self)


_NKI_BENCH_OPTIONS = ("warmup", "iters", "save_neff_name", "save_trace_name", "additional_compile_opt",
                      "device_count")
_TRACE_SUFFIXES = (".pftrace", ".perfetto-trace", ".pb", ".json")


def _bench_options(kwargs, call="benchmark"):
    """benchmark()'s keyword arguments with NKI's options taken out and turned into trnsim's: the trace
    (`trace=`, or NKI's `save_trace_name=` when it names a trace trnsim writes), the others checked and
    recorded. A trace name trnsim cannot write (NKI's .ntff profile) or a NEFF name is a RuntimeWarning
    naming it: nothing is written there (never a silent drop)."""
    import warnings

    nki = {k: kwargs.pop(k) for k in list(kwargs) if k in _NKI_BENCH_OPTIONS}
    for k in ("warmup", "iters"):
        v = nki.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError("%s: %s=%r: expected a count >= 0" % (call, k, v))
    name = nki.get("save_trace_name")
    if name is not None:
        if not isinstance(name, (str, _os.PathLike)):
            raise TypeError("%s: save_trace_name=%r: expected a file name" % (call, name))
        name = _os.fspath(name)
        if kwargs.get("trace") not in (None, name):
            raise ValueError("%s: save_trace_name=%r and trace=%r name two traces: give one"
                             % (call, name, kwargs["trace"]))
        if name.endswith(_TRACE_SUFFIXES):
            kwargs["trace"] = name
        else:
            warnings.warn("%s: save_trace_name=%r: no trace written there: trnsim writes a Perfetto "
                          "trace (.pftrace) or Chrome JSON (.json), not the Neuron profiler's NTFF; name a "
                          ".pftrace file" % (call, name), RuntimeWarning, stacklevel=3)
    if nki.get("save_neff_name") is not None:
        warnings.warn("%s: save_neff_name=%r: no NEFF written: trnsim compiles no NEFF (the kernel "
                      "is traced into the simulator's program)" % (call, nki["save_neff_name"]), RuntimeWarning,
                      stacklevel=3)
    if nki.get("device_count") not in (None, 1):
        raise ValueError("%s: device_count=%r: trnsim simulates one device" % (call, nki["device_count"]))
    kwargs["_nki_options"] = {k: nki[k] for k in ("warmup", "iters") if nki.get(k) is not None}
    if nki.get("additional_compile_opt"):
        kwargs["_compile_opt"] = _compile_opt(nki["additional_compile_opt"], call)
    return kwargs


def _compile_opt(opt, call):
    if not isinstance(opt, str):
        raise TypeError("%s: additional_compile_opt=%r: expected a string of compiler options" % (call, opt))
    return opt


def _compiled_with(kernel, opt):
    """The kernel with `opt` (nki.benchmark's / baremetal's / profile's additional_compile_opt) after its own
    @nki.jit(additional_compile_opt=...): the options trnsim reads from it (docs/nki.md) apply to the run."""
    from ._jit import JitKernel

    k = _as_kernel(getattr(kernel, "__trnsim_kernel__", kernel))
    own = k.options.get("additional_compile_opt") or ""
    out = JitKernel(k.fn, k.grid_given, dict(k.options, additional_compile_opt=(own + " " + opt).strip()))
    out.grid_loc = k.grid_loc
    return out


def benchmark(kernel=None, *args, **kwargs):  # noqa: F811
    """trnsim.nki.benchmark(kernel, *arrays, hardware=..., trace=...) -> BenchmarkResult; NKI's form
    nki.benchmark(kernel, warmup=.., iters=.., save_trace_name=..) (or as a decorator) returns the kernel
    to call with the arrays, its result in `.benchmark_result`. Both forms take the same options
    (save_trace_name= is trace= when it names a .pftrace or .json file; warmup= and iters= are recorded in
    the result: a simulated run is deterministic, so it runs once)."""
    options = _bench_options(kwargs)
    if kernel is None:
        return lambda k: _Benchmarked(_as_kernel(k), options)
    # NKI's nki.benchmark(kernel=None, **kwargs) takes its options only, never the kernel's arguments: a call
    # with an argument for the kernel (an array, or `n=32` for a kernel without array inputs) is the direct
    # form, a call with options only NKI's.
    if not args and all(k in _OPTIONS for k in options):
        return _Benchmarked(_as_kernel(kernel), options)
    return _platform_benchmark(kernel, *args, **options)


_PROFILE_OPTIONS = ("working_directory", "save_neff_name", "save_trace_name", "additional_compile_opt", "overwrite",
                    "profile_nth", "hardware", "lnc")


def profile(func=None, **kwargs):
    """nki.profile(working_directory=..., ...)(kernel)(*arrays): NKI's profiling decorator (nki.profile: NEFF
    and NTFF into working_directory). trnsim runs the kernel once and writes its Perfetto trace and its
    stats.json into working_directory (made if missing); returns the kernel's outputs. docs/nki.md "Profiling"
    maps each of NKI's arguments."""
    bad = sorted(set(kwargs) - set(_PROFILE_OPTIONS))
    if bad:
        raise TypeError("nki.profile: unknown argument %s (NKI's are %s)" % (", ".join(bad),
                                                                           ", ".join(_PROFILE_OPTIONS[:6])))
    opts = _profile_options(kwargs)
    if func is None:
        return lambda f: _profiled(f, opts)
    return _profiled(func, opts)


def _profiled(func, opts):
    return _Launch(_as_kernel(func), lambda kernel, args, kw: _profile_run(kernel, opts, args, kw))


def _profile_options(kw):
    """NKI's arguments checked (as NKI: working_directory given and absolute) and turned into trnsim's."""
    import warnings

    wd = kw.get("working_directory")
    if wd is None:
        raise ValueError("nki.profile: working_directory= is required (NKI: the absolute path of the folder "
                         "the profile is saved in)")
    if not isinstance(wd, (str, _os.PathLike)) or not _os.path.isabs(_os.fspath(wd)):
        raise ValueError("nki.profile: working_directory=%r must be an absolute path (as NKI requires)" % (wd,))
    wd = _os.fspath(wd)
    name = kw.get("save_trace_name", "profile.ntff")
    if not isinstance(name, (str, _os.PathLike)) or _os.path.basename(_os.fspath(name)) != _os.fspath(name):
        raise ValueError("nki.profile: save_trace_name=%r: expected a file name (it is saved in "
                         "working_directory)" % (name,))
    name = _os.fspath(name)
    # trnsim writes Perfetto or Chrome JSON, not NTFF: another extension becomes .pftrace (profile.ntff ->
    # profile.pftrace).
    trace = name if name.endswith(_TRACE_SUFFIXES) else _os.path.splitext(name)[0] + ".pftrace"
    if trace == "stats.json":
        raise ValueError("nki.profile: save_trace_name=%r: stats.json is the profile's statistics file in "
                         "working_directory: give the trace another name" % (name,))
    if "save_neff_name" in kw:
        warnings.warn("nki.profile: save_neff_name=%r: no NEFF written: trnsim compiles no NEFF (the kernel is "
                      "traced into the simulator's program)" % (kw["save_neff_name"],), RuntimeWarning,
                      stacklevel=3)
    nth = kw.get("profile_nth", 1)
    if isinstance(nth, bool) or not isinstance(nth, int) or nth < 1:
        raise ValueError("nki.profile: profile_nth=%r: expected a count >= 1" % (nth,))
    overwrite = kw.get("overwrite", False)
    if not isinstance(overwrite, bool):
        raise TypeError("nki.profile: overwrite=%r: expected True or False" % (overwrite,))
    run = {k: kw[k] for k in ("hardware", "lnc") if k in kw}
    if kw.get("additional_compile_opt"):
        run["_compile_opt"] = _compile_opt(kw["additional_compile_opt"], "nki.profile")
    return {"folder": wd, "trace": trace, "overwrite": overwrite, "profile_nth": nth, "run": run}


def _profile_run(kernel, opts, args, kw):
    import json
    import tempfile

    folder = opts["folder"]
    if _os.path.exists(folder) and not _os.path.isdir(folder):
        raise ValueError("nki.profile: working_directory=%r is not a folder" % folder)
    created = not _os.path.exists(folder)
    _os.makedirs(folder, exist_ok=True)
    trace, stats = _os.path.join(folder, opts["trace"]), _os.path.join(folder, "stats.json")
    try:
        # NKI's overwrite=False keeps earlier profile artifacts: refused before anything runs.
        if _os.path.exists(stats) and not opts["overwrite"]:
            raise FileExistsError("nki.profile: %s exists: pass overwrite=True to replace the earlier profile "
                                  "(NKI's overwrite=), or give another working_directory" % stats)
        r = _platform_benchmark(kernel, *args, trace=trace, overwrite=opts["overwrite"], **opts["run"], **kw)
    except BaseException:
        # A folder this call created is not left behind empty by a kernel that failed.
        if created and not _os.listdir(folder):
            _os.rmdir(folder)
        raise
    doc = dict(r.stats)
    doc["nki_profile"] = {"profile_nth": opts["profile_nth"], "trace": opts["trace"]}
    fd, tmp = tempfile.mkstemp(prefix=".stats.json.", dir=folder)
    try:
        # mkstemp's 0600 widened to what the umask allows, as the trace and trnsim run's stats.json are.
        umask = _os.umask(0)
        _os.umask(umask)
        _os.fchmod(fd, 0o666 & ~umask)
        with _os.fdopen(fd, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        _os.replace(tmp, stats)
    except BaseException:
        _os.unlink(tmp)
        raise
    return r.outputs[0] if len(r.outputs) == 1 else tuple(r.outputs)


# benchmark()'s own keyword arguments (trnsim's, and NKI's as _bench_options turned them).
_OPTIONS = frozenset(n for n, p in _inspect.signature(_platform_benchmark_fn).parameters.items()
                     if p.kind == p.KEYWORD_ONLY)


def __getattr__(name):
    """Any other public name of ``nki``: NkiUnsupported at the kernel line, as nki.language's (an
    AttributeError too: hasattr() is False)."""
    if name.startswith("_"):
        raise AttributeError(f"module 'nki' has no attribute '{name}'")
    from ._errors import unsupported_name

    raise unsupported_name("nki", name)
