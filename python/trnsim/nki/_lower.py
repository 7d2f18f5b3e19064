"""nki.language's conveniences lowered to the instructions of _ops, and the glue both calling styles share:
results of the earlier style (`fresh` tiles, written in place by `t[...] = value`), masks, ALU and activation
names of the functions kernels pass as `op=`.

Each nl.* lowering is the instruction sequence the NKI documentation describes for the call (the page is
named at each function and in docs/nki.md); where the documentation leaves an engine to the compiler, the
engine is _ops.DEFAULT_ENGINE's.
"""

import itertools

import numpy as np

from . import _ops
from . import _tensor
from . import _trace
from . import _void
from ._dtypes import BY_NAME, as_dtype, modelled, result_dtype, weak_dtype
from ._errors import NkiError, caller_loc, unsupported
from ._index import AffinePredicate, IndexExpr, Mask, UnmodelledMask
from ._tensor import _WHOLE, HBM, PSUM, SBUF, BlockTensor, LoadPart, NkiTensor, Unbounded, indexed_rows

F32 = BY_NAME["float32"]

# ---- operator names


_NP_ALU = {
    np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
    np.maximum: "maximum", np.minimum: "minimum", np.power: "power", np.equal: "equal",
    np.not_equal: "not_equal", np.greater: "greater", np.greater_equal: "greater_equal", np.less: "less",
    np.less_equal: "less_equal", np.logical_and: "logical_and", np.logical_or: "logical_or",
    np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or", np.bitwise_xor: "bitwise_xor",
    np.left_shift: "left_shift", np.right_shift: "right_shift", np.abs: "abs",
    # NumPy's reductions as reduce operators (NKI's Stable Diffusion attention tutorial: tensor_reduce(np.max, ...);
    # nki-samples' contributed pipelined attention: tensor_reduce(np.sum, ...)).
    np.max: "maximum", np.min: "minimum", np.amax: "maximum", np.amin: "minimum", np.sum: "add",
}
_NP_ACT = {
    np.exp: "exp", np.log: "log", np.tanh: "tanh", np.sqrt: "sqrt", np.square: "square", np.abs: "abs",
    np.sign: "sign", np.reciprocal: "reciprocal", np.sin: "sin", np.cos: "cos", np.arctan: "arctan",
    np.floor: "floor", np.ceil: "ceil", np.trunc: "trunc",
    np.copy: "copy",  # (nki-samples' contributed pipelined attention: nisa.activation(np.copy, ..., scale=...))
}


# Unary operators NKI's math operator table lists for the ALU (nki.api.shared: "Reverse Square Root ...
# nki.language.rsqrt"; its engine-selection notes run nisa.tensor_scalar(op0=nl.rsqrt, operand0=0.0) on GpSimd)
# that the simulator's ALU does not have: the instruction that computes each instead.
_UNARY_ALU = {"rsqrt": "nisa.activation(op=nl.rsqrt) on the Scalar engine",
              "reciprocal": "nisa.reciprocal (Vector engine) or nisa.activation(op=nl.reciprocal)"}


def alu_name(op, call):
    name = getattr(op, "alu", None)
    if name is None:
        name = _NP_ALU.get(op)
    if name is None and isinstance(op, str):
        name = op
    act = getattr(op, "act", None)
    if name is None and act in _UNARY_ALU:
        unsupported(f"nl.{act} as an ALU operator of nki.isa.{call}", f"the simulator's ALU has no {act}; use "
                    f"{_UNARY_ALU[act]}")
    if name is None:
        raise NkiError(f"{call}: {getattr(op, '__name__', op)!r} is not an ALU operator (nl.add, nl.multiply, "
                       "nl.maximum, ...)")
    return name


def act_name(op, call):
    name = getattr(op, "act", None)
    if name is None:
        name = _NP_ACT.get(op)
    if name is None and isinstance(op, str):
        name = op
    if name is None:
        raise NkiError(f"{call}: {getattr(op, '__name__', op)!r} is not an activation function trnsim models "
                       "(identity, copy, exp, log, silu, gelu, gelu_apprx_tanh, sigmoid, tanh, relu, square, "
                       "sqrt, rsqrt, reciprocal, abs, sign, sin, cos, arctan, erf, erf_dx, softplus, mish, gelu_dx, "
                       "silu_dx, floor, ceil, trunc)")
    return name


def dt(dtype, default):
    if dtype is None:
        if default is None:
            raise NkiError("a dtype is needed")
        return default
    return modelled(as_dtype(dtype))


def promote(*xs):
    """The result dtype of an elementwise call of tiles and numbers xs (_dtypes.result_dtype; a number's
    dtype is _dtypes.weak_dtype's: `int8 tile + 2` is int32, `bfloat16 tile * 0.5` float32)."""
    return result_dtype(*[x.dtype if isinstance(x, NkiTensor) else weak_dtype(x) for x in xs
                          if x is not None])


def reduced_shape(data, axis, keepdims):
    return tuple(1 if d is None else data.shape[d] for d in reduced_dims(data.ndim, axis, keepdims))


def reduced_dims(nd, axis, keepdims):
    """The data dim each dim of a reduction's result comes from (None: a reduced dim kept as 1)."""
    from ._index import _const

    if _const(axis) is not None:
        axis = (axis,)
    axis = {int(a) + nd if a < 0 else int(a) for a in axis}
    return tuple(None if i in axis else i for i in range(nd) if keepdims or i not in axis)


# ---- results of the earlier calling style


def fresh(v):
    """Marks `v` (a new tile just written by the trace's last op) as an instruction's result: assigning it
    into a tensor retargets that op instead of copying (`t[...] = nl.exp(x)` is one activation)."""
    t = _trace.current()
    if t.voiding is None:  # (a call emitting nothing made no op: _void)
        t.fresh[v.st.uid] = t.ops[-1]
    return v


def _fresh_op(v):
    t = _trace._current or _trace.current()
    op = t.fresh.get(v.st.uid)
    if op is None or t.ops[-1] is not op or op.attrs.get("dropped"):
        return None
    w = op.args.get("dst")
    if w is None or w.st is not v.st:
        return None
    if v.boff != w.boff or v.dims != w.dims or v.p0 != w.p0:
        return None
    return op


def _retarget(op, old, new, at=0):
    """Makes `op` write `new` instead of its fresh result tile `old` (`at`: the kernel line of the assignment
    that does it, 0: the caller's, None: `+=` accumulated it). `old` keeps no tile unless the kernel uses it
    again: then materialize() gives it its values."""
    t = _trace._current or _trace.current()
    op.args["dst"] = new
    w = op.writes
    op.writes = (new,) if len(w) == 1 and w[0] is old else tuple([new if x is old else x for x in w])
    if t.held:
        note_writes(t, (new,))
    r = op.reads
    read = False  # (whether op read its own result: materialize() puts it back)
    for x in r:
        if x is old:
            op.reads = tuple([new if y is old else y for y in r])
            read = True
            break
    st = new.st
    if st.first < 0 or st.first > op.index:
        st.first = op.index
    st.last = max(st.last, op.index)
    old.st.first = old.st.last = -1  # not used (yet): no buffer
    # Only what materialize() needs, and no view of old's when old is its whole tile, the usual case: kept
    # alive to the trace's end, each retarget's tuples made Python's collector walk 4 % more. (`+=`'s result
    # is never materialized: nothing to check.)
    part = None
    if at is not None:
        ost = old.st
        whole = _WHOLE.get((False, ost.shape, ost.pdim, ost.dtype.itemsize))  # (NkiTensor.whole's dims)
        if whole is None or old.dims != whole[0] or old.boff or old.p0 or old.pd != ost.pdim or (
                old.dtype is not ost.dtype):
            part = old
    old.st.moved_to = (new, op, caller_loc() if at == 0 else at, read, part)
    t.fresh.pop(old.st.uid, None)


def materialize(t, st, by=None):
    """`st` is the tile of a result `c[...] = m` retargeted to write c (_retarget), used again: NKI's
    assignment copies, so m keeps its values. The retargeted op gets a follower, emitted right after it
    (Trace.followers; _schedule.order puts it there): the op writes m's tile again, as recorded, and a
    tensor_copy copies it into c (the copy the assignment would have made; c may have another dtype); a
    matmul keeps writing c and the follower is the same matmul into m's tile. Later writes to c come after
    both, so m holds the op's values whatever the kernel writes into c.
    Returns the op's index, m's first access. A result `+=` accumulated into PSUM is an NkiError: its product
    exists nowhere on its own (`by`: the op using it, for the message)."""
    new, op, at, read, part = st.moved_to
    if at is None:
        raise NkiError(f"{by.name + ': ' if by else ''}uses {st.label(at=False)}, the result of {op.name} at line "
                       f"{op.loc[1] if op.loc else '?'}, which `+=` accumulated straight into "
                       f"{new.st.label(at=False)}: no tile holds its product alone (the matmul added it into the "
                       f"accumulation); to use it, compute it into a tile of its own and add that tile",
                       by.loc if by else caller_loc())
    st.moved_to = None
    old = NkiTensor.whole(st) if part is None else part  # the op's fresh result
    if op.name in ("nc_matmul", "nc_matmul_mx"):
        # The PE computes the product again into m's tile (its own PSUM accumulation group: its touch when
        # recorded still stands, so `m += nl.matmul(...)` continues it), and c keeps the group the op opened:
        # a copy into c would make `c += nl.matmul(...)` add onto a value a non-matmul instruction wrote,
        # which nki.isa.nc_matmul calls undefined on NeuronCore-v2/-v3.
        f = _trace.Op(op.name, dict(op.args, dst=old), op.reads, (old,), dict(op.attrs, accumulate=False),
                      at or op.loc, op.index)
        t.followers[op.index] = f
        st.first = op.index
        return op.index
    dst, src = new, old
    op.args["dst"] = old
    op.writes = tuple([old if x is new else x for x in op.writes]) + (new,)
    if read:
        op.reads = tuple([old if x is new else x for x in op.reads])
    dst, src = _ops.tile(dst, "dst", "tensor_copy"), _ops.tile(src, "src", "tensor_copy")
    f = _trace.Op("tensor_copy", {"dst": dst, "src": src}, (src,), (dst,),
                  {"engine": _ops._engine_for("tensor_copy", None, [dst, src])}, at or op.loc, op.index)
    t.followers[op.index] = f
    st.first = op.index
    return op.index


def _same_view(a, b):
    return a.st is b.st and a.boff == b.boff and a.dims == b.dims and a.p0 == b.p0 and a.dtype == b.dtype


def assign(dst, value):
    """`dst[...] = value` (NKI's earlier style): an instruction's fresh result is written straight into dst;
    another tensor is copied (tensor_copy on chip, a DMA when HBM is involved); a number fills dst. A void
    value (made by a call that emitted nothing: _void) is nothing to write: dst keeps what it holds; a void
    dst written becomes an ordinary tile."""
    void = _trace._current.void
    if void:
        if isinstance(value, NkiTensor) and value.st.uid in void:
            return
        void.discard(dst.st.uid)
    if isinstance(value, NkiTensor):
        if _same_view(dst, value):
            return
        op = _fresh_op(value)
        if tuple(dst.shape) != tuple(value.shape) and (op is not None or value.st.uid in _boxes()):
            dst = _masked_part(dst, value)
        if op is not None and op.name == "tensor_copy" and any(r.st is dst.st for r in op.reads):
            op = None  # a copy streams element by element: into its own source it goes through its new tile
        if op is not None and dst.st.space != HBM and _fits(op, dst, value):
            _retarget(op, value, dst)
            if dst.st.space == PSUM:
                t = _trace.current()
                if op.name in ("nc_matmul", "nc_matmul_mx"):
                    _ops.touch_psum(t, dst, "mm")
                    op.attrs["accumulate"] = False  # `=` overwrites; `+=` (iadd) accumulates
                else:
                    _ops.touch_psum(t, dst, "write", op)
            return
        same_layout(None, dst, value)
        if dst.st.space == HBM or value.st.space == HBM:
            dma(dst, value)
            return
        _ops.tensor_copy(dst, value)
        return
    if isinstance(value, (int, float, np.number)):
        _ops.memset(dst, float(value))
        return
    if hasattr(type(value), "into"):  # nl.loop_reduce's reduction, done into dst (_loop_reduce)
        value.into(dst)
        return
    raise NkiError(f"cannot assign {type(value).__name__} to an NKI tensor")


def _masked_part(dst, value):
    """`dst[...] = value` where value is a masked call's result (`nl.load(..., mask=...)`, `nl.exp(t, mask=...)`):
    its masked-in region of the call's index space goes to the same region of dst, when dst has that index
    space's shape; else dst as it is."""
    box = box_of(value)
    if box is None:
        return dst
    shape, full = tuple(dst.shape), box[0]
    if shape == full:
        return dst.index(tuple(slice(a, a + n) for a, n in zip(box[1], value.shape)))
    # The same index space but for its size-1 dims: `b[i_p, 0] = nl.sum(t, axis=1, mask=(i_p < 64))`, a
    # [128]-space result into a [128, 1] region.
    mine = [d for d, n in enumerate(shape) if n != 1]
    theirs = [e for e, n in enumerate(full) if n != 1]
    if [shape[d] for d in mine] != [full[e] for e in theirs]:
        return dst
    idx = [slice(None)] * len(shape)
    for d, e in zip(mine, theirs):
        idx[d] = slice(box[1][e], box[1][e] + value.shape[e])
    return dst.index(tuple(idx))


def _boxes():
    t = _trace._current or _trace.current()
    return t.mask_boxes


def box_of(v):
    """(index-space shape, first index per dim, the kernel line whose mask cut it) of the region a view of a
    masked call's result tile holds (the call's mask cut its index space to that region), or None: v is not
    such a tile, or not a box of it (strided, permuted or bitcast), or a view the kernel's own index made of
    one (`e[:, 49]`): a tile of its own shape, whose index space is that shape (tester23af F6)."""
    box = _boxes().get(v.st.uid)
    if box is None or getattr(v, "_sub", False) or len(box[0]) != len(v.dims):
        return None
    place = _place(v)
    if place is None:
        return None
    return box[0], tuple(box[1][d] + a for d, (a, _) in enumerate(place)), box[2]


def outer_box(t, full, starts, loc):
    """Marks the new tile `t`, a masked nisa.nc_matmul's product of tail operands (box_of), with the region
    of their whole index space it holds (outer_part)."""
    _boxes()[("outer", t.st.uid)] = (tuple(full), tuple(starts), loc)


def outer_part(dst, value):
    """`dst += value` for a masked nc_matmul's product of tail operands (outer_box) whose own region does not
    fit dst: dst's view of the rows/columns the product holds when dst has the operands' whole index-space
    shape, else None."""
    ob = _boxes().get(("outer", value.st.uid))
    if ob is None or value.boff != 0 or value.p0 != 0 or tuple(value.shape) != tuple(
            NkiTensor.whole(value.st).shape) or tuple(dst.shape) != ob[0]:
        return None
    if not all(a + n <= m for a, n, m in zip(ob[1], value.shape, ob[0])):
        return None
    return dst.index(tuple(slice(a, a + n) for a, n in zip(ob[1], value.shape)))


def mask_box(t, full, starts, loc=None):
    """Marks the new tile `t` as a masked call's result: the region at `starts` of the index space `full`;
    `loc`: the kernel line whose mask cut it, for messages (the calling line by default)."""
    _boxes()[t.st.uid] = (tuple(full), tuple(starts), loc or caller_loc())
    return t


def _widened(views):
    """The views with each masked call's result passed whole replaced by its whole tile (whole_of)."""
    return tuple(w if w is not None else v for v, w in ((v, whole_of(v)) for v in views))


def whole_of(v):
    """The tile of the whole index space that `v`, a masked call's result passed whole, is the held part of (its
    tile has that space's shape: _whole_tile, a masked nl.load's, the earlier-style memset's and iota's), else
    None (v holds it all, or is no such result, or its tile keeps the held part's shape: a PSUM tile past its
    bank, a masked matmul's product). A call that cannot work on the held part alone (two operands holding
    different parts, a matmul whose operands hold different K rows, .reshape) works on this, as NKI's one
    instruction on the whole tile does: the rest no instruction wrote reads as any unwritten tile (the
    simulator's warning of a read where no instruction wrote)."""
    if not isinstance(v, NkiTensor) or v.st.space == HBM or not _held_whole(v):
        return None
    own = box_of(v)
    box = _boxes().get(v.st.uid)
    if own is None or tuple(v.shape) == tuple(own[0]) or tuple(v.st.shape) != tuple(own[0]) or any(box[1]):
        return None
    return NkiTensor.whole(v.st)


def held_in(given, read):
    """[(first index, size)] per dim of `read` of the part that `given`, a masked call's result passed whole, holds,
    when `read` is its whole tile as is (whole_of: a call reading all of it); else None."""
    w = whole_of(given)
    if w is None or not isinstance(read, NkiTensor) or read.st is not given.st:
        return None
    if _place(read) != [(0, n) for n in w.shape]:
        return None
    return _place(given)


def _held_whole(v):
    """Whether `v` is a masked call's result as the call returned it (the part its tile holds, passed whole), not
    a view the kernel made of it (`.ap`, a slice of a slice, a slice of a reshape): such a view names its own
    elements of the tile, which is all a call given it reads or writes (tester23ah F9: `nisa.memset(dst=e.ap(
    [[64, 128], [1, 24]], offset=40), value=0.0)` zeroed all 64 columns of e)."""
    from ._tensor import LoadPart

    return type(v) is LoadPart


def dst_wide(dst, operands):
    """The operands of a dst= call writing `dst` with each masked call's result passed whole read as its whole
    tile (whole_of), when one is and its whole tile has dst's shape (the call's one instruction reads it all, as
    on the device), or when one's held part alone has dst's shape (the kernel's operand is its whole tile, which
    the call's shape check then refuses, as NKI's compiler does: tester23ai F3, `nisa.tensor_copy(dst=t, src=u)`
    with t [128, 30] and u [128, 64] holding 30 columns copied them silently), or when one is a [P, 1] vector
    whose whole tile has dst's partitions (a bias or scalar operand: tester23ai F4, the row sum of a row-masked
    load was "operand0 [100, 1] must be a scalar or a [128, 1] vector"), or when one is a [P, 1] vector whose held
    rows alone have dst's partitions (its whole tile then refused as a whole one is: tester23aj F1, a [100, 64]
    dst with the row sum of a load masked to rows < 100 ran quietly); None when none is."""
    if not isinstance(dst, NkiTensor) or dst.st.space == HBM:
        return None
    wide = [whole_of(v) for v in operands]
    if not any(w is not None and (tuple(w.shape) == tuple(dst.shape) or tuple(v.shape) == tuple(dst.shape) or (
            w.ndim == 2 and w.shape[1] == 1 and dst.ndim >= 1 and dst.shape[0] in (w.shape[0], v.shape[0])))
               for v, w in zip(operands, wide)):
        return None
    return tuple(v if w is None else w for v, w in zip(operands, wide))


def mark_filled(v):
    """Notes that the kernel wrote all of `v`'s tile, a masked call's result's whole tile (whole_of): the kernel's
    view of that result then holds it all (Trace.filled)."""
    if isinstance(v, NkiTensor) and v.st.uid in _boxes() and tuple(v.shape) == tuple(v.st.shape) and (
            v.boff == 0 and v.p0 == 0):
        _trace.current().filled.add(v.st.uid)


def _place(v):
    """[(first index, size) per dim] of the view `v` in its tile's whole shape, or None: not a box of it
    (strided, permuted, bitcast or reshaped)."""
    st = v.st
    whole = NkiTensor.whole(st)
    if v.pd != st.pdim or v.dtype is not st.dtype or len(whole.dims) != len(v.dims) or v.boff % v.dtype.itemsize:
        return None
    off = v.boff // v.dtype.itemsize
    out = []
    for d, ((s, n), (ws, wn)) in enumerate(zip(v.dims, whole.dims)):
        if s != ws and n != 1:
            return None
        if d == v.pd:
            start = v.p0
        else:
            start, off = divmod(off, ws) if ws else (0, off)
        if start + n > wn:
            return None
        out.append((start, n))
    return out if not off else None


def held_part(part):
    """Notes `part`, the view a masked call returns of its tile of the whole index space (a LoadPart), as the
    part that tile holds (Trace.held): a later write reaching outside it fills the tile (note_writes)."""
    where = _place(part)
    if where is not None:
        (_trace._current or _trace.current()).held[part.st.uid] = where
    return part


def note_writes(t, writes):
    """An instruction writes `writes`: one reaching outside the part a masked call's result holds of its tile
    (held_part) makes the kernel's result that whole tile from then on (Trace.filled), as NKI's tile always has
    its whole shape: `t[:, 40:64] = nl.load(...)`, `nisa.memset(dst=t[:, 40:64], value=0.0)` pad a tail tile,
    and a later `nl.max(t, axis=1)` reduces the pad too; what no instruction wrote reads as any unwritten tile
    (the simulator's warning) (tester23ag F6 addendum 3)."""
    held = t.held
    for v in writes:
        h = held.get(v.st.uid)
        if h is None:
            continue
        where = _place(v)
        if where is None or any(a < ha or a + n > ha + hn for (a, n), (ha, hn) in zip(where, h)):
            t.filled.add(v.st.uid)
            del held[v.st.uid]


def whole_contraction(x, y, x_k):
    """(x, y) for an unmasked matmul of tiles passed whole whose contraction dims K (dim `x_k` of x, dim 0 of y)
    have different sizes because one is a masked call's result holding part of K (`nl.exp(x, mask=(i_k < 64))`):
    both as their whole tiles (whole_of), as NKI's nc_matmul contracts all the partitions of the tiles it is
    given, the unwritten K rows read undefined with the warning (tester23af F1: it was "contraction dims
    differ: x.T is [64, 128]" of an x whose .shape is (128, 128)). Operands holding the same K rows (a K tail
    both loads hold) are kept as they are: the product of the rows both hold, exact."""
    if not all(isinstance(v, NkiTensor) and v.ndim == 2 and v.st.space != HBM for v in (x, y)) or (
            x.shape[x_k] == y.shape[0]):
        return x, y
    return _widened((x, y))


def boxed(result, box):
    """A masked call's new result tile, marked with the region of the call's index space it holds (`box` from
    operand_region() or apply_mask(..., box=True)), so that `dst[...] = result` writes that region of dst and
    a later mask takes its part of it. As in NKI, whose masked call returns a tile of the whole index space,
    the tile has that space's shape and the call's instruction writes its masked-in part (_whole_tile), the
    part being the result; an index into it may reach the rest, which no instruction wrote (the simulator warns
    at the read), as for a masked nl.load's tile, the earlier-style memset's and iota's (boxed_part)."""
    if box is not None and isinstance(result, NkiTensor) and result.boff == 0 and result.p0 == 0 and len(
            box[0]) == result.ndim and all(a + n <= m for a, n, m in zip(box[1], result.shape, box[0])):
        if tuple(result.shape) != tuple(box[0]):
            part = _whole_tile(result, box)
            if part is not None:
                return part
        mask_box(result, *box)
    return result


def _whole_tile(result, box):
    """boxed()'s tile of the whole index space box[0] for the fresh result `result` of the trace's last op, which
    holds the region at box[1]: the op retargeted to write that region of a new tile of the whole shape, and
    that region's view returned (marked as boxed_part marks it); None (the result kept at its own shape) when
    the result is no fresh whole tile of that op, or the whole shape is no tile of its memory (a PSUM tile
    past its bank)."""
    t = _trace._current or _trace.current()
    op = _fresh_op(result) if t.voiding is None else None
    st = result.st
    if op is None or tuple(st.shape) != tuple(result.shape) or st.pdim != 0 or result.pd != 0 or (
            result.dtype is not st.dtype) or op.name in ("nc_matmul", "nc_matmul_mx"):
        return None
    if not op.name.startswith("dma") and _legal_from(box[1][0], result.shape[0]) != box[1][0]:
        return None  # (an engine's write of the held rows there would break the start rule: _legal_start)
    full = tuple(box[0])
    try:
        _ops.check_tile_shape(full, 0, st.space, st.dtype, "")
    except NkiError:
        return None
    whole = _tensor.Storage(t, st.name, st.space, st.dtype, full, 0, loc=st.loc)
    whole.site = st.site
    w = NkiTensor.whole(whole)
    # (the view the kernel gets, a LoadPart as a masked load's: its .shape is the whole space's; the op writes
    # that very object, so that an assignment of it retargets the op)
    part = held_part(LoadPart.of(w.index(tuple(slice(a, a + n) for a, n in zip(box[1], result.shape))), full))
    for k, v in op.args.items():
        if v is result:
            op.args[k] = part
    op.writes = tuple([part if x is result else x for x in op.writes])
    op.reads = tuple([part if x is result else x for x in op.reads])
    whole.first, whole.last = st.first, st.last
    st.first = st.last = -1  # (never used: no buffer)
    t.fresh.pop(st.uid, None)
    mask_box(w, full, (0,) * len(full), box[2])
    return fresh(part)


def boxed_part(whole, part, box):
    """boxed() for a masked call whose new tile `whole` has the index space's whole shape and whose
    instruction wrote its masked-in view `part` (the earlier-style memset and iota): the tile is marked as
    holding the whole space, so `part` (at any offset: a mask's lower bound) holds its region of it."""
    if box is not None and tuple(whole.shape) == box[0] and whole.boff == 0 and whole.p0 == 0:
        mask_box(whole, box[0], (0,) * len(box[0]), box[2])
        # the kernel's result is the held part as a masked load's is (LoadPart): .shape the whole space's, and
        # a pad reaching outside it makes it the whole tile (tester23aj F5: the pad of a memset's tail was
        # ignored by a later nl.sum, unwarned)
        return fresh(held_part(LoadPart.of(part, box[0]) if tuple(part.shape) != box[0] else part))
    return boxed(fresh(part), box)


def result_box(box, shape, dims):
    """The region a masked call's new tile of `shape` holds when its dims come from the operands' index space
    dims `dims` (None: a dim the call makes, held whole), from the operands' region `box` (operand_region):
    bn_stats' [72, 6] result of a [128, F] index space masked to rows < 72 holds rows 0-71 of [128, 6], a
    transpose's the swapped region. For boxed(): `stats[...] = nisa.bn_stats(t, mask=...)` writes those rows."""
    if box is None or len(dims) != len(shape) or any(d is not None and d >= len(box[0]) for d in dims):
        return None
    return (tuple(n if d is None else box[0][d] for d, n in zip(dims, shape)),
            tuple(0 if d is None else box[1][d] for d in dims), box[2])


def operand_region(mask, views, dma=False):
    """(views, box) for an elementwise call whose new tile has its first operand's shape: with a mask, the
    operands cut to it and the region of the call's index space the tile holds (apply_mask); without, the
    operands as they are and the region an operand of that shape holds, if it is an earlier masked call's
    result (an unmasked elementwise call on the masked-in part of a tile computes that part of the index
    space, so a later, tighter mask takes its part of the result as of the operand: boxed()). An operand
    of that index space's whole shape (a tile the kernel combines with the masked tile, a dst=) is cut to
    the same part (cut_to_region): in NKI the masked tile has the whole shape and its masked-out part holds
    whatever was there, so the call's result there is unspecified; here the call computes the part only."""
    if mask is not None:
        return apply_mask(mask, views, box=True)
    boxes = _boxes()
    if not boxes:
        return views, None
    box = part = None
    for v in views:
        if isinstance(v, NkiTensor):
            if v.st.uid in boxes:
                b = box_of(v)
                if b is not None:
                    if part is None or _same_part(b, v.shape, box, part):
                        if part is None:
                            box, part = b, v.shape
                    elif _same_part(box, part, b, v.shape):
                        box, part = b, v.shape
                    else:
                        # Operands holding different regions (`nl.add(e1, e2)` of rows < 100 and rows < 50):
                        # the call works on their whole tiles, as NKI's one instruction does (whole_of), its
                        # result held whole; each operand's unwritten rest reads undefined, with the warning
                        # (tester23af F1: it was "operands [100, 64] and [50, 64] do not broadcast").
                        return _widened(views), None
    if box is None:
        return views, None
    box, part = _broadcast_box(box, part, views)
    if not dma:
        box, part, views = _legal_start(box, part, views)
    return cut_to_region(views, box, part), box


def _broadcast_box(box, part, views):
    """(box, part) widened on each dim of size 1 that the held part holds whole (a [P, 1] row-masked result's
    column) to the size an unmasked operand of the index space's other dims has there (`nl.add(xs, s)` with xs
    [128, 64], s [128, 1] holding rows 0-99): the call computes those rows of xs's whole shape, xs cut to them
    as docs/nki.md "Masks" says (tester23aj F2: it was "operands [128, 64] and [100, 1] do not broadcast")."""
    full = list(box[0])
    for v in views:
        if isinstance(v, NkiTensor) and v.st.space != HBM and len(v.shape) == len(full) and box_of(v) is None and all(
                n == f or (f == 1 and m == 1) for n, f, m in zip(v.shape, box[0], part)):
            full = [max(f, n) for f, n in zip(full, v.shape)]
    if tuple(full) == tuple(box[0]):
        return box, part
    part = tuple(f if f != b else m for f, b, m in zip(full, box[0], part))
    return (tuple(full), box[1], box[2]), part


def _legal_from(a, n):
    """The first partition of an engine instruction over the rows [a, a + n): `a` where an instruction of n
    partitions may start there, else the nearest start below it that is one for the rows up to a + n."""
    from .. import _core

    if not a or a in _core.engine_start_partitions(n):
        return a
    return next(s for s in range(a, -1, -1) if s in _core.engine_start_partitions(a + n - s))


def _legal_start(box, part, views):
    """(box, part, views) for an unmasked compute call on operands holding the part `part` at `box` whose first
    partition is no start a compute engine's instruction may have (a load masked to rows 3-99): the part from
    the nearest start below that is one, its operands the whole tiles (whole_of) to cut there. NKI's instruction
    is the call's one on the whole tile; trnsim's narrowing to the held part must not break the start rule the
    kernel did not ask for (tester23af F9): rows before the held part read undefined, with the warning."""
    a, n = box[1][0], part[0]
    s = _legal_from(a, n)
    if s == a or len(part) != len(box[0]):
        return box, part, views
    tiles = [v for v in views if isinstance(v, NkiTensor) and v.st.space != HBM]
    if tiles and all(box_of(v) is not None and whole_of(v) is None and v.shape[0] == n for v in tiles):
        # tiles kept at the held part's shape (a masked matmul's product, from its partition 0): no rows before
        # their held ones to read, and their own start breaks no rule; the call works on them as they are, its
        # result kept at that shape too (_whole_tile). (It took the moved start: `nl.copy(p)` of a product
        # holding rows 3-127 held rows 0-124, silently shifted.)
        return box, part, views
    starts, part = (s,) + tuple(box[1][1:]), (a + n - s,) + tuple(part[1:])
    # each masked result passed whole as its whole tile's view of that part, so that an operand of the whole
    # shape (cut_to_region) and the result agree on it (tester23aj F4: `nl.add(ones, t)` of t holding rows
    # 40-99 was "operands [100, 64] and [128, 64] do not broadcast")
    idx = tuple(slice(b, b + m) for b, m in zip(starts, part))
    views = tuple(w.index(idx) if w is not None and tuple(w.shape) == tuple(box[0]) else v
                  for v, w in ((v, whole_of(v)) for v in views))
    return (box[0], starts, box[2]), part, views


def legal_rows(v, dim=0):
    """`v`, a masked call's result passed whole (whole_of) whose held rows start at no partition an engine's
    instruction may start at for their count (a load masked to rows 3-99), as the view of its whole tile from the
    nearest start below that is one (rows 0-99): the kernel's unmasked call (a matmul's contraction, a transpose)
    is NKI's one instruction on the whole tile, and the rows before the held ones read undefined, with the
    simulator's warning, as _legal_start does for the elementwise calls (tester23ai F5: it was a partition-start
    RuleError blamed on trnsim's lowering); else `v`. `dim`: the dim of v that gives the instruction's
    partitions (1: a matmul's M, a transpose's free dim, which become its result's partitions)."""
    w = whole_of(v)
    place = _place(v) if w is not None else None
    if place is None or dim >= len(place):
        return v
    a, n = place[dim]
    s = _legal_from(a, n)
    if s == a:
        return v
    return w.index(tuple(slice(s, a + n) if d == dim else slice(b, b + m) for d, (b, m) in enumerate(place)))


def whole_free(v, dst=None):
    """`v`, a masked call's result passed whole (whole_of) whose free dims it holds only in part, as the view of
    its whole tile over all of its free dims and its held rows (from the nearest start an engine instruction may
    have, as legal_rows), else `v`: the operand of a call combining the elements along its free dims (max8,
    bn_stats / bn_aggr, tensor_tensor_scan) without a mask of its own, which on the device is one instruction
    reading all of each partition's elements of the tile the kernel gave (fix23aw: it computed the held part,
    warned, where nc_find_index8 read the whole tile). The unwritten rest reads undefined, with the simulator's
    warning of a read where no instruction wrote. `dst`: a dst= call's, whose partitions are the instruction's:
    with the whole tile's, `v` is its whole tile, rows too (a dst= call writes all of dst: _region)."""
    w = whole_of(v)
    if w is not None and isinstance(dst, NkiTensor) and dst.partitions == w.partitions:
        return w
    place = _place(v) if w is not None else None
    if place is None or len(place) != w.ndim or all(place[d] == (0, w.shape[d]) for d in range(w.ndim)
                                                     if d != w.pd):
        return v
    a, n = place[w.pd]
    s = _legal_from(a, n)
    return w.index(tuple(slice(s, a + n) if d == w.pd else slice(None) for d in range(w.ndim)))


def _same_part(b, p, box, part):
    """Whether the held part `p` (region `b`) of one operand is the held part `part` (region `box`) of
    another as it broadcasts against it: the same region on each of its leading dims, a dim of size 1
    (held whole: a [P, 1] column's) excepted. So `x - nl.mean(x, axis=1)`, a [P] reduction of a masked tile's
    held rows, holds those rows as x does (NKI's LayerNorm tutorial's tail tile)."""
    return len(p) <= len(part) and all((n == 1 and b[0][d] == 1) or (b[0][d], b[1][d], n) == (
        box[0][d], box[1][d], part[d]) for d, n in enumerate(p))


def cut_to_region(views, box, part):
    """The views with each tile of the index space's whole shape `box[0]` cut to the part `part` at
    `box[1]`, dim by dim (a dim of size 1, a per-partition [P, 1] operand's, broadcasts and stays; a view of
    fewer dims, a [P] one, is cut on the dims it has); a view of another shape is left as it is (the call's
    own shape check names it)."""
    full, starts = box[0], box[1]
    if tuple(part) == tuple(full):
        return views
    out = []
    for v in views:
        if isinstance(v, NkiTensor) and v.st.space != HBM and len(v.shape) <= len(full) and tuple(
                v.shape) != tuple(part[:len(v.shape)]) and box_of(v) is None:
            idx = []
            for n, f, a, m in zip(v.shape, full, starts, part):
                if n == f and m != f:
                    idx.append(slice(a, a + m))
                elif n in (m, 1):
                    idx.append(slice(None))
                else:
                    idx = None
                    break
            if idx is not None:
                v = v.index(tuple(idx))
        out.append(v)
    return tuple(out)


def _fits(op, dst, value):
    _same_shape(None, dst, value)
    # The instruction writes dst itself only where its engine can: the Tensor engine writes PSUM only and GpSimd
    # cannot access PSUM; otherwise its result stays where it is and a tensor_copy moves it (the compiler's copy
    # of `t[...] = nisa.nc_transpose(x)` into SBUF, NKI's Stable Diffusion attention tutorial).
    engine = op.attrs.get("engine") or ("PE" if op.name in ("nc_matmul", "nc_matmul_mx") else None)
    if (engine == "PE") != (dst.st.space == PSUM) and (engine == "PE" or engine == "POOL"):
        return False
    return dst.dtype == value.dtype or op.name not in ("nc_matmul", "nc_matmul_mx", "nc_transpose")


def _product_again(value):
    """The nc_matmul whose product `value` is, when an assignment retargeted it (`c[...] = m`: the product is
    in c only, m has no tile of its own) and no instruction since wrote what it reads: `acc += m` can then
    accumulate the same product into acc, as it does without the assignment."""
    mt = value.st.moved_to
    if mt is None or mt[2] is None or mt[4] is not None:
        return None
    op = mt[1]
    if op.name != "nc_matmul" or op.attrs.get("accumulate") or op.attrs.get("dropped"):
        return None
    srcs = {op.args["stationary"].st.uid, op.args["moving"].st.uid}
    t = _trace._current or _trace.current()
    if any(x.st.uid in srcs for o in t.ops[op.index + 1:] for x in o.writes):
        return None
    return op


def _legal_product_rows(op, part):
    """`part`, the rows of a whole-shape PSUM accumulator a matmul's product of a stationary holding M columns
    from a masked call (a load masked to columns 3-127) accumulates into, when its first partition is no start
    an engine instruction may have: NKI's instruction is the matmul of the whole tile, so the rows from the
    nearest start below that is one (_legal_from: rows 0-127), with op's stationary read from the same column
    of its whole tile (legal_rows); the columns before the held ones read undefined, with the simulator's
    warning, and their rows of the accumulator get what the matmul makes of them, as `nisa.nc_matmul(dst=acc,
    ...)` does (tester23au: it was the partition-start RuleError of trnsim's own matmul). `part` otherwise."""
    place = _place(part)
    if place is None or part.pd != 0 or len(place) != 2:
        return part
    a, n = place[0]
    if _legal_from(a, n) == a:
        return part
    st = op.args.get("stationary")
    wide = legal_rows(st, 1) if st is not None and op.name == "nc_matmul" and not op.attrs.get(
        "is_transpose") else st
    if wide is st or _place(st) is None or _place(wide) is None:
        return part
    d = _place(st)[1][0] - _place(wide)[1][0]
    if d > a or _legal_from(a - d, n + d) != a - d:
        return part
    op.args["stationary"] = wide
    op.reads = tuple(wide if r is st else r for r in op.reads)
    return NkiTensor.whole(part.st).index((slice(a - d, a + n), slice(place[1][0], place[1][0] + place[1][1])))


def iadd(dst, value):
    """`dst += value`: a fresh matmul result accumulates into dst (a PSUM accumulation group), and so does one
    an assignment moved into another tile (`c[...] = m; acc += m`: the PE array adds the product again,
    _product_again); anything else is an elementwise add into dst, as NumPy's `+=` adds what value holds. A
    PSUM tile into PSUM (a matmul result with a tile of its own, used since) is first copied to SBUF, as
    nki.isa.tensor_tensor reads at most one PSUM tile: acc + m bit for bit. A void value adds nothing (_void)."""
    if isinstance(value, NkiTensor):
        t = _trace._current
        if _iadd_matmul is not None and t.bad_ap is None and _iadd_matmul(t, dst, value):
            return dst  # (a tiled matmul's K loop: the matmul accumulates into dst, in one call)
        if value.st.uid in _trace._current.void:
            return dst
        op = _fresh_op(value)
        if op is None and dst.st.space == PSUM and value.st.space == PSUM:
            again = _product_again(value)
            if again is not None and tuple(dst.shape) == tuple(value.shape):
                a = again.args
                _ops.nc_matmul(dst, a["stationary"], a["moving"], None, again.attrs["perf_mode"],
                               again.attrs["is_transpose"], caller_loc(), iadd=True)
                return dst
        if (op is None or op.name not in ("nc_matmul", "nc_matmul_mx")) and dst.st.space == PSUM and (
                value.st.space == PSUM):
            value = copy(value)
        elif op is not None and op.name in ("nc_matmul", "nc_matmul_mx") and dst.st.space == PSUM:
            # A masked matmul's product accumulates into its part of dst (as `=` writes it: assign()).
            part = dst
            if dst.dims != value.dims or dst.pd != value.pd:  # (the same dims: the same shape, nothing to check)
                if tuple(dst.shape) != tuple(value.shape):
                    part = _masked_part(dst, value)
                if part.partitions != value.partitions or part.free_size != value.free_size:
                    outer = outer_part(dst, value)
                    part = part if outer is None else outer
                if part.partitions != value.partitions or part.free_size != value.free_size:
                    call = "nl.matmul" if value.st.name == "matmul" else f"nisa.{op.name}"
                    raise NkiError(f"`+=` of a {call} result {list(value.shape)} into a {list(dst.shape)} region: "
                                   f"the product accumulates into a region of its own shape")
                part = _legal_product_rows(op, part)
            acc = _ops.matmul_accumulate(_trace._current, part, None, op.loc, iadd=True)
            op.attrs["accumulate"] = acc
            _retarget(op, value, part, None)
            if acc:
                op.reads = op.reads + (part,)
            return dst
    from . import language as nl

    nl.add(dst, value, out=dst)
    return dst


def psum_matmul_update(sym, dst, value):
    """`dst -= nl.matmul(...)` (or `*=`) into PSUM: NkiError saying what NKI allows. The PE array only
    adds its products into PSUM (nki.isa.nc_matmul's accumulate: "subsequent writes accumulate"), so NKI's
    PSUM accumulation is `+=`; the fallback, an elementwise op of two PSUM tiles, is not allowed either
    (nki.isa.tensor_tensor)."""
    if not isinstance(value, NkiTensor) or dst.st.space != PSUM:
        return
    op = _fresh_op(value)
    if op is None or op.name not in ("nc_matmul", "nc_matmul_mx"):
        return
    hint = ("negate an operand and accumulate: `acc += nl.matmul(nl.negative(x), y)`, or take the product "
            "to SBUF first: `acc[...] = nl.subtract(acc, nl.copy(nl.matmul(x, y)))` (a loop-carried value: "
            "nl.sequential_range)" if sym == "-=" else
            "take the product to SBUF first (`nl.copy(nl.matmul(x, y))`) and combine it there")
    raise NkiError(f"`{sym}` of a matmul result into {dst.st.label(at=False)}: a matmul can only add to PSUM "
                   f"(NKI accumulates with `acc += nl.matmul(...)`, nki.isa.nc_matmul's accumulate); {hint}")


# ---- masks


def apply_mask(mask, views, skip=False, box=False, dma=False, axes=None, ignore=None):
    """The views restricted to what `mask` allows (NKI's tile masking, docs/nki.md "Masks").

    A mask is a conjunction (&) of bounds on nl.arange index variables (_index.Mask); each bound names the
    valid range of the operand axis its variable indexes. The NKI docs ("NKI API Masking") say the mask is a
    compile-time predicate: the compiler emits the instruction for the masked-in region only (or no
    instruction when nothing is masked in), so masking costs nothing at run time and the instruction takes
    the time of the smaller region. Here, likewise, each operand is cut to its masked-in region and the one
    instruction is emitted for that: a view indexed by an nl.arange variable is cut along the variable's dim
    (an index expression reaching outside its dim, _tensor.Unbounded, is checked on the masked-in region
    only); a view without variables (a tile) along the dims of the first indexed view when it has that view's
    shape, or to its part of the masked-in region when it is an earlier masked call's result (box_of), or is
    taken as it is when it already has the masked-in shape; with no indexed view, the variable of axis a of
    an n-D index space bounds dim a of an n-D tile.

    Returns None when nothing is masked in and the caller can skip its instruction (`skip`: it writes an
    existing tensor); NkiError for a call that would return an empty new tile. With `box`, returns (views,
    region): the region of the call's index space that its result holds (for boxed()), or None. Unless the
    call is a DMA (`dma`), a mask that moves an on-chip operand's first partition must leave it where a
    compute engine's instruction may start (NkiError naming it otherwise). `axes`: per view, None or {axis:
    dim}, the dim of that view (a tile without variables, with no indexed view) the variable of an axis bounds
    where it is not the axis itself (nl.matmul's x [M, K] without transpose_x, whose mask is that of
    nc_matmul(x.T, y): axis 0 bounds its K, dim 1). `ignore`: per view, the variables that bound no dim of
    that tile (a matmul's free-dim variable of the other operand: _free_dim_owners)."""
    if mask is None or mask is True:
        for v in views:
            if type(v) is Unbounded:
                raise v._error()
        return (tuple(views), None) if box else tuple(views)
    if mask is False or isinstance(mask, np.bool_):
        if mask:
            return apply_mask(None, views, box=box)
        return _empty(skip, views, box)
    if isinstance(mask, AffinePredicate):
        raise mask.mask_error()
    if isinstance(mask, UnmodelledMask):
        raise mask.error()
    if not isinstance(mask, Mask):
        raise NkiError(f"mask must be a predicate on nl.arange index expressions (e.g. mask=(i_p < n), "
                       f"combined with &), got {type(mask).__name__} {mask!r}")
    if any(isinstance(v, _Indirect) for v in views):
        unsupported("mask= on an access indexed at run time (a tile of indices)")
    if mask.empty():
        return _empty(skip, views, box)
    bounds = mask.bounds
    ref = next((v for v in views if isinstance(v, NkiTensor) and v.vars), None)
    if ref is not None:
        cuts = {d: bounds[var] for d, var in enumerate(ref.vars) if var is not None and var in bounds}
        used = {var for v in views if isinstance(v, NkiTensor) and v.vars for var in v.vars}
        unused = [var for var in bounds if var not in used]
        if unused:
            raise NkiError(f"mask: its nl.arange variable {unused[0]!r} indexes no operand of this call (a mask "
                           f"bounds the operand axes its variables index)")
        region = (tuple(ref.shape), tuple(cuts[d][0] if d in cuts else 0 for d in range(ref.ndim)))
    else:
        cuts = region = None
    out = []
    bound = {}  # id(view returned) -> (that view, the dims of it the mask bounds)
    for i, v in enumerate(views):
        if not isinstance(v, NkiTensor):
            out.append(v)
            continue
        past = None
        if type(v) is Unbounded:
            if not v.slices_past():
                vb = _same_axis_bounds(v, bounds) if dma else bounds
                out.append(v.bounded(vb))
                bound[id(out[-1])] = (out[-1], _var_dims(v, vb))
                continue
            past, v = v.unbounded, v.unchecked()  # (cut as a tile, then checked inside its tensor)
        if v.vars:
            vb = _same_axis_bounds(v, bounds) if dma else bounds
            vc = {d: vb[var] for d, var in enumerate(v.vars) if var is not None and var in vb}
            dims = _var_dims(v, vb)
        else:
            vb = {k: b for k, b in bounds.items() if k not in ignore[i]} if ignore else bounds
            dims = set()
            vc, r = _tile_cuts(v, ref, cuts, vb, axes[i] if axes else None, dims)
            if region is None:
                region = r
        idx = tuple(slice(vc[d][0], vc[d][1]) if d in vc else slice(None) for d in range(v.ndim))
        for d, e, size, _ in past or ():
            if d not in vc or e.start + vc[d][1] > size:
                hi = e.start + (vc[d][1] if d in vc else v.shape[d])
                raise NkiError(f"mask: {_mask_words(caller_loc(), 'the mask')} keeps [{e.start}, {hi}) of a "
                               f"view whose {e.error.bare}: bound a variable of axis {d} (of the view's length) so "
                               f"that the masked-in indices stop by {size}")
        out.append(v.index(idx) if vc else v)
        bound[id(out[-1])] = (out[-1], frozenset(dims))
    (_trace._current or _trace.current()).mask_dims = (mask, bound)
    if not dma:
        for v, w in zip(views, out):
            if isinstance(w, NkiTensor) and w.st.space != HBM and w.pd >= 0 and w.p0 != v.p0:
                _engine_start(w.p0, w.partitions)
    if not box:
        return tuple(out)
    if ref is not None and 1 in region[0]:
        # The masked operand is a [P, 1] one (`operand0=t[i_p, 0]`): the index space is as wide as the tiles it
        # broadcasts along.
        full = list(region[0])
        for v in views:
            if isinstance(v, NkiTensor) and not v.vars and v.ndim == len(full):
                full = [max(a, b) if a == 1 else a for a, b in zip(full, v.shape)]
        region = (tuple(full), region[1])
    return tuple(out), (region[0], region[1], caller_loc()) if region is not None else None


def _same_axis_bounds(v, bounds):
    """The mask `bounds` for view `v`, a side of a DMA copy, with a bound for each nl.arange variable of v's
    index that the mask does not name but that runs along the same axis of the call's index space, of the same
    extent, as one it bounds: that one's (`nl.store(o[i_p_hbm, i_f], value=t[i_p_tile, i_f], mask=(i_p_hbm <
    n))`: the mask applies to the copy's iteration space, so it cuts the value's rows where it cuts dst's, as
    nki-samples' interpolate_bilinear_fwd has it); none where variables of that axis are bounded differently.
    (A matmul's M and N variables are both of axis 1 and not one axis: compute calls keep their own rules.)"""
    out = bounds
    for var in v.vars:
        if var is None or var in bounds:
            continue
        got = {b for w, b in bounds.items() if w.ndim == var.ndim and w.axis == var.axis and w.size == var.size}
        if len(got) == 1:
            if out is bounds:
                out = dict(bounds)
            out[var] = got.pop()
    return out


def _engine_start(start, n):
    """The compute engines' start-partition rule, asked of its one home (sim/isa/partition_start.h, which
    isa::check applies), so that the error names the mask that broke it while tracing."""
    from .. import _core

    allowed = _core.engine_start_partitions(n)
    if start not in allowed:
        raise NkiError(f"mask: it starts this instruction at partition {start} ({n} partitions), but a compute "
                       f"engine's instruction of {n} partitions starts at partition "
                       f"{' or '.join(str(a) for a in allowed)}: widen the mask to start there, or move the rows "
                       f"with a DMA (nl.load / nl.store / nisa.dma_copy start at any partition)")


def _empty(skip, views, box):
    """A mask that selects nothing: NKI emits no instruction. None for a call that writes an existing tensor
    (`skip`: the caller skips it); for a call that returns a new tile, the views as they are (an index reaching
    outside its tensor too) with recording off for the rest of the call (_void): its tiles are void."""
    if skip:
        return None
    if not _void.begin(_trace.current()):
        raise NkiError("mask: the mask selects no element, and this assignment has no call to skip: put the "
                       "mask on the call, or skip the assignment for this iteration")
    out = tuple(v.unchecked() if type(v) is Unbounded else v for v in views)
    return (out, None) if box else out


def _var_dims(v, bounds):
    """The dims of `v`, a view the kernel indexed with nl.arange variables, that the mask `bounds` bounds: those
    its variables index (the dim a variable indexes, whatever its axis in its own index space)."""
    return frozenset(d for d, var in enumerate(v.vars) if var is not None and var in bounds)


def _tile_cuts(v, ref, cuts, bounds, axes=None, bound=None):
    """The dims to cut of a tile `v` (a view without index variables) under the mask `bounds`, as slices of
    v ({dim: (lo, hi)}), and the region of the index space v's cut holds (full shape, first index per dim).
    `axes`: {axis: dim of v} where a variable's axis bounds another dim of v (apply_mask). `bound`: a set
    given to receive the dims of v the mask bounds (cut or already the extent)."""
    bound = set() if bound is None else bound
    shape = tuple(v.shape)
    own = box_of(v)  # an earlier masked call's result: the region it holds
    vc = {}
    if ref is not None:
        full = tuple(ref.shape)
        if len(shape) != len(full):
            # e.g. a [128, 1] tile against a 1-D index: their dims other than 1 in order
            mine = [d for d, n in enumerate(shape) if n != 1]
            theirs = [d for d, n in enumerate(full) if n != 1]
            if len(shape) == 1 and v.pd == 0 and ref.pd >= 0:
                theirs = [ref.pd]  # a [P] per-partition operand (a keepdims=False reduction's result)
            if len(mine) != len(theirs):
                raise NkiError(f"mask: operand {list(shape)} does not match the masked operand {list(full)}")
            pairs = list(zip(mine, theirs))
        else:
            pairs = [(d, d) for d in range(len(shape))]
        for d, e in pairs:
            n = shape[d]
            if n == 1 and full[e] != 1:
                continue  # a broadcast dim (a [P, 1] bias or scalar operand)
            if e not in cuts:
                if n != full[e] and full[e] != 1:  # (a masked [P, 1] operand broadcasts along the tile's dim)
                    raise NkiError(f"mask: operand {list(shape)} does not match the masked operand "
                                   f"{list(full)} (dim {d})")
                continue
            bound.add(d)
            lo, hi = cuts[e]
            if n == full[e]:
                vc[d] = (lo, hi)
            else:
                r = _within(own, d, full[e], lo, hi, v, f"the masked operand's ({full[e]})")
                if r is not None:
                    vc[d] = r
        return vc, None
    region_full, region_starts = list(shape), [0] * len(shape)
    if own is not None:
        region_full, region_starts = list(own[0]), list(own[1])
    for var, (lo, hi) in bounds.items():
        # A variable of axis 0, the partition axis of any index space, bounds a tile's partitions whatever its
        # rank (a [P, F] reduction result masked with the first variable of a 3-D index space).
        if var.ndim != v.ndim and not (var.axis == 0 and v.pd == 0):
            continue
        d = axes.get(var.axis, var.axis) if axes else var.axis
        n = shape[d]
        if n == 1 and var.size != 1:
            continue  # a broadcast dim (a [P, 1] bias or scalar operand)
        region_full[d], region_starts[d] = var.size, lo
        bound.add(d)
        if n == var.size:
            if (lo, hi) != (0, n):
                vc[d] = (lo, hi)
        else:
            r = _within(own, d, var.size, lo, hi, v, f"the mask variable's range ({var.size})")
            if r is not None:
                vc[d] = r
    if bounds and not vc and not any(var.ndim == v.ndim or (var.axis == 0 and v.pd == 0) for var in bounds):
        raise NkiError(f"mask: no operand is indexed with the mask's nl.arange variables, and the mask's "
                       f"{max(var.ndim for var in bounds)}-D index space does not match operand {list(shape)}")
    return vc, (tuple(region_full), tuple(region_starts))


def _within(own, d, size, lo, hi, v, what):
    """The slice of dim d of a tile view `v` that selects the masked-in [lo, hi) of an index-space dim of
    `size`: by the region `own` the tile holds (an earlier masked call's result, or an unmasked elementwise
    call's on one), or None when the tile is already the masked-in extent; NkiError otherwise, naming both
    masks, their lines and the operand."""
    n = v.shape[d]
    if own is not None and own[0][d] == size:
        a = own[1][d]
        if a <= lo and hi <= a + n:
            return (lo - a, hi - a) if (lo - a, hi - a) != (0, n) else None
        raise held_only(v, d, lo, hi, a, n, own[2])
    if n != hi - lo:
        this = _mask_words(caller_loc(), "this call's mask")
        raise NkiError(f"mask: dim {d} of operand {_operand(v)} is neither {what} nor the extent {this} "
                       f"selects ({hi - lo}: [{lo}, {hi}))")
    return None


def held_only(v, d, lo, hi, a, n, loc, what=None, fix="mask that call as widely"):
    """The looser-mask error, the one wording for every way to reach past a masked call's result: `what` (this
    call's mask by default; an index, a slice or an index expression of `v`) asks for [lo, hi) of dim d of
    the index space, but operand `v`, an earlier masked call's result (its mask at kernel line `loc`), holds
    only [a, a + n) of it."""
    if what is None:
        what = "mask: " + _mask_words(caller_loc(), "this call's mask") + " selects"
        fix += ", or this one as narrowly"
    that = _mask_words(loc, "the mask") + (f" at {loc}" if loc else "")
    why = " (a result computed without a mask holds its operand's part)" if loc != v.st.loc else ""
    return NkiError(f"{what} [{lo}, {hi}) of dim {d}, but operand {_operand(v)} holds only [{a}, {a + n}) of it, "
                    f"the part {that} selected{why}: {fix}")


def _masked_dims(mask, data):
    """The dims of operand `data` that `mask`, the kernel's call's own, bounds, as apply_mask applied it to the
    view it returned: a variable bounds the dim it indexes of the view the kernel indexed with it, and the dim
    paired with that one of a tile beside the view (Trace.mask_dims). The axis rule alone (a variable of axis a
    bounds dim a) took `t[0:128, j]` with `j = nl.arange(64)[:, None]` as bounding the partitions, and a 2-D
    grid's variable indexing the last dim of a 3-D view as bounding nothing (fix23aw). A view no apply_mask
    returned: by its variables, or for a tile by that axis rule (_tile_cuts; one of axis 0 the partitions)."""
    if not isinstance(mask, Mask):
        return set()
    last = (_trace._current or _trace.current()).mask_dims
    if last is not None and last[0] is mask:
        hit = last[1].get(id(data))
        if hit is not None and hit[0] is data:
            return hit[1]
    if data.vars:
        return _var_dims(data, mask.bounds)
    return {v.axis if v.ndim == data.ndim else data.pd for v in mask.bounds
            if v.ndim == data.ndim or (v.axis == 0 and data.pd == 0)}


def warn_partial_reduction(call, data, axes, mask=None, verb="reduces"):
    """The warning of a call reducing dims `axes` of `data`, a masked call's result that holds only part of them
    (box_of): trnsim reduces the held part, the device the whole dim, whose rest no instruction wrote
    (undefined; tester23af F7). One warning per kernel line (Kernel.warn). `mask`: the call's own mask= (the
    kernel's), none for a call of trnsim's lowering. Every call combining the elements along a dim goes
    through here (bn_stats, max8, nc_find_index8 and tensor_tensor_scan too, tester23ah F7; unmasked, those read
    the whole free dims instead: whole_free, isa._positional); `verb`: what it does along the dim ("scans": a
    scan starts at the held part's first element, not the dim's)."""
    box = box_of(data)
    if box is None:
        return
    cut = [a for a in axes if box[0][a] > data.shape[a]]
    held, place = (_trace._current or _trace.current()).held.get(data.st.uid), _place(data)
    if cut and held is not None and place is not None:
        # The part the result holds is known: a dim it holds whole (a row mask's columns), or a slice of it
        # that stops short of the held part's edges inside the tile, reads no undefined element (tester23ah F1:
        # nl.sum(e[:, 8:40], axis=1, mask=...) of a row-masked e was warned "holds only [8, 40)").
        cut = [a for a in cut if (place[a][0] == held[a][0] > 0) or (
            place[a][0] + place[a][1] == held[a][0] + held[a][1] < box[0][a])]
    if cut and place is not None and not _held_whole(data):
        # A view the kernel made (a slice of a slice, .ap, a slice of a reshape, a chunk its call's mask cut)
        # reads the elements it names, on the device as here: inside the part the tile holds (all of it when
        # no mask cut it, or after a pad filled it) nothing undefined is read (tester23ai F2, F12: NKI's
        # LayerNorm tutorial's bn_stats chunks of a row-masked tile were warned "holds only [0, 512) of its
        # 1024"). The held part itself, as the call returned it, stands for the whole tile: warned.
        whole = tuple(data.st.shape) == tuple(box[0])
        region = held if held is not None else [(0, n) for n in data.st.shape] if whole else None
        if region is not None and len(region) == len(place):
            cut = [a for a in cut if not (region[a][0] <= place[a][0] and place[a][0] + place[a][1] <= region[a][0]
                                          + region[a][1] and (place[a] != region[a] or region[a] == (
                                              0, data.st.shape[a])))]
    if cut:
        # A dim the call's own mask bounds reads the held part only, on the device too (tester23ag F1): a
        # looser bound is the looser-mask error before this.
        masked = _masked_dims(mask, data)
        cut = [a for a in cut if a not in masked]
    if not cut:
        return
    a = cut[0]
    lo, n, full = box[1][a], data.shape[a], box[0][a]
    loc = caller_loc()
    _trace._current.kernel.warn(
        str(loc), f"{call} {verb} dim {a} of {_operand(data)}, which holds only [{lo}, {lo + n}) of its {full} "
        f"(the part {_mask_words(box[2], 'a mask')}{f' at {box[2]}' if box[2] else ''} selected): trnsim {verb} "
        f"that part; the device {verb} all {full}, {full - n} of them written by no instruction (undefined): "
        f"mask this call as the one that made the operand")


def _mask_words(loc, default):
    """`mask=<its source text>` of the one call with mask= at the kernel line `loc`, else `default`."""
    import ast
    import linecache

    from ._tensor import _statement_at

    node = _statement_at(loc[0], loc[1]) if loc else None
    if node is None:
        return default
    found = [k.value for c in ast.walk(node) if isinstance(c, ast.Call) for k in c.keywords if k.arg == "mask"]
    text = ast.get_source_segment("".join(linecache.getlines(loc[0])), found[0]) if len(found) == 1 else None
    if not text:
        return default
    return f"mask={text}" if isinstance(found[0], (ast.Name, ast.Call)) else f"mask=({text})"


def _operand(v):
    """An operand view as messages name it: its storage's label, preceded by its shape if it is a part."""
    return v.st.label() if tuple(v.shape) == v.st.shape else f"{list(v.shape)} of {v.st.label()}"


# ---- DMAs


def same_layout(call, dst, src, given=None):
    """NkiError unless `src` fills `dst` row for row, as `buf[...] = tile` requires: as many partitions (HBM: rows
    of dim 0) and the same shape but for dims of size 1. Only two HBM views may differ beyond that (then only in element
    count: one run of elements to another); so may an on-chip side whose partition dim is not first (the DMA
    reorders both sides alike), and a one-partition row (`t[3, :]`, `t[3:4, :]`) to or from a 1-D HBM region of
    as many elements (`o[i]`), in order: the row is the region. `call` None: the assignment `dst[...] = src`.
    `given`: (dst, src) before the call's mask cut them; where those fit and the cut ones do not, the error
    names the mask (tester23ak F5: it was "cannot copy a [128, 64] tile to a [100, 64] region")."""
    if given is not None:
        try:
            same_layout(call, dst, src)
        except NkiError:
            given = tuple(v.unchecked() if type(v) is Unbounded else v for v in given)  # (its shape, unchecked)
            try:
                same_layout(call, *given)
            except NkiError:
                given = None
            if given is None:
                raise
            raise _mask_cut_one(call, (dst, src), given) from None
        return
    views = (dst, src)
    if all(v.st.space == HBM for v in views) or any(v.st.space != HBM and v.pd != 0 for v in views):
        return
    hbm, chip = (dst, src) if dst.st.space == HBM else (src, dst)
    if hbm.st.space == HBM and hbm.ndim == 1 and chip.partitions == 1 and chip.size == hbm.shape[0]:
        return
    _same_shape(call, dst, src)


def _mask_cut_one(call, views, given):
    """The error of a copy whose mask cut one side (`views`, cut from `given`) and not the other the same way."""
    names = ("dst", "value" if call == "nl.store" else "src")
    said = [f"{n} {list(g.shape)} to {list(v.shape)}" if tuple(g.shape) != tuple(v.shape) else
            f"leaves {n} at {list(v.shape)}" for n, v, g in zip(names, views, given)]
    said[0] = said[0] if said[0].startswith("leaves") else "cuts " + said[0]
    said[1] = said[1] if said[1].startswith("leaves") else ("cuts " if said[0].startswith("leaves") else "") + said[1]
    return NkiError(f"{call}: {_mask_words(caller_loc(), 'the mask')} {said[0]} and {said[1]}, which no longer "
                    f"fit: a copy's mask cuts the axes its nl.arange variables index, and those of the other side "
                    f"that another nl.arange of the same axis and extent indexes, in an index space of as many "
                    f"dims: index both sides so")


def _copies_past_held(call, dst, src, maskable=True):
    """The looser-mask error (held_only) for a copy whose shapes differ only because one side is an earlier masked
    call's result passed whole: its whole index space's shape fits the other side, its held part does not
    (`nl.store(o, e)` of `e = nl.exp(t, mask=(i_p < 100))`, tester23af F1). `maskable`: nl.store's advice may
    be a mask (not on an access indexed at run time, which takes none)."""
    for v, other in ((src, dst), (dst, src)):
        box = box_of(v) if v.st.space != HBM else None
        if box is None or tuple(box[0]) == tuple(v.shape):
            continue
        if [n for n in box[0] if n != 1] != [n for n in other.shape if n != 1]:
            continue
        d = next(i for i, (w, n) in enumerate(zip(box[0], v.shape)) if w != n)
        what = f"{call}: the copy" if call else "the assignment"
        # The advice names the kernel's tile and fits the call (tester23ah F8): nl.store takes a mask;
        # nisa.dma_copy's current signature and an assignment take none.
        name = _tensor.var_name(_trace._current or _trace.current(), v.st)
        ref = name or "the result"
        ix = f"{name}[{', '.join(['i_p', 'i_f'] if v.ndim == 2 else ['i_p', '...'])}]" if name else (
            "with index variables")
        index = f"index {ref} ({ix}: its undefined rest is read with a warning)"
        fix = (f"mask the store as that call, or {index}" if call == "nl.store" and maskable else
               f"{index}, or copy only the part it holds (both sides cut to it)")
        raise held_only(v, d, 0, box[0][d], box[1][d], v.shape[d], box[2], what=f"{what} reads", fix=fix)


def indirect_layout(call, dst, src):
    """For a DMA one side of which has a run-time offset (an _Indirect: `o.ap(..., scalar_offset=s)`, `o[idx,
    :]`), whose shapes the DMA checks by element count only: the looser-mask error (held_only) when the other side
    is a masked call's result passed whole whose whole tile would fit (tester23ai F6: a tile holding 4 of its 8
    columns into a [16, 8] indirect dst was "src [16, 4] has 64 elements, dst [16, 8] has 128")."""
    if isinstance(dst, _Indirect) != isinstance(src, _Indirect):
        d = dst.view if isinstance(dst, _Indirect) else dst
        s = src.view if isinstance(src, _Indirect) else src
        if isinstance(d, NkiTensor) and isinstance(s, NkiTensor):
            _copies_past_held(call, d, s, maskable=False)


def _same_shape(call, dst, src):
    """NkiError unless src and dst have the same partitions and shape but for dims of size 1 (`[128, 1, F]`
    into `[128, F]`): NKI documents no other broadcast or reshape for a copy, and a [128, 8, 4] tile into a
    [128, 4, 8] region would scramble it. `call` None: the assignment `dst[...] = src`."""
    if dst.partitions != src.partitions or [n for n in src.shape if n != 1] != [n for n in dst.shape if n != 1]:
        _copies_past_held(call, dst, src)
        what = f"{call}: cannot copy" if call else "cannot assign"
        raise NkiError(f"{what} a {list(src.shape)} tile to a {list(dst.shape)} region (the same shape needed, "
                       f"but for dims of size 1, with as many partitions; nl.transpose / .reshape change the "
                       f"shape)")


def dma(dst, src, engine=None, dge_mode="unknown", oob_mode="error", accumulate=False, loc=None):
    if isinstance(src, _Indirect) or isinstance(dst, _Indirect):
        return _indirect_dma(dst, src, engine, dge_mode, oob_mode, accumulate)
    return _ops.dma_copy(dst, src, engine=engine, dge_mode=dge_mode, oob_mode=oob_mode, accumulate=accumulate,
                         loc=loc)


class _Indirect:
    """`t.ap(..., vector_offset=idx, indirect_dim=0)` or `t[idx_tile, ...]`: rows picked at run time;
    `t.ap(..., scalar_offset=s)`: the view moved when the DMA runs by s rows, or by s times `stride` bytes
    (`indirect_dim` k > 0: dim k's stride; 0: a row)."""

    __slots__ = ("view", "vector_offset", "scalar_offset", "stride")

    def __init__(self, view, vector_offset=None, scalar_offset=None, stride=0):
        self.view, self.vector_offset, self.scalar_offset, self.stride = view, vector_offset, scalar_offset, stride

    @property
    def shape(self):
        return self.view.shape

    @property
    def dtype(self):
        return self.view.dtype

    def is_indirect(self):
        return True


def dynamic_ap(t, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype):
    if not isinstance(scalar_offset, (NkiTensor, type(None))) or not isinstance(vector_offset,
                                                                               (NkiTensor, type(None))):
        raise NkiError(".ap: scalar_offset / vector_offset must be SBUF tensors")
    if type(indirect_dim) is not int or not 0 <= indirect_dim < max(1, len(t.dims)):
        raise NkiError(f".ap: indirect_dim={indirect_dim!r} is not a dim of the {len(t.dims)}-dim tensor "
                       f"{list(t.shape)}")
    if indirect_dim != 0:
        if vector_offset is not None:
            # The indirect DMA (vector_offset) picks whole rows of the tensor's dim 0 (sim/isa/semantics.h).
            unsupported(f".ap(vector_offset=..., indirect_dim={indirect_dim})", "a vector_offset picks whole rows "
                        "of the HBM tensor's dim 0 only (indirect_dim=0); scalar_offset= moves along another dim")
        if t.st.space != HBM:
            unsupported(f".ap(scalar_offset=..., indirect_dim={indirect_dim}) of an on-chip tensor")
        # The run-time value moves the whole access by that many steps of the tensor's dim `indirect_dim`
        # (tester23al F2: nki-library's cross_entropy picks each row's target element by `indirect_dim=1`;
        # tester23am F1: find_nonzero_indices writes each column's indices at a run-time position): the DMA's
        # scalar_offset_stride, dim k's stride in bytes (of the tensor's dtype, before a dtype= view).
        stride = t.dims[indirect_dim][0] * t.dtype.itemsize
        return _Indirect(t.ap(pattern, offset, dtype=dtype), None, scalar_offset, stride)
    if vector_offset is not None and scalar_offset is None and t.st.space == HBM and pattern:
        # The pattern's first pair steps the row index; its first row is what must lie inside the tensor.
        first = [list(pattern[0][:1]) + [1]] + [list(p) for p in pattern[1:]]
        return indexed_rows(t.ap(first, offset, dtype=dtype), vector_offset)
    return _Indirect(t.ap(pattern, offset, dtype=dtype), vector_offset, scalar_offset)


def held_indices(call, ind):
    """NkiError when the row indices of `ind` (an _Indirect's vector_offset) read partitions of a masked call's
    result tile outside the part it holds (Trace.held): the indirect DMA reads an index from each partition
    it is given, and those no instruction wrote, so the rows it moves are undefined. The one check for every
    spelling of the index: the result passed whole (whole_of: its whole tile, tester23ai F11: `nl.load(x[idx,
    i_f])` of an index tile loaded with mask=(i_p < 40) gathered 40 rows into a tile whose .shape says 128) or
    a view the kernel made of it (`it[i_p, 0]`, `it[:, 0]`, `it[0:128, 0:1]`: tester23al F1, a tail loop's
    scatter re-scattered the indices an earlier iteration left in the rows past the tail, silently)."""
    idx = ind.vector_offset if isinstance(ind, _Indirect) else None
    if not isinstance(idx, NkiTensor):
        return
    t = _trace._current or _trace.current()
    held = t.held.get(idx.st.uid)
    whole = whole_of(idx)
    read = _place(whole if whole is not None else idx)
    if held is None or read is None:
        return
    (a, n), (ra, rn) = held[0], read[0]
    if a <= ra and ra + rn <= a + n:
        return
    box = _boxes().get(idx.st.uid)
    loc = box[2] if box else None
    that = _mask_words(loc, "the mask") + (f" at {loc}" if loc else "")
    name = _tensor.var_name(t, idx.st) or "the index tile"
    rows = f"{name}[{a}:{a + n}]"
    fix = (f"mask the load as that call, or give it the rows the indices hold ({rows} as its row indices)"
           if call == "nl.load" else f"give it the rows the indices hold ({rows} as its row indices, the other "
           f"side cut to as many rows)")
    if whole is not None:
        raise NkiError(f"{call}: its row indices {_operand(idx)} hold only rows [{a}, {a + n}) of their "
                       f"{whole.partitions}, the part {that} selected: the indirect DMA reads a row index from each "
                       f"of the {whole.partitions} partitions, and those outside [{a}, {a + n}) no instruction "
                       f"wrote, so the rows it moves there are undefined: {fix}")
    raise NkiError(f"{call}: its row indices, partitions [{ra}, {ra + rn}) of {idx.st.label()}, reach past the "
                   f"rows [{a}, {a + n}) it holds, the part {that} selected: the indirect DMA reads a row index from "
                   f"each of those {rn} partitions, and those outside [{a}, {a + n}) no instruction wrote (in a "
                   f"loop they may hold an earlier iteration's indices), so the rows it moves there are "
                   f"undefined: {fix}")


def _indirect_dma(dst, src, engine, dge_mode, oob_mode, accumulate):
    if isinstance(src, _Indirect) and isinstance(dst, _Indirect):
        raise NkiError("dma_copy: only one side can have a run-time offset")
    ind = src if isinstance(src, _Indirect) else dst
    d = dst.view if ind is dst else dst
    s = src.view if ind is src else src
    if ind.view.st.space != HBM:
        unsupported("dma_copy with a run-time offset on an on-chip tensor")
    if ind.vector_offset is not None:
        rows = ind.vector_offset.partitions
        if (d if ind is src else s).partitions != rows:
            raise NkiError(f"dma_copy: vector_offset has {rows} rows but the other side has "
                           f"{(d if ind is src else s).partitions}")
        return _ops.dma_copy(d, s, engine=engine, dge_mode=dge_mode, oob_mode=oob_mode, accumulate=accumulate,
                             vector_offset=ind.vector_offset, indirect_dst=ind is dst)
    return _ops.dma_copy(d, s, engine=engine, dge_mode=dge_mode, oob_mode=oob_mode, accumulate=accumulate,
                         scalar_offset=ind.scalar_offset, scalar_offset_dst=ind is dst,
                         scalar_offset_stride=ind.stride)


# ---- iota of the earlier style


def iota_expr(expr, dtype, mask):
    """nisa.iota(expr, dtype): a tile holding the values of an affine index expression: the partition
    variable's coefficient is the channel multiplier, the free variables' the steps."""
    if isinstance(expr, int):
        raise NkiError("iota: the expression must involve nl.arange variables")
    if not isinstance(expr, IndexExpr):
        raise NkiError(f"iota: expected an nl.arange expression, got {expr!r}")
    shape = expr.shape
    grids = {v.grid for v in expr._vars()}
    if len(grids) == 1 and None not in grids:
        # An nl.mgrid expression has the whole grid's shape, as NumPy's mgrid (dense) does, whichever axes it
        # uses: `3 * g.y + g.z` of mgrid[0:128, 0:4, 0:3, 0:3] is [128, 4, 3, 3], the same values on every
        # partition (channel_multiplier 0); nl.arange's open grid keeps the axes its expression has.
        shape = grids.pop()
    shape = tile_shape(shape)
    nmax = expr.ndim
    coef = [0] * len(shape)
    for v, k in expr.terms.items():
        coef[v.axis + (nmax - v.ndim)] += k
    d = dt(dtype, None)
    dst = _ops.new_tile(shape, d, SBUF, "iota")
    const = expr.const
    if mask is not None:
        # The instruction for the masked-in region (the tile keeps the expression's shape, as a masked
        # nl.load's): its first element holds the expression's value at the variables' lower bounds.
        if isinstance(mask, Mask) and not mask.empty():
            other = [v for v in mask.bounds if v not in expr.terms]
            if other:
                raise NkiError(f"mask: its nl.arange variable {other[0]!r} is not in the iota expression")
            const += sum(k * mask.bounds[v][0] for v, k in expr.terms.items() if v in mask.bounds)
        (part,), box = apply_mask(mask, (dst,), box=True)
        _ops.iota(part, coef[1:], const, coef[0])
        return boxed_part(dst, part, box)
    _ops.iota(dst, coef[1:], const, coef[0])
    return fresh(dst)


# ---- nl.* lowerings


_BITVEC = frozenset(("bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"))


def _sbuf_result(shape, dtype, name):
    return _ops.new_tile(shape, dtype, SBUF, name)


def _scalar(x):
    return isinstance(x, (int, float, np.number)) and not isinstance(x, bool) or isinstance(x, bool)


def _partition_dim_needed(v, name):
    """NkiError for an on-chip operand without a partition dim, which an engine instruction cannot take as it is
    (`t[3, :]` is a [1, ...] tile of one partition: _tensor._PARTITION_KEPT)."""
    if isinstance(v, NkiTensor) and v.pd < 0 and v.st.space != HBM:
        raise NkiError(f"nl.{name}: operand {list(v.shape)} has no partition dim: an engine instruction works on "
                       f"partitions; index it as a tile of one partition, t[{v.p0}:{v.p0 + 1}, ...]")


def elementwise(name, alu, x, y, dtype=None, out=None, engine=None):
    """Binary nl.* math: two tiles -> tensor_tensor; a tile and a number -> tensor_scalar (number first:
    reverse0), on the Vector engine (nki.language.add etc. and nki.isa.tensor_tensor / tensor_scalar docs)."""
    xt, yt = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    for v in (x, y):
        if isinstance(v, BlockTensor):  # (not a tile: each block is one)
            raise v.whole_error()
        _partition_dim_needed(v, name)
    if not xt and not yt:
        raise NkiError(f"nl.{name}: at least one operand must be a tensor")
    for v, which in ((x, "x"), (y, "y")):
        if not isinstance(v, NkiTensor) and not isinstance(v, (int, float, np.number)):
            raise NkiError(f"nl.{name}: operand {which} must be a number or a tile, got {type(v).__name__} {v!r:.60}")
    x, y = load_if_hbm(x, name), load_if_hbm(y, name)
    if xt and yt and x.shape != y.shape:
        x, y = _broadcast_pair(x, y, name)
    ref = x if xt else y
    if xt and yt and y.free_size > x.free_size:
        ref = y  # the result has the broadcast shape: [P, 1] - [P, F] is [P, F]
    if out is None:
        # NKI's type promotion is for arithmetic operators; a bitvec one (its math operator table's other
        # kind: bit patterns) with a number keeps the tile's dtype (uint32 << 2 is uint32, not float32).
        ops = (x, y) if alu not in _BITVEC else [v for v in (x, y) if isinstance(v, NkiTensor)]
        out = _sbuf_result(ref.shape, dt(dtype, promote(*ops)), name)
        res = True
    else:
        res = False
    if xt and yt:
        if y.free_size == 1 and x.free_size != 1 and y.partitions == x.partitions:
            _ops.tensor_scalar(out, x, alu, y, engine=engine)
        elif x.free_size == 1 and y.free_size != 1 and x.partitions == y.partitions:
            _ops.tensor_scalar(out, y, alu, x, reverse0=True, engine=engine)
        else:
            _ops.tensor_tensor(out, x, y, alu, engine=engine)
    elif xt:
        _ops.tensor_scalar(out, x, alu, float(y), engine=engine)
    else:
        _ops.tensor_scalar(out, y, alu, float(x), reverse0=True, engine=engine)
    return fresh(out) if res else out


def _broadcast_pair(x, y, name):
    if x.ndim != y.ndim:
        # A tile of its partition dim alone ([P]: a reduction's result with keepdims=False) against [P, F...] is
        # a per-partition scalar, as in NKI's RMSNorm and softmax tutorials (nl.multiply(a_tile, rms), rms [P]).
        if min(x.ndim, y.ndim) == 1 and x.partitions == y.partitions:
            return x, y
        raise NkiError(f"nl.{name}: operands {list(x.shape)} and {list(y.shape)} differ in rank")
    shape = tuple(max(a, b) for a, b in zip(x.shape, y.shape))
    for a, b in zip(x.shape, y.shape):
        if a != b and 1 not in (a, b):
            raise NkiError(f"nl.{name}: operands {list(x.shape)} and {list(y.shape)} do not broadcast")
    if x.partitions != y.partitions:
        # [1, F] against [P, F]: the row repeated on P partitions first (partition_broadcast).
        if x.partitions == 1:
            x = partition_broadcast(x, y.partitions, "broadcast")
        elif y.partitions == 1:
            y = partition_broadcast(y, x.partitions, "broadcast")
    # A [P, 1] operand stays a per-partition scalar (tensor_scalar); others broadcast by a stride-0 view.
    if y.free_size == 1 or x.free_size == 1:
        return x, y
    return x.broadcast_to(shape), y.broadcast_to(shape)


def unary(name, func, x, dtype=None, out=None):
    """Unary nl.* math: one activation on the Scalar engine (nki.language.exp etc.; nki.isa.activation)."""
    _partition_dim_needed(x, name)
    x = load_if_hbm(x, name)
    if out is None:
        out = _sbuf_result(x.shape, dt(dtype, x.dtype), name)
        _ops.activation(out, func, x)
        return fresh(out)
    _ops.activation(out, func, x)
    return out


def reduce(name, alu, x, axis, dtype=None, keepdims=False, negate=False, mask=None):
    """nl.sum / max / min / prod over free axes: tensor_reduce on the Vector engine (`mask`: the kernel's call's
    own)."""
    x = load_if_hbm(x, name)
    if axis is None:
        axis = tuple(range(1, x.ndim))
    else:
        axis = _ops.reduce_axes(x, axis)  # (before the result's shape, which needs the partition dim)
    shape = reduced_shape(x, axis, keepdims)  # NKI's keepdims=False: [128, 64] over axis 1 gives [128]
    out = _sbuf_result(shape, dt(dtype, x.dtype), name)
    _ops.tensor_reduce(out, alu, x, axis, negate, any_axes=True, mask=mask)
    return fresh(out)


def _fast_paths():
    """trnsim._core.nki_new_tile_op, which makes the usual loads' and matmuls' tiles and ops in one call, and
    nki_iadd_matmul, a tiled matmul's `acc += nl.matmul(...)` (python/src/bind_trace.cpp); None, None without
    the bindings. Also installs NkiTensor's indexing with the bindings' short path for HBM slices."""
    try:
        from .. import _core

        _core.nki_trace_types(_tensor.Storage, NkiTensor, _trace.Op, _void.WRAPPER_CODE)
        # HBM slices made before, from the trace's cache in one call (else NkiTensor's own __getitem__)
        NkiTensor.__getitem__ = _core.nki_method(_core.nki_getitem)
        return _core.nki_new_tile_op, _core.nki_iadd_matmul
    except (ImportError, AttributeError):
        return None, None


_new_tile_op, _iadd_matmul = _fast_paths()
_SRC = ("src",)  # its operand slots: nl.load's dma_copy, nl.matmul's nc_matmul
_MATMUL_SRCS = ("stationary", "moving")


def load_if_hbm(x, name):
    if isinstance(x, NkiTensor) and x.st.space == HBM:
        raise NkiError(f"nl.{name}: operand {list(x.shape)} is in HBM; load it into SBUF first (nl.load)")
    return x


def load(src, mask=None, dtype=None):
    """nl.load: one DMA from HBM into a new SBUF tile (nki.language.load)."""
    if mask is None and type(src) is NkiTensor and src.st.space == HBM:  # the common case, in short
        dims = src.dims
        nd = len(dims)
        if nd == 2:
            shape = (dims[0][1], dims[1][1])
        else:
            shape = tile_shape(tuple([d[1] for d in dims]))
        dtype = src.dtype if dtype is None else dt(dtype, src.dtype)
        # The tile and its DMA in one call, when it can (depth 3: the kernel's frame is nl.load's caller)
        t = _trace._current
        if _new_tile_op is not None and t is not None and t.bad_ap is None:  # (its record checks no .ap view)
            out = _new_tile_op(t, shape, dtype, SBUF, "load", 3, "dma_copy", _SRC, (src,), _ops._LOAD_ATTRS, True)
            if out is not None:
                return out
        out = _ops.new_tile(shape, dtype, SBUF, "load", None, 3)
        # dma_copy(out, src) as _ops.dma_copy records it with its defaults: none of its checks can fail for an
        # HBM view and the new SBUF tile of its shape, and no PSUM is touched.
        st = out.st
        t = st.trace
        o = t.record("dma_copy", {"dst": out, "src": src}, (src,), (out,), _ops._LOAD_ATTRS, st.loc)
        o.load = True
        t.fresh[st.uid] = o
        return out
    if isinstance(src, _Indirect):
        if mask is not None:
            return _masked_gather(src, mask, dtype)
        held_indices("nl.load", src)
        shape, sdt = src.shape, src.dtype
    else:
        if not isinstance(src, NkiTensor):
            raise NkiError(f"nl.load: src must be an HBM tensor, got {type(src).__name__}")
        if mask is not None or type(src) is Unbounded:
            return _masked_load(src, mask, dtype)
        if src.st.space != HBM:
            raise NkiError("nl.load: src must be in HBM (use nl.copy / nisa.tensor_copy on chip)")
        shape, sdt = src.shape, src.dtype
    shape = tile_shape(shape)
    out = _ops.new_tile(shape, sdt if dtype is None else dt(dtype, sdt), SBUF, "load")
    dma(out, src, loc=out.st.loc)  # the new tile's loc: the kernel line (as caller_loc finds it)
    return fresh(out)


def tile_shape(shape):
    """An on-chip tile's shape for values of `shape`: a tile has a partition dim and a free dim, so a 1-D shape
    [N] is [N, 1] and a 0-d one (one element, `x[b, h]`) [1, 1]; others as they are."""
    return tuple(shape) if len(shape) >= 2 else (shape[0], 1) if len(shape) else (1, 1)


def _masked_load(src, mask, dtype):
    """nl.load(src, mask=...): the tile has the index's shape, as in NKI, and one DMA writes its masked-in
    region; that region's view is the result (what the kernel's next calls work on: an unmasked nl.exp of it
    computes the masked-in part only, as the rest holds nothing)."""
    full = tuple(src.shape)
    cuts = {d: mask.bounds[var] for d, var in enumerate(src.vars or ()) if var is not None
            and isinstance(mask, Mask) and var in mask.bounds}
    (src,), box = apply_mask(mask, (src,), dma=True, box=True)
    if src.st.space != HBM:
        raise NkiError("nl.load: src must be in HBM (use nl.copy / nisa.tensor_copy on chip)")
    if not cuts and box is not None and tuple(box[0]) == full:
        # a view without index variables (slices, or a slice past the tensor's end: _tensor._SlicePast) cut by
        # the mask as a tile: its region (`nl.load(x[0:128, :], mask=(i_p < 72))` was "src [72, 8] has 576
        # elements, dst [128, 8] has 1024")
        cuts = {d: (a, a + n) for d, (a, n) in enumerate(zip(box[1], src.shape)) if n != full[d]}
    full = tile_shape(full)
    out = _ops.new_tile(full, src.dtype if dtype is None else dt(dtype, src.dtype), SBUF, "load")
    if _trace._current.voiding is not None:
        return out  # (the mask selects nothing: a void tile of the index's shape, _void)
    mask_box(out, full, (0,) * len(full), out.st.loc)
    if cuts:
        part = out.index(tuple(slice(*cuts[d]) if d in cuts else slice(None) for d in range(len(full))))
        if part.shape != out.shape:
            out = held_part(LoadPart.of(part, full))
    dma(out, src, loc=out.st.loc)
    return fresh(out)


def _masked_gather(src, mask, dtype):
    """nl.load(x[idx_tile, i_f], mask=...) (nki-samples' resize_nearest_fixed_dma_kernel's tail tile): the tile
    has the index's shape and one indirect DMA writes its masked-in part, as _masked_load's does. The mask
    cuts the gather as a tile (the variable of axis 0 bounds its rows, so the entries of the index tile past
    them are never read, those of axis a > 0 its dim a); only a gather of vector_offset rows."""
    if mask is True or (isinstance(mask, np.bool_) and mask):
        return load(src, None, dtype)  # (a loop-only bound that holds: no bound)
    empty = mask is False or isinstance(mask, np.bool_) or (isinstance(mask, Mask) and mask.empty())
    if not empty and (src.vector_offset is None or src.scalar_offset is not None or not isinstance(mask, Mask)
                      or any(var.ndim != src.view.ndim for var in mask.bounds)):
        apply_mask(mask, (src,))  # (refused, or not a mask: its own error)
    if empty:
        _empty(False, (src,), False)  # NKI emits no instruction: a void tile of the index's shape (_void)
    full = tile_shape(tuple(src.shape))
    out = _ops.new_tile(full, src.dtype if dtype is None else dt(dtype, src.dtype), SBUF, "load")
    if _trace._current.voiding is not None:
        return out
    view = src.view
    vc, _ = _tile_cuts(view, None, None, mask.bounds)
    lo, hi = vc.get(0, (0, view.shape[0]))
    first = NkiTensor(view.st, view.dtype, view.boff, ((view.dims[0][0], 1),) + tuple(view.dims[1:]), -1, 0)
    first = first.index((slice(None),) + tuple(slice(*vc[d]) if d in vc else slice(None)
                                               for d in range(1, view.ndim)))
    idx = src.vector_offset
    whole = whole_of(idx)
    if whole is not None:
        # a masked call's result passed whole as the row indices: the rows the mask keeps must be rows it holds
        # (tester23ai F11), cut from its whole tile, where they lie
        a, n = _place(idx)[0]
        if not a <= lo < hi <= a + n:
            raise held_only(idx, 0, lo, hi, a, n, box_of(idx)[2])
        idx = whole
    rows = indexed_rows(first, idx.index((slice(lo, hi), slice(None))))
    held_indices("nl.load", rows)  # (a view of the indices, `it[i_p, 0]`, masked past the rows they hold)
    mask_box(out, full, (0,) * len(full), out.st.loc)
    part = out.index(tuple(slice(*vc[d]) if d in vc else slice(None) for d in range(len(full))))
    if part.shape != out.shape:
        out = held_part(LoadPart.of(part, full))
    dma(out, rows, loc=out.st.loc)
    return fresh(out)


def store(dst, value, mask=None):
    """nl.store: one DMA from SBUF into HBM; a PSUM value is first copied to SBUF; a number is first set into
    a new SBUF tile of dst's rows x elements per row (one memset), which the DMA then stores
    (nki.language.store)."""
    if not isinstance(value, NkiTensor):
        if not isinstance(value, (int, float, np.number)):
            from ._indirect import IndirectView

            what = ("a Tensor Indirection view (t.indirect), which a compute instruction reads or writes, not a "
                    "DMA" if isinstance(value, IndirectView) else type(value).__name__)
            raise NkiError(f"nl.store: value must be an on-chip tile or a number, got {what}")
        views = apply_mask(mask, (dst,), skip=True, dma=True)
        if views is None:
            return  # nothing masked in: NKI emits no instruction
        (d,) = views
        if not isinstance(d, NkiTensor) or d.st.space != HBM:
            raise NkiError("nl.store: dst must be an HBM tensor")
        loc = caller_loc()
        pmax = _ops._target().partitions
        if d.partitions > pmax:
            raise NkiError(f"nl.store(value={value!r}): dst {d.st!r} has {d.partitions} rows, but the number is "
                           f"stored from an SBUF tile of one row per partition ({pmax} partitions, "
                           f"nl.tile_size.pmax): store at most {pmax} rows per call (dst[0:{pmax}], "
                           f"dst[{pmax}:{min(d.partitions, 2 * pmax)}], ...)", loc)
        tile = _ops.new_tile((d.partitions, d.free_size), d.dtype, SBUF, "store_value", loc)
        _ops.memset(tile, value, loc=loc)
        dma(d, tile, loc=loc)
        return
    given = None
    if mask is not None:
        given = (dst, value)
        views = apply_mask(mask, given, skip=True, dma=True)
        if views is None:
            return  # nothing masked in: NKI emits no instruction
        dst, value = views
    d = dst.view if isinstance(dst, _Indirect) else dst
    if not isinstance(d, NkiTensor) or d.st.space != HBM:
        raise NkiError("nl.store: dst must be an HBM tensor")
    if not isinstance(dst, _Indirect):
        same_layout("nl.store", dst, value, given)
    else:
        held_indices("nl.store", dst)
        indirect_layout("nl.store", dst, value)
    loc = caller_loc()
    if value.st.space == PSUM:
        value = _psum_to_sbuf(value, loc)
    dma(dst, value, loc=loc)


# "k.py:12" -> (first partition, first stored partition, end) of the last build's nl.store copies of PSUM rows
# from an earlier start (_psum_to_sbuf), so that the warning of such a copy reading rows before the stored ones
# where no instruction wrote says they are not stored (_jit.warnings_by_call; cleared there).
store_copies = {}


def _psum_to_sbuf(v, loc):
    """nl.store's copy of a PSUM value to SBUF (the DMA reads SBUF: nki.language.store, "an extra copy will be
    performed to move the tile to SBUF first"), returning the SBUF view holding v's elements. The copy is an
    engine instruction, so it starts at a partition one may start at: v's rows from the nearest such start
    below them (_legal_from), the rows before v's copied too and not stored (tester23aj F3: `nl.store(o[8:100],
    acc[8:100])`, or a store masked to rows >= 8, was the partition-start RuleError of this copy, which the
    kernel never wrote)."""
    a, n = v.p0, v.partitions
    s = _legal_from(a, n) if v.pd == 0 else a
    src = v
    if s != a:
        store_copies[str(loc)] = (s, a, a + n)
        dims = list(v.dims)
        dims[v.pd] = (dims[v.pd][0], a + n - s)
        src = NkiTensor(v.st, v.dtype, v.boff, tuple(dims), v.pd, s)
    tmp = _ops.new_tile(src.shape, v.dtype, SBUF, "store_psum_copy", loc)
    _ops.tensor_copy(tmp, src, loc=loc)
    if s == a:
        return tmp
    return tmp.index((slice(a - s, a - s + n),) + (slice(None),) * (v.ndim - 1))


def copy(x, dtype=None, mask=None):
    """nl.copy: one tensor_copy into a new SBUF tile (nki.language.copy)."""
    (x,), box = operand_region(mask, (x,))
    x = load_if_hbm(x, "copy")
    out = _ops.new_tile(x.shape, x.dtype if dtype is None else dt(dtype, x.dtype), SBUF, "copy")
    _ops.tensor_copy(out, x, loc=out.st.loc)
    return boxed(fresh(out), box)


def transpose(x, dtype=None, mask=None):
    """nl.transpose: a 2-D partition <-> free transpose, nc_transpose on the Tensor engine into a new PSUM
    tile (the Vector engine for tiles of at most 32 x 32, into SBUF) (nki.language.transpose,
    nki.isa.nc_transpose)."""
    if mask is None:
        x = legal_rows(legal_rows(x), 1)  # (x's free dim is the result's partitions)
    (x,), box = operand_region(mask, (x,))
    x = load_if_hbm(x, "transpose")
    if x.ndim != 2:
        raise NkiError(f"nl.transpose: a 2-D tile is needed, got {list(x.shape)}")
    p, f = x.shape
    if not (p <= 32 and f <= 32):
        x = to_sbuf(x, "transpose")
    # The transpose keeps x's dtype (nki.isa.nc_transpose); dtype= casts its result with a tensor_copy into a
    # tile of that dtype in the same buffer (nki.language.transpose: "data type to cast the output type to").
    if p <= 32 and f <= 32:
        out = _sbuf_result((f, p), x.dtype, "transpose")
        _ops.nc_transpose(out, x, "DVE")
    else:
        out = _ops.new_tile((f, p), x.dtype, PSUM, "transpose")
        _ops.nc_transpose(out, x, "PE")
    to = dt(dtype, x.dtype)
    if to != x.dtype:
        cast = _ops.new_tile((f, p), to, out.st.space, "transpose")
        _ops.tensor_copy(cast, out)
        out = cast
    return boxed(fresh(out), result_box(box, out.shape, (1, 0)))


def partition_broadcast(x, parts, name):
    """A [1, F] tile (or HBM row) repeated on `parts` partitions: a new SBUF tile of x's dtype
    (nki.language.broadcast_to: "a new tile broadcast along the partition dimension of src, this new tile will
    be in SBUF"). On chip, as NKI's fused Mamba tutorial describes `A_i.broadcast_to((nl.tile_size.pmax, n))`
    ("a partition-dimension broadcast ... using a separate instruction on TensorE"): a ones row [1, parts]
    (one memset) as the matmul's stationary and x as its moving operand, one nc_matmul per PSUM bank (512 FP32
    columns) into PSUM, each copied out to the SBUF tile (tensor_copy); x * 1.0 summed over one partition is x
    exactly. An HBM row is read once per partition by one DMA whose row step is 0 (nki-library's bias loads:
    TensorView(bias).broadcast(dim=0, size=T) into dma_copy)."""
    if x.st.space == HBM:
        if x.ndim < 2 or x.shape[0] != 1:
            raise NkiError(f"{name}: only a dim of size 1 broadcasts, got {list(x.shape)}")
        out = _sbuf_result((parts,) + tuple(x.shape[1:]), x.dtype, name)
        _ops.dma_copy(out, x.broadcast(0, parts))
        return fresh(out)
    if x.partitions != 1:
        raise NkiError(f"{name}: only a tile of 1 partition broadcasts along the partition dim, got "
                       f"{list(x.shape)}")
    if x.ndim != 2:  # (a [1, 1, F] weight of a 3-D tile: the row broadcast flat, then shaped back)
        if x.ndim < 2 or not x.is_contiguous():
            unsupported(f"{name}: a partition broadcast of a {x.ndim}-D view", "reshape it to [1, F] first")
        flat = partition_broadcast(x.reshape((1, x.free_size)), parts, name)
        return flat.reshape((parts,) + tuple(x.shape[1:]))
    if not x.dtype.is_float:
        raise NkiError(f"{name}: a partition broadcast runs on the Tensor engine, which multiplies floats, not "
                       f"{x.dtype.name}: broadcast the row from HBM instead (nl.broadcast_to(hbm_row, shape), "
                       "one DMA)")
    x = to_sbuf(x, name)
    if x.p0 != 0:
        # The Tensor engine reads a 1-partition operand from partition 0, 32, 64 or 96 only: the row is moved
        # to partition 0 of a tile of its own first (one SBUF-to-SBUF DMA), where the ones row is too.
        row = _sbuf_result((1, x.free_size), x.dtype, name + "_row")
        _ops.dma_copy(row, x)
        x = row
    ones = _ops.new_tile((1, parts), x.dtype, SBUF, name + "_ones")
    _ops.memset(ones, 1.0)
    f = x.free_size
    out = _sbuf_result((parts, f), x.dtype, name)
    for c0 in range(0, f, 512):
        c1 = min(f, c0 + 512)
        acc = _ops.new_tile((parts, c1 - c0), F32, PSUM, name + "_psum")
        acc.st.role = "partition broadcast"  # named in an allocation error: the user wrote no such tile
        _ops.nc_matmul(acc, ones, x[:, c0:c1] if (c0, c1) != (0, f) else x, accumulate=False)
        _ops.tensor_copy(out[:, c0:c1] if (c0, c1) != (0, f) else out, acc)
    return fresh(out)


def to_sbuf(x, name):
    """A PSUM operand an instruction must read from SBUF: copied there first (tensor_copy), as the compiler
    does for nl.* calls given a PSUM tile."""
    if x.st.space != PSUM:
        return x
    t = _sbuf_result(x.shape, x.dtype, name + "_psum_copy")
    _ops.tensor_copy(t, x)
    return t


def matmul(x, y, transpose_x=False, mask=None):
    """nl.matmul: x @ y (or x.T @ y with transpose_x) into a new PSUM tile. Without transpose_x the
    documented extra transpose is inserted: x [M, K] goes through nc_transpose (Tensor engine, into PSUM) and a
    tensor_copy back to SBUF, then nc_matmul(stationary=x.T, moving=y) (nki.language.matmul)."""
    boxes = _boxes()
    if (transpose_x and mask is None and type(x) is NkiTensor and type(y) is NkiTensor and x.st.space == SBUF
            and y.st.space == SBUF and x.pd == 0 and y.pd == 0 and x.dims[0][1] == y.dims[0][1] and not (
                boxes and (x.st.uid in boxes or y.st.uid in boxes))):
        # the common case, in short: SBUF operands (nothing to load or copy out of PSUM), no mask
        xd, yd = x.dims, y.dims  # (partition dims first: a 2-D operand's free size is its dim 1)
        shape = (xd[1][1] if len(xd) == 2 else x.free_size, yd[1][1] if len(yd) == 2 else y.free_size)
        # nc_matmul's record for operands it would accept as they are (nc_matmul(..., _checked=True)); a new
        # tile holds no accumulation group, so the matmul overwrites and opens one (what matmul_accumulate's
        # touch_psum finds and records for it). The tile and its op in one call, when it can.
        attrs = {"accumulate": False, "perf_mode": "none", "is_transpose": False}
        t = _trace._current
        if _new_tile_op is not None and t is not None and t.bad_ap is None:
            out = _new_tile_op(t, shape, F32, PSUM, "matmul", 3, "nc_matmul", _MATMUL_SRCS, (x, y), attrs, False)
            if out is not None:
                t.psum_groups[out.st.uid] = [(out._rect or out.rect(), "mm", None)]
                return out
        out = _ops.new_tile(shape, F32, PSUM, "matmul", None, 3)  # (under nl.matmul)
        st = out.st
        t = st.trace
        t.psum_groups[st.uid] = [(out._rect or out.rect(), "mm", None)]
        t.fresh[st.uid] = t.record("nc_matmul", {"dst": out, "stationary": x, "moving": y}, (x, y), (out,), attrs,
                                   st.loc)
        return out
    if mask is None:
        x, y = whole_contraction(x, y, 0 if transpose_x else 1)
        x, y = legal_rows(x, 0 if transpose_x else 1), legal_rows(y)
    given = (x, y)
    if mask is not None:
        x, y = matmul_mask(mask, x, y, 1 if transpose_x else 0, "nl.matmul")
    masked = (x, y)
    x, y = load_if_hbm(x, "matmul"), load_if_hbm(y, "matmul")
    x, y = to_sbuf(x, "matmul"), to_sbuf(y, "matmul")
    if not transpose_x:
        m, k = x.partitions, x.free_size
        pmax = _ops._target().partitions
        if k > pmax:
            # (else the transpose's [K, M] result would be the one blamed for K)
            raise NkiError(f"nl.matmul: x is [M, K] = [{m}, {k}]: the contraction dim K = {k} > {pmax} (K goes on "
                           f"the partitions: at most nl.tile_size.pmax = {pmax}); split K into tiles of at most "
                           f"{pmax} and accumulate the matmuls into one PSUM tile")
        xt_ps = _ops.new_tile((k, m), x.dtype, PSUM, "matmul_transpose")
        _ops.nc_transpose(xt_ps, x, "PE")
        xt = _sbuf_result((k, m), x.dtype, "matmul_transpose_sb")
        _ops.tensor_copy(xt, xt_ps)
        x = xt
    if x.partitions != y.partitions:
        raise _contraction_error(x, y, given, transpose_x, mask)
    out = _ops.new_tile((x.free_size, y.free_size), F32, PSUM, "matmul")
    _ops.nc_matmul(out, x, y, None, loc=out.st.loc)
    from .isa import _matmul_box, _outer_tail

    x_m = 1 if transpose_x else 0
    box = _matmul_box(mask, given, masked, False, x_m)
    return _outer_tail(boxed(fresh(out), box), mask, box, given, x_m)


_MATMUL_MASK_RULE = (
    "a matmul's mask is that of nisa.nc_matmul(stationary=x.T, moving=y) (nki.language.matmul: matmul(x, y) "
    "lowers to nc_matmul(transpose(x), y)): of tiles, a variable of axis 0 (nl.arange(n)[:, None]) bounds the "
    "contraction dim K of both operands and one of axis 1 (nl.arange(n)[None, :]) the free dims, M of x and N of "
    "y; a K, M or N tail held by masked loads needs no mask here")


def matmul_mask(mask, x, y, x_m, call):
    """(x, y) cut to `mask` for a matmul of x and y whose result's rows M come from dim `x_m` of x (0: nl.matmul's
    x [M, K] without transpose_x; 1: x.T [K, M], nc_matmul's stationary): the mask is the lowered nc_matmul's,
    so for tiles (views without index variables) a variable of axis 0 bounds K of both and one of axis 1 M and
    N (_MATMUL_MASK_RULE); indexed views as apply_mask has them (by their variables). NkiError with that rule
    for a mask that does not fit, and for an axis-1 variable bounding x [M, K] with the very range of K that x
    holds from a masked load (a K tail written in x's own layout, which would cut M and N instead)."""
    plain = all(isinstance(v, NkiTensor) and not v.vars and v.ndim == 2 for v in (x, y))
    if plain and x_m == 0 and isinstance(mask, Mask):
        own = box_of(x)
        for var, (lo, hi) in mask.bounds.items():
            if (var.ndim == 2 and var.axis == 1 and own is not None and own[0][1] != x.shape[1]
                    and (own[1][1], own[1][1] + x.shape[1]) == (lo, hi) and (lo, hi) != (0, var.size)):
                raise NkiError(f"{call}: {_mask_words(caller_loc(), 'the mask')} bounds a variable of axis 1 to "
                               f"[{lo}, {hi}), the very part of x's K (dim 1) that x holds from a masked load; but "
                               + _MATMUL_MASK_RULE + f": here it would cut M (and N if of its range) to [{lo}, {hi}). Drop the "
                               f"mask (the loads hold the K tail), or bound K with a variable of axis 0")
    ignore = None
    if plain and isinstance(mask, Mask) and not mask.empty():
        _check_contraction_bound(mask, x, y, x_m, call)
        ignore = _free_dim_owners(mask, x, y, x_m, call)
    if isinstance(mask, Mask) and not mask.empty() and all(isinstance(v, NkiTensor) and v.ndim == 2 for v in (x, y)) \
            and bool(x.vars) != bool(y.vars):
        return _matmul_mask_one_indexed(mask, x, y, x_m)
    try:
        return apply_mask(mask, (x, y), axes=({0: 1, 1: 0}, None) if plain and x_m == 0 else None, ignore=ignore)
    except NkiError as e:
        if not plain:
            raise
        raise type(e)(f"{call}: {e.bare}; {_MATMUL_MASK_RULE}", e.loc) from None


def _free_dim_owners(mask, x, y, x_m, call):
    """For a matmul of tiles passed whole: per operand (x, y), the mask variables of axis 1 that do not bound its
    free dim (M of x, N of y), for apply_mask(ignore=). Such a variable bounds the free dim whose index space
    has its range; when both have it (M == N), the one whose operand holds just the bound's part from its own
    masked call (the mask restates x's M tail: `x = nl.load(aT[i_k, i_m], mask=(i_m < 96))`, then
    `nl.matmul(x, y, transpose_x=True, mask=(i_m < 96))`); NkiError when that does not tell them apart, as
    the bound would cut M or N only because their sizes agree (tester23af F10: an M-tail mask cut N to 96 when
    N was 128 and was an error when it was 512)."""
    def held(v, d):
        own = box_of(v)
        return (own[0][d], own[1][d], own[1][d] + v.shape[d]) if own is not None else (v.shape[d], 0, v.shape[d])

    ignore = (set(), set())
    for var, (lo, hi) in mask.bounds.items():
        if var.ndim != 2 or var.axis != 1:
            continue
        (sx, ax, bx), (sy, ay, by) = held(x, 1 if x_m == 1 else 0), held(y, 1)
        fx, fy = sx == var.size, sy == var.size
        if fx and fy:
            rx, ry = (ax, bx) == (lo, hi), (ay, by) == (lo, hi)
            if (lo, hi) == (0, var.size) or rx == ry == True:  # noqa: E712 (nothing to cut)
                continue
            if rx != ry:
                ignore[1 if rx else 0].add(var)
                continue
            raise NkiError(
                f"{call}: {_mask_words(caller_loc(), 'the mask')} bounds a variable of axis 1 to [{lo}, {hi}): of "
                f"tiles passed whole, that is a free dim, M of x or N of y ({_MATMUL_MASK_RULE}), and both have its "
                f"range ({var.size}; x holds M [{ax}, {bx}), y holds N [{ay}, {by})), so it cannot tell which one "
                f"it bounds: index the operands with their own variables (x[i_k, i_m] with mask=(i_m < M), "
                f"y[i_k, i_n] with mask=(i_n < N)), or leave the M and N tails to the masked loads and the store")
        elif fx:
            ignore[1].add(var)
        elif fy:
            ignore[0].add(var)
        elif hi - lo not in (bx - ax, by - ay):
            raise NkiError(
                f"{call}: {_mask_words(caller_loc(), 'the mask')} bounds a variable of axis 1 of {var.size} values to "
                f"[{lo}, {hi}): of tiles passed whole, that is a free dim, M of x or N of y ({_MATMUL_MASK_RULE}), but "
                f"neither x's M ({sx}) nor y's N ({sy}) has its range, so it indexes neither: use a variable of the "
                f"dim it bounds (nl.arange({sx})[None, :] for M, nl.arange({sy})[None, :] for N), or index the "
                f"operands with their own variables")
    return ignore if ignore[0] or ignore[1] else None


def _check_contraction_bound(mask, x, y, x_m, call):
    """For a matmul of tiles passed whole: NkiError for a mask variable of axis 0, which bounds the contraction
    dim K (_MATMUL_MASK_RULE), that cannot be an index of the K rows an operand holds (its range is not as long
    as they are) and bounds them narrower. Written for the result's rows (`acc[i_mp, i_n] += nl.matmul(x, y,
    mask=(i_mp < M) & ...)`, i_mp = nl.arange(M)[:, None] indexing only acc), it silently gave a contraction
    over M rows (tester23ad F4). A variable spanning the K rows held (`k * 128 + i_k < K`, i_k of 128) bounds K
    as the rule says, whether the loads were masked too or read whole rows of a padded input (tester23af F3);
    as trnsim cannot tell it from a result-row variable of the same range, such a cut is said in a warning."""
    k_dims = ((x, 0 if x_m == 1 else 1, "x"), (y, 0, "y"))
    for var, (lo, hi) in mask.bounds.items():
        if var.ndim != 2 or var.axis != 0:
            continue
        for v, d, name in k_dims:
            own = box_of(v)
            a = own[1][d] if own is not None else 0
            n = v.shape[d]
            if lo <= a and hi >= a + n:
                continue
            loc = caller_loc()
            words = (f"{call}: {_mask_words(loc, 'the mask')} bounds a variable of axis 0 to [{lo}, {hi}): of "
                     f"tiles passed whole, that is the contraction dim K ({_MATMUL_MASK_RULE}), but {name} holds K "
                     f"rows [{a}, {a + n})")
            if var.size != n:
                xk = "x[i_k, i_m]" if x_m == 1 else "x[i_m, i_k]"
                if own is not None and var.size == own[0][d]:
                    # Of the whole tile's K range: a K bound on operands holding different K rows (tester23ah
                    # F3), which the operands' own indices say.
                    raise NkiError(
                        f"{words} of its {own[0][d]}: on tiles passed whole, trnsim cannot tell a bound narrower "
                        f"than the K rows an operand holds from one on the result's rows (M). To bound K (operands "
                        f"holding different K rows, or fewer than they hold), index both operands by "
                        f"the same K variable ({xk}, y[i_k, i_n] with mask=(i_k < K)); to bound M, {xk} with "
                        f"mask=(i_m < M)")
                raise NkiError(
                    f"{words}, so the mask would drop rows of the contraction. A bound on the result's rows (M) is "
                    f"not one on K: index the operands with their own variables ({xk} with mask=(i_m < M)), "
                    f"or leave the M tail to x's masked load and the masked store")
            _trace._current.kernel.warn(
                str(loc), f"{words}: the product sums K rows [{max(lo, a)}, {min(hi, a + n)}) only (a K tail of a "
                f"padded input); if the bound was meant for the result's rows (M), index the operands with their "
                f"own variables (x[i_k, i_m] with mask=(i_m < M)) or leave the M tail to the loads and the store")
            return


def _matmul_mask_one_indexed(mask, x, y, x_m):
    """matmul_mask for one operand indexed by nl.arange variables and the other a tile passed whole
    (`nl.matmul(x, y[i_k, i_n], transpose_x=True, mask=(i_n < 300))`, tester23ad F2): the indexed one is cut by
    its variables, as for any call; the tile shares only the contraction dim K with it (its other dim is the
    result's M or N, which the other operand's variables do not index), so it is cut on K to the range the mask
    gives the indexed operand's K variable, and kept whole on its free dim."""
    k_dim = {0: 0 if x_m == 1 else 1, 1: 0}  # x's and y's contraction dim
    i = 0 if x.vars else 1
    views = [x, y]
    (views[i],) = apply_mask(mask, (views[i],))
    given = (x, y)[i].vars
    var = given[k_dim[i]] if len(given) > k_dim[i] else None
    b = mask.bounds.get(var) if var is not None else None
    if b is not None:
        j, d = 1 - i, k_dim[1 - i]
        v = views[j]
        idx = tuple(slice(b[0], b[1]) if e == d else slice(None) for e in range(2))
        w = v.index(idx)
        if w.st.space != HBM and w.pd >= 0 and w.p0 != v.p0:
            _engine_start(w.p0, w.partitions)
        views[j] = w
    return tuple(views)


def _contraction_error(x, y, given, transpose_x, mask):
    """nl.matmul's error for operands whose contraction dims K differ (x.T [K, M], y [K, N] as multiplied),
    naming the mask when it is what cut one operand's K (`given`: the operands as passed)."""
    import math

    gx, gy = given
    given_k = (gx.shape[0] if transpose_x else math.prod(gx.shape[1:]), gy.shape[0])
    now = (x.partitions, y.partitions)
    why = ""
    if mask is not None and given_k[0] == given_k[1] and (given_k[0] == now[0]) != (given_k[1] == now[1]):
        c = 0 if given_k[0] != now[0] else 1
        cut, kept = "xy"[c], "xy"[1 - c]
        why = (f": {_mask_words(caller_loc(), 'the mask')} cuts {cut}'s contraction dim K to {now[c]} but not "
               f"{kept}'s ({given_k[1 - c]}): it bounds the index variable of {cut}'s K only; bound the one of "
               f"{kept}'s K in the mask too (`& (i < {now[c]})`)")
    return NkiError(f"nl.matmul: contraction dims differ: x.T is [{x.partitions}, {x.free_size}], y is "
                    f"{list(y.shape)}{why}")


def full(shape, fill_value, dtype, buffer, name="", kwargs=None, call="nl.full"):
    from . import language as nl

    t = nl.new_tensor(shape, dtype, buffer, name, kwargs or {}, call)
    if isinstance(t, BlockTensor):  # a PSUM tensor with block dims: each block is a tile, filled by itself
        for b in itertools.product(*(range(n) for n in t.shape[:t.pdim])):
            _ops.memset(t[b], fill_value)
        return t
    if t.st.space == HBM:
        unsupported(f"{call} in HBM", "filling an HBM tensor needs a DMA from a tile")
    _ops.memset(t, fill_value)
    return t
