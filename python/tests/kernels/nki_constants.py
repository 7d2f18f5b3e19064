"""NKI kernels using nl.shared_constant (a constant tensor given on the host, in HBM before the kernel runs),
for test_nki_shared_constant.py. Written for this project."""

import numpy as np

import nki
import nki.language as nl

seen = {}  # values the kernels computed while tracing, for the test to compare
given = {}  # the constant read_back asks for (an array passed to the kernel would be one of its inputs)


@nki.jit
def read_back(x, dtype, out_dtype=nl.float32):
    # The constant given["c"] (an array, or a .npy path) as a `dtype` HBM tensor, copied out as out_dtype.
    k = nl.shared_constant(given["c"], dtype=dtype)
    seen["shape"], seen["dtype"], seen["name"] = tuple(k.shape), k.dtype, k.name
    out = nl.ndarray(k.shape, dtype=out_dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(k, dtype=out_dtype))
    return out


@nki.jit
def plus_identity(x):
    # out = x + I (the attention tutorials' identity constant, int8 given, bfloat16 tensor), twice asked for.
    ident = nl.shared_constant(np.identity(128, dtype=np.int8), dtype=nl.bfloat16)
    again = nl.shared_constant(np.identity(128, dtype=np.int8), dtype=nl.bfloat16)
    other = nl.shared_constant(np.identity(128, dtype=np.int8), dtype=nl.float32)
    seen["names"] = (ident.name, again.name, other.name)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(x), nl.load(ident, dtype=nl.float32)))
    return out


@nki.jit
def per_core_rows(x):
    # LNC2: each core adds the constant's row pid (a [2, 64] constant) to its half of x [256, 64].
    pid = nl.program_id(0)
    c = nl.shared_constant(np.array([[1] * 64, [1000] * 64], dtype=np.int32), dtype=nl.float32)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    row = nl.load(c[pid:pid + 1, :])
    t = nl.load(x[pid * 128:(pid + 1) * 128, :])
    nl.store(out[pid * 128:(pid + 1) * 128, :], nl.add(t, row.broadcast_to((128, 64))))
    return out


@nki.jit
def named_like_an_input(shared_constant):
    # The kernel's input has the name the constant would get: the constant takes the next one.
    c = nl.shared_constant(np.full((128, 64), 2.0, dtype=np.float32))
    seen["name"] = c.name
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.add(nl.load(shared_constant), nl.load(c)))
    return out


@nki.jit
def bad(x, what):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if what == "fraction":
        nl.shared_constant(np.array([[1.0, 0.5]]), dtype=nl.int32)  # MARK-fraction
    elif what == "complex":
        nl.shared_constant(3j, dtype=nl.float32)  # MARK-complex
    elif what == "float64":
        nl.shared_constant(np.ones((2, 2)))  # MARK-float64
    elif what == "x4":
        nl.shared_constant(np.ones((2, 2), dtype=np.uint32), dtype=nl.float8_e4m3fn_x4)  # MARK-x4
    elif what == "scalar":
        nl.shared_constant(np.float32(2.0))  # MARK-scalar
    elif what == "tile":
        nl.shared_constant(nl.load(x))  # MARK-tile
    elif what == "late":
        nl.shared_constant(np.ones((2, 2), dtype=np.float32))
        raise ValueError("the kernel fails after making a constant")  # MARK-late
    elif what == "range":
        nl.shared_constant(np.array([[300]]), dtype=nl.int8)  # MARK-range
    nl.store(out, nl.load(x))
    return out
