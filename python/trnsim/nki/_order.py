"""Elementwise instructions whose dst overlaps a source in other elements (`nisa.tensor_copy(dst=t[:, ::-1],
src=t)`, `t[:, 1:]` from `t[:, :-1]`): NKI's ISA reference does not say in which order an engine reads and
writes an instruction's elements, so such a result depends on it; the kernel gets a warning at the line.
An instruction whose dst is exactly its source (in-place, element k onto element k) is well defined."""

import numpy as np

from . import _trace
from ._tensor import NkiTensor


def _bytes(v):
    """(byte keys, element index) of every byte of on-chip view `v`, elements in the instruction's order
    (partition dim first): key = partition << 32 | byte offset in the partition. None for a view without a
    partition dim."""
    pd = v.pd
    if pd < 0:
        return None
    dims = v.dims
    order = [pd] + [i for i in range(len(dims)) if i != pd]
    grid = np.indices([dims[i][1] for i in order], dtype=np.int64).reshape(len(order), -1)
    isz = v.dtype.itemsize
    part = v.p0 + grid[0] * dims[pd][0]
    byte = np.full(grid.shape[1], v.boff, dtype=np.int64)
    for k, i in enumerate(order[1:], 1):
        byte += grid[k] * (dims[i][0] * isz)
    keys = ((part << 32) + byte)[:, None] + np.arange(isz, dtype=np.int64)[None, :]
    index = np.repeat(np.arange(grid.shape[1], dtype=np.int64), isz)
    return keys.ravel(), index


def _crossed(dst, src):
    """True if some element of dst is stored over bytes of another element of src."""
    a, b = _bytes(dst), _bytes(src)
    if a is None or b is None:
        return False
    common = np.intersect1d(a[0], b[0])
    if common.size == 0:
        return False
    ma, mb = np.isin(a[0], common), np.isin(b[0], common)
    keys = np.concatenate([a[0][ma], b[0][mb]])
    index = np.concatenate([a[1][ma], b[1][mb]])
    order = np.lexsort((index, keys))
    keys, index = keys[order], index[order]
    first = np.r_[True, keys[1:] != keys[:-1]]
    last = np.r_[keys[1:] != keys[:-1], True]
    return bool((index[first] != index[last]).any())


def check(op, dst, sources):
    """Warns at op's line (the build's warnings: trnsim run, simulate_kernel) when dst overlaps one of
    `sources` (views of the same tensor) in other elements."""
    for src in sources:
        if not isinstance(src, NkiTensor) or src.st is not dst.st or src is dst:
            continue
        if src.dims == dst.dims and src.boff == dst.boff and src.p0 == dst.p0 and src.dtype == dst.dtype:
            continue  # in place
        if not _crossed(dst, src):
            continue
        _trace.current().kernel.warn(
            str(op.loc),
            f"{op.name} writes {dst.st!r} over other elements of its own source (dst {list(dst.shape)}, source "
            f"{list(src.shape)} of the same tile, shifted or reordered): NKI's ISA reference does not say in "
            f"which order an engine reads and writes an instruction's elements, so the result depends on it "
            f"(trnsim's tensor_copy streams element by element, each read after the earlier ones were written; "
            f"the other instructions read a partition's row before writing it); write into another tile and "
            f"copy back (as `t[...] = nl.copy(t[...])` does)")
        return
