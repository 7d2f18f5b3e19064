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

Inside `with nl.no_reorder():` (nki.compiler.no_reorder) loads keep their program position too, so the region's
instructions are issued in program order; loads after the region may still be issued earlier.

Dependencies are found on the physical buffers the allocation chose (_alloc), by partition and byte ranges,
and on HBM tensors by byte range; core_barrier and sendrecv are fences.
"""

from ._tensor import HBM


def order(trace, mode="pipelined", after=None):
    ops = trace.ops
    if trace.dropped:  # the ops between the dropped ones (few: memsets a matmul made useless), in slices
        kept, prev = [], 0
        for i in sorted(set(trace.dropped_at)):
            kept += ops[prev:i]
            prev = i + 1
        ops = kept + ops[prev:]
    if mode == "program_order":
        return _with_followers(trace, ops)
    from . import _emit

    # The rule runs in the bindings (trnsim._core.nki_schedule_ops, reading the Op objects) over the ops as
    # integers: each access is (storage uid, its rectangle), and buffer_of maps a storage to its history: its
    # physical buffer on chip (storages sharing one are one history), the tensor itself in HBM.
    # (An HBM tensor's key is its Storage: one history per tensor.)
    ids = {}  # history key -> its number, in order of first appearance
    buffer_of = [ids.setdefault(st.phys if st.space != HBM else st, len(ids)) for st in trace.storages]
    # `after` (the allocation plan's pool-to-pool dependencies): an op that first writes a buffer whose space
    # another site held waits for that holder's accesses, as if it also wrote the holder's whole buffer. Each
    # op's kind: 1 a load (op.load), 2 a fence (core_barrier, sendrecv), 0 any other.
    return _with_followers(trace, list(map(ops.__getitem__, _emit.core().nki_schedule_ops(ops, buffer_of,
                                                                                         after or {}))))


def _with_followers(trace, ops):
    """`ops` with each op's follower (a copy made for a retargeted result used again: _lower.materialize) right
    after it; the op lists the follower's accesses as its own, so the schedule moves them together."""
    f = trace.followers
    if not f:
        return ops
    out = []
    for op in ops:
        out.append(op)
        g = f.get(op.index)
        if g is not None:
            out.append(g)
    return out



class no_reorder:
    """Keeps the instructions made inside the block in program order (nki.language.no_reorder): the default
    schedule moves nothing but loads, so its loads are marked as other instructions are (they keep their
    program position). Also a loop's `directives=` (nl.sequential_range(n, directives=no_reorder())): the
    loop's instructions. Each engine already runs its instructions in the order issued; engines still overlap
    where no data dependency orders them, as on hardware (the block orders the compiler's schedule, it adds no
    synchronisation)."""

    def __enter__(self):
        from . import _trace

        self._trace = _trace.active()
        self._start = len(self._trace.ops) if self._trace is not None else 0
        return self

    def __exit__(self, *exc):
        keep_order(self._trace, self._start)
        return False


def keep_order(trace, start):
    """Marks the instructions `trace` made from `start` on as staying at their program position."""
    if trace is not None:
        for op in trace.ops[start:]:
            op.load = False
