"""nki.jit: the kernel object. Calling its `.func` inside a build (the runner calls it once per physical
core) traces the kernel for the programs of that core, allocates, schedules and emits it, and returns the
builder views of the tensors the kernel returned. Called from host code with NumPy arrays it runs the kernel
on the simulator, as nki.baremetal does; called from inside another kernel it runs inline.
"""

import collections
import functools
import math
import os
import re
import threading

from . import _budget, _emit, _loop_reduce, _loops, _lower, _platform, _print, _trace
from ._backend import Target
from ._dtypes import as_dtype
from ._errors import Loc, NkiError
from ._tensor import HBM, NkiTensor, Storage, var_name
from .._runner import def_loc

_last_plans = []  # allocation reports of the last build (per core), for stats.json
_auto_named = {}  # output name given to a tensor declared without name= -> the kernel's variable naming it
_kernel_file = {}  # base name -> path of the last build's kernel file (warnings_by_call)
returned_shapes = []  # shapes of the views the last build's kernel returned (e.g. a reshape of its output)
# The output name of each tensor the last build's kernel returned, in return order: a tensor returned twice
# (`return o, o`) is one output, given back twice (trnsim.nki._entry._ordered_outputs).
returned_names = []
returned_tuple = []  # [True] when the last build's kernel returned a tuple or list (of one output too)
# simulate_kernel / benchmark (trnsim.nki._entry) set it: the names of the inputs the last build's cores write but
# do not return, which they write back into the caller's arrays as NKI's simulator does (the hook
# written_inputs); the CLI and the builds of tools/bench leave it off (the scan costs tracing time).
track_written_inputs = False
written_inputs = []


def _compile_flags(opts):
    """The Neuron compiler flags of the kernel's additional_compile_opt that trnsim models, as written without
    spaces: --enable-instruction-scheduling=false (program order, docs/nki.md "Scheduling") and --disable-dge
    (DMAs with precomputed descriptors instead of the hardware DGE, as a C++ kernel's set_disable_dge)."""
    extra = str(opts.get("additional_compile_opt") or "")
    return {f for f in ("--enable-instruction-scheduling=false", "--disable-dge") if f in extra.replace(" ", "")}


def _schedule_mode(opts):
    if "--enable-instruction-scheduling=false" in _compile_flags(opts):
        return "program_order"
    return opts.get("schedule", "pipelined")


def _grid_dims(grid):
    """The launch grid's dims as ints; NkiError at the kernel[...] line for a dim that is not a positive
    whole number (kernel[0] launches no program)."""
    if grid is None:
        return None
    given = grid
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    dims = []
    for i, g in enumerate(grid):
        n = g.__index__() if hasattr(g, "__index__") and not isinstance(g, bool) else None
        if n is None or n < 1:
            raise NkiError(f"kernel[{given!r}]: launch grid dim {i} is {g!r}: each dim must be a positive whole "
                           "number of programs (kernel[2] runs one program per core of an LNC2 pair)")
        dims.append(n)
    return tuple(dims)


class JitKernel:
    __trnsim_jit__ = True

    def __init__(self, fn, grid=None, options=None):
        self.fn = fn
        self.options = dict(options or {})
        if getattr(fn, "__trnsim_force_auto_alloc__", False):  # (nki.compiler.force_auto_alloc under @nki.jit)
            self.options["force_auto_alloc"] = True
        self.launch_grid = _grid_dims(grid)
        self.grid_given = grid  # as the kernel wrote it (messages)
        self.grid_loc = None
        # Grid dim 0's programs in a row on one core (nl.spmd_dim(nl.nc(2), 2): 2; else 1, alternating).
        dim0 = grid[0] if isinstance(grid, (tuple, list)) and grid else grid
        self.core_block = getattr(dim0, "block", 1)
        n = math.prod(self.launch_grid) if self.launch_grid else None
        # The runner's `.grid`: programs = physical cores (1, or 2 along grid dim 0, as kernel[2] and
        # kernel[2, 1]: one per core; kernel[1, 2] has both on dim 0's index 0, core 0); a larger grid runs
        # its programs in turn on the cores of the workload's lnc, unless it names its cores
        # (kernel[nl.nc(2), 2]: 2, so that an lnc of 1 conflicts with it as with kernel[nl.nc(2)]).
        if hasattr(dim0, "block"):  # nl.spmd_dim: its nl.nc sub-dim's cores, if it has one
            cores = dim0.nc if dim0.nc > 1 else None
        else:  # nl.nc(n): n cores
            cores = getattr(dim0, "n", None)
        self.grid = n if n == 1 or (n == 2 and self.launch_grid[0] == 2) else cores
        functools.update_wrapper(self, fn)

        @functools.wraps(fn)
        def traced(*args, **kwargs):
            return build_core(self, args, kwargs)

        traced.__trnsim_traced__ = True
        self.func = traced

    def __getitem__(self, grid):
        from ._errors import caller_loc

        k = JitKernel(self.fn, grid, self.options)
        k.grid_loc = caller_loc()  # the launch's line (messages about the LNC it asks for)
        return k

    def __call__(self, *args, **kwargs):
        if _trace.active() is not None:
            return self.fn(*args, **kwargs)
        from .. import _core

        if _core.Kernel.current() is not None:
            return self.func(*args, **kwargs)
        from . import simulate_kernel

        return simulate_kernel(self, *args, **kwargs)

    def __repr__(self):
        return f"nki.jit({self.fn.__name__})"


def jit(func=None, mode=None, **kwargs):
    """@nki.jit / @nki.jit(...): a kernel trnsim can run (the keyword arguments NKI takes, _JIT_KEYWORDS;
    additional_compile_opt='--enable-instruction-scheduling=false' keeps program order; platform_target
    picks the hardware of a call that names none, trnsim.nki._platform; mode is checked, then ignored: every
    mode runs on the simulator)."""
    _check_jit_options(dict(kwargs, mode=mode))
    if func is None:
        return lambda f: JitKernel(f, None, kwargs)
    if isinstance(func, JitKernel):
        return func
    return JitKernel(func, None, kwargs)


def _check_platform(kernel, target):
    """NkiError at the kernel's def line when the run's hardware is of another generation than the kernel's
    nki.jit(platform_target=...) names (hardware=, or a workload's "hardware"): the kernel says what it is
    written for, and a run on other hardware would measure something else."""
    mine, written = _platform.kernel_target(kernel)
    if mine is None or mine == target.generation:
        return
    raise NkiError(f"kernel {kernel.fn.__name__} is written for nki.jit(platform_target={written!r}), a {mine} "
                   f"NeuronCore, but the run's hardware is a {target.generation} config: run it on a {mine} "
                   f"config (simulate_kernel / benchmark: hardware='{mine}', or leave hardware= out; a workload: "
                   f"\"hardware\": \"{mine}\") or change its platform_target", loc=Loc(def_loc(kernel.fn)))


# nki.jit's keyword arguments: NKI's (2.33's compile_config and specialization_config; platform_target, as
# nki-samples' tutorials pass it; the earlier mode and compiler options, which have no counterpart here) and
# trnsim's own (schedule, bufs). Any other is a TypeError naming it, as a function without **kwargs raises.
_JIT_KEYWORDS = ("mode", "platform_target", "compile_config", "specialization_config", "additional_compile_opt",
                 "debug_kernel", "show_compiler_tb", "experimental_flags", "schedule", "bufs")
# nki.jit's mode values (the nki.jit page, 2.21-2.26; later pages list a subset of them); None is NKI's "auto".
# "trace" is on no page but neuronxcc's nki.jit took it, and AWS's published kernels (nki-samples, nki-library)
# decorate the helper kernels they call from a kernel with it: such a call runs inline, as any nki.jit's does.
_JIT_MODES = ("auto", "jax", "torchxla", "baremetal", "benchmark", "simulation", "trace")


def _check_jit_options(kwargs):
    """nki.jit's keyword arguments checked: a name it does not take, a mode or platform_target NKI does not
    accept or a config of the wrong class is an error at the decorator line."""
    from . import compiler
    from ._errors import caller_loc

    where = caller_loc()
    at = f"{where}: " if where else ""
    for k in kwargs:
        if k not in _JIT_KEYWORDS:
            raise TypeError(f"{at}nki.jit() got an unexpected keyword argument '{k}' (it takes "
                            f"{', '.join(_JIT_KEYWORDS[:8])}; docs/nki.md, \"Target platform and LNC\")")
    mode = kwargs.get("mode")
    if mode is not None and not (isinstance(mode, str) and mode in _JIT_MODES):
        raise ValueError(f"{at}nki.jit: mode={mode!r} is not a mode NKI accepts ({', '.join(_JIT_MODES)})")
    if kwargs.get("platform_target") is not None:
        try:
            _platform.check_target(kwargs["platform_target"], "nki.jit: platform_target")
        except ValueError as e:
            raise ValueError(f"{at}{e}") from None
    for k, cls in (("compile_config", compiler.CompileConfig), ("specialization_config",
                                                                 compiler.SpecializationConfig)):
        v = kwargs.get(k)
        if v is not None and not isinstance(v, cls):
            raise TypeError(f"{at}nki.jit: {k}={v!r}: expected a nki.compiler.{cls.__name__}(...)")


def _programs_of_core(grid, core, cores, block=1):
    """The launch-grid programs a physical core runs: grid dim 0's index n goes to core n // block % cores
    (the legacy SPMD mapping, block 1: NC0 runs even n, NC1 odd n; nl.spmd_dim(nl.nc(2), b): blocks of b),
    the other dims all on that core. A grid dim 0 shorter than the cores (kernel[1, 2] under lnc=2) would leave
    a core idle: its programs then go to the cores in turn in grid order (program k on core k % cores), as NKI
    lets the compiler place a grid that names no nl.nc."""
    import itertools

    if grid is None:
        grid = (cores,)
    every = list(itertools.product(*[range(g) for g in grid]))
    if block == 1 and grid[0] < cores <= len(every):
        return every[core::cores], grid
    ids = [p for p in every if p[0] // block % cores == core]
    if not ids:
        raise NkiError(f"launch grid {list(grid)} gives no program to core {core} of {cores}")
    return ids, grid


def build_core(kernel, args, kwargs):
    """Traces the kernel's programs for the current core and emits them; returns the output views. The
    cyclic garbage collector is paused meanwhile: a trace is many small objects that stay alive until the
    emission, which the collector would otherwise walk again and again."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        return _build_core(kernel, args, kwargs)
    finally:
        if enabled:
            gc.enable()


def _build_core(kernel, args, kwargs):
    from .. import _core

    k = _core.Kernel.current()
    if k is None:
        raise NkiError("a kernel's traced function runs inside trnsim's build (trnsim run / simulate_kernel)")
    if "--disable-dge" in _compile_flags(kernel.options):
        k.set_disable_dge(True)
    core, cores = k.program_id(), k.num_programs()
    if core == 0:
        _print.printed.clear()
        _auto_named.clear()
        _kernel_file.clear()
        _lower.store_copies.clear()
        path = kernel.fn.__code__.co_filename
        _kernel_file[os.path.basename(path)] = path
    target = Target.of_kernel(k)
    _check_platform(kernel, target)
    ids, grid = _programs_of_core(kernel.launch_grid, core, cores, kernel.core_block)
    trace = _trace.Trace(kernel.fn.__code__, ids[0], grid, grid, target, kernel.options)
    trace.kernel = k
    trace.max_ops = k.instructions_left()
    trace.limit = min(trace.max_ops, _budget.CHECK_EVERY)
    hbm_seq = []
    trace.hbm_seq = hbm_seq
    trace.hbm_pos = 0
    results = None
    threads_before = set(threading.enumerate())
    for pid in ids:
        trace.program_id = pid
        trace.hbm_pos = 0
        targs = [_as_input(trace, a) for a in args]
        tkw = {n: _as_input(trace, a) for n, a in kwargs.items()}
        r = _trace.run_program(kernel.fn, targs, tkw, trace)
        _loop_reduce.check_assigned(trace)
        _warn_running_threads(k, kernel.fn, trace, threads_before)
        if results is None:
            results = r
            outs = _outputs(kernel.fn, r, trace, cores * len(ids))
            _check_distinct_names(kernel.fn, outs, trace)
            _check_same_returns(kernel.fn, r, outs, trace, core, cores)
    _check_written(kernel.fn, outs, trace, core, cores)
    _check_files_named(kernel.fn, outs, trace)
    if track_written_inputs:
        _note_written_inputs(trace, outs)
    _note_moved(trace, outs)
    _check_cross_core(trace, core, cores)
    _loops.check(trace)
    _declare_hbm(k, trace, outs)
    plan = _emit.emit(k, trace, _schedule_mode(kernel.options), kernel.options.get("bufs"))
    _last_plans.append({"core": core, "schedule": _schedule_mode(kernel.options), "sites": plan.report(),
                        "instructions": len(trace.ops) + len(trace.followers)})
    if plan.direct:
        _last_plans[-1]["direct"] = plan.report_direct()
    views = [o.st.phys for o in outs]
    returned_shapes[:] = [o.shape for o in outs]
    returned_names[:] = [o.st.name for o in outs]
    returned_tuple[:] = [isinstance(results, (tuple, list))]
    # nl.device_print's copies are outputs of the run too (_print.py): returned after the kernel's own.
    shown = [st.phys for st in trace.storages if st.role == "print"]
    _release(trace)
    if shown:
        return tuple(views + shown)
    if results is None:
        return None
    return views[0] if not isinstance(results, (tuple, list)) else tuple(views)


moved = {}  # (direction, HBM tensor name) -> bytes, of the tensors the build's cores move (_hooks.moved_bytes)
moved_known = [False]  # whether an nki.jit kernel's build filled `moved` (a plain function's leaves it)


def _note_moved(trace, outs):
    """Adds to `moved` this core's compulsory bytes: each input (and nl.shared_constant) an instruction reads or
    writes, each returned tensor and nl.device_print copy one writes (an input returned unwritten moves nothing)."""
    moved_known[0] = True
    returned = {id(o.st) for o in outs}
    written = set()
    for op in trace.ops:
        for v in op.writes:
            if id(v.st) in returned or v.st.role == "print":
                written.add(id(v.st))
    for st in trace.storages:
        if st.space != HBM:
            continue
        if st.role == "input" and st.first >= 0:
            moved[("in", st.name)] = st.pbytes
        if id(st) in written:  # (named as both cores' same output is: an unnamed one has no name yet)
            moved[("out", _same_on_both(trace, st))] = st.pbytes


def _note_written_inputs(trace, outs):
    """Adds to written_inputs each input this core's instructions write that the kernel does not return."""
    returned = {id(o.st) for o in outs}
    for op in trace.ops:
        for v in op.writes:
            st = v.st
            if st.role == "input" and id(st) not in returned and st.name not in written_inputs:
                written_inputs.append(st.name)


_cross_calls = []  # core 0's cross-core calls of the build being made ((call, engine), loc), for core 1's check


def _check_cross_core(trace, core, cores):
    """NkiError at the first cross-core call (core_barrier, sendrecv) one LNC2 core makes and the other does
    not (each waits for the other's there, so on hardware it would wait forever): the call's kernel line and
    both cores' counts of each call (the builder's own check, kernels/api/kernel.cpp, names no line)."""
    if cores != 2:
        return
    calls = [((op.name, op.attrs.get("engine") if op.name == "core_barrier" else None), op.loc)
             for op in trace.ops if op.name in ("core_barrier", "sendrecv")]
    if core == 0:
        _cross_calls[:] = calls
        return
    made = (list(_cross_calls), calls)
    counts = [collections.Counter(key for key, _ in cs) for cs in made]
    for c, cs in enumerate(made):
        seen = collections.Counter()
        for key, loc in cs:
            seen[key] += 1
            if seen[key] <= counts[1 - c][key]:
                continue
            n = seen[key]
            nth = f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
            each = []
            for i in (0, 1):
                by = collections.Counter(name for (name, _), _l in made[i])
                each.append(f"core {i} made {by['core_barrier']} core_barrier, {by['sendrecv']} sendrecv")
            raise NkiError(f"{key[0]}: core {c}'s {nth} {key[0]}{f' on {key[1]}' if key[1] else ''}, which "
                           f"core {1 - c} does not make: the two cores of an LNC2 kernel must make the same "
                           f"cross-core calls (each waits for the other's; control flow must match): "
                           f"{'; '.join(each)}", loc=loc)


def _warn_running_threads(k, fn, trace, before):
    """A build warning, at the kernel's return, for each thread the kernel started that still runs when it
    returned: an nki call that thread makes from then on is no part of the kernel (the trace has ended; the
    call raises NkiError in that thread), so whatever it was to record is missing."""
    for t in threading.enumerate():
        if t in before or not t.is_alive():
            continue
        before.add(t)  # said once (an LNC2 kernel runs twice)
        loc = _return_loc(fn, trace)
        k.warn(str(loc) if loc and loc[0] else fn.__name__,
               "%sthread '%s' that kernel %s started still runs after the kernel returned: nki calls it makes "
               "from now on are not part of the kernel (join it before returning)" % (
                   "daemon " if t.daemon else "", t.name, fn.__name__))


def _as_input(trace, a):
    from .. import _core
    from ._hooks_fill import declared

    shape = None
    d = declared.get(id(a))
    if d is not None and d[0] is a:
        shape = d[1]
    if isinstance(a, _core.View):
        st = trace.__dict__.setdefault("_inputs", {}).get(a.name)
        if st is None:
            d = as_dtype(_core.dtype_name(a.dtype))
            shape = shape or getattr(a, "tensor_shape", None) or tuple(a.shape)
            st = Storage(trace, a.name, HBM, d, tuple(shape), role="input")
            st.phys = a
            trace._inputs[a.name] = st
        return NkiTensor.whole(st)
    return a


_RETURN = re.compile(r"\s*(return\b|.*[:;]\s*return\b)")


def _return_loc(fn, trace):
    """The kernel's return statement, or its def line when it ended without one."""
    import linecache

    loc = trace.return_loc
    # (the statement may follow a colon or semicolon on its line: `if flag: return o`)
    if loc is not None and _RETURN.match(linecache.getline(loc.path, loc.line)):
        return loc
    return Loc(def_loc(fn))


def _outputs(fn, r, trace, programs):
    """The returned tensors, each an HBM tensor the kernel allocated or one of its inputs (an in-place output,
    nki-library's `out: nt.mutable_tensor`: the caller's tensor as the kernel left it); NkiError at the kernel's
    return line (its def line when it fell off its end) otherwise. An nl.private_hbm (nl.hbm) tensor is an output only
    when one program runs (nki.simulate_kernel's own example returns an nl.hbm tensor): with more, each
    program has its own and none is the output."""
    where = _return_loc(fn, trace)
    name = fn.__name__
    if r is None:
        raise NkiError(f"kernel {name} returns None: return the output tensors it writes (allocated with "
                       "nl.ndarray(..., buffer=nl.shared_hbm)), as NKI kernels do", loc=where)
    items = list(r) if isinstance(r, (tuple, list)) else [r]
    for x in items:
        if not isinstance(x, NkiTensor) or x.st.space != HBM:
            raise NkiError(f"kernel {name} returns {x!r}: an output must be an HBM tensor it allocated "
                           "(nl.ndarray(..., buffer=nl.shared_hbm))", loc=where)
        if x.st.private and programs > 1:
            raise NkiError(f"kernel {name} returns an nl.private_hbm tensor (nl.hbm is its alias) from "
                           f"{programs} programs, each of which has its own; outputs of a launch grid or "
                           "LNC2 kernel are nl.shared_hbm", loc=where)
        _check_output_name(name, x.st.name, where)
        if not _whole(x):
            var = var_name(trace, x.st)
            raise NkiError(f"kernel {name} returns a {list(x.shape)} part of {x.st.label(at=False)}: an output is "
                           f"a whole tensor (or a reshape of it); return {var or 'the tensor'} and take the part "
                           "of the result", loc=where)
    return items


def _whole(x):
    """Whether the HBM view `x` is its whole tensor in row-major order (the tensor itself or a reshape of it):
    the run's output is the whole tensor, so a returned slice would give back other elements."""
    if x.boff or x.size != math.prod(x.st.shape):
        return False
    stride = 1
    for st, k in reversed(x.dims):
        if k > 1 and st != stride:
            return False
        stride *= k
    return True


def _check_output_name(kernel, out_name, where):
    """An output is written as OUT/<name>.npy next to trnsim's own files: the builder's one rule
    (sim/io/output_name.h), refused here at the kernel's return line."""
    from .. import _core

    if not out_name:
        return
    problem = _core.output_name_problem(out_name)
    if problem:
        raise NkiError(f"kernel {kernel} returns an output named {out_name!r}: it {problem}", loc=where)


def _label(trace, st):
    """A returned tensor as messages name it: its variable and the line that allocated it."""
    var = var_name(trace, st)
    made = f"allocated at {st.loc}" if getattr(st, "loc", None) else ""
    return f"{var} ({made})" if var and made else var or made or "a tensor"


def _check_distinct_names(fn, outs, trace):
    """NkiError at the return line for two returned tensors given the same name= (each is written as
    OUT/<name>.npy: the second was silently renamed)."""
    seen = {}
    for o in outs:
        first = seen.setdefault(o.st.name, o.st) if o.st.name else o.st
        if first is not o.st:
            raise NkiError(f"kernel {fn.__name__} returns two outputs named {o.st.name!r}: {_label(trace, first)} "
                           f"and {_label(trace, o.st)}; each output is written as OUT/<name>.npy, so give each its "
                           "own name=", loc=_return_loc(fn, trace))


def _check_files_named(fn, outs, trace):
    """NkiError at the return line for an output's name= that another output's file would take: a name= an
    input has is saved as '<name>_out', which another returned tensor's own name= may be, and nl.device_print
    writes 'device_print_<n>'. Either output's file would silently hold the other's tensor."""
    inputs = {st.name for st in trace.storages if st.space == HBM and st.role == "input"}
    prints = {st.name: st for st in trace.storages if st.role == "print"}
    mine = []
    for o in outs:
        if o.st.role != "input" and o.st.name and o.st not in mine:
            mine.append(o.st)
    named = {st.name: st for st in mine if st.name not in inputs}
    for st in mine:
        if st.name in prints:
            raise NkiError(f"kernel {fn.__name__} returns {_label(trace, st)} named {st.name!r}, the output that "
                           f"nl.device_print at {prints[st.name].loc} writes as OUT/{st.name}.npy: give it another "
                           "name=", loc=_return_loc(fn, trace))
        other = named.get(st.name + "_out") if st.name in inputs else None
        if other is not None:
            raise NkiError(f"kernel {fn.__name__} returns {_label(trace, st)} named {st.name!r}, an input's name, "
                           f"which is saved as OUT/{st.name}_out.npy, and {_label(trace, other)} named "
                           f"{other.name!r}: give one of them another name=", loc=_return_loc(fn, trace))


_first_core_returns = []  # [(name, label) of each tensor core 0 of the build being made returned, or None]


def _check_same_returns(fn, r, outs, trace, core, cores):
    """NkiError at core 1's return line when the LNC2 cores return different tensors (the run's outputs are
    what both return; a core returning None leaves them to the other), naming each core's and the lines that
    allocated them."""
    got = None if r is None else [(_same_on_both(trace, o.st), o.st.name, _label(trace, o.st)) for o in outs]
    if core == 0 or cores != 2:
        _first_core_returns[:] = [got]
        return
    first = _first_core_returns[0] if _first_core_returns else None
    if got is not None and first is not None and [k for k, _, _ in got] != [k for k, _, _ in first]:
        def text(rs):
            return ", ".join(f"{n!r}: {lab}" if n else lab for _, n, lab in rs) or "nothing"
        raise NkiError(f"kernel {fn.__name__}: the two cores return different tensors (core 0 "
                       f"{text(first)}; core 1 {text(got)}); an LNC2 kernel's outputs are the "
                       "nl.shared_hbm tensors both return, allocated alike on each core (the same name=, or the same line)",
                       loc=_return_loc(fn, trace))


def _same_on_both(trace, st):
    """What makes core 0's returned tensor and core 1's the same output: its name= (the run's output of that
    name), or, without one, the line that allocated it and which of that line's unnamed HBM tensors it is (both
    are the run's 'out': two tensors from different lines, one per core, were silently written as one)."""
    if st.name:
        return ("name", st.name)
    loc = getattr(st, "loc", None)
    nth = [x for x in trace.storages if x.space == HBM and not x.name and getattr(x, "loc", None) == loc]
    return ("allocated", loc, next((i for i, x in enumerate(nth) if x is st), -1))


_unwritten = {}  # return position -> its message, for the outputs no core built so far writes


def _check_written(fn, outs, trace, core, cores):
    """NkiError at the return line for a returned tensor no instruction of any core writes (its values would
    be whatever HBM held: the run would measure nothing). Cores build in turn: the check ends on the last."""
    # The ops from the last, until every output is seen written (an output's stores are usually near the
    # end): the whole trace is walked only when one is not written.
    # (An input returned is the caller's tensor: unwritten, it holds the caller's values, as router_topk's
    # skip_store_* leave it.)
    todo = {id(o.st) for o in outs if o.st.first >= 0 and o.st.role != "input"}
    written = set()
    for op in reversed(trace.ops):
        if not todo:
            break
        for v in op.writes:
            k = id(v.st)
            if k in todo:
                todo.discard(k)
                written.add(k)
    mine = {}
    for i, o in enumerate(outs):
        if o.st.role != "input" and id(o.st) not in written:
            where = _return_loc(fn, trace)
            made = f" (allocated at {o.st.loc})" if getattr(o.st, "loc", None) else ""
            label = var_name(trace, o.st) or o.st.name or "its output"
            empty = ""
            if trace.empty_loops:
                # (nki-samples' pipelined_attention at seqlen 2048: its loop over seqlen // 8192 sections)
                kind, r, at = trace.empty_loops[0]
                bounds = f"{r.stop}" if (r.start, r.step) == (0, 1) else f"{r.start}, {r.stop}, {r.step}"
                empty = f" (the nl.{kind}({bounds}) loop at {at} ran no iteration)"
            mine[i] = NkiError(f"kernel {fn.__name__} returns {label}{made}, but no instruction writes it{empty}: "
                               "store its values (nl.store / nisa.dma_copy into it) before returning it",
                               loc=where)
    if core == 0:
        _unwritten.clear()
        _unwritten.update(mine)
    else:
        for i in [i for i in _unwritten if i not in mine]:
            del _unwritten[i]
    if core == cores - 1 and _unwritten:
        raise _unwritten[min(_unwritten)]


def _declare_hbm(k, trace, outs):
    """Declares the kernel's HBM tensors on the builder: returned ones as outputs, the rest as scratch
    (private_hbm: private to the core). NKI's name= is free, but the builder needs an output's name unique
    and none of an input's: names are picked first (_hbm_names), then declared in the kernel's order."""
    out_st = []
    for o in outs:
        if o.st not in out_st:
            out_st.append(o.st)
    names = _hbm_names(trace, out_st)
    from .. import _core

    for st in trace.storages:
        if st not in names:
            continue
        loc = tuple(st.loc) if st.loc else None
        dtype = _core.parse_dtype(st.dtype.isa)
        if st.role == "print":  # nl.device_print's copy: an extra output of the run (_print.py)
            st.phys = k.output(st.name, dtype, list(st.shape), loc=loc)
        elif st in out_st:
            if not st.name:
                _auto_named[names[st]] = var_name(trace, st)
            st.name = names[st]
            st.phys = k.output(st.name, dtype, list(st.shape), loc=loc)
            st.role = "output"
        else:
            # Without name=: the builder's name is the kernel's variable in angle brackets, which the
            # builder's messages show as no name the kernel gave (kernels/api hbm_label); st.name stays
            # empty, so the front end's own messages name it by the variable and its line too.
            st.phys = k.scratch(names[st], dtype, list(st.shape), private_to_core=st.private, loc=loc)


def _hbm_names(trace, out_st):
    """The builder's name of each HBM tensor to declare. Outputs first: a name= that an input has becomes
    '<name>_out' (its OUT/ file); an unnamed one the first free of 'out', 'out_1', ... (never a parameter's
    name). Then scratch: a name= already an input's or output's gets ' 2', ' 3', ... (two scratch tensors
    may share one); an unnamed one is '<variable>'."""
    todo = [st for st in trace.storages if st.space == HBM and st.role != "input" and st.phys is None]
    taken = {st.name for st in trace.storages if st.space == HBM and st.role == "input"}
    taken |= {st.name for st in todo if st.role == "print"}
    names = {st: st.name for st in todo if st.role == "print"}

    def free(base, first, nth):
        name, n = first, 1
        while name in taken:
            n += 1
            name = nth(base, n)
        taken.add(name)
        return name

    outs = [st for st in todo if st in out_st and st.role != "print"]
    for st in [st for st in outs if st.name]:
        names[st] = free(st.name, st.name, lambda b, n: f"{b}_out" if n == 2 else f"{b}_out_{n - 2}")
    for st in [st for st in outs if not st.name]:
        names[st] = free("out", "out", lambda b, n: f"{b}_{n - 1}")
    reserved, seen = set(taken), set()
    for st in todo:
        if st in names:
            continue
        if st.name:
            taken.clear()
            taken.update(reserved)
            names[st] = free(st.name, st.name, lambda b, n: f"{b} {n}")
        else:
            base = var_name(trace, st) or "unnamed"
            taken.clear()
            taken.update(reserved | seen)
            names[st] = free(base, f"<{base}>", lambda b, n: f"<{b} {n}>")
        seen.add(names[st])
    return names


def warnings_by_call(warnings):
    """The build's warnings, each about an instruction a lowering made for the kernel's nl call ("k.py:9:
    dma_copy reads ..." of an nl.store) naming that call first, as errors do (_errors.by_call): "k.py:9:
    nl.store: its dma_copy (made by trnsim's lowering of nl.store) reads ...". The call is read from the
    warned line's source (_loops.user_call: the line's one nl / nisa call, if not the instruction itself), so
    that nothing of the trace is kept for it (its ops, kept alive, cost the garbage collector's passes time)."""
    import re
    from types import SimpleNamespace

    from ._direct import name_in_warning
    from ._direct import reads_at as direct_reads
    from ._errors import path_of
    from ._loops import user_call

    from ._ops import quiet_selects

    out, no_calls = [], SimpleNamespace(calls=())
    auto = {n: v for n, v in _auto_named.items() if v != n}  # ('out' for a variable out says it)
    _auto_named.clear()
    for w in warnings:
        m = re.match(r"([^\s:]+):(\d+): (\w+) (reads .*)", w, re.S)
        if m and m.group(3) == "affine_select" and quiet_selects.get(f"{m.group(1)}:{m.group(2)}"):
            continue  # only elements the select discards are undefined (_ops.quiet_selects)
        path = m and (_kernel_file.get(m.group(1)) or path_of(m.group(1)))
        if path:
            name = m.group(3)
            call = user_call(SimpleNamespace(index=-1, loc=(path, int(m.group(2))), name=name), no_calls)
            if call is not None:
                w = f"{m.group(1)}:{m.group(2)}: {call}: its {name} (made by trnsim's lowering of {call}) " \
                    f"{m.group(4)}"
                w += _store_copy_note(f"{m.group(1)}:{m.group(2)}", name, m.group(4))
        if auto and "output '" in w:
            w = _named_by_variable(w, auto)
        if direct_reads and "'direct " in w:
            w = name_in_warning(w)
        out.append(w)
    direct_reads.clear()
    quiet_selects.clear()
    _lower.store_copies.clear()
    return out


def _store_copy_note(where, name, text):
    """What the warning of nl.store's copy of PSUM rows reading before the stored rows (_lower._psum_to_sbuf)
    adds: those rows are read by the copy's legal start, not stored."""
    c = _lower.store_copies.get(where)
    p = re.search(r"\(partition (\d+),", text)
    if name != "tensor_copy" or c is None or p is None or not c[0] <= int(p.group(1)) < c[1]:
        return ""
    s, a, e = c
    before = f"partition {s}, before the stored {a}-{e - 1}, is" if a - 1 == s else (
        f"partitions {s}-{a - 1}, before the stored {a}-{e - 1}, are")
    return (f"; {before} read because the copy to SBUF starts at partition {s}, the nearest start an engine "
            f"instruction may have for these rows: not stored")


def _named_by_variable(w, auto):
    """Warning `w` with each output the run named 'out', 'out_1', ... (declared without name=) named as the
    kernel's variable, as a scratch tensor declared without name= is (kernels/api hbm_label): "output y float32
    [128, 64] declared at k.py:6, without name= (saved as out.npy)"."""
    import re

    def sub(m):
        if m.group(1) not in auto:
            return m.group(0)
        var = auto[m.group(1)]  # None: no variable names it (a list's element)
        return (f"output {var + ' ' if var else ''}{m.group(2)}{m.group(3) or ''}, without name= (saved as "
                f"{m.group(1)}.npy)")

    return re.sub(r"output '(out(?:_\d+)?)' (\w+ \[[\d, ]*\])( declared at [^\s:]+:\d+)?", sub, w)


def _release(trace):
    """Drops the trace's objects: the lists that hold its storages and ops (a storage points back at the
    trace: these lists were the cycle), the builder objects (the Kernel, the HBM tensors' builder views) and
    what refers to ops. An on-chip storage a kernel kept (in a global) keeps its `trace`, now empty: record()
    tells it from the next kernel's by it."""
    from ._hooks_fill import declared

    declared.clear()
    trace.fresh = {}
    trace.hbm_slices = {}
    trace.return_locals = None
    for st in trace.storages:
        if st.space == HBM:
            st.trace = None
            st.phys = None
    trace.ops = []
    trace.calls = []
    trace.storages = []
    trace.kernel = None
    trace.psum_groups = {}
    trace.iters = []
    trace.outer_iters = []
    trace.escaped = {}
