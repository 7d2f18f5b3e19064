"""Allocation of a traced kernel's on-chip tensors: which physical buffer each nl.ndarray (and each result
tile of the earlier calling style) gets.

The model (docs/nki.md, "Allocation"): tensors are grouped by allocation site, the kernel line that made them
together with the lines of the helper calls leading to it (a tile declared in a loop body is one site, made
once per iteration). A site gets a pool of buffers, `bufs` times the number of its tensors alive at once (a
tensor lives from its first to its last access), at most one per tensor; its tensors take the pool's buffers
in rotation, skipping a buffer still held by a live tensor. So a tile declared once is one buffer (every
reuse waits for the previous readers), and a tile declared in a loop rotates over `bufs` buffers per live
copy, letting the next iteration's loads overlap this iteration's compute, as the Neuron compiler's
allocator does for tiles declared inside loops (NKI Block Dimension Migration Guide; the calibration
ports' TilePools, kernels/api/pool.h).

`loop_tile_buffers` is the rule's one place; it answers the same as the C++ calibration kernels' pools.
"""

import math

from ._errors import NkiError
from ._tensor import PSUM, SBUF


def loop_tile_buffers(space, in_loop):
    """Buffers per live tensor of an allocation site: 2 for a site made more than once (a tile declared in a
    loop: double buffering, the C++ calibration ports' default `bufs` and `psum_bufs`), 1 for a tensor made
    once."""
    return 2 if in_loop else 1


class Site:
    __slots__ = ("key", "space", "storages", "live", "bufs", "pool_size", "buffer_bytes", "shape", "dtype",
                 "loc", "uid", "first", "last", "partitions")

    def __init__(self, key, st, uid):
        self.key = key
        self.space = st.space
        self.storages = []
        self.live = 0
        self.bufs = 1
        self.pool_size = 1
        self.shape = st.shape
        self.dtype = st.dtype
        self.loc = st.loc
        self.uid = uid
        self.partitions = st.partitions
        self.buffer_bytes = st.pbytes
        self.first = st.first
        self.last = st.last


class Plan:
    """Pools (one per site) and the buffer of each on-chip storage: `phys[storage uid] = (site uid, index)`."""

    def __init__(self, sites, sbuf_scale, psum_scale):
        self.sites = sites
        self.sbuf_bufs = sbuf_scale
        self.psum_bufs = psum_scale

    def report(self):
        return [{"site": s.uid, "space": s.space, "line": str(s.loc) if s.loc else "?",
                 "shape": list(s.shape), "dtype": s.dtype.name, "tensors": len(s.storages), "live": s.live,
                 "bufs": s.bufs, "buffers": s.pool_size, "bytes_per_partition": s.buffer_bytes * s.pool_size}
                for s in self.sites]


def _bank_round(nbytes, bank):
    return -(-nbytes // bank) * bank


def plan(trace, bufs_override=None):
    target = trace.target
    by_key = {}
    sites = []
    for st in trace.storages:
        if st.space not in (SBUF, PSUM) or st.first < 0:
            continue
        key = (st.site, st.space, st.shape, st.pdim, st.dtype.name)
        s = by_key.get(key)
        if s is None:
            s = by_key[key] = Site(key, st, len(sites))
            sites.append(s)
        s.storages.append(st)
        s.first = min(s.first, st.first)
        s.last = max(s.last, st.last)
    for s in sites:
        ev = []
        for st in s.storages:
            ev.append((st.first, 1))
            ev.append((st.last + 1, -1))
        ev.sort(key=lambda e: (e[0], e[1]))
        cur = peak = 0
        for _, d in ev:
            cur += d
            peak = max(peak, cur)
        s.live = peak

    def size_pools(scale_sbuf, scale_psum):
        for s in sites:
            b = loop_tile_buffers(s.space, len(s.storages) > 1)
            if b > 1:
                b = scale_sbuf if s.space == SBUF else scale_psum
            if bufs_override is not None and len(s.storages) > 1:
                b = bufs_override
            s.bufs = b
            s.pool_size = min(len(s.storages), b * s.live)

    def used(space):
        if space == SBUF:
            return sum(s.pool_size * s.buffer_bytes for s in sites if s.space == SBUF)
        bank = target.psum_bank_bytes
        return sum(s.pool_size * _bank_round(s.buffer_bytes, bank) for s in sites if s.space == PSUM)

    # Double-buffer what fits; when a memory cannot hold two copies of every in-loop site, every in-loop
    # site of it gets one per live tensor (as the calibration workloads that run out of SBUF set bufs 1).
    sb, ps = 2, 2
    size_pools(sb, ps)
    if used(SBUF) > target.sbuf_bytes and bufs_override is None:
        sb = 1
    if used(PSUM) > target.psum_bytes and bufs_override is None:
        ps = 1
    size_pools(sb, ps)
    for space, cap in ((SBUF, target.sbuf_bytes), (PSUM, target.psum_bytes)):
        if used(space) > cap:
            big = sorted((s for s in sites if s.space == space), key=lambda s: -s.pool_size * s.buffer_bytes)
            lines = "; ".join(f"{s.loc}: {s.pool_size} x {list(s.shape)} {s.dtype.name} "
                              f"({s.pool_size * s.buffer_bytes} B)" for s in big[:4])
            raise NkiError(f"the kernel's {space.upper()} tiles need {used(space)} bytes per partition alive at "
                           f"once, more than the {cap} the core has (largest: {lines})", loc=big[0].loc)
    # Assign buffers in rotation, skipping buffers still held.
    for s in sites:
        held_until = [-1] * s.pool_size
        r = 0
        for st in s.storages:
            for k in range(s.pool_size):
                b = (r + k) % s.pool_size
                if held_until[b] < st.first:
                    break
            else:
                # More tensors alive than the pool: give the site one more buffer (never shares a live one).
                held_until.append(-1)
                b = s.pool_size
                s.pool_size += 1
            held_until[b] = st.last
            st.phys = (s.uid, b)
            r = b + 1
    return Plan(sites, sb, ps)
