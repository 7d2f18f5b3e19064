"""The copy kernel the front-end tests share (ndarray + load + store) and its scaled twin. Tests that call it
import it; tests of a user's own kernel file write its source into that file (runner.kernel_source), so the
file:line their messages name is the written file's."""

import nki
import nki.language as nl


@nki.jit
def copy(x):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.load(x))
    return y


@nki.jit
def scaled(x, scale=2.0):
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(y, nl.multiply(nl.load(x), scale))
    return y
