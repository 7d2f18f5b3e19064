"""Runs a Python (NKI) kernel on the builder: the Python half of python/src/py_kernel.cpp.

NKI_CONTRACT.md section 3 / docs/nki.md: the kernel function runs once per core inside
``_core.build_program``; its inputs are HBM tensors declared from the workload's dtypes and shapes (wrapped by
``trnsim.nki._hooks.wrap_input``), its parameters come as keyword arguments, and the tensors it returns
(unwrapped by ``trnsim.nki._hooks.unwrap``) are the run's outputs.
"""

import importlib.util
import inspect
import os
import sys
import traceback

from . import _core

_loaded = {}


def load_function(path, name):
    """The object called ``name`` in the Python file ``path`` (imported once per path, as a module of its
    own). LookupError if the file defines no such name."""
    # The nki module names resolve to trnsim's before the kernel's imports run.
    from . import nki as _nki  # noqa: F401

    path = os.path.abspath(path)
    module = _loaded.get(path)
    if module is None:
        mod_name = "_trnsim_kernel_%d" % len(_loaded)
        spec = importlib.util.spec_from_file_location(mod_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[mod_name] = module
        kernel_dir = os.path.dirname(path)
        added = kernel_dir not in sys.path
        if added:  # a kernel file may import its neighbours
            sys.path.insert(0, kernel_dir)
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[mod_name]
            raise
        _loaded[path] = module
    if not hasattr(module, name):
        defined = sorted(n for n, v in vars(module).items()
                         if not n.startswith("_") and callable(v) and getattr(v, "__module__", None) == module.__name__)
        raise LookupError("'%s' is not defined in %s (%s)" % (
            name, os.path.basename(path),
            "it defines " + ", ".join(defined) if defined else "it defines no function"))
    return getattr(module, name)


def resolve_kernel(obj):
    """(function, grid): the function an nki.jit object wraps (``.func``) and its launch grid (``.grid``,
    1 or 2 programs, or None), or a plain function and None."""
    if getattr(obj, "__trnsim_jit__", False):
        func = obj.func
        grid = getattr(obj, "grid", None)
    else:
        func, grid = obj, None
    if not callable(func):
        raise TypeError("%r is not a function" % (func,))
    if grid is not None:
        if isinstance(grid, (tuple, list)):
            n = 1
            for g in grid:
                n *= int(g)
            grid = n
        grid = int(grid)
        if grid not in (1, 2):
            raise ValueError("launch grid of %d programs: trnsim runs 1 or 2 (LNC2)" % grid)
    return func, grid


def _parameters(func):
    try:
        return list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return []


def input_order(kernel, names):
    """The input names in the order of the function's parameters; ValueError naming an input that is not
    one of them."""
    func, _ = resolve_kernel(kernel)
    params = _parameters(func)
    pos = {p.name: i for i, p in enumerate(params)}
    takes_kwargs = any(p.kind == p.VAR_KEYWORD for p in params)
    for n in names:
        if n not in pos and not takes_kwargs:
            raise ValueError("'%s' is not a parameter of %s%s" % (
                n, func.__name__, "(%s)" % ", ".join(p.name for p in params)))
    return sorted(names, key=lambda n: pos.get(n, len(pos)))


_JSON_TYPES = ((bool, "bool"), (int, "int"), (float, "float"), (str, "string"))


def kernel_params(kernel, inputs):
    """The parameters a workload's "params" can set: the kernel function's parameters that are not among
    ``inputs`` (keyword arguments), each as {"name", "type", "default" (absent: required), "nullable"}; the
    type is the default's (bool, int, float, string), "string" when it has none (any JSON value goes)."""
    func, _ = resolve_kernel(kernel)
    inputs = set(inputs)
    out = []
    for p in _parameters(func):
        if p.name in inputs or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        d = {"name": p.name, "type": "string", "nullable": p.default is None}
        if p.default is not p.empty:
            for t, name in _JSON_TYPES:
                if isinstance(p.default, t):
                    d["type"], d["default"] = name, p.default
                    break
        out.append(d)
    return out


class CoreRunner:
    """Called by the builder once per core with the core's ``_core.Kernel``: declares the inputs, calls the
    kernel function, returns the names of the tensors it returned (None if it returned nothing)."""

    def __init__(self, func, inputs, params):
        from .nki import _hooks
        self.hooks = _hooks
        self.func = func
        self.inputs = inputs  # [(name, DType, shape)]
        self.params = params
        code = getattr(func, "__code__", None)
        self.loc = (code.co_filename, code.co_firstlineno) if code else None
        # How many inputs are the function's leading positional parameters (in order).
        params_ = [p for p in _parameters(func)
                   if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self.positional_count = 0
        for p, (n, _, _) in zip(params_, inputs):
            if p.name != n:
                break
            self.positional_count += 1

    def __call__(self, k):
        wrap = self.hooks.wrap_input
        tensors = [wrap(k.input(n, dt, shape, loc=self.loc)) for n, dt, shape in self.inputs]
        # Inputs that are the function's leading parameters go positionally, any other by keyword.
        lead = self.positional_count
        kwargs = dict(self.params)
        kwargs.update((n, t) for (n, _, _), t in zip(self.inputs[lead:], tensors[lead:]))
        ret = self.hooks.call(self.func, tensors[:lead], kwargs)
        if ret is None:
            return None
        items = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        names = []
        for item in items:
            view = self.hooks.unwrap(item)
            if not isinstance(view, _core.View):
                raise TypeError("the kernel returned %r: expected tensors it allocated in nl.shared_hbm" % (item,))
            if view.space != _core.MemSpace.HBM:
                raise TypeError("the kernel returned %s: an output must be an HBM tensor (nl.shared_hbm)"
                                % view.describe())
            if view.name not in names:
                names.append(view.name)
        return names


def call_reference(ref, arrays, params, n_outputs):
    """The reference's outputs: ``ref(*arrays, **params)`` (params limited to what its signature takes),
    as a list of ``n_outputs`` arrays."""
    import numpy as np

    sig = _parameters(ref)
    if not any(p.kind == p.VAR_KEYWORD for p in sig):
        accepted = {p.name for p in sig}
        params = {k: v for k, v in params.items() if k in accepted}
    out = ref(*arrays, **params)
    if isinstance(out, (tuple, list)):
        out = list(out)
    else:
        out = [out]
    if len(out) != n_outputs:
        raise ValueError("reference %s returned %d array%s for %d kernel output%s" % (
            getattr(ref, "__name__", "?"), len(out), "" if len(out) == 1 else "s", n_outputs,
            "" if n_outputs == 1 else "s"))
    return [np.asarray(o, dtype=np.float64) for o in out]


def _internal(filename):
    return filename.startswith(os.path.dirname(os.path.abspath(__file__)) + os.sep)


def format_exception(etype, value, tb):
    """'<file>:<line>: <Type>: <message>' at the innermost frame outside trnsim, then the traceback."""
    frames = traceback.extract_tb(tb)
    user = [f for f in frames if not _internal(f.filename)]
    where = ""
    if isinstance(value, SyntaxError) and value.filename:
        where = "%s:%s: " % (os.path.basename(value.filename), value.lineno)
    elif user:
        where = "%s:%d: " % (os.path.basename(user[-1].filename), user[-1].lineno)
    head = "%s%s: %s" % (where, etype.__name__, value)
    # The traceback from the first frame outside trnsim (the runner's own frames say nothing to the user).
    first = next((i for i, f in enumerate(frames) if not _internal(f.filename)), len(frames))
    body = "".join(traceback.format_list(frames[first:]))
    body += "".join(traceback.format_exception_only(etype, value))
    return head + "\nTraceback (most recent call last):\n" + body.rstrip("\n")
