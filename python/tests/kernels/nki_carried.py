"""NKI kernels carrying values across nl.affine_range iterations, for test_nki_warnings.py. Written for this
project."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def swapped_regions(x):
    # Each iteration adds one half of acc into the other: iteration 1 reads what iteration 0 wrote into the
    # other half of the same tile (a loop-carried dependency, not an accumulation into the region read).
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    acc = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(3):
        nisa.tensor_tensor(dst=acc[:, 32:64], data1=acc[:, 0:32], data2=t[:, 0:32], op=nl.add)  # MARK-first
        nisa.tensor_tensor(dst=acc[:, 0:32], data1=acc[:, 32:64], data2=t[:, 32:64], op=nl.add)
    nl.store(y, acc)
    return y


@nki.jit
def same_region(x):
    # The accumulation into the region read (each half into itself): no carried value.
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    acc = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(3):
        nisa.tensor_tensor(dst=acc[:, 32:64], data1=acc[:, 32:64], data2=t[:, 0:32], op=nl.add)
        nisa.tensor_tensor(dst=acc[:, 0:32], data1=acc[:, 0:32], data2=t[:, 32:64], op=nl.add)
    nl.store(y, acc)
    return y


@nki.jit
def rebound(x):
    # `cur = nxt`: iteration 1 reads the tile iteration 0 declared.
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    cur = nl.load(x)
    for i in nl.affine_range(3):
        nxt = nl.add(cur, 1.0)  # MARK-rebound
        nl.store(y, nxt)
        cur = nxt
    return y


@nki.jit
def rebound_sequential(x):
    # The same in nl.sequential_range: allowed.
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    cur = nl.load(x)
    for i in nl.sequential_range(3):
        nxt = nl.add(cur, 1.0)
        nl.store(y, nxt)
        cur = nxt
    return y


@nki.jit
def hbm_carried(x):
    # The output itself carries the value: each iteration loads y and stores y + x. y has no name=.
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    nl.store(y, t)
    for i in nl.affine_range(3):
        u = nl.load(y)  # MARK-hbm
        nl.store(y, nl.add(u, t))
    return y
