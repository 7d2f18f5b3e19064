"""Fills the platform's hooks (trnsim/nki/_hooks.py, NKI_CONTRACT.md): running a kernel function traces it
(plain functions too), and the allocation and schedule of the last build go into stats.json."""

from . import _constants, _hooks, _jit, _trace


def _call(func, inputs, params):
    """NKI kernels (@nki.jit) are traced; a plain function (e.g. one written on trnsim._core's builder) gets
    the builder's views as they are."""
    from .. import _core

    k = _core.Kernel.current()
    if k is not None and k.program_id() == 0:
        _constants.reset()  # a new build (one that failed before its constants were read left them)
    if getattr(func, "__trnsim_traced__", False):
        return func(*inputs, **params)
    _trace.plain_function = func  # an nl / nisa call in it names it (_trace.current)
    try:
        return func(*inputs, **params)
    finally:
        _trace.plain_function = None


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
