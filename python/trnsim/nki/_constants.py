"""nl.shared_constant: a tensor whose values the kernel gives on the host, in HBM before the kernel runs.

It is one more input of the kernel (declared like the inputs the caller gives, at the call's line); its values
go through the same conversion as a given input's (python/src/py_util.cpp to_host, after the build: the
PythonKernel reads constants() below). Equal data of one dtype is one tensor, as in NKI."""

import io
import os

import numpy as np

from . import _trace
from ._dtypes import as_dtype, modelled
from ._errors import NkiError, caller_loc, unsupported
from ._tensor import HBM, NkiTensor, Storage

CALL = "nl.shared_constant"

_given = []  # (name, host array, isa dtype name, label) of the build being made, in first-call order
_names = {}  # (dtype name, shape, host bytes) -> name


def reset():
    """A new build (core 0's trace starts)."""
    _given.clear()
    _names.clear()


def constants():
    """After a build: its constants, (name, array, DType, label), for the PythonKernel to bind as inputs."""
    from .. import _core

    out = [(n, a, _core.parse_dtype(isa), label) for n, a, isa, label in _given]
    reset()  # (consumed: a later build of a kernel that makes none binds none)
    return out


def _array(constant):
    if isinstance(constant, (str, os.PathLike)):
        try:
            with open(constant, "rb") as f:
                data = f.read()
            a = np.load(io.BytesIO(data), allow_pickle=False)
        except (OSError, ValueError) as e:
            raise NkiError(f"{CALL}: cannot read {os.fspath(constant)!r} as a .npy file: {e}") from None
        # Among the files the kernel ran (stats.json nki.sources), by the SHA-256 of the bytes read: a sweep keys
        # its points by them, so editing the file reruns them (tester23ae F7: they were kept, stale).
        from .. import _runner

        _runner.record_source(os.path.abspath(os.fspath(constant)), data)
        return a
    if isinstance(constant, NkiTensor):
        raise NkiError(f"{CALL}: the constant is a kernel tensor; it takes a NumPy array (or a .npy file "
                       f"path) whose values are known on the host")
    a = np.asarray(constant) if isinstance(constant, (list, tuple, int, float, np.generic)) else constant
    if not isinstance(a, np.ndarray):
        raise NkiError(f"{CALL}: the constant is a {type(constant).__name__}; it takes a NumPy array or a "
                       f".npy file path")
    return a


def _host(a, d):
    """`a` as the array the input conversion takes for dtype `d`: float dtypes from float64 values (which it
    rounds once to d, to nearest even, as a float64 input's), integer dtypes from int64."""
    if a.dtype.kind not in "fiub":
        raise NkiError(f"{CALL}: a NumPy array of {a.dtype} has no NKI values; give numbers")
    if d.kind == "f":
        return a.astype(np.float64)
    if d.name in ("float8_e8m0fnu",):
        if a.dtype != np.uint8:
            raise NkiError(f"{CALL}: dtype nl.float8_e8m0fnu takes its raw bits as a uint8 array; got "
                           f"{a.dtype}")
        return a
    if a.dtype.kind == "f":
        bad = np.argwhere(a != np.trunc(a))
        if bad.size:
            at = tuple(int(i) for i in bad[0])
            raise NkiError(f"{CALL}: dtype nl.{d.name} takes integers; the constant holds {a[at].item()!r} "
                           f"at {list(at)}")
    return a.astype(np.int64)


def _free_name(t):
    """shared_constant, shared_constant_1, ...: the next one that names no parameter of the kernel function
    (its inputs are its parameters)."""
    code = t.entry_code
    params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]) if code is not None else set()
    taken = params | set(_names.values())
    n, name = 0, "shared_constant"
    while name in taken:
        n += 1
        name = f"shared_constant_{n}"
    return name


def shared_constant(constant, dtype=None):
    t = _trace.current(CALL)
    a = _array(constant)
    if dtype is None:
        try:
            d = as_dtype(a.dtype)
        except NkiError:
            d = None
        if d is None or d.isa is None:
            raise NkiError(f"{CALL}: a {a.dtype} constant needs dtype= (the tensor's NKI dtype)")
    else:
        d = modelled(as_dtype(dtype), "shared constant")
    if d.kind == "x4" or d.name in ("int64", "float64"):
        unsupported(f"{CALL} of dtype nl.{d.name}", "its supported dtypes are the NKI page's unpacked ones")
    if a.ndim == 0 or a.size == 0:
        raise NkiError(f"{CALL}: the constant has shape {list(a.shape)}; it needs at least one element and "
                       f"one dim")
    host = np.ascontiguousarray(_host(a, d))
    key = (d.name, a.shape, host.dtype.str, host.tobytes())
    name = _names.get(key)
    loc = caller_loc()
    if name is None:
        name = _free_name(t)
        _names[key] = name
        _given.append((name, host, d.isa, f"{loc}: {CALL}"))
    made = t.__dict__.setdefault("_constants", {})
    st = made.get(name)
    if st is None:
        from .. import _core

        st = Storage(t, name, HBM, d, a.shape, role="input", loc=loc)
        st.phys = t.kernel.input(name, _core.parse_dtype(d.isa), list(a.shape), loc=loc)
        made[name] = st
    return NkiTensor.whole(st)
