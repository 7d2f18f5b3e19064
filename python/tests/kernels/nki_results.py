"""NKI kernels for test_nki_results.py: what a kernel gives back (a tensor returned more than once, in a
shape of its own) and the values its fills write. Written for this project."""

import nki
import nki.isa as nisa
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


@nki.jit
def integer_fills(x):
    # Integers float32 does not hold (2^24 + 1, 1 - 2^31, 2^32 - 255), by each way a kernel fills a tile.
    out = nl.ndarray((128, 6), dtype=nl.int32, buffer=nl.shared_hbm)
    wide = nl.ndarray((128, 2), dtype=nl.uint32, buffer=nl.shared_hbm)
    a = nl.full((128, 2), 16777217, dtype=nl.int32, buffer=nl.sbuf)
    b = nl.ndarray((128, 2), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=b, value=-2147483647)
    nl.store(out[:, 0:2], a)
    nl.store(out[:, 2:4], b)
    nl.store(out[:, 4:6], value=16777219)
    nl.store(wide, nl.full((128, 2), 4294967041, dtype=nl.uint32, buffer=nl.sbuf))
    return out, wide
