"""trnsim.nki.simulate_kernel and trnsim.nki.benchmark: run an NKI kernel on NumPy arrays, in NKI users'
habits, through the same pipeline as ``trnsim run`` (kernels/workload/workload_run.h)."""

import functools
import inspect
import os
import re
import threading

import numpy as np

from .. import _core
from .._runner import resolve_kernel
from . import _errors, _platform, _print

_LOC = re.compile(r"([^:\n]+\.py):(\d+): ")

# The tracer's state (the kernel being traced, what it returned) is process-wide, as SystemC's kernel is (the
# bindings take turns for that): calls from several threads take turns from tracing to reading the outputs.
_TURN = threading.RLock()


def _one_at_a_time(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with _TURN:
            return fn(*args, **kwargs)

    return call


class typed:
    """An array passed as a tensor of another dtype: ``typed(x, nl.bfloat16)`` (float values, rounded to
    nearest even, or the dtype's raw bits as uint16/uint8/int32, as for .npy inputs). The dtype is any
    spelling a kernel takes: nl.bfloat16, "bfloat16", np.float32."""

    def __init__(self, array, dtype):
        from . import _dtypes

        self.array = np.asarray(array)
        if isinstance(dtype, _core.DType):
            self.dtype = dtype
            return
        try:
            d = _dtypes.as_dtype(dtype)
        except _errors.NkiError as e:
            raise ValueError("%s: nki.typed: %s" % (e.loc, e.bare)) from None
        if d.isa is None:
            raise ValueError("%s: nki.typed: dtype %s has no Trainium numerics in trnsim (docs/nki.md lists the "
                             "dtypes)" % (_errors.caller_loc(), d.name))
        self.dtype = _core.parse_dtype(d.isa)


_DEFAULT_DTYPES = {
    np.dtype("float32"): _core.DType.F32, np.dtype("float16"): _core.DType.FP16,
    np.dtype("int32"): _core.DType.I32, np.dtype("uint32"): _core.DType.U32,
    np.dtype("int16"): _core.DType.I16, np.dtype("int8"): _core.DType.I8,
}
# Arrays whose dtype is also how trnsim gives the raw bits of a dtype NumPy lacks (raw_outputs, the .npy files
# of `trnsim run`): which dtypes they could be, as the CLI's .npy inputs say (workload_prepare.cpp).
_AMBIGUOUS = {
    np.dtype("uint16"): ("uint16 values, or the raw bits of bfloat16 or float16", "nl.uint16", "nl.bfloat16"),
    np.dtype("uint8"): ("uint8 values, or the raw bits of float8_e4m3fn, float8_e5m2 or float8_e8m0fnu",
                        "nl.uint8", "nl.float8_e4m3fn"),
}


def _tensor_of(value, what):
    """(array, DType) for an input value, None for a parameter; `what` names the argument for messages
    ("add_k: argument x")."""
    if isinstance(value, typed):
        return value.array, value.dtype
    if isinstance(value, np.ndarray):
        d = _DEFAULT_DTYPES.get(value.dtype)
        nki_name = (value.dtype.metadata or {}).get("nki")  # np.dtype(nl.bfloat16) and the like: raw bytes
        if d is None and nki_name:
            raise TypeError("%s: an array of np.dtype(nl.%s) holds bytes, not values: pass nki.typed(array, nl.%s) "
                            "with float values (or the bits as unsigned integers)" % (what, nki_name, nki_name))
        if value.dtype in _AMBIGUOUS:
            could, own, bits = _AMBIGUOUS[value.dtype]
            raise TypeError("%s: a %s array holds %s: pass nki.typed(array, %s) for its values, or "
                            "nki.typed(array, %s) (or another of those) for bits" % (what, value.dtype, could, own,
                                                                                      bits))
        if d is None:
            raise TypeError("%s: a %s array has no Trainium dtype: convert it, or pass nki.typed(array, dtype)"
                            % (what, value.dtype))
        return value, d
    return None


def _cores(grid, lnc, kernel=None):
    """The physical cores of the run: `lnc` (the workload's "lnc": 1 or 2; a larger grid's programs run in
    turn on those cores), else the kernel[...] launch grid of 1 or 2 programs, else NEURON_LOGICAL_NC_CONFIG,
    else 1; a grid disagreeing with either is a ValueError."""
    if lnc is None:
        env = _platform.env_lnc()  # NKI 2.33's NEURON_LOGICAL_NC_CONFIG: the LNC when lnc= does not say
        if env is not None and grid is not None and grid != env:
            raise ValueError("%s=%d conflicts with the kernel's launch grid %s, which runs it on %d core%s%s: "
                             "unset the variable or drop the [...] (NKI's runtime refuses the mismatch too)"
                             % (_platform.LNC_ENV, env, _grid_text(kernel, grid), grid, "" if grid == 1 else "s",
                                _grid_why(kernel, grid)))
        return grid or env or 1
    from ._index import _const

    if _const(lnc) not in (1, 2) or isinstance(lnc, bool):  # (lnc=2.0 ended in pybind11's argument error)
        raise ValueError("lnc=%r: trnsim runs 1 core or the LNC2 pair (lnc=2)" % (lnc,))
    lnc = _const(lnc)
    if grid is not None and grid != lnc:
        raise ValueError("lnc=%d conflicts with the kernel's launch grid %s, which runs it on %d core%s%s: drop "
                         "lnc= or the [...]" % (lnc, _grid_text(kernel, grid), grid, "" if grid == 1 else "s",
                                                _grid_why(kernel, grid)))
    return lnc


def _grid_text(kernel, cores):
    """The launch grid as the kernel wrote it: `kernel[nl.nc(2), 4]` (`[2]` when it is not known)."""
    given = getattr(getattr(kernel, "__trnsim_kernel__", kernel), "grid_given", None)
    if given is None:
        return "[%d]" % cores
    dims = given if isinstance(given, (tuple, list)) else (given,)
    return "%s[%s]" % (getattr(kernel, "__name__", "kernel"), ", ".join(repr(d) for d in dims))


def _grid_why(kernel, cores):
    """Why the grid needs `cores` cores: the nl.nc(n) it names, or one program per core."""
    given = getattr(getattr(kernel, "__trnsim_kernel__", kernel), "grid_given", None)
    dim0 = given[0] if isinstance(given, (tuple, list)) and given else given
    if hasattr(dim0, "block") or hasattr(dim0, "n"):
        return " (its nl.nc(%d) places programs on %d physical cores: the LNC2 pair, lnc=2)" % (cores, cores)
    return " (one program per core)" if cores == 2 else ""


def _lnc_origin(kernel, lnc, cores):
    """Where the run's LNC came from, for messages: lnc=, the launch grid (its line), or the variable."""
    if lnc is not None:
        return "lnc=%r" % (lnc,)
    k = getattr(kernel, "__trnsim_kernel__", kernel)
    if getattr(k, "grid", None) is not None:  # (a grid of 1 or 2 programs, or naming its cores: _cores)
        where = getattr(k, "grid_loc", None)
        return "%s%s" % ("%s: " % (where,) if where else "", _grid_text(kernel, cores))
    return "%s=%s" % (_platform.LNC_ENV, os.environ.get(_platform.LNC_ENV))


def _hw_origin(kernel, hardware):
    """Where the run's hardware came from, for messages: hardware=, the kernel's platform_target, or the
    variable."""
    if hardware is not None:
        return "hardware=%r" % (getattr(hardware, "name", hardware),)
    mine, written = _platform.kernel_target(kernel)
    if mine is not None:
        return "the kernel's nki.jit(platform_target=%r)" % (written,)
    return "%s=%r" % (_platform.TARGET_ENV, os.environ.get(_platform.TARGET_ENV))


_OPTION_MEANS = {"hardware": "the hardware to run on", "lnc": "the run's LNC", "trace": "the trace file to write",
                 "reference": "the NumPy reference", "numerics": "whether to check the outputs",
                 "overwrite": "whether the trace may replace a file"}


def _name_of(func):
    """The kernel's name for messages: its __name__, or that of the function a functools.partial (or another
    wrapper with .func) binds arguments of."""
    f = func
    for _ in range(8):
        name = getattr(f, "__name__", None)
        if isinstance(name, str):
            return name
        f = getattr(f, "func", None)
        if f is None:
            break
    return type(func).__name__


def _warn_options_taken(caller, kernel, args, **options):
    """RuntimeWarning at the caller's line for each of trnsim's options given (not None) that the kernel function
    also has as a parameter its positional arguments leave unbound: the option takes the keyword, so the
    kernel's parameter silently keeps its default (NKI's simulate_kernel would pass it to the kernel)."""
    from .._runner import def_loc

    try:
        func, _ = resolve_kernel(kernel)
        sig = inspect.signature(func)
        bound = sig.bind_partial(*args).arguments
    except (TypeError, ValueError):
        return  # (_prepare says what is wrong with the call)
    loc = def_loc(func) or def_loc(getattr(func, "func", None))
    where = "%s (%s:%d)" % (_name_of(func), os.path.basename(loc[0]), loc[1]) if loc else _name_of(func)
    for name, value in options.items():
        p = sig.parameters.get(name)
        if value is None or p is None or name in bound or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        how = ("it is keyword-only, so no call of %s can set it: rename it" % caller if p.kind == p.KEYWORD_ONLY
               else "pass the kernel's value positionally to set it")
        _errors.warn_at("%s: %s=%r is trnsim's option (%s), not the parameter %s of %s, which keeps its default "
                        "%s; %s" % (caller, name, value, _OPTION_MEANS[name], name, where,
                                    "(none)" if p.default is p.empty else repr(p.default), how), RuntimeWarning)


def _prepare(kernel, args, kwargs, hardware, reference, numerics, lnc=None):
    from . import _jit

    _jit.returned_names.clear()  # (this run's NKI build sets it; a builder kernel leaves it empty)
    _print.printed.clear()
    _jit.returned_tuple.clear()
    func, grid = resolve_kernel(kernel)
    grid = _cores(grid, lnc, kernel)
    if reference is not None and not callable(reference):
        raise TypeError("benchmark: reference=%r is a %s, not a function (a NumPy function called with the "
                        "kernel's arguments)" % (reference, type(reference).__name__))
    try:
        bound = inspect.signature(func).bind_partial(*args, **kwargs)
    except TypeError as e:
        raise TypeError("%s: %s" % (_name_of(func), e)) from None
    inputs, params = [], {}
    given = {}  # the caller's array of each input, for the in-place outputs (_written_back); None: typed()
    for name, value in bound.arguments.items():
        param = bound.signature.parameters[name]
        if param.kind == param.VAR_KEYWORD:
            for k, v in value.items():
                t = _tensor_of(v, "%s: argument %s" % (_name_of(func), k))
                if t is None:
                    params[k] = v
                else:
                    inputs.append((k, t[0], t[1]))
                    given[k] = None if isinstance(v, typed) else t[0]
            continue
        if param.kind == param.VAR_POSITIONAL:
            raise TypeError("%s: *%s parameters are not supported" % (_name_of(func), name))
        t = _tensor_of(value, "%s: argument %s" % (_name_of(func), name))
        if t is None:
            params[name] = value
        else:
            inputs.append((name, t[0], t[1]))
            given[name] = None if isinstance(value, typed) else t[0]
    chosen = _platform.hardware_for(kernel, hardware)
    hw = chosen if isinstance(chosen, _core.HwConfig) else _core.load_hw_config(str(chosen), {})
    why = _core.lnc_refusal(hw, grid)
    if why is not None:
        raise ValueError("%s with %s: %s" % (_lnc_origin(kernel, lnc, grid), _hw_origin(kernel, hardware), why))
    _jit.track_written_inputs = True  # (the build happens here: the inputs it writes, for _written_back)
    try:
        run = _core.WorkloadRun.of_python_kernel(kernel, inputs, params, hw, reference=reference, lnc=grid,
                                                 numerics=numerics)
    finally:
        _jit.track_written_inputs = False
    _refuse_written_aliases(_name_of(func), given, set(_jit.written_inputs) | set(run.output_names))
    return run, given


def _refuse_written_aliases(kernel, given, written):
    """ValueError, before anything runs or is written back, if two inputs are one array (or overlapping views
    of one) and the kernel writes (or returns) either: each input is an HBM tensor of its own here, so a write
    through one would not be seen through the other, and the write-backs would overwrite each other. Inputs
    only read may share memory."""
    arrays = [(n, a) for n, a in given.items() if a is not None]
    for i, (n1, a1) in enumerate(arrays):
        for n2, a2 in arrays[i + 1:]:
            hit = [n for n in (n1, n2) if n in written]
            if hit and np.shares_memory(a1, a2):
                raise ValueError(f"{kernel}: inputs '{n1}' and '{n2}' are the same array (or overlapping views of "
                                 f"one) and the kernel writes '{hit[0]}': each input is simulated as an HBM tensor "
                                 f"of its own, so the write would not be seen through the other; pass a copy "
                                 "of the array for one of them")


def _written_back(name, out, given):
    """An input the kernel wrote (returned or not): NKI's simulator updates the caller's input array in place
    (NKI CPU Simulator, "How It Works"), so the caller's array, written, is what a returned one gives back; a
    typed() input (another dtype than its array's) or a read-only array is left as it was (a returned one comes
    back as a new array)."""
    a = given.get(name)
    if a is None or not a.flags.writeable or a.dtype != out.dtype or a.shape != out.shape:
        return out
    np.copyto(a, out)
    return a


def _ordered_outputs(run, given):
    return [a for _, a in _named_outputs(run, given)]


def _named_outputs(run, given):
    """(name, array) of each of the run's outputs in return order (an input the kernel returned: the caller's array, written back); a RuntimeWarning for each of the build's warnings (a read of SBUF or
    PSUM no instruction wrote, an output some of whose bytes no instruction writes, at its kernel line), else
    for each float output whose every value is NaN (HBM the kernel never wrote reads as NaN)."""
    from . import _jit
    from ._jit import returned_names

    outs = run.outputs(native=True)
    names = run.output_names
    shown = _print.show(outs)  # nl.device_print's outputs: printed, not returned
    # The inputs the kernel wrote without returning them: into the caller's arrays, not returned.
    written = set(_jit.written_inputs)
    for n in written & set(outs):
        _written_back(n, outs[n], given)
    names = [n for n in names if n not in shown and n not in written]
    if set(returned_names) == set(names):
        names = returned_names  # a tensor the kernel returned twice is given back twice, as the same array
    ordered = [(n, outs[n]) for n in names if n in outs]
    _build_warnings(run)
    for n, a in ordered:
        # (An NKI kernel's returned outputs are each written by some instruction, or the build fails: their NaN
        # is the kernel's, as nl.mod(t, 0.0)'s.)
        if not run.warnings and n not in returned_names and a.size and a.dtype.kind == "f" and np.isnan(a).all():
            _errors.warn_at(f"output '{n}' of {run.kernel} is all NaN: did the kernel write it? (HBM it never "
                            "writes reads as NaN)", RuntimeWarning)
    return [(n, _written_back(n, a, given)) for n, a in ordered]


def _build_warnings(run):
    """A RuntimeWarning for each of the build's warnings, "file.py:LINE: message", attributed to that kernel line
    (its file's path as the trace saw it)."""
    for w in run.warnings:
        m = _LOC.match(w)
        path = m and _errors.path_of(m.group(1))
        _errors.warn_at(w, RuntimeWarning, (path, int(m.group(2))) if path else None)


def _run(run, **kwargs):
    """run.run(**kwargs); when the simulation stops at a rule (a RuleError), the build's warnings first: a read
    where no instruction wrote is often why (tester23al F1: an index tile never written gathers by trnsim's NaN
    fill, "vector_offset[0] = -1 is outside rows [0, 100)", and the warning naming the tile was lost)."""
    from .. import _core

    try:
        run.run(**kwargs)
    except _core.RuleError:
        try:
            warnings = bool(run.warnings)
        except Exception:
            warnings = False  # (no build to speak of: the error says it all)
        if warnings:
            _build_warnings(run)
        raise


@_one_at_a_time
def simulate_kernel(kernel, *args, hardware=None, lnc=None, **kwargs):
    """Runs ``kernel(*args, **kwargs)`` on the simulated machine and returns its outputs as NumPy arrays (one
    array for ``return o``, else a tuple in the order the kernel returns them: ``return (o,)`` gives a tuple of
    one), like ``nki.simulate_kernel``. NumPy array
    arguments are the input tensors (float32, float16 and the integer dtypes as they are; ``typed(x,
    "bfloat16")`` for another dtype); other arguments are passed to the kernel as they are. Each output is
    an array of the kernel's output dtype, as NKI's simulate_kernel returns it (float32, float16, int32,
    uint8, ...); bfloat16 and the FP8 dtypes, which NumPy lacks, as float32 values (exact but for NaN codes:
    benchmark's ``raw_outputs`` has their bits). ``lnc=2`` runs
    it on the LNC2 pair, as the workload's "lnc": 2 (a launch grid ``kernel[2]`` does so by itself; a larger
    grid's programs run in turn on the run's cores, program n of grid dim 0 on core n % lnc, or as an
    nl.spmd_dim's nl.nc sub-dim says). Without ``lnc=`` or a launch grid of 1 or 2, NEURON_LOGICAL_NC_CONFIG
    (1 or 2) gives the LNC. ``hardware``: a config name or file; unset, the kernel's
    ``nki.jit(platform_target=...)``, else NEURON_PLATFORM_TARGET_OVERRIDE, else trn2 (trnsim.nki._platform)."""
    _warn_options_taken("simulate_kernel", kernel, args, hardware=hardware, lnc=lnc)
    run, given = _prepare(kernel, args, kwargs, hardware, None, True, lnc)
    _run(run)
    outs = _ordered_outputs(run, given)
    if not outs:
        return None
    from ._jit import returned_tuple

    # One array for `return o`; a tuple for `return o1, o2` and for `return (o,)`, as the kernel returned it.
    return outs[0] if len(outs) == 1 and not any(returned_tuple) else tuple(outs)


class _Latency:
    def __init__(self, us):
        self._us = us

    def get_latency_percentile(self, percentile):
        """Microseconds (every percentile: a simulated run is deterministic)."""
        return self._us


class BenchmarkResult:
    """The simulated run of ``benchmark``: ``latency_ns``, ``latency_us``, ``stats`` (stats.json as a dict),
    ``trace`` (its path or None), ``outputs`` (NumPy arrays; none when timing only), ``raw_outputs`` (the same
    outputs as the bits the .npy files of ``trnsim run`` hold: a bfloat16 output's as uint16, an FP8 one's as
    uint8, where ``outputs`` has float32 values), ``checks`` (with a reference),
    ``nc_latency.get_latency_percentile(p)`` as in NKI's benchmark result, and ``warmup`` / ``iters`` as
    given (NKI's options; a simulated run is deterministic, so it runs once)."""

    def __init__(self, run, trace, nki_options=None, given=None):
        self.stats = run.stats()
        self.latency_ns = float(self.stats["total_time_ns"])
        self.latency_us = self.latency_ns / 1e3
        self.trace = trace or None
        named = _named_outputs(run, given or {})
        self.outputs = [a for _, a in named]
        raw = run.outputs(raw=True) if named else {}
        self.raw_outputs = [raw[n] if n in raw else a for n, a in named]
        self.checks = run.checks()
        self.passed = all(c["pass"] for c in self.checks)
        self.nc_latency = _Latency(self.latency_us)
        self.warmup = (nki_options or {}).get("warmup")
        self.iters = (nki_options or {}).get("iters")

    def __repr__(self):
        return "BenchmarkResult(latency_us=%.3f)" % self.latency_us


def _check_trace_path(trace):
    """ValueError unless ``trace`` can be created as it is: its folder must exist (no folder is made for
    it, as open() makes none) and be a folder; the name ends in a trace extension."""
    import os

    if not isinstance(trace, (str, os.PathLike)):
        raise TypeError("benchmark: trace=%r: expected a file name" % (trace,))
    trace = os.fspath(trace)
    if not trace.endswith((".pftrace", ".perfetto-trace", ".pb", ".json")) and not (
            os.path.exists(trace) and not os.path.isfile(trace) and not os.path.isdir(trace)):
        raise ValueError("benchmark: trace=%r: unknown extension (expected .pftrace, .perfetto-trace, .pb or "
                         ".json)" % trace)
    folder = os.path.dirname(os.path.abspath(trace))
    if not os.path.exists(folder):
        raise ValueError("benchmark: trace=%r: folder %s does not exist (no folder is created for a trace: "
                         "make it first)" % (trace, folder))
    if not os.path.isdir(folder):
        raise ValueError("benchmark: trace=%r: %s is not a folder" % (trace, folder))
    if os.path.isdir(trace):
        raise ValueError("benchmark: trace=%r: it is a folder" % trace)
    return trace


@_one_at_a_time
def benchmark(kernel, *args, hardware=None, lnc=None, trace=None, reference=None, numerics=True,
              overwrite=False, _nki_options=None, **kwargs):
    """Runs the kernel once on the simulated machine and returns a BenchmarkResult with the simulated
    latency, the stats and (``trace="t.pftrace"`` or ``.json``, in a folder that exists) a trace, like
    ``nki.benchmark``. ``reference``: a NumPy function of the same arguments whose outputs the result's
    ``checks`` compare with; ``numerics=False``: timing only. A trace replaces a file already at its path
    only when trnsim wrote it (its folder's record lists it unchanged), or with ``overwrite=True`` (the
    CLI's ``--overwrite``). ``lnc`` and ``hardware``: as simulate_kernel's."""
    _warn_options_taken("benchmark", kernel, args, hardware=hardware, lnc=lnc, trace=trace, reference=reference,
                        numerics=None if numerics is True else numerics,
                        overwrite=None if overwrite is False else overwrite)
    for name, value in (("numerics", numerics), ("overwrite", overwrite)):
        if not isinstance(value, (bool, np.bool_)):  # (overwrite='no' was true: a user's file replaced)
            raise TypeError("benchmark: %s=%r: expected True or False" % (name, value))
    if trace:
        trace = _check_trace_path(trace)
    run, given = _prepare(kernel, args, kwargs, hardware, reference, numerics, lnc)
    from .. import _core
    _core.set_overwrite_allowed(bool(overwrite))
    try:
        _run(run, trace=trace or "")
    finally:
        _core.set_overwrite_allowed(False)
    return BenchmarkResult(run, trace, _nki_options, given)
