"""NKI kernels using nl.loop_reduce (a reduction across loop iterations into a tile that is also the op's
input), for test_nki_loop_reduce.py. Written for this project."""

import numpy as np

import nki
import nki.compiler as ncc
import nki.isa as nisa
import nki.language as nl


@nki.jit
def reduce_slices(x, op, acc_dtype=nl.float32, dtype=None, init=0.0):
    # x [n, 128, 64]: acc = init, then acc[...] = loop_reduce(x[i], op) for each i; out = acc as float32.
    n = x.shape[0]
    acc = nl.full((128, 64), init, dtype=acc_dtype, buffer=nl.sbuf)
    for i in nl.affine_range(n):
        acc[...] = nl.loop_reduce(nl.load(x[i]), op=op, loop_indices=[i], dtype=dtype)
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, nl.copy(acc, dtype=nl.float32))
    return out


@nki.jit
def blocked_matmul(a, b):
    # The contributed matmul's pattern: per K block a PSUM accumulation of 128-row K tiles, added across K
    # blocks into an SBUF tile by loop_reduce. a [K, 128] (stationary, K on partitions), b [K, 512].
    K = a.shape[0]
    blocks, tiles = K // 256, 2
    z = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    for kb in nl.affine_range(blocks):
        p = nl.zeros((128, 512), dtype=nl.float32, buffer=nl.psum)
        for kt in nl.affine_range(tiles):
            k0 = kb * 256 + kt * 128
            p += nisa.nc_matmul(nl.load(a[k0:k0 + 128, :]), nl.load(b[k0:k0 + 128, :]))
        z[...] = nl.loop_reduce(p, np.add, loop_indices=[kb], name="z-acc")
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, z)
    return out


@nki.jit
def rebound(x, op, form="plain"):
    # The page's own form: b rebound to the call's value each iteration (b set before the loop); annotated,
    # and chained (c holds no value on the first iteration).
    b = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0]):
        if form == "plain":
            b = nl.loop_reduce(nl.load(x[i]), op=op, loop_indices=[i], dtype=nl.float32)
        elif form == "annotated":
            b: nl.ndarray = nl.loop_reduce(nl.load(x[i]), op=op, loop_indices=[i])
        else:
            c = b = nl.loop_reduce(nl.load(x[i]), op=op, loop_indices=[i])
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, b)
    return out


@nki.jit
def masked(x, rows=64):
    # Only partitions 0..rows-1 accumulate; the others keep acc's 5.0 (rows=0: the mask selects nothing).
    i_p, i_f = nl.mgrid[0:128, 0:64]
    acc = nl.full((128, 64), 5.0, dtype=nl.float32, buffer=nl.sbuf)
    for i in nl.affine_range(x.shape[0]):
        acc[i_p, i_f] = nl.loop_reduce(nl.load(x[i]), np.add, [i], mask=(i_p < rows))
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    nl.store(out, acc)
    return out


@nki.jit
def into_blocks(x, buffer="direct", t_first=False):
    # x [n, m, 128, 64]: acc[g] = the sum over j of x[g, j], acc a tensor with a block dim (tester23s F2): placed
    # directly (mod_alloc, as nki-samples' pipelined attention places its accumulators), automatic in SBUF, or
    # PSUM blocks. The loaded tiles rotate over two places of a tensor declared in the loop body (t_first: before
    # the loop, as tester23s's kernel: each block then holds one value per g).
    n, m = x.shape[0], x.shape[1]
    out = nl.ndarray((n, 128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    if buffer == "direct":
        acc = nl.ndarray((n, nl.par_dim(128), 64), dtype=nl.float32,
                         buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(n,)))
    else:
        acc = nl.ndarray((n, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf if buffer == "sbuf" else nl.psum)

    def loaded():
        if buffer == "direct":
            return nl.ndarray((m, nl.par_dim(128), 64), dtype=nl.float32,
                              buffer=ncc.sbuf.mod_alloc(base_addr=n * 256, num_free_tiles=(2,)))
        return nl.ndarray((m, nl.par_dim(128), 64), dtype=nl.float32, buffer=nl.sbuf)

    t = loaded() if t_first else None
    for g in nl.affine_range(n):
        if not t_first:
            t = loaded()
        acc[g] = 0.0
        for j in nl.affine_range(m):
            t[j] = nl.load(x[g, j])
            acc[g, :, :] = nl.loop_reduce(t[j], np.add, loop_indices=[j])
        nl.store(out[g], acc[g])
    return out


@nki.jit
def bad(x, what):
    out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((128, 64), dtype=nl.float32, buffer=nl.sbuf)
    t = nl.load(x[0])
    if what == "unassigned":
        for i in nl.affine_range(2):
            nl.loop_reduce(t, np.add, loop_indices=[i])  # MARK-unassigned
    elif what == "used":
        shape = nl.loop_reduce(t, np.add, loop_indices=[0]).shape  # MARK-used
        nl.store(out, shape)
    elif what == "unbound":
        r = nl.loop_reduce(t, np.add, loop_indices=[0])  # MARK-unbound
        nl.store(out, r)
    elif what == "hbm":
        out[...] = nl.loop_reduce(t, np.add, loop_indices=[0])  # MARK-hbm
    elif what == "op":
        acc[...] = nl.loop_reduce(t, np.exp, loop_indices=[0])  # MARK-op
    elif what == "indices":
        acc[...] = nl.loop_reduce(t, np.add, loop_indices=["k"])  # MARK-indices
    elif what == "shape":
        acc[:, 0:32] = nl.loop_reduce(t, np.add, loop_indices=[0])  # MARK-shape
    elif what == "x":
        acc[...] = nl.loop_reduce(x[0], np.add, loop_indices=[0])  # MARK-x
    elif what == "stored":
        nl.store(out, nl.loop_reduce(t, np.add, loop_indices=[0]))  # MARK-stored
    elif what == "listed":
        accs = [acc]
        accs[0] = nl.loop_reduce(t, np.add, loop_indices=[0])  # MARK-listed
        nl.store(out, accs[0])
    nl.store(out, acc)
    return out
