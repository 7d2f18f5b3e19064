"""Allocation of a traced kernel's on-chip tensors: which physical buffer each nl.ndarray (and each result
tile of the earlier calling style) gets.

The model (docs/nki.md, "Allocation"): tensors are grouped by allocation site, the kernel line that made them
together with the lines of the helper calls leading to it (a tile declared in a loop body is one site, made
once per iteration). A tensor lives from its first to its last access; a site's `tiles` are its tensors alive
at once and its trip count the declarations over that. The site's pool holds `bufs` x `tiles` buffers, `bufs`
from the allocation rule (kernels/api/alloc_rule.h: 1 for a declaration that runs once, 2 in SBUF, every free
bank in PSUM, never more than fits beside the tiles declared after it), the same rule the C++ kernels' pools
ask; its tensors take the buffers in rotation, skipping one still held by a live tensor. So a tile declared
once is one buffer (every reuse waits for the previous readers), and a tile declared in a loop rotates, letting
the next iteration's loads overlap this iteration's compute (kernels/api/pool.h).
"""

import math

from ._errors import NkiError
from ._tensor import PSUM, SBUF


def loop_tile_buffers(space, bytes_per_partition, trip_count, tiles, free_bytes, reserve_bytes):
    """(bufs, reason): the allocation rule of kernels/api/alloc_rule.h, the one the C++ kernels' pools ask,
    through the binding (trnsim._core.loop_tile_buffers) when the build has it. The fallback below states
    the same rule for builds whose bindings predate it: 1 for a declaration that runs once; SBUF double
    buffering; PSUM every free bank up to the trip count; never more than fits beside the reserve."""
    from . import _emit

    c = _emit.core()
    f = getattr(c, "loop_tile_buffers", None)
    if f is not None:
        q = c.LoopTileQuery()
        q.space = c.MemSpace.SBUF if space == SBUF else c.MemSpace.PSUM
        q.bytes_per_partition = bytes_per_partition
        q.loop = c.InLoop(trip_count=trip_count, tiles=tiles, reserve_bytes_per_partition=reserve_bytes)
        q.free_bytes_per_partition = free_bytes
        r = f(q)
        return r.bufs, r.reason
    if trip_count == 1:
        return 1, "declared once: nothing to rotate"
    wanted = min(2, trip_count) if space == SBUF else max(1, min(free_bytes // bytes_per_partition, trip_count))
    fit = max(0, free_bytes - reserve_bytes) // bytes_per_partition
    if fit < wanted:
        return max(1, fit), f"only {fit} fit beside the loop body's other tiles"
    return wanted, "double buffering (compiler default)" if space == SBUF else "every free PSUM bank"


class Site:
    __slots__ = ("key", "space", "storages", "live", "bufs", "pool_size", "buffer_bytes", "shape", "dtype",
                 "loc", "uid", "first", "last", "partitions", "unit", "reason")

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
                 "bufs": s.bufs, "buffers": s.pool_size, "reason": s.reason,
                 "bytes_per_partition": s.bufs * s.unit}
                for s in self.sites]


def _round(nbytes, granule):
    return -(-nbytes // granule) * granule


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
        ev.sort()
        cur = peak = 0
        for _, d in ev:
            cur += d
            peak = max(peak, cur)
        s.live = peak
    # Sites are allocated in the order the kernel first uses them (as the C++ kernels make their pools), a
    # site's buffers living from its first to its last access. Each asks the rule with the space the sites
    # alive then leave free and, as reserve, one buffer of every site declared after it while it lives.
    cap = {SBUF: target.sbuf_bytes, PSUM: target.psum_bytes}
    gran = {SBUF: 64, PSUM: target.psum_bank_bytes}
    for s in sites:
        s.unit = _round(s.buffer_bytes, gran[s.space]) * s.live
    sites.sort(key=lambda s: s.first)
    for i, s in enumerate(sites):
        s.uid = i
    for i, s in enumerate(sites):
        n = len(s.storages)
        trip = -(-n // s.live)
        held = sum(o.bufs * o.unit for o in sites[:i] if o.space == s.space and o.last >= s.first)
        reserve = sum(o.unit for o in sites[i + 1:] if o.space == s.space and o.first <= s.last)
        free = cap[s.space] - held
        if bufs_override is not None and trip > 1:
            s.bufs, s.reason = bufs_override, "explicit bufs"
        else:
            s.bufs, s.reason = loop_tile_buffers(s.space, s.unit, trip, s.live, free, reserve)
        s.pool_size = s.bufs * s.live
    for space in (SBUF, PSUM):
        ev = []
        for s in sites:
            if s.space == space:
                ev.append((s.first, 1, s))
                ev.append((s.last + 1, -1, s))
        ev.sort(key=lambda e: (e[0], e[1]))
        cur = peak = 0
        at = []
        live = set()
        for _, d, s in ev:
            cur += d * s.bufs * s.unit
            (live.add if d > 0 else live.discard)(s)
            if cur > peak:
                peak, at = cur, list(live)
        if peak > cap[space]:
            big = sorted(at, key=lambda s: -s.bufs * s.unit)
            lines = "; ".join(f"{s.loc}: {s.pool_size} x {list(s.shape)} {s.dtype.name} "
                              f"({s.bufs * s.unit} B)" for s in big[:4])
            raise NkiError(f"the kernel's {space.upper()} tiles need {peak} bytes per partition alive at once, "
                           f"more than the {cap[space]} the core has (largest: {lines})", loc=big[0].loc)
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
                raise NkiError(f"{s.loc}: more tiles of this site alive at once than its {s.pool_size} buffers",
                               loc=s.loc)
            held_until[b] = st.last
            st.phys = (s.uid, b)
            r = b + 1
    return Plan(sites, None, None)
