"""NKI's rules on loops, checked on a traced kernel (docs/nki.md, "Loops"):

- A tensor declared in the body of an nl.affine_range or nl.sequential_range loop belongs to that body: a
  local variable naming it used after the loop is NKI's err_local_variable_used_out_of_scope, an error at
  the line that uses it. Tiles the body put in a list (or tuple, dict) made before the loop may be used
  after it (the NKI block-dimension migration guide's pattern; examples/nki/nki_tutorial_matmul.py), so a
  tile that such a container holds when the loop ends is not refused. A static_range body is unrolled while
  tracing and makes no scope of its own.
- The iterations of an nl.affine_range loop have no loop-carried dependency (NKI's affine_range and
  sequential_range docs: the compiler may reorder or pipeline them, and a carried dependency "could lead to
  numerical errors"): an iteration that reads what an earlier iteration of the same loop wrote gets a warning
  at the reading line (the kernel still runs, in program order). An associative accumulation is not such a
  dependency: a matmul accumulating into its PSUM dst, a DMA with accumulate, a tensor_tensor add / max / min
  / multiply whose dst is the operand read.

The trace records each loop iteration as [first op, end op, kind, loop loc, loop id, iteration number]
(Trace.iters), and each storage the iterations it was declared in (Storage.scope, outermost first).
"""

import bisect

from ._errors import NkiError

_SCOPED = ("affine_range", "sequential_range")
_ASSOCIATIVE = ("add", "maximum", "minimum", "multiply")


def check(trace):
    """Raises NkiError for a tensor used outside its loop body; warns (trace.kernel.warn) at each line
    reading a value an earlier iteration of the same nl.affine_range loop wrote."""
    if not getattr(trace, "iters", None):
        return
    _out_of_scope(trace)
    _carried(trace)


def note_exit(trace, loop, frame):
    """At the end of the nl.affine_range / sequential_range loop `loop` (its first Trace.iters index), run in
    `frame`: each tile declared in its body that a local variable still names, with the containers (lists,
    tuples, dicts) the frame's locals hold then (trace.escaped; looked into only if the tile is used after
    the loop, so a loop's end costs a pass over the local names)."""
    from ._tensor import NkiTensor

    containers = None
    for name, value in frame.f_locals.items():
        if isinstance(value, NkiTensor):
            st = value.st
            if st.scope and any(x[4] == loop for x in st.scope):
                if containers is None:
                    containers = [v for v in frame.f_locals.values() if isinstance(v, (list, tuple, dict))]
                trace.escaped[st.uid] = (name, containers)


def _held(st, containers):
    """True if a container (two levels deep: a list of lists of tiles) holds a view of the storage."""
    from ._tensor import NkiTensor

    for c in containers:
        for item in (c.values() if isinstance(c, dict) else c):
            for v in (item if isinstance(item, (list, tuple)) else (item,)):
                if isinstance(v, NkiTensor) and v.st is st:
                    return True
    return False


def _body(st):
    """The innermost affine/sequential iteration record the storage was declared in, or None."""
    for rec in reversed(st.scope):
        if rec[2] in _SCOPED:
            return rec
    return None


def _out_of_scope(trace):
    ops = trace.ops
    escaped = trace.escaped
    for st in trace.storages:
        if not st.scope or st.first < 0 or st.uid not in escaped:
            continue
        rec = _body(st)
        if rec is None or rec[1] is None or st.last < rec[1] or _held(st, escaped[st.uid][1]):
            continue
        for op in ops[rec[1]: st.last + 1]:
            if any(v.st is st for v in op.reads) or any(v.st is st for v in op.writes):
                raise NkiError(
                    f"'{escaped[st.uid][0]}', {st!r} declared at {st.loc} in the body of the nl.{rec[2]} loop at "
                    f"{rec[3]}, is used after that loop: a tensor declared in a loop body belongs to it (NKI's "
                    f"err_local_variable_used_out_of_scope); declare it before the loop", loc=op.loc)


def _exempt(op, v):
    """A read that is half of an associative accumulation into v (not a loop-carried dependency)."""
    attrs = op.attrs
    dst = op.args.get("dst")
    if dst is None:
        return False
    if attrs.get("accumulate") and v is dst:
        return True
    if op.name == "tensor_tensor" and v.st is dst.st:
        alu = attrs.get("op")
        name = alu if isinstance(alu, str) else getattr(alu, "alu", None) or getattr(alu, "__name__", None)
        return name in _ASSOCIATIVE
    return False


def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _carried(trace):
    iters = [r for r in trace.iters if r[2] == "affine_range" and r[1] is not None and r[1] > r[0]]
    if not iters:
        return
    # Only a storage accessed on both sides of the start of a later iteration can carry a value: the others
    # (most: tiles declared and used in one body) are not looked at again.
    starts = sorted(r[0] for r in iters if r[5] > 0)
    cand = set()
    for st in trace.storages:
        if st.first >= 0:
            j = bisect.bisect_right(starts, st.first)
            if j < len(starts) and starts[j] <= st.last:
                cand.add(st.uid)
    if not cand:
        return
    ops = trace.ops
    stack = []  # the affine iterations op i is in, outermost first
    k = 0
    written = {}  # (loop id, storage uid) -> [bounding rect, [(iteration, rect), ...]]
    warned = set()
    for i in range(iters[0][0], len(ops)):
        while stack and stack[-1][1] <= i:
            stack.pop()
        while k < len(iters) and iters[k][0] <= i:
            rec = iters[k]
            k += 1
            while stack and stack[-1][1] <= rec[0]:
                stack.pop()
            if rec[1] > i:
                stack.append(rec)
        if not stack:
            if k >= len(iters):
                break
            continue
        op = ops[i]
        if not any(v.st.uid in cand for v in op.reads) and not any(v.st.uid in cand for v in op.writes):
            continue
        for rec in stack:
            loop, n = rec[4], rec[5]
            for v in op.reads:
                st = v.st
                if n == 0 or st.uid not in cand or any(x is rec for x in st.scope):
                    continue
                w = written.get((loop, st.uid))
                if w is None or not _overlap(w[0], v.rect()) or _exempt(op, v):
                    continue
                r = v.rect()
                first = next((j for j, wr in w[1] if j < n and _overlap(wr, r)), None)
                at = str(op.loc)
                if first is None or at in warned:
                    continue
                warned.add(at)
                trace.kernel.warn(
                    at,
                    f"{op.name} in iteration {n} of the nl.affine_range loop at {rec[3]} reads {st!r}, which "
                    f"iteration {first} wrote: a loop-carried dependency, which affine_range iterations must "
                    f"not have (the compiler may reorder or overlap them); use nl.sequential_range")
            for v in op.writes:
                st = v.st
                if st.uid not in cand or any(x is rec for x in st.scope):
                    continue
                r = v.rect()
                w = written.get((loop, st.uid))
                if w is None:
                    written[(loop, st.uid)] = [r, [(n, r)]]
                else:
                    # What this write covers, earlier iterations no longer hold (a tile declared outside the
                    # loop and overwritten whole each iteration carries nothing).
                    w[1] = [(j, wr) for j, wr in w[1] if not (r[0] <= wr[0] and wr[1] <= r[1] and r[2] <= wr[2]
                                                                and wr[3] <= r[3])]
                    b = w[0]
                    w[0] = (min(b[0], r[0]), max(b[1], r[1]), min(b[2], r[2]), max(b[3], r[3]))
                    w[1].append((n, r))
