"""Fills the platform's hooks (trnsim/nki/_hooks.py, NKI_CONTRACT.md): running a kernel function traces it
(plain functions too), and the allocation and schedule of the last build go into stats.json."""

import re

from . import _constants, _hooks, _jit, _print, _trace
from ._errors import Loc, NkiError, _in_package


def _call(func, inputs, params):
    """NKI kernels (@nki.jit) are traced; a plain function (e.g. one written on trnsim._core's builder) gets
    the builder's views as they are."""
    from .. import _core

    k = _core.Kernel.current()
    if k is not None and k.program_id() == 0:
        _constants.reset()  # a new build (one that failed before its constants were read left them)
        _jit.written_inputs.clear()
        _jit.moved.clear()
        _jit.moved_known[0] = False
    if getattr(func, "__trnsim_traced__", False):
        return func(*inputs, **params)
    _trace.plain_function = func  # an nl / nisa call in it names it (_trace.current)
    try:
        return func(*inputs, **params)
    except Exception as e:
        # An operator, attribute or NumPy call on the builder's views (`a + b`, `x.astype`): most likely an NKI
        # kernel without its @nki.jit (or the workload's reference given as its kernel), not a builder
        # kernel's own bug. Any exception whose text names the views' type is taken for one.
        kind = type(inputs[0]).__name__ if inputs else None
        if kind is None or not re.search(rf"\b{kind}\b", str(e)):
            raise
        why = f", whose inputs are {kind} objects: {type(e).__name__}: {e}"
        err = NkiError(_trace.not_jit(func, why), _kernel_line(e.__traceback__))
        raise err.with_traceback(e.__traceback__) from None
    finally:
        _trace.plain_function = None


def _kernel_line(tb):
    """The innermost kernel line (outside the package) of traceback `tb`."""
    loc = None
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if not _in_package(fn):
            loc = Loc((fn, tb.tb_lineno))
        tb = tb.tb_next
    return loc


class Input:
    """An input's builder view with the shape the run declared it with (a 1-D [n] input's view is (n, 1))."""

    __slots__ = ("view", "shape")

    def __init__(self, view, shape):
        self.view, self.shape = view, tuple(shape)


declared = {}  # id(view) -> the shape the run declared the input with (the view goes to the kernel as it is)


def _wrap_input(view):
    # The shape the run declared the input with (a 1-D [n] input's view is (n, 1); its tensor_shape (n,)).
    declared[id(view)] = (view, tuple(view.tensor_shape or view.shape))
    return view


def _stats():
    plans = list(_jit._last_plans)
    _jit._last_plans.clear()
    return {"allocation": plans} if plans else {}


def install():
    _hooks.call = _call
    _hooks.wrap_input = _wrap_input
    _hooks.stats = _stats
    _hooks.constants = _constants.constants
    _hooks.warnings = _jit.warnings_by_call
    _hooks.debug_outputs = _print.debug_outputs
    _hooks.written_inputs = lambda: list(_jit.written_inputs)
    _hooks.moved_bytes = lambda: float(sum(_jit.moved.values())) if _jit.moved_known[0] else None
