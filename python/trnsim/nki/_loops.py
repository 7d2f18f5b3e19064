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
  at the reading line (the kernel still runs, in program order). Iteration 1 is checked against iteration 0:
  every iteration runs the same body, and two iterations keep the pass a small share of tracing. An associative accumulation is not such a
  dependency: a matmul accumulating into its PSUM dst, a DMA with accumulate, a tensor_tensor add / max / min
  / multiply whose dst is the region read (another region of the same tile is a carried value). A tile
  declared in iteration 0 that iteration 1 reads was carried by a variable rebound to it (`cur = nxt`).

The trace records each loop iteration as [first op, end op, kind, loop loc, loop id, iteration number]
(Trace.iters), and each storage the iterations it was declared in (Storage.scope, outermost first).
"""

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
    if op.name == "tensor_tensor" and v.st is dst.st and v.boff == dst.boff and v.dims == dst.dims and \
            v.p0 == dst.p0:  # the region written is the one read (another region of the tile is a carried value)
        alu = attrs.get("op")
        name = alu if isinstance(alu, str) else getattr(alu, "alu", None) or getattr(alu, "__name__", None)
        return name in _ASSOCIATIVE
    return False


def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _covered(rects, r):
    """True if the union of `rects` covers rectangle r (byte ranges of those spanning r's partitions)."""
    spans = sorted((q[2], q[3]) for q in rects if q[0] <= r[0] and r[1] <= q[1])
    pos = r[2]
    for lo, hi in spans:
        if lo > pos:
            break
        pos = max(pos, hi)
        if pos >= r[3]:
            return True
    return pos >= r[3]


def _carried(trace):
    """Iteration 1 of each nl.affine_range loop against its iteration 0: every iteration runs the same body,
    so a carried value shows there, and looking at two iterations keeps the pass a small share of tracing."""
    firsts = {}  # loop id -> [iteration 0, iteration 1]
    for r in trace.iters:
        if r[5] < 2 and r[2] == "affine_range" and r[1] is not None:
            firsts.setdefault(r[4], []).append(r)
    ops = trace.ops
    warned = set()
    for recs in firsts.values():
        if len(recs) < 2:
            continue
        it0, it1 = recs
        # storage uid -> rects iteration 0 wrote: of storages declared outside the loop, and of tiles declared
        # in iteration 0 itself, which iteration 1 reaches only through a variable rebound to them (`cur = nxt`)
        before = {}
        own0 = set()  # uids of the storages declared in iteration 0
        for op in ops[it0[0]:it0[1]]:
            for v in op.writes:
                st = v.st
                before.setdefault(st.uid, []).append(v.rect())
                if any(x is it0 for x in st.scope):
                    own0.add(st.uid)
        if not before:
            continue
        own = {}  # uid -> rects iteration 1 wrote so far
        for op in ops[it1[0]:it1[1]]:
            for v in op.reads:
                w = before.get(v.st.uid)
                if w is None:
                    continue
                r = v.rect()
                if not any(_overlap(q, r) for q in w) or _exempt(op, v) or _covered(own.get(v.st.uid, ()), r):
                    continue
                at = str(op.loc)
                if at in warned:
                    continue
                warned.add(at)
                how = ""
                if v.st.uid in own0:
                    how = (f" (declared at {v.st.loc} in iteration 0's body: a variable rebound to it, as in `cur = "
                           f"nxt`, carries it to the next iteration; NKI warns when a tensor variable is rebound "
                           f"to a new object: update one tensor declared before the loop with `cur[...] = ...`)")
                trace.kernel.warn(
                    at,
                    f"{op.name} in iteration 1 of the nl.affine_range loop at {it1[3]} reads {v.st!r}, which "
                    f"iteration 0 wrote{how}: a loop-carried dependency, which affine_range iterations must not "
                    f"have (the compiler may reorder or overlap them); use nl.sequential_range")
            for v in op.writes:
                if v.st.uid in before:
                    own.setdefault(v.st.uid, []).append(v.rect())
