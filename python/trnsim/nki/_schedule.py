"""The order in which a traced kernel's instructions are emitted: NKI's default schedule, or program order.

Default ("pipelined"): a load (a DMA from HBM into SBUF/PSUM) is issued as early as its dependencies allow,
right after the last earlier instruction that touches the buffer it writes (or writes what it reads), and never
ahead of an earlier load; every other instruction keeps its program position. With tiles declared in loops
rotating over two buffers, this issues iteration i + 1's loads ahead of iteration i's compute and stores, the
software pipelining the Neuron compiler's scheduler gives the published tutorial, vector-add and transpose
kernels (their profiles show one iteration's compute overlapping the next one's loads), and the order the C++
calibration ports emit with pipelined_loop (kernels/api/schedule.h).
"program_order": nothing moves (a kernel compiled with the scheduler off, e.g. nki-autotune's
`--enable-instruction-scheduling=false`).

Dependencies are found on the physical buffers the allocation chose (_alloc), by partition and byte ranges,
and on HBM tensors by byte range; core_barrier and sendrecv are fences.
"""

from ._tensor import HBM

_KEEP = 16  # accesses remembered per buffer; older ones fold into a floor (conservative)


def _key(v):
    st = v.st
    if st.space == HBM:
        return ("h", st.uid)
    return st.phys


def _rect(v):
    return v.rect()


def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _after(anchor, h, rect):
    """The latest access in history list h overlapping rect, if later than anchor."""
    if anchor is not None and h[2] <= anchor:
        return anchor  # nothing in h is later
    if h[0] is not None and (anchor is None or h[0] > anchor):
        anchor = h[0]
    a0, a1, a2, a3 = rect
    for ok, (b0, b1, b2, b3) in h[1]:
        if a0 < b1 and b0 < a1 and a2 < b3 and b2 < a3 and (anchor is None or ok > anchor):
            anchor = ok
    return anchor


def _note(h, key, rect):
    lst = h[1]
    lst.append((key, rect))
    if key > h[2]:
        h[2] = key
    if len(lst) > _KEEP:
        old = lst.pop(0)[0]
        if h[0] is None or old > h[0]:
            h[0] = old


def order(trace, mode="pipelined"):
    ops = [op for op in trace.ops if not op.attrs.get("dropped")]
    if mode == "program_order":
        return ops
    writes = {}  # buffer key -> [floor key, [(key, rect), ...]] of writes
    reads = {}  # the same for reads
    last_load = None
    fence = None
    keys = []
    n = 0
    for op in ops:
        r_acc = [(v.st.phys if v.st.space != HBM else ("h", v.st.uid), v.rect()) for v in op.reads]
        w_acc = [(v.st.phys if v.st.space != HBM else ("h", v.st.uid), v.rect()) for v in op.writes]
        if op.load:
            anchor = last_load
            if fence is not None and (anchor is None or fence > anchor):
                anchor = fence
            for bk, rect in r_acc:  # read after write
                h = writes.get(bk)
                if h is not None:
                    anchor = _after(anchor, h, rect)
            for bk, rect in w_acc:  # write after write, write after read
                h = writes.get(bk)
                if h is not None:
                    anchor = _after(anchor, h, rect)
                h = reads.get(bk)
                if h is not None:
                    anchor = _after(anchor, h, rect)
            n += 1
            key = (anchor + (n,)) if anchor is not None else (-1, n)
            last_load = key
        else:
            key = (op.index,)
            if op.name in ("core_barrier", "sendrecv"):
                fence = key
        for bk, rect in r_acc:
            h = reads.get(bk)
            if h is None:
                h = reads[bk] = [None, [], ()]
            _note(h, key, rect)
        for bk, rect in w_acc:
            h = writes.get(bk)
            if h is None:
                h = writes[bk] = [None, [], ()]
            _note(h, key, rect)
        keys.append(key)
    idx = sorted(range(len(ops)), key=keys.__getitem__)
    return [ops[i] for i in idx]
