"""Allocation of a traced kernel's on-chip tensors: which physical buffer each nl.ndarray (and each result
tile of the earlier calling style) gets.

The model (docs/nki.md, "Allocation"; the rule itself is kernels/api/alloc_rule.h, shared with the C++
kernels' pools): tensors are grouped by allocation site, the kernel line that made them together with the
lines of the helper calls leading to it (a tile declared in a loop body is one site, made once per
iteration). A tensor lives from its first to its last access; a site's `tiles` are its tensors alive at once
and its trip count the declarations over that; `bufs` comes from the rule (loop_tile_buffers). A site's scope
is one iteration of the outermost affine / sequential loop around its declaration (static_range loops,
unrolled while tracing as Python loops are, are none) when none of its tiles outlives that
iteration (else the kernel): one pool instance per scope iteration, placed by plan_pools with the builder's
first-fit allocator in program order. An instance keeps the site's previous buffers when no other site took
their space in between (the rotation goes on); otherwise it gets fresh ones, and the first writer of each
waits for the last accesses of the buffers that held that space before (Plan.after, used by the schedule).
"""

import operator

import numpy as np

from . import _direct
from ._errors import NkiError
from ._tensor import PSUM, SBUF


class Site:
    __slots__ = ("key", "space", "storages", "live", "bufs", "pool_size", "buffer_bytes", "shape", "dtype",
                 "loc", "uid", "first", "last", "partitions", "unit", "reason", "scope", "instances",
                 "trip", "placements")

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
        self.scope = "kernel"
        self.instances = 0
        self.placements = 0


class Pool:
    """One placement of a site: the buffers a run of its scope iterations rotates over (phys[0] indexes
    these)."""

    __slots__ = ("site", "pool_size", "partitions", "offsets")

    def __init__(self, site, offsets):
        self.site = site
        self.pool_size = site.pool_size
        self.partitions = site.partitions
        self.offsets = offsets  # per buffer, bytes per partition


class Plan:
    """Sites, their placements (`pools`) and the buffer of each on-chip storage: `phys[storage uid] = (pool
    uid, index)`; `after[op index]`: (storage uid) whose buffer's last accesses the op must follow (its
    buffer took their space: write-after-read from pool to pool)."""

    def __init__(self, sites, pools, after, direct=()):
        self.sites = sites
        self.pools = pools
        self.after = after
        self.direct = direct  # the directly allocated tiles (_direct.py), when the kernel places them

    def report_direct(self):
        return _direct.report(self.direct)

    def report(self):
        return [{"site": s.uid, "space": s.space, "line": str(s.loc) if s.loc else "?",
                 "shape": list(s.shape), "dtype": s.dtype.name, "tensors": len(s.storages), "live": s.live,
                 "bufs": s.bufs, "buffers": s.pool_size, "reason": s.reason, "scope": s.scope,
                 "scope_iterations": s.instances, "placements": s.placements,
                 "bytes_per_partition": s.unit, "pool_bytes_per_partition": s.bufs * s.unit}
                for s in self.sites]


_by_first = operator.attrgetter("first")


def _round(nbytes, granule):
    return -(-nbytes // granule) * granule


def _scope(trace, s):
    """(scope description, instance key of each storage): the kernel, or one iteration of the outermost loop
    when no tile of the site outlives the iteration it was declared in (kernels/api/alloc_rule.h)."""
    its = trace.outer_iters
    crossed = False
    for st in s.storages:
        o = st.outer
        if o is None or st.last >= its[o][1]:
            crossed = True
            break
    from . import _emit

    f = getattr(_emit.core(), "site_scope", None)
    depth = f([crossed]) if f is not None else (-1 if crossed else 0)
    if depth < 0:
        if len(s.storages) > 1 and all(st.outer is None and st.role != "block" for st in s.storages):
            keys = _runs(s.storages)
            if max(keys):
                return "each run of its tiles (outside every nl loop)", keys
        return "kernel", [0] * len(s.storages)
    loc = its[s.storages[0].outer][2]
    where = f"loop at {loc}" if loc else "outermost loop"
    keys = [st.outer for st in s.storages]
    # Declared again in one iteration of the innermost affine / sequential loop around it (a Python or
    # static_range loop in the body, both unrolled while tracing): a scope per run of its tiles in that
    # iteration, as outside every such loop.
    by_outer = {}
    for k, st in enumerate(s.storages):
        by_outer.setdefault(st.outer, []).append(k)
    split = False
    for ks in by_outer.values():
        inner = _traced_iter(s.storages[ks[0]])
        if len(ks) > 1 and inner is not None and all(
                _traced_iter(s.storages[k]) is inner and s.storages[k].role != "block" for k in ks):
            runs = _runs([s.storages[k] for k in ks])
            if max(runs):
                split = True
                for k, r in zip(ks, runs):
                    keys[k] = (keys[k], r)
    if split:
        keys = [k if isinstance(k, tuple) else (k, 0) for k in keys]
        return f"{where}, each run of its tiles in an iteration", keys
    return where, keys


def _traced_iter(st):
    """The iteration record (Trace.iters) of the innermost affine_range / sequential_range loop `st` was
    declared in, or None: the static_range loops between are unrolled while tracing, as Python loops are."""
    for rec in reversed(st.scope or ()):
        if rec[2] != "static_range":
            return rec
    return None


def _groups(storages, keys):
    """{instance key: [first op, last op, its storages]} of a site's storages and their instance keys."""
    groups = {}
    for st, k in zip(storages, keys):
        g = groups.get(k)
        if g is None:
            groups[k] = [st.first, st.last, [st]]
        else:
            if st.first < g[0]:
                g[0] = st.first
            if st.last > g[1]:
                g[1] = st.last
            g[2].append(st)
    return groups


def _plan_runs(c, limits, q_sites, q_inst, inst_of, q_whole, whole_of, sites, whole_scope, q_sites_whole):
    """plan_pools for a kernel with sites split into runs (_runs): the runs as scopes, each site's buffer count
    asked when its first run starts, as for an affine_range iteration. Should that not fit (a site first used
    between two runs of another may have taken the space the other's next run needs), the counts of the
    scopes before the split with the runs' placement, and failing that the plan before the split (its scopes
    restored): a kernel that fitted before the split still fits. Returns (choices, placement_of, placements,
    the instances' storages)."""
    try:
        choices, placement_of, placements = c.plan_pools(limits, q_sites, q_inst)
        return choices, placement_of, placements, inst_of
    except Exception as e:
        err = e
    try:
        first = c.plan_pools(limits, q_sites_whole, q_whole)
    except Exception:
        raise err from None
    counted = [q[:6] + (b,) for q, (b, _r) in zip(q_sites_whole, first[0])]
    try:
        _c, placement_of, placements = c.plan_pools(limits, counted, q_inst)
    except Exception:
        for i, scope in whole_scope.items():
            sites[i].scope = scope
            sites[i].instances = sum(1 for q in q_whole if q[0] == i)
        return first[0], first[1], first[2], whole_of
    return first[0], placement_of, placements, inst_of


def _held(c, limits, q_sites, q_inst, site):
    """Where plan_pools failed to place an instance of `site`: (that instance's index, the bufs chosen per site
    so far, the instances holding space then), by replaying ever longer prefixes of the instances' starts in
    its event order (a bisection: each prefix places the same as the whole up to its end)."""
    order = sorted(range(len(q_inst)), key=lambda k: (q_inst[k][1], k))

    def fails(m):
        keep = set(order[:m])
        try:
            return False, c.plan_pools(limits, q_sites, [q for k, q in enumerate(q_inst) if k in keep])
        except Exception:
            return True, None

    lo, hi = 0, len(order)  # a prefix of lo starts places; one of hi does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(mid)[0]:
            hi = mid
        else:
            lo = mid
    f = order[hi - 1]
    if q_inst[f][0] != site:
        return None
    bad, got = fails(hi - 1)
    if bad:
        return None
    at = q_inst[f][1]
    return f, got[0], [k for k in order[:hi - 1] if q_inst[k][2] >= at]


def _no_fit(c, limits, sites, q_sites, q_inst, msg):
    """The NkiError for plan_pools' message `msg` (a site's buffer that does not fit): the tile and its line,
    the free space, and every tile holding space at that instance's first access with the buffers it holds
    (so the figures add up), then those that start later in its life."""
    i = int(msg.split("site ", 1)[1].split(":", 1)[0])
    s = sites[i]
    found = _held(c, limits, q_sites, q_inst, i)

    def listed(tiles):
        tiles = sorted(tiles, key=lambda o: -o[1] * o[0].unit)
        shown = [f"{o.loc}: {list(o.shape)} {o.dtype.name} x {o.live}{f', {b} buffers' if b > 1 else ''} "
                 f"({b * o.unit} B)" for o, b in tiles[:8]]
        return "; ".join(shown + ([f"{len(tiles) - 8} more"] if len(tiles) > 8 else []))

    others = [o for o in sites if o.space == s.space and o.first <= s.last and s.first <= o.last and o is not s]
    if found is not None:  # the holders then, each site once with its buffers (bufs x tiles alive at once)
        _f, choices, holders = found
        by_site = {}
        for k in holders:
            o = sites[q_inst[k][0]]
            if o.space == s.space:
                by_site[o.uid] = (o, choices[o.uid][0])
        lines = listed(by_site.values())
        start = q_inst[found[0]][1]
        later = listed((o, 1) for o in others if o.first > start and o.uid not in by_site)
    else:
        lines = listed((o, 1) for o in others if o.first <= s.first)
        later = listed((o, 1) for o in others if o.first > s.first)
    if not lines and s.live > 1:
        lines = f"{s.live - 1} more of this one ({s.loc})"
    whose = (" (the PSUM bank a partition broadcast of a [1, F] row passes through: the row is repeated on "
             "the partitions by the Tensor engine, docs/nki.md)"
             if any(st.role == "partition broadcast" for st in s.storages) else "")
    raise NkiError(f"{s.space.upper()} tile {list(s.shape)} {s.dtype.name}{whose} (x {s.live} alive at once): "
                   f"{msg.split(f'site {i}: ', 1)[-1]}; the other tiles alive then: {lines or 'none'}"
                   + (f"; alive later in its life: {later}" if later else ""), loc=s.loc) from None


def _runs(storages):
    """The run of each of `storages` (tiles of one site declared more than once with no affine / sequential
    loop between the declarations: a Python or nl.static_range loop, both unrolled while tracing): tiles whose
    lives overlap, chained, are one run, as an affine_range iteration is one scope when no tile of the site
    outlives it. All 0 when the runs are one (a tile alive into the next declaration's life all along)."""
    order = sorted(range(len(storages)), key=lambda k: storages[k].first)
    keys = [0] * len(order)
    run, end = 0, -1
    for k in order:
        st = storages[k]
        if end >= 0 and st.first > end:
            run += 1
        keys[k] = run
        end = max(end, st.last)
    return keys


def plan(trace, bufs_override=None, limits=None):
    target = trace.target
    by_key = {}
    sites = []
    direct = []
    for st in trace.storages:
        if st.first < 0:
            continue
        if st.direct is not None:
            direct.append(st)
            continue
        if st.space not in (SBUF, PSUM):
            continue
        key = (st.site, st.space, st.shape, st.pdim, st.dtype.name)
        s = by_key.get(key)
        if s is None:
            s = by_key[key] = Site(key, st, len(sites))
            sites.append(s)
        s.storages.append(st)
    if direct:  # the kernel places its tiles itself (_direct.py): no sites, one buffer per logical tile
        _direct.check_no_mixing(direct, [st for st in trace.storages if st.space in (SBUF, PSUM) and
                                         st.first >= 0 and st.direct is None])
        _direct.check_hbm(trace, direct)
        pools, after = _direct.plan(trace, direct)
        return Plan([], pools, after, direct)
    for s in sites:
        # The most tensors alive at once: at each first access, those begun minus those ended by then (a
        # tensor ending where another begins is not alive with it). The site's first and last accesses too.
        sts = s.storages
        starts = sorted([st.first for st in sts])
        ends = sorted([st.last + 1 for st in sts])
        s.first, s.last = starts[0], ends[-1] - 1
        n, j, peak = len(ends), 0, 0
        if n > 64:  # the loop below, in NumPy: at the i-th start, i + 1 begun minus those ended by then
            peak = int((np.arange(1, n + 1) - np.searchsorted(ends, starts, side="right")).max())
        else:
            for i, a in enumerate(starts):
                while j < n and ends[j] <= a:
                    j += 1
                if i + 1 - j > peak:
                    peak = i + 1 - j
        s.live = peak
    gran = {SBUF: 64, PSUM: target.psum_bank_bytes}
    for s in sites:
        s.unit = _round(s.buffer_bytes, gran[s.space]) * s.live
    sites.sort(key=lambda s: s.first)
    for i, s in enumerate(sites):
        s.uid = i
    # The rule's query per site: trip count (declarations over the kernel, in sets of `live`), tiles, and as
    # reserve one set of every site declared after it while it lives; then the scoped placement
    # (kernels/api/alloc_rule.h plan_pools): one instance per scope iteration.
    from . import _emit

    c = _emit.core()
    q_sites, q_inst, inst_of = [], [], []
    first_inst = []
    # Sites split into runs (_runs): their instances before the split too, for the buffer counts (below).
    q_whole, whole_of, whole_scope, split, wholes = [], [], {}, False, []
    for i, s in enumerate(sites):
        s.scope, keys = _scope(trace, s)
        groups = _groups(s.storages, keys)
        s.instances = len(groups)
        whole = groups
        if "each run" in s.scope:
            split = True
            whole_scope[i] = "kernel" if "outside every nl loop" in s.scope else s.scope.split(", each run")[0]
            whole = _groups(s.storages, [k[0] if isinstance(k, tuple) else 0 for k in keys])
        first_inst.append((min((g[0], g[1]) for g in groups.values()), min((g[0], g[1]) for g in whole.values())))
        # The trip count: declarations (sets of `live`) over the kernel. The count is the site's (one logical
        # tensor over every iteration of its loops, kernels/api/alloc_rule.h); its scope bounds where it
        # lives, not how many buffers it rotates over.
        trip = -(-len(s.storages) // s.live)
        s.trip = trip
        for g in groups.values():
            q_inst.append((i, g[0], g[1]))
            inst_of.append(g[2])
        wholes.append(whole)
    if split:
        for i, whole in enumerate(wholes):
            for g in whole.values():
                q_whole.append((i, g[0], g[1]))
                whole_of.append(g[2])
    def queries(life):
        """The rule's query per site (and per site before the split into runs): the reserve is one set of each
        site first used after this one while its first pool instance (when the rule is asked) lives, or, with
        `life`, while any of its instances lives (the whole life of its logical tensor)."""
        q_sites, q_sites_whole = [], []
        for i, s in enumerate(sites):
            bufs = bufs_override if bufs_override is not None and s.trip > 1 else None
            space = c.MemSpace.SBUF if s.space == SBUF else c.MemSpace.PSUM
            for (_first, end), out in zip(first_inst[i], (q_sites, q_sites_whole) if split else (q_sites,)):
                reserve = sum(o.unit for o in sites[i + 1:] if o.space == s.space and o.first <= (s.last if life
                                                                                                  else end))
                out.append((space, s.partitions, s.buffer_bytes, s.trip, s.live, reserve, bufs))
        return q_sites, q_sites_whole

    if limits is None:
        limits = c.default_limits(c.Generation.Trn2)
    scopes = [(s.scope, s.instances) for s in sites]
    for life in (False, True):
        # The counts asked when each site's first pool instance starts; should the instances then not fit (a
        # site first used in a later scope iteration needs the space an earlier site's extra buffers hold:
        # tester23af F5), the counts asked with a reserve over each site's whole life, as the unsplit scopes
        # of a Python loop's runs give (_plan_runs): the same buffers whatever the loop's spelling.
        q_sites, q_sites_whole = queries(life)
        try:
            if split:
                choices, placement_of, placements, inst_of = _plan_runs(
                    c, limits, q_sites, q_inst, inst_of, q_whole, whole_of, sites, whole_scope, q_sites_whole)
            else:
                choices, placement_of, placements = c.plan_pools(limits, q_sites, q_inst)
            break
        except Exception as e:  # a site whose buffers do not fit: name it and its line
            msg = str(e)
            if "site " not in msg:
                raise
            if not life:
                for s, (scope, n) in zip(sites, scopes):  # (_plan_runs may have restored the unsplit scopes)
                    s.scope, s.instances = scope, n
                continue
            _no_fit(c, limits, sites, q_sites, q_inst, msg)
    for s, (bufs, reason) in zip(sites, choices):
        s.bufs, s.reason = bufs, reason
        s.pool_size = bufs * s.live
    pools = []
    for site_i, offsets, _after in placements:
        s = sites[site_i]
        s.placements += 1
        pools.append(Pool(s, offsets))
    # Buffers in rotation within a placement (it goes on across the scope iterations that keep it), skipping
    # buffers still held.
    rot = {}
    first_user = {}  # (pool, buffer) -> the storage that uses it first
    for k, sts in enumerate(inst_of):
        p = placement_of[k]
        pool = pools[p]
        n = pool.pool_size
        held_until, r, keys = rot.get(p) or ([-1] * n, 0, [(p, b) for b in range(n)])  # keys: the buffers' phys
        for st in sorted(sts, key=_by_first):
            first = st.first
            b = r % n
            if held_until[b] >= first:  # the next buffer in turn is held: the first free one after it
                for j in range(1, n):
                    b = (r + j) % n
                    if held_until[b] < first:
                        break
                else:
                    raise NkiError(f"{st.loc}: more tiles of this site alive at once than its {n} buffers",
                                   loc=st.loc)
            held_until[b] = st.last
            st.phys = pb = keys[b]
            first_user.setdefault(pb, st)
            r = b + 1
        rot[p] = (held_until, r, keys)
    after = {}
    held_before = {(p, b): prev for p, (_site, _offsets, afters) in enumerate(placements)
                   for b, prev in enumerate(afters)}

    def users(q, seen):
        """The storages of the buffers that held buffer q's space last: q's first user, or, for a buffer no
        tile used (a rotation a run of its site never reached), those of the buffers that held its space before
        it (the wait goes through it: its space was never written)."""
        out, todo = [], [q]
        while todo:
            q = todo.pop()
            o = first_user.get(q)
            if o is not None:
                out.append(o.uid)
                continue
            for h in held_before.get(q, ()):
                h = tuple(h)
                if h not in seen:
                    seen.add(h)
                    todo.append(h)
        return out

    for p, (_site, _offsets, afters) in enumerate(placements):
        for b, prev in enumerate(afters):
            st = first_user.get((p, b))
            if st is None or not prev:
                continue
            deps = after.setdefault(st.first, [])
            seen = set()
            for q in prev:
                q = tuple(q)
                seen.add(q)
                deps += users(q, seen)
    return Plan(sites, pools, after)
