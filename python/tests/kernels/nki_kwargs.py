"""NKI kernels taking keyword arguments that are not JSON values (a dtype, a function, a tuple, a NumPy
scalar), for test_nki_kwargs.py. Written for this project."""

import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

seen = []  # what each call of a kernel below received, for the test to compare


@nki.jit
def cast_apply(x, dt=nl.float32, fn=nl.exp, shape=(128, 64), scale=np.float32(1.0)):
    # x's values through fn, times scale, into an output of dtype dt and shape `shape`.
    seen.append({"dt": dt, "fn": fn, "shape": shape, "scale": scale})
    y = nl.ndarray(shape, dtype=dt, buffer=nl.shared_hbm)
    t = nl.load(x)
    u = nl.ndarray(shape, dtype=dt, buffer=nl.sbuf)
    nisa.activation(dst=u, op=fn, data=t, scale=scale)
    nl.store(y, u)
    return y


def cast_apply_ref(x, dt=nl.float32, fn=nl.exp, shape=(128, 64), scale=np.float32(1.0)):
    seen.append({"ref": True, "dt": dt, "fn": fn, "shape": shape, "scale": scale})
    return np.exp(x * np.float32(scale))


@nki.jit
def filled(n=8):
    # No array input: a [128, n] output filled with n.
    seen.append({"n": n})
    y = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=float(n))
    nl.store(y, t)
    return y
