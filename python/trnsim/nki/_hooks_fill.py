"""Fills the platform's hooks (trnsim/nki/_hooks.py, NKI_CONTRACT.md): running a kernel function traces it
(plain functions too), and the allocation and schedule of the last build go into stats.json."""

from . import _hooks, _jit


def _call(func, inputs, params):
    if getattr(func, "__trnsim_traced__", False):
        return func(*inputs, **params)
    k = _jit.JitKernel(getattr(func, "fn", func))
    return k.func(*inputs, **params)


def _stats():
    plans = list(_jit._last_plans)
    _jit._last_plans.clear()
    return {"allocation": plans} if plans else {}


def install():
    _hooks.call = _call
    _hooks.stats = _stats
