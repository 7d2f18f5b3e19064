"""NKI's rules on loops, checked on a traced kernel (docs/nki.md, "Loops"):

- A tensor declared in the body of an nl.affine_range or nl.sequential_range loop belongs to that body: a
  local variable naming it used after the loop is NKI's err_local_variable_used_out_of_scope, an error at
  the line that uses it. Tiles the body put in a list (or tuple, dict) made before the loop may be used
  after it (the NKI block-dimension migration guide's pattern; examples/nki/nki_tutorial_matmul.py), so a
  tile that such a container holds when the loop ends is not refused. A static_range body is unrolled while
  tracing and makes no scope of its own.
- The iterations of an nl.affine_range loop have no loop-carried dependency (NKI's affine_range and
  sequential_range docs: the compiler may reorder or pipeline them, and a carried dependency "could lead to
  numerical errors"): an iteration that reads what an earlier iteration of the same loop wrote, or writes what
  an earlier one read, gets a warning at that line (the kernel still runs, in program order); _carried says
  which iterations are checked. An associative accumulation is not such a dependency: a matmul accumulating
  into its PSUM dst, a DMA with accumulate, a tensor_tensor add / max / min / multiply whose dst is the region
  read (another region of the same tile is a carried value). A tile declared in one iteration that a later
  one reads was carried by a variable rebound to it (`cur = nxt`).

The trace records each loop iteration as [first op, end op, kind, loop loc, loop id, iteration number, first
storage uid, depth, the enclosing iterations' records] (Trace.iters), and each storage the iterations it was declared in (Storage.scope, outermost first).
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
    from ._tensor import NkiTensor, storage_of

    containers = None
    for name, value in frame.f_locals.items():
        if isinstance(value, NkiTensor):
            st = storage_of(value)
            if st.scope and any(x[4] == loop for x in st.scope):
                if containers is None:
                    containers = [v for v in frame.f_locals.values() if isinstance(v, (list, tuple, dict))]
                trace.escaped[st.uid] = (name, containers)


def _held(st, containers):
    """True if a container (two levels deep: a list of lists of tiles) holds a view of the storage."""
    from ._tensor import NkiTensor, storage_of

    for c in containers:
        for item in (c.values() if isinstance(c, dict) else c):
            for v in (item if isinstance(item, (list, tuple)) else (item,)):
                if isinstance(v, NkiTensor) and storage_of(v) is st:
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
    storages = trace.storages
    for uid in sorted(escaped):  # (in the storages' order; only those a variable named after their loop)
        st = storages[uid] if uid < len(storages) else None  # (None: an earlier kernel's, kept in a global)
        if st is None or not st.scope or st.first < 0:
            continue
        rec = _body(st)
        if rec is None or rec[1] is None or st.last < rec[1] or _held(st, escaped[st.uid][1]):
            continue
        for op in ops[rec[1]: st.last + 1]:
            if any(v.st is st for v in op.reads) or any(v.st is st for v in op.writes):
                name, label = escaped[st.uid][0], st.label(at=False)
                raise NkiError(
                    f"{label if f' {name} ' in label else repr(name) + ', ' + label} declared at {st.loc} in the "
                    f"body of the nl.{rec[2]} loop at "
                    f"{rec[3]}, is used after that loop: a tensor declared in a loop body belongs to it (NKI's "
                    f"err_local_variable_used_out_of_scope); declare it before the loop", loc=op.loc)


def _exempt(op, v):
    """A read that is half of an associative accumulation into v (not a loop-carried dependency)."""
    attrs = op.attrs
    if attrs.get("loop_reduce") is v.st:  # nl.loop_reduce: the reduction the kernel declared across its loops
        return True
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


def _first_overlap(recorded, r):
    """The iteration of the first (view or rect, iteration) in `recorded` overlapping rectangle r, or None (a
    view's rect is taken here: most of what an iteration reads is never compared)."""
    for q, n in recorded:
        if _overlap(q if type(q) is tuple else q.rect(), r):
            return n
    return None


def _carried(trace):
    """Iterations 0 to _CHECKED - 1 and the last of each nl.affine_range loop, each against the earlier ones
    checked: a read of what an earlier iteration wrote (read after write, of any lag), and a write of what an
    earlier iteration read before writing it itself (write after read: `acc[:, i] = acc[:, i + 1] + 1`).
    Every iteration runs the same body up to the branches on the loop index, and a branch mostly singles out
    the first or the last iterations: checking those keeps the pass a small share of tracing. A region an
    iteration writes before reading it is its own (scratch each iteration reuses is no dependency), unless
    it wrote it by accumulating into it (the sum so far is carried); a read that is half of an associative
    accumulation is no dependency (_exempt). A tensor declared in the iteration's body is its own; one
    declared in an earlier iteration's body is reached only through a variable rebound to it, and reading it
    is a dependency. An elementwise call that reads an earlier iteration's elements into a tile of this
    iteration's body (an unmasked compute over a scratch tile whose tail a masked load left stale) carries
    them only if a later call of the iteration reads the elements they made (_stale): a tail the masked store
    drops is no dependency. One warning per loop and tensor, and per line. A loop nested in an
    nl.affine_range iteration left unchecked is checked only if its instructions (their kernel lines, in
    order, and its trip count) differ from those of every instance of that loop checked so far: the same
    body as a checked one gives the same warnings at the same lines, while a branch on the outer index that
    singles out a middle outer iteration gives another body, which may carry a value."""
    loops = {}  # loop id -> its iteration records, in order (an outer loop before the loops in its body)
    for r in trace.iters:
        if r[2] == "affine_range" and r[1] is not None:
            loops.setdefault(r[4], []).append(r)
    ops = trace.ops
    warned = set()
    unchecked = set()  # ids of the iteration records of the loops above that were not checked
    bodies = set()  # (loop line, trip count, its instructions' lines) of the nested loop instances checked
    for loop, recs in loops.items():
        if len(recs) < 2:
            continue
        nested = recs[0][7] > 0
        if nested:
            body = (recs[0][3], len(recs), tuple([o.loc for o in ops[recs[0][0]:recs[-1][1]]]))
            if unchecked and body in bodies and any(id(e) in unchecked for e in recs[0][8]):
                unchecked.update(id(r) for r in recs)
                continue
            bodies.add(body)
        if len(recs) > _CHECKED + 1:
            unchecked.update(id(r) for r in recs[_CHECKED:-1])
        first, depth = recs[0][6], recs[0][7]  # storages made before `first` were declared before the loop
        written = {}  # storage uid -> [(rect, iteration)] the earlier iterations checked wrote
        exposed = {}  # storage uid -> [(view or rect, iteration)] they read before writing it themselves
        said = set()  # storages warned about in this loop

        def carried_read(op, st, it, n, m, body):
            """The warning for `op` of iteration n reading storage st, which iteration m wrote."""
            if st.uid in said or str(op.loc) in warned:
                return
            said.add(st.uid)
            warned.add(str(op.loc))
            how = ""
            if body is not None:
                how = (f" (declared at {st.loc} in iteration {m}'s body: a variable rebound to it, as in "
                       f"`cur = nxt`, carries it to the next iteration; NKI warns when a tensor variable is "
                       f"rebound to a new object: update one tensor declared before the loop with "
                       f"`cur[...] = ...`)")
            trace.kernel.warn(
                str(op.loc),
                f"{called(op)} in iteration {n} of the nl.affine_range loop at {it[3]} reads "
                f"{st.label(at=body is None)}, which iteration {m} wrote{how}: {_RULE}")

        for it in (recs[:_CHECKED] + recs[-1:] if len(recs) > _CHECKED else recs):
            n = it[5]
            own = {}  # uid -> rects this iteration wrote so far, other than by accumulating into them
            wrote = {}  # uid -> rects this iteration wrote
            reads = {}  # uid -> views (or rects) it read before writing them
            stale = {}  # uid of a tile of this body -> [(rect, warning)]: made from an earlier iteration's elements
            for op in ops[it[0]:it[1]]:
                accumulated = None  # the storage this op accumulates into (what it holds then is carried)
                for v in op.reads:
                    st = v.st
                    uid = st.uid
                    body = None  # the iteration of this loop whose body declared it
                    if uid >= first:
                        if stale and uid in stale:
                            _stale(op, v, stale, it, depth, carried_read)
                        sc = st.scope  # (a PSUM block made when first used has its tensor's scope)
                        if len(sc) > depth:
                            b = sc[depth]
                            if b is it:
                                continue
                            if b[4] == loop:
                                body = b[5]
                    mine = own.get(uid)
                    r = None
                    if mine is not None:
                        r = v.rect()
                        if _covered(mine, r):
                            continue
                    if _exempt(op, v):
                        accumulated = uid
                        continue
                    if body is not None:
                        carried_read(op, st, it, n, body, body)
                        continue
                    reads.setdefault(uid, []).append(v if r is None else r)
                    w = written.get(uid)
                    if w is None:
                        continue
                    gaps = _gaps(mine, r) if mine is not None else None  # what it reads of earlier iterations
                    m = _first_overlap(w, r or v.rect()) if gaps is None else min(
                        (k for k in (_first_overlap(w, g) for g in gaps) if k is not None), default=None)
                    if m is None:
                        continue
                    if gaps is None or not _into_body(op, v, stale, it, depth, gaps, (op, st, it, n, m)):
                        carried_read(op, st, it, n, m, None)
                for v in op.writes:
                    st = v.st
                    uid = st.uid
                    if uid >= first:
                        sc = st.scope
                        if len(sc) > depth and (sc[depth] is it or sc[depth][4] == loop):
                            continue  # declared in this iteration's body (or an earlier one's: reads say it)
                    r = v.rect()
                    wrote.setdefault(uid, []).append(r)
                    if uid != accumulated:
                        own.setdefault(uid, []).append(r)
                    e = exposed.get(uid)
                    if e is None or uid in said:
                        continue
                    m = _first_overlap(e, r)
                    if m is None or str(op.loc) in warned:
                        continue
                    said.add(uid)
                    warned.add(str(op.loc))
                    trace.kernel.warn(
                        str(op.loc),
                        f"{called(op)} in iteration {n} of the nl.affine_range loop at {it[3]} writes {st!r}, which "
                        f"iteration {m} read (write after read: iteration {m} must not see it): {_RULE}")
            for uid, rects in wrote.items():
                written.setdefault(uid, []).extend((q, n) for q in rects)
            for uid, views in reads.items():
                exposed.setdefault(uid, []).extend((q, n) for q in views)


_ELEMENTWISE = ("activation", "tensor_scalar", "tensor_tensor", "tensor_copy")


def _gaps(rects, r):
    """The parts of rectangle r that the union of `rects` (those spanning r's partitions) leaves uncovered."""
    spans = sorted((q[2], q[3]) for q in rects if q[0] <= r[0] and r[1] <= q[1])
    out = []
    pos = r[2]
    for lo, hi in spans:
        if lo >= r[3]:
            break
        if lo > pos:
            out.append((r[0], r[1], pos, lo))
        pos = max(pos, hi)
    if pos < r[3]:
        out.append((r[0], r[1], pos, r[3]))
    return out


def _dense(v):
    """True if v's free dims are one row-major run of elements (a tile, or whole rows of one)."""
    step = 1
    for d in range(len(v.dims) - 1, -1, -1):
        if d != v.pd:
            s, k = v.dims[d]
            if k != 1 and s != step:
                return False
            step *= k
    return True


def _into_body(op, v, stale, it, depth, rects, warning):
    """If `op` computes elementwise from view v into a dense tile declared in iteration `it`'s body, marks
    the elements it makes from the rectangles `rects` of v as stale (with the warning to give if a later op
    reads them) and returns True; else False (the caller warns now)."""
    if op.name not in _ELEMENTWISE or len(op.writes) != 1:
        return False
    w = op.writes[0]
    sc = w.st.scope
    if w.shape != v.shape or not (len(sc) > depth and sc[depth] is it) or not _dense(v) or not _dense(w):
        return False
    iv, iw = v.dtype.itemsize, w.dtype.itemsize
    d = w.p0 - v.p0
    out = stale.setdefault(w.st.uid, [])
    for r in rects:
        out.append(((r[0] + d, r[1] + d, w.boff + (r[2] - v.boff) // iv * iw, w.boff + (r[3] - v.boff) // iv * iw),
                    warning))
    return True


def _stale(op, v, stale, it, depth, carried_read):
    """`op` reads view v of a tile of this iteration's body, some of whose elements were made from an earlier
    iteration's (`stale`): the elements it makes from them are stale in turn (_into_body), or, if op is no
    elementwise call into such a tile, the read carries the earlier iteration's value: that warning."""
    r = v.rect()
    hit = [(q, wn) for q, wn in stale[v.st.uid] if _overlap(q, r)]
    if not hit:
        return
    parts = [(max(q[0], r[0]), min(q[1], r[1]), max(q[2], r[2]), min(q[3], r[3])) for q, _ in hit]
    if not _into_body(op, v, stale, it, depth, parts, hit[0][1]):
        carried_read(*hit[0][1], None)


_CHECKED = 3  # leading iterations of an nl.affine_range loop _carried checks (and the last)
_RULE = ("a loop-carried dependency, which affine_range iterations must not have (the compiler may reorder or "
         "overlap them); use nl.sequential_range")


def called(op):
    """How a message names instruction `op`: the kernel's call at its line that made it, with the instruction
    when they differ ("nl.load (dma_copy)"), read from the source: the one nl.* / nisa.* call of the line
    named as the instruction or whose lowering (its docstring) names it; else the instruction's name."""
    import ast

    from . import isa, language
    from ._tensor import _statement_at

    node = _statement_at(op.loc[0], op.loc[1]) if op.loc else None
    if node is None:
        return op.name
    found = []
    for c in ast.walk(node):
        f = c.func if isinstance(c, ast.Call) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            obj = getattr(language, f.attr, None) or getattr(isa, f.attr, None)
            if f.attr == op.name or obj is not None and f"nisa.{op.name}" in (getattr(obj, "__doc__", "") or ""):
                found.append(f"{f.value.id}.{f.attr}")
    if len(found) != 1 or found[0].endswith("." + op.name):
        return op.name
    return f"{found[0]} ({op.name})"


def user_call(op, trace):
    """The kernel's call at instruction `op`'s line when a lowering made op for it (nl.add, whose partition
    broadcast copies a PSUM row out with a tensor_copy): the nl.* call that made it (trace.calls), else the one
    nl.* / nisa.* call or tile operator of the line's statements, if it is not the instruction itself; else None
    (also when one of several is the instruction: `d = nl.ndarray(...); nisa.activation(dst=d, ...)` was "nl.ndarray:
    its activation (made by trnsim's lowering of nl.ndarray)", tester23al F4)."""
    import ast

    from . import isa, language
    from ._tensor import _OPERATORS, _statements_at

    spans = [c for c in trace.calls if c[0] <= op.index < c[1]]
    if spans:
        name = min(spans, key=lambda c: c[1] - c[0])[2]
        return None if name == op.name else f"nl.{name}"
    nodes = _statements_at(op.loc[0], op.loc[1]) if op.loc else ()
    found = set()
    for c in (c for node in nodes for c in ast.walk(node)):
        f = c.func if isinstance(c, ast.Call) else None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and (
                hasattr(language, f.attr) or hasattr(isa, f.attr)):
            found.add(f"{f.value.id}.{f.attr}")
        elif isinstance(c, (ast.BinOp, ast.UnaryOp, ast.AugAssign)):
            name = _OPERATORS.get(type(c.op).__name__)
            if name is not None:
                found.add(f"nl.{name}")
    if len(found) != 1 or any(call.endswith("." + op.name) for call in found):
        return None
    (call,) = found
    return call
