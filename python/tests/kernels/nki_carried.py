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
def shifted(x, src=1, dst=0):
    # acc[:, i + dst] = acc[:, i + src] + 1. src=1, dst=0: iteration 1 writes column 1, which iteration 0
    # read (write after read); src=0, dst=2: iteration 2 reads column 2, which iteration 0 wrote (lag 2).
    y = nl.ndarray((128, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 8), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(8 - max(src, dst)):
        w, r = i + dst, i + src
        nisa.tensor_scalar(dst=acc[:, w:w + 1], data=acc[:, r:r + 1], op0=nl.add, operand0=1.0)  # MARK-shift
    nl.store(y, acc)
    return y


@nki.jit
def branch_carried(x):
    # Iteration 1 writes tmp (a branch on the index), iteration 2 reads it; iterations 0 and 1 alone show
    # nothing.
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    tmp = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    acc = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        if i == 1:
            nisa.tensor_copy(dst=tmp, src=t)
        if i == 2:
            nisa.tensor_tensor(dst=acc, data1=tmp, data2=t, op=nl.add)  # MARK-branch
    nl.store(y, acc)
    return y


@nki.jit
def last_iteration_reads(x):
    # Every iteration accumulates into acc; the last one stores it (before the others may have run).
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    acc = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(9):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
        if i == 8:
            nl.store(y, acc)  # MARK-last
    return y


@nki.jit
def scratch_reused(x):
    # One tile declared before the loop, written before it is read in every iteration: each iteration's
    # own value, no dependency (and no warning); each iteration writes its own rows of y.
    y = nl.ndarray((512, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    tmp = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(4):
        nisa.dma_copy(dst=tmp, src=x)
        nl.store(y[i * 128:(i + 1) * 128, :], nl.add(tmp, float(i)))
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


@nki.jit
def loaded_and_named(x, named=False):
    # A loaded tile updated in place carries each iteration's value to the next; so does a tile named
    # with name= (messages call it by that name; the others by the kernel's variable).
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    prev = nl.load(x)
    acc = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf, name="acc_buf" if named else "")
    nisa.tensor_copy(dst=acc, src=prev)
    for i in nl.affine_range(3):
        if named:
            step = nl.add(acc, 1.0)  # MARK-named
            acc[...] = nl.multiply(step, 2.0)
        else:
            step = nl.add(prev, 1.0)  # MARK-loaded
            prev[...] = nl.multiply(step, 2.0)
    nl.store(y, acc if named else prev)
    return y


@nki.jit
def masked_tail_scratch(x, reduce=False):
    # A scratch tile declared before a loop over column tiles of 48 (the last masked to 16 columns): in the
    # last iteration the unmasked computes over it read its stale columns 16..47, which iteration 0 wrote,
    # but the masked store drops what they make of them (no dependency). With `reduce`, a sum over the whole
    # result reads those too: the value is carried (warned at the compute that read the stale columns).
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    sums = nl.ndarray((128, 2), dtype=x.dtype, buffer=nl.shared_hbm) if reduce else None
    buf = nl.ndarray((128, 48), dtype=x.dtype, buffer=nl.sbuf)
    i_p = nl.arange(128)[:, None]
    j = nl.arange(48)[None, :]
    for t in nl.affine_range(2):
        buf[i_p, j] = nl.load(x[i_p, t * 48 + j], mask=(t * 48 + j < 64))
        e = nl.multiply(buf, 2.0)  # MARK-tail
        f = nl.add(e, 1.0)
        nl.store(y[i_p, t * 48 + j], value=f, mask=(t * 48 + j < 64))
        if reduce:
            nl.store(sums[:, t:t + 1], value=nl.sum(f, axis=1, keepdims=True))
    return (y, sums) if reduce else y


@nki.jit
def unwritten_tiles(x):
    # Tiles read before anything writes them: the warnings name them by the kernel's variables and their
    # allocation lines (they said sbuf 'tile' / psum 'tile', nl.ndarray's name, with no line).
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    mytile = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)  # MARK-mytile
    y = nl.add(mytile, 1.0)  # MARK-read-mytile
    ps = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.psum)  # MARK-ps
    nl.store(out, nl.add(y, nl.copy(ps)))  # MARK-read-ps
    return out


@nki.jit
def loop_sites(x):
    # Two allocation sites in a loop: stats.json "allocations" names them t and e (it said load and exp).
    out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(4):
        t = nl.load(x[:, i * 16:(i + 1) * 16])
        e = nl.exp(t)
        nl.store(out[:, i * 16:(i + 1) * 16], e)
    return out


@nki.jit
def nested_branch_carried(x):
    # An nl.affine_range loop nested in another: in outer iteration 5 only (a branch on the outer index),
    # inner iteration 1 reads tmp, which inner iteration 0 wrote: a loop-carried dependency of the inner loop
    # in an outer iteration the check otherwise leaves out (0-2 and the last are checked).
    y = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    acc = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(8):
        tmp = nl.zeros((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        for j in nl.affine_range(2):
            if i == 5 and j == 0:
                nisa.tensor_copy(dst=tmp, src=t)
            if i == 5 and j == 1:
                nisa.tensor_tensor(dst=acc, data1=tmp, data2=t, op=nl.add)  # MARK-nested
    nl.store(y, acc)
    return y
