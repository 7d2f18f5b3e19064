"""NKI kernels for test_nki_results.py: what a kernel gives back (a tensor returned more than once, in a
shape of its own) and the values its fills write. Written for this project."""

import nki
import nki.language as nl


@nki.jit
def returned_twice(x):
    # o2 is allocated first (outputs come back in return order, not allocation order); o1 is returned
    # three times, once reshaped.
    o2 = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    o1 = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(o1, t)
    nl.store(o2, nl.add(t, 1.0))
    return o1, o2, o1, o1.reshape((64, 128))
