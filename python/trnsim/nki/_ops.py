"""The instructions the simulator models, as the front end records them: each function checks what NKI
checks at the call (operand kinds, shapes, dtypes it can know), picks the engine NKI's `engine.unknown`
leaves to the compiler (DEFAULT_ENGINE), and appends one Op to the current trace. nki.isa's functions (both
calling styles) and nki.language's lowerings all go through here, so each instruction is recorded in one
place. Hardware rules beyond these (PSUM banks, engine connectivity, matmul tile limits, generation) are
checked by the builder when the trace is emitted, with the same kernel line.
"""

import math
import sys

from . import _indirect, _order, _trace
from ._dtypes import BY_NAME, as_dtype, modelled
from ._errors import Loc, NkiError, caller_loc
from ._tensor import HBM, PSUM, SBUF, NkiTensor, Storage

# The engine an instruction runs on when the kernel leaves it to the compiler (engine.unknown). The NKI docs
# leave the choice to the compiler; these follow the published profiles the calibration ports cite
# (kernels/calibration/*: PSUM -> SBUF copies and SBUF copies on Scalar, memsets on GpSimd, elementwise and
# reductions on Vector, activations on Scalar, iota on GpSimd, transposes on the Tensor engine).
DEFAULT_ENGINE = {
    "tensor_copy": "ACT",
    "memset": "POOL",
    "tensor_tensor": "DVE",
    "tensor_scalar": "DVE",
    "tensor_reduce": "DVE",
    "activation": "ACT",
    "iota": "POOL",
    "select": "DVE",
    "scalar_tensor_tensor": "DVE",
    "affine_select": "POOL",
    "nc_transpose": "PE",
}

F32 = BY_NAME["float32"]
_new = object.__new__
_getframe = sys._getframe


def _target():
    t = _trace.active()
    if t is not None:
        return t.target
    from ._backend import target

    return target()


# The bitvec operators (NKI's math operator table), which run on the Vector engine only.
_BITVEC = {"bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"}
# The operators the table gives no GpSimd for: the bitvec ones (Vector) and nl.abs (Vector/Scalar).
_NOT_GPSIMD = _BITVEC | {"abs"}


def _abs_not_on_gpsimd(op, engine, *alus):
    """nl.abs as an operator runs on the Vector or Scalar engine (NKI's math operator table), not GpSimd."""
    if engine == "POOL" and "abs" in alus:
        raise NkiError(f"{op}: nl.abs is an ALU operator of the Vector and Scalar engines (NKI's math operator "
                       "table), not of GpSimd: use engine=nisa.vector_engine")


def _engine_for(name, engine, views):
    if engine is not None:
        return engine
    e = DEFAULT_ENGINE[name]
    if e == "ACT" and name == "tensor_copy" and _target().generation == "trn1":
        e = "DVE"  # "On NeuronCore v2, tensor_copy is not supported on the Scalar Engine" (nki.isa.tensor_copy)
    # GpSimd cannot access PSUM (nki.isa.tensor_copy / memset docs): the compiler then uses Vector.
    if e == "POOL" and any(v is not None and v.st.space == PSUM for v in views):
        return "DVE"
    return e


def tile(v, what, op):
    """`v` as an on-chip instruction operand: an SBUF/PSUM view whose partition dim is its first dim."""
    if not isinstance(v, NkiTensor):
        from ._indirect import IndirectView
        from ._tensor import BlockTensor

        if isinstance(v, IndirectView):
            return v.operand(what, op)

        if isinstance(v, BlockTensor):
            raise v.whole_error()
        raise NkiError(f"{op}: {what} must be an NKI tensor, got {type(v).__name__}")
    if v.st.space == HBM:
        raise NkiError(f"{op}: {what} must be in SBUF or PSUM, got an HBM tensor {list(v.shape)} "
                       "(load it with nisa.dma_copy / nl.load first)")
    if v.pd > 0:
        # A tensor with block dims before its partition dim, (B..., P, F...): the instruction covers every
        # block at once, with the partition dim first ([P, B..., F...] is its physical layout). Operands of
        # the same logical shape are reordered alike, so elementwise instructions pair the same elements.
        order = (v.pd,) + tuple(i for i in range(len(v.dims)) if i != v.pd)
        return v.permute(order)
    return v


def same_shape(op, a, an, b, bn):
    if a.partitions != b.partitions or a.free_size != b.free_size:
        raise NkiError(f"{op}: {an} {list(a.shape)} and {bn} {list(b.shape)} must have the same partitions "
                       f"and elements per partition ([{a.partitions}, {a.free_size}] vs "
                       f"[{b.partitions}, {b.free_size}])")


def new_tile(shape, dtype, space, name, loc=None, depth=1):
    """A new on-chip tensor for an instruction's result (NKI's earlier calling style returns one). `depth`:
    where the kernel's frame is when the kernel function made the nki call (Trace.call_stack looks there
    first), counting new_tile's caller as 1 (e.g. 3 from _lower.load, under nl.load); 1: no guess."""
    t = _trace._current
    if t is None:
        t = _trace.current()
    if type(shape) is not tuple:
        shape = tuple(shape)
    key = (shape, space, dtype.name)  # the name: DType's own __hash__ is a Python call
    checked = t.tile_shapes
    whole = checked.get(key)
    if whole is None:
        shape = tuple(int(s) for s in shape)
        check_tile_shape(shape, 0, space, dtype, result_of(name))
    # Trace.call_stack's fast path, here (a call less per tile): an nl / nisa call made by the kernel function
    # itself, the usual case, has its (site, Loc) per instruction offset of the kernel function.
    f = None
    if depth > 1 and t.entry_outside:
        f = _getframe(depth)
        if f.f_code is _trace.WRAPPER_CODE:
            f = f.f_back
        if f.f_code is not t.entry_code:
            f = None
        else:
            hit = t.entry_tiles.get(f.f_lasti)
            if hit is not None:
                site = hit[0]
                if loc is None:
                    loc = hit[1]
                f = False
    if f is not False:
        site = t.call_stack(depth + 1)  # (+1: call_stack's own frame)
        if loc is None or f is not None:
            # The innermost frame outside nki, as caller_loc finds it (one Loc per site).
            at = t.site_locs.get(site)
            if at is None:
                at = Loc(site[-1]) if site else caller_loc()
                if site:
                    t.site_locs[site] = at
            if loc is None:
                loc = at
            if f is not None:
                t.entry_tiles[f.f_lasti] = (site, at)
    if whole is None:
        st = Storage(t, name, space, dtype, shape, 0, loc=loc)
        st.site = site
        v = NkiTensor.whole(st)
        checked[key] = (v.dims, v._rect, st.pbytes)
        return v
    # Storage(t, name, space, dtype, shape, 0, loc=loc) with site, and NkiTensor.whole of it, their fields set
    # here (a class call with __init__ costs as much again; python/tests/test_nki_fast_paths.py checks that these
    # set the same fields as __init__ does).
    storages = t.storages
    st = _new(Storage)
    st.trace = t
    st.uid = len(storages)
    storages.append(st)
    st.name = name
    st.space = space
    st.private = False
    st.dtype = dtype
    st.shape = shape
    st.pdim = 0
    st.pbytes = whole[2]
    st.site = site
    st.role = None
    st.loc = loc
    st.first = -1
    st.last = -1
    st.phys = None
    st.direct = None
    st.moved_to = None
    st.outer = t.outer
    st.scope = t.scope
    v = _new(NkiTensor)
    v.st = st
    v.dtype = dtype
    v.boff = 0
    v.dims = whole[0]
    v.pd = 0
    v.p0 = 0
    v.vars = None
    v._rect = whole[1]
    v._bv = None
    return v


def result_of(name):
    """How a message names the new tile of the call whose internal tile name is `name` (new_tile's, e.g.
    "load", "store_value", "matmul_transpose"): "the result of nl.load", not the internal name."""
    from . import isa, language

    if name in isa.__dict__ and name not in language.__dict__:
        return f"the result of nisa.{name}"
    base = name if name in language.__dict__ else name.split("_")[0]  # e.g. matmul_transpose: nl.matmul's
    return f"the result of nl.{base}"


def check_tile_shape(shape, pdim, space, dtype, what):
    if not shape:
        raise NkiError(f"an {space} tensor needs at least a partition dim")
    p = shape[pdim]
    tg = _target()
    if p > tg.partitions:
        raise NkiError(f"{what}: partition dim {p} exceeds the {tg.partitions} partitions of {space.upper()} "
                       f"(shape {list(shape)}; nl.tile_size.pmax is {tg.partitions})")
    if any(s <= 0 for s in shape):
        raise NkiError(f"{what}: shape {list(shape)} has a dim that is not positive")
    if space == PSUM:
        tile_bytes = math.prod(shape[pdim + 1:]) * dtype.itemsize
        if tile_bytes > tg.psum_bank_bytes:
            raise NkiError(f"{what}: a PSUM tile of {list(shape[pdim:])} {dtype.name} takes {tile_bytes} bytes "
                           f"per partition, over the {tg.psum_bank_bytes}-byte PSUM bank "
                           f"(nl.tile_size.psum_fmax is {tg.psum_bank_bytes // 4} float32)")


# ---- PSUM accumulation groups: NKI's default `accumulate` for nc_matmul.
# nki.isa.nc_matmul: with accumulate=None "first write overwrites, subsequent writes accumulate". So a matmul
# accumulates into its dst when that region holds an open accumulation group (the last access was a matmul
# writing it) or a value another instruction wrote (a fill, tensor_copy, activation, iota, a DMA: the result is
# that value + the products); otherwise it starts a group by overwriting. A read of a group ends it for
# nisa.nc_matmul's accumulate=None (the next matmul overwrites); `dst += nl.matmul(...)` still adds to its sum. A
# memset of 0 that such a first matmul would overwrite is dropped: the compiler lowers zeroing + accumulating matmuls
# to a first matmul that zeroes the bank (the profiler's psum_zero flag;
# kernels/calibration/matmul_lhs_dma_transpose). The same docs: on NeuronCore-v2 and -v3 accumulating onto a value a
# non-matmul instruction wrote is undefined behaviour on hardware (warned on trn2; trn3 is NeuronCore-v4).


def _overlap(a, b):
    return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]


def _inside(a, b):
    return b[0] <= a[0] and a[1] <= b[1] and b[2] <= a[2] and a[3] <= b[3]


def _covers(rects, r):
    """Whether the rectangles `rects` (p0, p1, byte lo, byte hi) together cover rectangle `r`."""
    ps = sorted({x for g in rects for x in (g[0], g[1]) if r[0] < x < r[1]} | {r[0], r[1]})
    bs = sorted({x for g in rects for x in (g[2], g[3]) if r[2] < x < r[3]} | {r[2], r[3]})
    return all(any(g[0] <= p and q <= g[1] and g[2] <= b and c <= g[3] for g in rects)
               for p, q in zip(ps, ps[1:]) for b, c in zip(bs, bs[1:]))


def touch_psum(t, v, kind, op=None):
    """Records an access to PSUM view `v` for the group logic: kind 'mm' (a matmul writing v), 'memset' (op, a
    fill), 'write' (op, another instruction writing v) or 'read'. For kind 'mm' returns (accumulate, zero_fill,
    init, read_sum, part): whether the matmul adds to what the region holds (also when open matmul groups over
    other regions cover all of it: nki.isa.nc_matmul's "subsequent writes accumulate", per address), the memset
    of 0 it may replace, the op whose written value it adds to (None when it continues a matmul group only),
    whether the region holds the sum of a matmul group that a read ended, or of a group over another region
    this one overlaps (`+=` adds to it), and whether open matmul groups cover only part of it (part). A call
    emitting nothing (_void) touches nothing."""
    if t.voiding is not None:
        return False, None, None, False, False
    if v.st.moved_to is not None:  # a retargeted result used again (a matmul's dst: before it is recorded)
        from ._lower import materialize

        materialize(t, v.st)
    groups = t.psum_groups
    lst = groups.get(v.st.uid, ())
    r = v._rect or v.rect()
    if kind == "mm" and len(lst) == 1 and lst[0][1] == "mm" and lst[0][0] == r:
        return True, None, None, False, False  # the one open group over r goes on (a tiled matmul's K loop)
    acc, ms, init, ended = False, None, None, False
    keep = []
    others = []  # open matmul groups over other regions that overlap r
    for g in lst:
        if g[1] == "ended":
            # A matmul group's sum a read ended: it stays until written over.
            if kind == "mm" and _overlap(g[0], r):
                ended = True  # `+=` over any part of it adds to it
                continue
            if kind == "read" or not _overlap(g[0], r):
                keep.append(g)
            continue
        if kind == "read" and g[1] == "mm" and _overlap(g[0], r):
            keep.append((g[0], "ended", None))
            continue
        if g[1] == "init":
            # A written value stays until written over (reads leave it): a matmul over any part adds to it.
            if kind == "mm" and _overlap(g[0], r):
                acc, init = True, g[2]
                if g[0] == r:
                    continue  # (now the matmul's group)
            elif kind != "mm" and kind != "read" and _inside(g[0], r):
                continue
            keep.append(g)
            continue
        if g[0] == r and kind == "mm":
            if g[1] == "mm":
                acc = True
            else:
                ms = g[2]
            continue
        if not _overlap(g[0], r):
            keep.append(g)
        elif kind == "mm" and g[1] == "mm":
            ended = True  # a group over another region: `+=` over part of it adds to its sum (it ends here)
            others.append(g[0])
            if not _inside(g[0], r):
                keep.append(g)  # (still open where r does not reach)
    part = False
    if kind == "mm":
        keep.append((r, "mm", None))
        if ms is not None:  # the fill of 0 is the region's last write (a later write would have removed it)
            acc, init = False, None
        elif others and not acc:
            # Every address of r a matmul of an open group wrote: a subsequent write there, so it accumulates
            # (the groups become this one); some only: one accumulate flag cannot say (matmul_accumulate).
            acc = _covers(others, r)
            part = not acc
    elif kind == "memset" and op.attrs["value"] == 0:
        keep.append((r, "memset", op))
    elif kind != "read":
        keep.append((r, "init", op))
    groups[v.st.uid] = keep
    return acc, ms, init, ended, part


def matmul_accumulate(t, dst, accumulate, loc, iadd=False):
    """The accumulate flag of a matmul writing PSUM view `dst` (`accumulate` as given: None infers it, dropping
    a memset of 0 the matmul's overwrite replaces; `iadd`: the kernel's `dst += nl.matmul(...)`, which adds to
    what dst holds even after a read); warns when it adds to a value a non-matmul instruction wrote on a
    NeuronCore-v2/-v3 target."""
    acc, ms, init, ended, part = touch_psum(t, dst, "mm")
    if accumulate is None:
        if part and not iadd:
            raise NkiError(f"nc_matmul: accumulate=None, but matmuls of an open accumulation group wrote part of "
                           f"dst {list(dst.shape)} of {dst.st.label(at=False)} only: the first write to an address "
                           "overwrites and later ones accumulate (nki.isa.nc_matmul), and one instruction cannot "
                           "do both; pass accumulate=True or False, or split the matmul where that group ends")
        accumulate = acc or (iadd and ended)
        if ms is not None and ms.index not in t.followers:  # (a follower copies the memset's zeros elsewhere)
            _trace.drop(ms)  # the matmul's overwrite zeroes the bank instead
    elif accumulate and ms is not None:
        init = ms  # accumulate=True onto nl.zeros / a memset of 0 (kept: the flag is the user's)
    if accumulate and init is not None and t.target.generation != "trn3":
        t.kernel.warn(
            str(loc or caller_loc()),
            f"the matmul adds to {dst.st!r}, which {init.name} at {init.loc} wrote: NKI's "
            f"nc_matmul docs call accumulating onto a value a non-matmul instruction wrote undefined behaviour on "
            f"NeuronCore-v2 and -v3 (trn2; supported from NeuronCore-v4, trn3); trnsim adds to it. Start the "
            f"group with a matmul (accumulate=False) and add the value after")
    return bool(accumulate)


def _psum_touch(t, reads, writes, op):
    for v in reads:
        if v is not None and v.st.space == PSUM:
            touch_psum(t, v, "read")
    for v in writes:
        if v is not None and v.st.space == PSUM:
            touch_psum(t, v, "write", op)


def record(name, args, reads, writes, attrs, loc=None):
    o = _record(name, args, reads, writes, attrs, loc)
    if _indirect.pending is not None:  # an indirect dst (t.indirect): its scatter follows the instruction
        _indirect.flush(name)
    return o


def _record(name, args, reads, writes, attrs, loc):
    t = _trace._current
    if t is None:
        t = _trace.current()
    for v in reads:
        if v.st.space is PSUM:
            o = t.record(name, args, reads, writes, attrs, loc)
            _psum_touch(t, reads, writes, o)
            return o
    for v in writes:
        if v.st.space is PSUM:
            o = t.record(name, args, reads, writes, attrs, loc)
            _psum_touch(t, (), writes, o)
            return o
    return t.record(name, args, reads, writes, attrs, loc)


# ---- the instructions


def _operand_not_in_sbuf(op, stationary, moving):
    """The message for an nc_matmul operand outside SBUF: which, what it is, and what to write. An earlier-style
    nc_transpose's result on the Tensor engine is in PSUM: an earlier-style nc_matmul copies it to SBUF itself
    (isa._nc_matmul_old), the current style (`dst=`, one instruction) reaches here."""
    which, v = ("stationary", stationary) if stationary.st.space != SBUF else ("moving", moving)
    why = ""
    if v.st.space == PSUM and v.st.name == "nc_transpose":
        why = (", as nc_transpose on the Tensor engine writes its result to PSUM (an earlier-style call with no "
               "engine runs there)")
    return (f"{op}: {which} is the {v.st.label()}{why}: the Tensor engine reads stationary and moving from SBUF "
            f"(NKI's nc_matmul page); copy it to SBUF first (nl.copy(t), or nisa.tensor_copy into an SBUF tile)"
            + (", or transpose a tile of up to 32 x 32 on the Vector engine (engine=nisa.vector_engine), "
               "which writes SBUF" if why else ""))


def nc_matmul(dst, stationary, moving, accumulate=None, perf_mode="none", is_transpose=False, loc=None,
              _checked=False, iadd=False):
    """_checked: the caller (nl.matmul's common case) made dst [M, N] for SBUF operands of one contraction
    dim, so the operand checks below hold. iadd: the kernel's `dst += ...` (matmul_accumulate)."""
    op = "nc_matmul"
    if _checked:
        return _matmul_record(op, dst, stationary, moving, accumulate, perf_mode, is_transpose, loc, iadd)
    stationary = tile(stationary, "stationary", op)
    moving = tile(moving, "moving", op)
    dst = tile(dst, "dst", op)
    if stationary.st.space != SBUF or moving.st.space != SBUF:
        raise NkiError(_operand_not_in_sbuf(op, stationary, moving))
    if dst.st.space != PSUM:
        raise NkiError(f"{op}: dst must be in PSUM, got {dst.st.space.upper()}")
    k = stationary.partitions
    if moving.partitions != k:
        raise NkiError(f"{op}: stationary has {k} partitions (the contraction dim) but moving has "
                       f"{moving.partitions}")
    if perf_mode == "none" and not is_transpose:
        m, n = stationary.free_size, moving.free_size
        if m > 128:  # (before dst's shape: a dst of m partitions could not be made either)
            raise NkiError(f"{op}: stationary [{k}, {m}] has a free size of {m}, over the 128 columns of the PE "
                           "array (nl.tile_size.gemm_stationary_fmax): split it into tiles of 128 columns")
        if dst.partitions != m or dst.free_size != n:
            raise NkiError(f"{op}: dst {list(dst.shape)} must be [{m}, {n}] (stationary [{k}, {m}], moving "
                           f"[{k}, {n}])")
    return _matmul_record(op, dst, stationary, moving, accumulate, perf_mode, is_transpose, loc, iadd)


def _matmul_record(op, dst, stationary, moving, accumulate, perf_mode, is_transpose, loc, iadd=False):
    t = _trace._current or _trace.current()
    accumulate = matmul_accumulate(t, dst, accumulate, loc, iadd)
    reads = (stationary, moving, dst) if accumulate else (stationary, moving)
    return t.record(op, {"dst": dst, "stationary": stationary, "moving": moving}, reads, (dst,),
                    {"accumulate": bool(accumulate), "perf_mode": perf_mode, "is_transpose": bool(is_transpose)},
                    loc)


def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, accumulate=None, loc=None):
    op = "nc_matmul_mx"
    dst, stationary, moving = tile(dst, "dst", op), tile(stationary, "stationary", op), tile(moving, "moving", op)
    stationary_scale = tile(stationary_scale, "stationary_scale", op)
    moving_scale = tile(moving_scale, "moving_scale", op)
    st_view, st_off = _scale_operand(op, "stationary_scale", stationary_scale, stationary)
    mv_view, mv_off = _scale_operand(op, "moving_scale", moving_scale, moving)
    t = _trace.current()
    accumulate = matmul_accumulate(t, dst, accumulate, loc)
    reads = [stationary, moving, st_view, mv_view] + ([dst] if accumulate else [])
    return t.record(op, {"dst": dst, "stationary": stationary, "moving": moving, "stationary_scale": st_view,
                         "moving_scale": mv_view}, reads, [dst],
                    {"accumulate": bool(accumulate), "st_off": st_off, "mv_off": mv_off}, loc)


def _scale_operand(op, what, scale, data):
    """An MX scale view starting `off` (0, 4, 8, 12) partitions into its data's quadrant: the instruction's
    scale operand starts at the data's partition and names the offset (isa scale_offset)."""
    off = scale.p0 - data.p0
    if off not in (0, 4, 8, 12):
        raise NkiError(f"{op}: {what} starts at partition {scale.p0}; it must start 0, 4, 8 or 12 partitions "
                       f"after its data's first partition {data.p0}")
    if off == 0:
        return scale, 0
    v = NkiTensor(scale.st, scale.dtype, scale.boff, ((0, scale.partitions + off),) + scale.dims[1:], 0, data.p0)
    return v, off


def quantize_mx(dst, src, dst_scale, loc=None):
    op = "quantize_mx"
    dst = tile(dst, "dst", op)
    src = tile(src, "src", op)
    dst_scale = tile(dst_scale, "dst_scale", op)
    sv, off = _scale_operand(op, "dst_scale", dst_scale, dst)
    return record(op, {"dst": dst, "src": src, "dst_scale": sv}, [src], [dst, sv], {"scale_offset": off}, loc)


def nc_transpose(dst, data, engine=None, loc=None):
    op = "nc_transpose"
    dst = tile(dst, "dst", op)
    data = tile(data, "data", op)
    if engine is None:
        engine = "PE" if dst.st.space == PSUM else "DVE"
    if dst.partitions != data.free_size or dst.free_size != data.partitions:
        raise NkiError(f"{op}: dst {list(dst.shape)} must be [{data.free_size}, {data.partitions}] for data "
                       f"{list(data.shape)}")
    return record(op, {"dst": dst, "data": data}, [data], [dst], {"engine": engine}, loc)


def _operand(x, op, what, data):
    """An FP32 immediate or a [P, 1] per-partition vector."""
    if isinstance(x, NkiTensor):
        x = tile(x, what, op)
        if x.partitions != data.partitions or x.free_size != 1:
            raise NkiError(f"{op}: {what} {list(x.shape)} must be a scalar or a [{data.partitions}, 1] vector")
        return x, 0.0
    try:
        return None, float(x)
    except (TypeError, ValueError):
        raise NkiError(f"{op}: {what} must be a number or a [P, 1] tensor, got {x!r}") from None
    except OverflowError:  # an int past any float (10**400)
        raise NkiError(f"{op}: {what} {x!r:.40} is past the largest float: an immediate is an FP32 "
                       f"number") from None


def activation(dst, func, data, bias=None, scale=1.0, reduce_res=None, engine=None, loc=None, mask=None):
    """`mask`: the kernel's call's own mask (for the warning of a reduction of part of a masked result)."""
    op = "activation"
    dst = tile(dst, "dst", op)
    data = tile(data, "data", op)
    same_shape(op, dst, "dst", data, "data")
    bv, bi = _operand(0.0 if bias is None else bias, op, "bias", data)
    sv, si = _operand(scale, op, "scale", data)
    reads = [data] + [v for v in (bv, sv) if v is not None]
    writes = [dst]
    if reduce_res is not None:
        reduce_res = tile(reduce_res, "reduce_res", op)
        if reduce_res.partitions != data.partitions or reduce_res.free_size != 1:
            raise NkiError(f"{op}: reduce_res {list(reduce_res.shape)} must be [{data.partitions}, 1]")
        writes.append(reduce_res)
        _partial(op, data, [d for d in range(data.ndim) if d != data.pd], mask)
    engine = _engine_for(op, engine, [dst, data])
    o = record(op, {"dst": dst, "data": data, "bias": bv, "scale": sv, "reduce_res": reduce_res}, reads,
               writes, {"func": func, "bias": bi, "scale": si, "engine": engine}, loc)
    if dst.st is data.st:
        _order.check(o, dst, (data,))
    return o


def _two_tiles(op, dst, a, an, b, bn):
    """dst and two input tiles of one shape, not both in PSUM (tensor_tensor, scalar_tensor_tensor)."""
    dst, a, b = tile(dst, "dst", op), tile(a, an, op), tile(b, bn, op)
    same_shape(op, a, an, b, bn)
    same_shape(op, dst, "dst", a, an)
    if a.st.space == PSUM and b.st.space == PSUM:
        raise NkiError(f"{op}: {an} and {bn} cannot both be in PSUM (nki.isa.{op})")
    return dst, a, b


def gpsimd_no_psum(op, runs, *named):
    """NkiError for the first (view, operand name) of `named` in PSUM: `runs` (instruction `op`, or the operator
    that puts it on GpSimd: nl.power) runs on the GpSimd engine, which cannot access PSUM (its nki.isa page;
    "GpSimd Engine cannot access PSUM", nki.isa.tensor_tensor)."""
    for v, n in named:
        if v.st.space == PSUM:
            fix = "dst must be in SBUF" if n == "dst" else "copy the tile to SBUF first (nl.copy / nisa.tensor_copy)"
            raise NkiError(f"{op}: {n} is in PSUM; {runs} runs on the GpSimd engine, which cannot access PSUM "
                           f"(nki.isa.{op}): {fix}")


def tensor_tensor(dst, data1, data2, alu, engine=None, loc=None):
    op = "tensor_tensor"
    dst, data1, data2 = _two_tiles(op, dst, data1, "data1", data2, "data2")
    if alu == "power":
        # nki.isa.tensor_tensor: nl.power "runs on the GpSimd engine", so its tiles cannot be in PSUM.
        if engine not in (None, "POOL"):
            raise NkiError(f"{op}: nl.power runs on the GpSimd engine (nki.isa.tensor_tensor), not {engine}")
        gpsimd_no_psum(op, "nl.power", (dst, "dst"), (data1, "data1"), (data2, "data2"))
        engine = "POOL"
    if engine is None and alu not in _NOT_GPSIMD and all(v.dtype.name in ("int32", "uint32") and v.st.space != PSUM
                                                     for v in (dst, data1, data2)):
        # nki.isa.tensor_tensor (2.33): int32/uint32 tiles of an arithmetic operator default to GpSimd, whose
        # native integer arithmetic is exact for every 32-bit value (Vector computes in FP32); the bitvec
        # operators run on the Vector engine only.
        engine = "POOL"
    engine = _engine_for(op, engine, [dst, data1, data2])
    _abs_not_on_gpsimd(op, engine, alu)
    o = record(op, {"dst": dst, "data1": data1, "data2": data2}, [data1, data2], [dst],
               {"op": alu, "engine": engine}, loc)
    if dst.st is data1.st or dst.st is data2.st:
        _order.check(o, dst, (data1, data2))
    return o


def _wide_bits(alu, x, data, loc):
    """operand x of a bitvec operator `alu`, as the instruction can take it: an integer FP32 does not hold
    exactly (0x7FFFFFFF: more than 24 significant bits) would round as an FP32 immediate, so it becomes a
    [P, 1] vector of data's integer dtype that a memset fills with its exact bits (one more instruction)."""
    if alu not in _BITVEC or isinstance(x, NkiTensor) or isinstance(x, bool) or data.dtype.name not in (
            "int32", "uint32"):
        return x
    try:
        v = float(x)
    except (TypeError, ValueError):
        return x
    if not v.is_integer() or _fp32_exact(v):
        return x
    if not -2 ** 31 <= v < 2 ** 32:
        raise NkiError(f"tensor_scalar: {alu}'s operand {int(v)} is a bit pattern of more than 32 bits (data "
                       f"is {data.dtype.name})")
    bits = int(v) % 2 ** 32  # the operand's 32 bits, as data's dtype reads them
    v = bits - 2 ** 32 if data.dtype.name == "int32" and bits >= 2 ** 31 else bits
    vec = new_tile((data.partitions, 1), data.dtype, SBUF, "tensor_scalar", loc=loc)
    memset(vec, v, loc=loc)
    return vec


def tensor_scalar(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                  engine=None, loc=None):
    op = "tensor_scalar"
    dst = tile(dst, "dst", op)
    data = tile(data, "data", op)
    same_shape(op, dst, "dst", data, "data")
    operand0 = _wide_bits(op0, operand0, data, loc)
    if op1 is not None:
        operand1 = _wide_bits(op1, operand1, data, loc)
    v0, i0 = _operand(operand0, op, "operand0", data)
    if op1 is None:
        v1, i1 = None, 0.0
    else:
        if operand1 is None:
            raise NkiError(f"{op}: op1 needs operand1")
        v1, i1 = _operand(operand1, op, "operand1", data)
    engine = _engine_for(op, engine, [dst, data])
    _abs_not_on_gpsimd(op, engine, op0, op1)
    reads = [data] + [v for v in (v0, v1) if v is not None]
    o = record(op, {"dst": dst, "data": data, "operand0": v0, "operand1": v1}, reads, [dst],
               {"op0": op0, "imm0": i0, "reverse0": bool(reverse0), "op1": op1 or "bypass", "imm1": i1,
                "reverse1": bool(reverse1), "engine": engine}, loc)
    if dst.st is data.st:
        _order.check(o, dst, (data,))
    return o


def tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res, reverse0=False, negate=False, loc=None,
                         mask=None):
    op = "tensor_scalar_reduce"
    dst, data = tile(dst, "dst", op), tile(data, "data", op)
    same_shape(op, dst, "dst", data, "data")
    v0, i0 = _operand(operand0, op, "operand0", data)
    res = tile(reduce_res, "reduce_res", op)
    if res.partitions != data.partitions or res.free_size != 1:
        raise NkiError(f"{op}: reduce_res {list(res.shape)} must be [{data.partitions}, 1] (one element per "
                       "partition of data)")
    _partial(op, data, [d for d in range(data.ndim) if d != data.pd], mask)
    reads = [data] + ([v0] if v0 is not None else [])
    o = record(op, {"dst": dst, "data": data, "operand0": v0, "reduce_res": res}, reads, [dst, res],
               {"op0": op0, "imm0": i0, "reverse0": bool(reverse0), "reduce_op": reduce_op, "negate": bool(negate)},
               loc)
    if dst.st is data.st:
        _order.check(o, dst, (data,))
    return o


# The operators NKI's table of math operators marks as legal reduction ops ("Supported Math Operators for NKI
# ISA", nki.api.shared: add, subtract, multiply, max, min and the bitwise and logical and/or/xor are Y; the
# others, divide, comparisons, shifts and power among them, are N).
_REDUCTIONS = {"add", "subtract", "multiply", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor",
               "logical_and", "logical_or", "logical_xor"}


def reduce_axes(data, axis):
    """tensor_reduce's `axis` (an int or ints, negative from the end) as sorted dims of data: free dims only."""
    nd = data.ndim
    from ._index import _const

    if _const(axis) is not None:  # an int, a NumPy integer (np.int64(1) was "not iterable")
        axis = (axis,)
    if not isinstance(axis, (tuple, list)) or any(_const(a) is None for a in axis):
        raise NkiError(f"tensor_reduce: axis {axis!r} is not an integer or a tuple / list of integers (the free "
                       f"dims of data {list(data.shape)} to reduce; the partition dim is 0)")
    axis = sorted({_const(a) + nd if _const(a) < 0 else _const(a) for a in axis})
    if not axis or any(a < 1 or a >= nd for a in axis):
        raise NkiError(f"tensor_reduce: axis {list(axis)} must name free dims of data {list(data.shape)} (the "
                       "partition dim is 0)")
    return axis


def _partial(op, data, axes, mask):
    """The warning of a reduction over dims a masked call's result holds only in part (_lower); `mask`: the
    kernel's call's own."""
    from . import _lower

    _lower.warn_partial_reduction(op, data, axes, mask)


def tensor_reduce(dst, alu, data, axis, negate=False, keepdims=False, engine=None, loc=None, any_axes=False,
                  mask=None):
    """`any_axes`: an nl reduction's, whose axes may be any free ones (NKI's average-pool tutorial sums axes
    [2, 4] of a 5-D tile): the instruction reduces a view with them last. `mask`: the kernel's call's own."""
    op = "tensor_reduce"
    if alu not in _REDUCTIONS:
        raise NkiError(f"{op}: nl.{alu} is not a reduction operator (NKI's math operator table: add, subtract, "
                       "multiply, maximum, minimum, and the bitwise and logical and/or/xor reduce)")
    dst = tile(dst, "dst", op)
    data = tile(data, "data", op)
    nd = data.ndim
    axis = reduce_axes(data, axis)
    _partial(op, data, axis, mask)
    if axis != list(range(nd - len(axis), nd)) and any_axes:
        # The instruction reduces the innermost dims: reorder the view (strides only) so the reduced axes are
        # last, the kept ones in their order.
        order = [i for i in range(nd) if i not in axis] + axis
        data = data.permute(order)
        axis = list(range(nd - len(axis), nd))
    if axis != list(range(nd - len(axis), nd)):
        # Every version of the reference (2.21-2.33) asks for consecutive axes that include the most minor one
        # (2.31 on: "the last contiguous free dimension(s) of the tile, ending at the final dimension").
        last = tuple(range(nd - len(axis), nd))
        raise NkiError(f"{op}: axis {list(axis)} of data {list(data.shape)}: the reduction axes must be the last "
                       f"contiguous free dims of the tile, ending at its final dim (nki.isa.tensor_reduce): e.g. "
                       f"axis={last[0] if len(last) == 1 else last} "
                       f"here; to reduce dim{'s' if len(axis) > 1 else ''} {', '.join(map(str, axis))}, give the "
                       f"instruction a view with {'them' if len(axis) > 1 else 'it'} last (t.ap(...)), or call "
                       f"nl.sum / nl.max / ..., which reduce any free axes")
    kept = data.partitions * math.prod(n for i, (_, n) in enumerate(data.dims) if i not in axis and i != data.pd)
    if dst.partitions != data.partitions or dst.partitions * dst.free_size != kept:
        raise NkiError(f"{op}: dst {list(dst.shape)} does not match data {list(data.shape)} reduced over "
                       f"axis {list(axis)}")
    engine = _engine_for(op, engine, [dst, data])
    return record(op, {"dst": dst, "data": data}, [data], [dst],
                  {"op": alu, "axis": axis, "negate": bool(negate), "engine": engine}, loc)


def tensor_copy(dst, src, engine=None, loc=None):
    op = "tensor_copy"
    dst = tile(dst, "dst", op)
    src = tile(src, "src", op)
    same_shape(op, dst, "dst", src, "src")
    engine = _engine_for(op, engine, [dst, src])
    o = record(op, {"dst": dst, "src": src}, [src], [dst], {"engine": engine}, loc)
    if dst.st is src.st:
        _order.check(o, dst, (src,))
    return o


def memset(dst, value, engine=None, loc=None):
    op = "memset"
    dst = tile(dst, "dst", op)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise NkiError(f"{op}: value must be a number, got {value!r}") from None
    engine = _engine_for(op, engine, [dst])
    t = _trace.current()
    o = t.record(op, {"dst": dst}, [], [dst], {"value": value, "engine": engine}, loc)
    if dst.st.space == PSUM:
        touch_psum(t, dst, "memset", o)
    return o


def _fp32_exact(v):
    """Whether FP32 (an instruction's immediate) holds Python float `v` exactly."""
    import numpy as np

    return float(np.float32(v)) == v


def _exact_iota_immediates(op, dst, **immediates):
    """FP32 immediates of an integer iota / affine_select (iota's channel_multiplier; affine_select's offset and
    channel_multiplier, compared in FP32): one FP32 does not hold exactly (33554433: more than 24 significant
    bits) would silently shift every value, so it is an NkiError naming a way that is exact. (iota's offset
    and affine_select's on_false_value are exact: the ISA splits them, element.h split_fill.)"""
    if dst.dtype.name not in ("int32", "uint32", "int16", "uint16", "int8", "uint8"):
        return
    for what, v in immediates.items():
        if not _fp32_exact(float(v)):
            raise NkiError(f"{op}: {what} {v} is not exact in FP32, the instruction's immediate (more than 24 "
                           f"significant bits): make the {op} with a smaller {what} and add the rest with nl.add "
                           f"of {dst.dtype.name} tiles (integer tile arithmetic is exact)")


def iota(dst, pattern, offset=0, channel_multiplier=0, engine=None, loc=None):
    op = "iota"
    dst = tile(dst, "dst", op)
    if engine is None:
        gpsimd_no_psum(op, op, (dst, "dst"))
    pattern = [int(p) for p in pattern]
    if len(pattern) > max(1, dst.ndim - 1):
        raise NkiError(f"{op}: {len(pattern)} pattern steps for the {dst.ndim - 1} free dims of dst")
    _exact_iota_immediates(op, dst, channel_multiplier=channel_multiplier)
    engine = _engine_for(op, engine, [dst])
    return record(op, {"dst": dst}, [], [dst], {"pattern": pattern, "offset": float(offset),
                                              "channel_multiplier": float(channel_multiplier), "engine": engine},
                  loc)


def select(dst, predicate, on_true, on_false, engine=None, loc=None):
    op = "select"
    dst, predicate, on_true = tile(dst, "dst", op), tile(predicate, "predicate", op), tile(on_true, "on_true", op)
    same_shape(op, dst, "dst", on_true, "on_true")
    same_shape(op, dst, "dst", predicate, "predicate")
    fv, fi = (on_false, 0.0) if isinstance(on_false, NkiTensor) else (None, float(on_false))
    if fv is not None:
        fv = tile(fv, "on_false", op)
    engine = _engine_for(op, engine, [dst, predicate, on_true])
    reads = [predicate, on_true] + ([fv] if fv is not None else [])
    return record(op, {"dst": dst, "predicate": predicate, "on_true": on_true, "on_false": fv}, reads, [dst],
                  {"on_false": fi, "engine": engine}, loc)


def scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, engine=None,
                         loc=None):
    op = "scalar_tensor_tensor"
    dst, data, in1 = _two_tiles(op, dst, data, "data", operand1, "operand1")
    v0, i0 = _operand(operand0, op, "operand0", data)
    engine = _engine_for(op, engine, [dst, data, in1])
    reads = [data, in1] + ([v0] if v0 is not None else [])
    o = record(op, {"dst": dst, "data": data, "operand0": v0, "operand1": in1}, reads, [dst],
               {"op0": op0, "imm0": i0, "reverse0": bool(reverse0), "op1": op1, "reverse1": bool(reverse1),
                "engine": engine}, loc)
    if dst.st is data.st or dst.st is in1.st:
        _order.check(o, dst, (data, in1))
    return o


def _free(data):
    return [d for d in range(data.ndim) if d != data.pd]


def _lower_warn(op, data, mask, verb):
    """_partial over all of data's free dims, saying what the call does along them."""
    from . import _lower

    _lower.warn_partial_reduction(op, data, _free(data), mask, verb=verb)


def bn_stats(dst, data, loc=None, mask=None):
    op = "bn_stats"
    dst, data = tile(dst, "dst", op), tile(data, "data", op)
    _partial(op, data, _free(data), mask)
    return record(op, {"dst": dst, "data": data}, [data], [dst], {}, loc)


def bn_aggr(dst, data, loc=None, mask=None):
    op = "bn_aggr"
    dst, data = tile(dst, "dst", op), tile(data, "data", op)
    _partial(op, data, _free(data), mask)
    return record(op, {"dst": dst, "data": data}, [data], [dst], {}, loc)


def max8(dst, src, loc=None, mask=None):
    op = "max8"
    dst, src = tile(dst, "dst", op), tile(src, "src", op)
    _partial(op, src, _free(src), mask)
    return record(op, {"dst": dst, "src": src}, [src], [dst], {}, loc)


def tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, loc=None,
                       mask=None):
    """nki.isa.tensor_tensor_scan: per partition, r = (data0[i] op0 r) op1 data1[i] from r = initial."""
    op = "tensor_tensor_scan"
    dst, data0, data1 = _two_tiles(op, dst, data0, "data0", data1, "data1")
    from . import _lower

    for d in (data0, data1):  # the scan starts at the held part's first element, the device's at the dim's
        _lower.warn_partial_reduction(op, d, _free(d), mask, verb="scans")
    for o in (op0, op1):
        if o in _BITVEC or o == "abs":
            raise NkiError(f"{op}: op0 nl.{op0} and op1 nl.{op1} must be binary arithmetic operators (NKI's "
                           "math operator table; bitvec operators and nl.abs are not)")
    v0, i0 = _operand(initial, op, "initial", data0)
    reads = [data0, data1] + ([v0] if v0 is not None else [])
    o = record(op, {"dst": dst, "data0": data0, "data1": data1, "initial": v0}, reads, [dst],
               {"op0": op0, "op1": op1, "imm0": i0, "reverse0": bool(reverse0), "reverse1": bool(reverse1)}, loc)
    if dst.st is data0.st or dst.st is data1.st:
        _order.check(o, dst, (data0, data1))
    return o


# nki.isa.tensor_partition_reduce's operators (NKI 2.21-2.33: add, max, bitwise_or, bitwise_and; 2.33 adds
# bitwise_xor and mean).
PARTITION_REDUCE_OPS = ("add", "maximum", "bitwise_or", "bitwise_and", "bitwise_xor")


def tensor_partition_reduce(dst, alu, data, loc=None, mask=None):
    """nki.isa.tensor_partition_reduce on GpSimd: dst [1, F...] = data [P, F...] reduced across partitions."""
    op = "tensor_partition_reduce"
    dst, data = tile(dst, "dst", op), tile(data, "data", op)
    if alu not in PARTITION_REDUCE_OPS:
        raise NkiError(f"{op}: op nl.{alu} is not a partition reduction operator (NKI: add, maximum, "
                       "bitwise_or, bitwise_and, bitwise_xor)")
    if dst.partitions != 1 or dst.free_size != data.free_size:
        raise NkiError(f"{op}: dst {list(dst.shape)} must be one partition holding data's {data.free_size} "
                       f"elements per partition (data {list(data.shape)})")
    gpsimd_no_psum(op, op, (dst, "dst"), (data, "data"))
    _partial(op, data, [data.pd], mask)
    return record(op, {"dst": dst, "data": data}, [data], [dst], {"op": alu}, loc)


def nc_n_gather(dst, data, indices, loc=None):
    """nki.isa.nc_n_gather on GpSimd: dst[p, j] = data[p, indices[p, j]] (data's free elements flattened)."""
    op = "nc_n_gather"
    dst, data, indices = tile(dst, "dst", op), tile(data, "data", op), tile(indices, "indices", op)
    gpsimd_no_psum(op, op, (dst, "dst"), (data, "data"), (indices, "indices"))
    if indices.dtype.name != "uint32":
        raise NkiError(f"{op}: indices must be nl.uint32, got {indices.dtype.name}")
    if dst.dtype != data.dtype:
        raise NkiError(f"{op}: dst must have data's dtype {data.dtype.name}, got {dst.dtype.name}")
    if not (dst.partitions == data.partitions == indices.partitions) or dst.free_size != indices.free_size:
        raise NkiError(f"{op}: data {list(data.shape)}, indices {list(indices.shape)} and dst {list(dst.shape)} "
                       "must have the same partitions, and dst as many elements per partition as indices")
    return record(op, {"dst": dst, "data": data, "indices": indices}, [data, indices], [dst], {}, loc)


def _int32_immediate(op, what, x):
    """An int32 immediate of nonzero_with_count (index_offset, padding_val): exact, no FP32 on the way."""
    import numpy as np

    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        if isinstance(x, (float, np.floating)) and float(x).is_integer():
            x = int(x)
        else:
            raise NkiError(f"{op}: {what} must be an int32 number, got {x!r}")
    if not -2 ** 31 <= int(x) < 2 ** 31:
        raise NkiError(f"{op}: {what} {int(x)} is outside int32")
    return int(x)


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, loc=None):
    """nki.isa.nonzero_with_count on GpSimd (NeuronCore-v3 and newer): on partitions 0, 16, ..., 112, dst =
    the nonzero positions of src plus index_offset, padding_val up to src's length, then the count."""
    op = "nonzero_with_count"
    dst, src = tile(dst, "dst", op), tile(src, "src", op)
    if _target().generation == "trn1":
        raise NkiError(f"{op}: NeuronCore-v3 and newer only (Trn2, Trn3); this target is trn1 (NeuronCore-v2)")
    gpsimd_no_psum(op, op, (dst, "dst"), (src, "src"))
    if src.dtype.name not in ("float32", "int32"):
        raise NkiError(f"{op}: src must be nl.float32 or nl.int32, got {src.dtype.name}")
    if dst.dtype.name != "int32":
        raise NkiError(f"{op}: dst must be nl.int32, got {dst.dtype.name}")
    if dst.partitions != src.partitions or dst.free_size != src.free_size + 1:
        raise NkiError(f"{op}: dst {list(dst.shape)} must have src's {src.partitions} partitions and one more "
                       f"element per partition than src {list(src.shape)} ({src.free_size + 1}: the count)")
    attrs = {"index_offset": _int32_immediate(op, "index_offset", index_offset),
             "padding_val": _int32_immediate(op, "padding_val", padding_val)}
    return record(op, {"dst": dst, "src": src}, [src], [dst], attrs, loc)


def _shuffle_mask(op, mask):
    """nc_stream_shuffle's shuffle_mask: 32 ints, each a source partition 0-31 of the quadrant or 255."""
    import numpy as np

    try:
        entries = list(mask)
    except TypeError:
        raise NkiError(f"{op}: shuffle_mask must be a list of 32 ints, got {mask!r}") from None
    if len(entries) != 32:
        raise NkiError(f"{op}: shuffle_mask has {len(entries)} entries, expected 32 (one per partition of a "
                       "quadrant)")
    out = []
    for i, m in enumerate(entries):
        if isinstance(m, (bool, np.bool_)) or not isinstance(m, (int, np.integer)) or not (
                0 <= m <= 31 or m == 255):
            raise NkiError(f"{op}: shuffle_mask[{i}] is {m!r}: expected a source partition 0-31 of the "
                           "quadrant, or 255 (the output partition is not modified)")
        out.append(int(m))
    return out


def nc_stream_shuffle(dst, src, shuffle_mask, loc=None):
    """nki.isa.nc_stream_shuffle on Vector: in each 32-partition quadrant, dst partition i = src partition
    shuffle_mask[i] (255: unmodified); in place allowed."""
    op = "nc_stream_shuffle"
    dst, src = tile(dst, "dst", op), tile(src, "src", op)
    mask = _shuffle_mask(op, shuffle_mask)
    if dst.dtype != src.dtype:
        raise NkiError(f"{op}: dst must have src's dtype {src.dtype.name}, got {dst.dtype.name}")
    if dst.free_size != src.free_size:
        raise NkiError(f"{op}: dst {list(dst.shape)} must have as many elements per partition as src "
                       f"{list(src.shape)}")
    # 255 leaves dst's partition as it was: dst is read too where the mask keeps any.
    reads = [src] + ([dst] if 255 in mask else [])
    return record(op, {"dst": dst, "src": src}, reads, [dst], {"shuffle_mask": mask}, loc)


def nc_find_index8(dst, data, vals, loc=None, mask=None):
    op = "nc_find_index8"
    dst, data, vals = tile(dst, "dst", op), tile(data, "data", op), tile(vals, "vals", op)
    _lower_warn(op, data, mask, "searches")
    return record(op, {"dst": dst, "data": data, "vals": vals}, [data, vals], [dst], {}, loc)


def nc_match_replace8(dst, data, vals, imm, dst_idx=None, loc=None, mask=None):
    op = "nc_match_replace8"
    dst, data, vals = tile(dst, "dst", op), tile(data, "data", op), tile(vals, "vals", op)
    _lower_warn(op, data, mask, "searches")
    idx = tile(dst_idx, "dst_idx", op) if dst_idx is not None else None
    try:
        imm = float(imm)
    except (TypeError, ValueError):
        raise NkiError(f"{op}: imm must be a number, got {imm!r}") from None
    # data is read whole before dst is written (docs/program-format.md), so dst may be data (in place).
    writes = [dst] + ([idx] if idx is not None else [])
    return record(op, {"dst": dst, "data": data, "vals": vals, "dst_idx": idx}, [data, vals], writes,
                  {"imm": imm}, loc)


# str(loc) of each line with an affine_select -> whether every select there reads from on_true_tile only elements
# that hold values: its predicate keeps none, or only elements of the part a masked call's result holds (`held`,
# padding a tail tile). The builder checks the select's whole on_true_tile, so it warns of a read where no
# instruction wrote for elements the select discards; _jit.warnings_by_call drops that warning at such a line
# (and clears this).
quiet_selects = {}


def _below_zero(c, ks, ns):
    """[(lo, hi)] per dim bounding the points x of the box [0, n) per dim where c + sum k * x < 0 (integers);
    [] where none."""
    mins = [min(0, k * (n - 1)) for k, n in zip(ks, ns)]
    least = c + sum(mins)
    if least >= 0:
        return []
    out = []
    for k, n, m in zip(ks, ns, mins):
        room = m - least  # > 0: k * x must be below it
        if k > 0:
            out.append((0, min(n, -(-room // k))))
        elif k < 0:
            out.append((max(0, room // k + 1), n))
        else:
            out.append((0, n))
    return out


def kept_box(shape, steps, offset, channel_multiplier, cmp_op):
    """[(lo, hi)] per dim of dst (shape [P, free...]) bounding the elements where affine_select's predicate,
    cmp_op(offset + channel_multiplier * p + sum of steps * free indices, 0), holds (a superset for equal);
    [] where it holds nowhere; None when not known (a fraction, or a value past FP32's exact integers)."""
    ks = [channel_multiplier] + list(steps) + [0] * (len(shape) - 1 - len(steps))
    try:
        if not all(float(v).is_integer() for v in ks + [offset]):
            return None
    except (TypeError, ValueError, OverflowError):
        return None  # (not numbers: the call's own checks say so)
    ks, c = [int(k) for k in ks], int(offset)
    if abs(c) + sum(abs(k) * (n - 1) for k, n in zip(ks, shape)) >= 1 << 24:
        return None
    neg = [-k for k in ks]
    below = {"less": lambda: _below_zero(c, ks, shape), "less_equal": lambda: _below_zero(c - 1, ks, shape),
             "greater": lambda: _below_zero(-c, neg, shape), "greater_equal": lambda: _below_zero(-c - 1, neg, shape)}
    if cmp_op in below:
        return below[cmp_op]()
    if cmp_op in ("equal", "not_equal"):
        a, b = below["less_equal"](), below["greater_equal"]()
        if cmp_op == "equal":
            box = [(max(l1, l2), min(h1, h2)) for (l1, h1), (l2, h2) in zip(a, b)] if a and b else []
            return [] if any(hi <= lo for lo, hi in box) else box
        a, b = below["less"](), below["greater"]()
        return [(min(l1, l2), max(h1, h2)) for (l1, h1), (l2, h2) in zip(a, b)] if a and b else (a or b)
    return None


def affine_select(dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value, cmp_op, engine=None,
                  loc=None, held=None):
    """held: [(first index, size)] per dim of on_true_tile, the part of it that holds values when it is a masked
    call's result read whole (padding a tail tile; quiet_selects)."""
    op = "affine_select"
    dst, on_true = tile(dst, "dst", op), tile(on_true_tile, "on_true_tile", op)
    same_shape(op, dst, "dst", on_true, "on_true_tile")
    pattern = [int(p) for p in pattern]
    if len(pattern) > max(1, dst.ndim - 1):
        raise NkiError(f"{op}: {len(pattern)} pattern steps for the {dst.ndim - 1} free dims of dst")
    _exact_iota_immediates(op, dst, offset=offset, channel_multiplier=channel_multiplier)
    try:
        value = float(on_false_value)
    except (TypeError, ValueError):
        raise NkiError(f"{op}: on_false_value must be a number, got {on_false_value!r}") from None
    if engine is None:  # (no other engine runs it: nki.isa.affine_select is GpSimd only)
        gpsimd_no_psum(op, op, (dst, "dst"), (on_true, "on_true_tile"))
    engine = _engine_for(op, engine, [dst, on_true])
    o = record(op, {"dst": dst, "on_true_tile": on_true}, [on_true], [dst],
               {"pattern": pattern, "offset": float(offset), "channel_multiplier": float(channel_multiplier),
                "on_false_value": value, "cmp_op": cmp_op, "engine": engine}, loc)
    # The select reads on_true_tile where its predicate holds only: nothing is undefined when that is nowhere,
    # or inside the held part (docs/nki.md "Masks")
    kept = kept_box(tuple(dst.shape), pattern, offset, channel_multiplier, cmp_op)
    quiet = kept == [] or (kept is not None and held is not None and len(held) == len(kept) and all(
        a <= lo and hi <= a + n for (lo, hi), (a, n) in zip(kept, held)))
    at = str(o.loc)
    quiet_selects[at] = quiet_selects.get(at, True) and quiet
    return o


def dma_copy(dst, src, engine=None, dge_mode="unknown", oob_mode="error", accumulate=False,
             vector_offset=None, indirect_dst=False, scalar_offset=None, scalar_offset_dst=False,
             scalar_offset_stride=0, loc=None):
    op = "dma_copy"
    if not isinstance(dst, NkiTensor) or not isinstance(src, NkiTensor):
        for v, n in ((dst, "dst"), (src, "src")):
            if isinstance(v, _indirect.IndirectView):
                raise NkiError(f"{op}: {n} is a Tensor Indirection view (t.indirect), which a compute "
                               f"instruction reads or writes, not a DMA; nisa.tensor_copy it to or from a tile")
            if not isinstance(v, NkiTensor):
                raise NkiError(f"{op}: {n} must be an NKI tensor, got {type(v).__name__}")
    for v in ((dst, src) if dst.pd > 0 or src.pd > 0 else ()):  # (HBM views have pd -1)
        if v.on_chip and v.pd > 0:
            # Block dims before the partition dim: both sides are reordered alike, partition dim first.
            if dst.shape != src.shape:
                raise NkiError(f"{op}: {list(v.shape)} has block dims before its partition dim; the other side "
                               f"must have the same shape, got {list(dst.shape)} and {list(src.shape)}")
            order = (v.pd,) + tuple(i for i in range(len(v.dims)) if i != v.pd)
            dst, src = dst.permute(order), src.permute(order)
            break
    if vector_offset is None and (dst.dims is not src.dims and dst.size != src.size):
        raise NkiError(f"{op}: src {list(src.shape)} has {src.size} elements, dst {list(dst.shape)} has "
                       f"{dst.size}")
    reads = [src]
    if vector_offset is not None:
        reads.append(vector_offset)
    if scalar_offset is not None:
        reads.append(scalar_offset)
    if accumulate:
        reads.append(dst)
    o = record(op, {"dst": dst, "src": src, "vector_offset": vector_offset, "scalar_offset": scalar_offset},
               reads, [dst], {"engine": engine, "dge_mode": dge_mode, "oob_mode": oob_mode,
                              "accumulate": bool(accumulate), "indirect_dst": bool(indirect_dst),
                              "scalar_offset_dst": bool(scalar_offset_dst),
                              "scalar_offset_stride": scalar_offset_stride}, loc)
    o.load = src.st.space == HBM and dst.st.space != HBM and vector_offset is None and scalar_offset is None
    return o


# dma_copy's attributes with its defaults, shared by every nl.load of the common case (_lower.load) (a DMA's attributes are
# never changed once recorded).
_LOAD_ATTRS = {"engine": None, "dge_mode": "unknown", "oob_mode": "error", "accumulate": False,
               "indirect_dst": False, "scalar_offset_dst": False, "scalar_offset_stride": 0}


def dma_transpose(dst, src, engine=None, dge_mode="unknown", loc=None, axes=(1, 0)):
    """axes: NKI's permutation for src's rank (nki.isa._dma_axes): (1, 0), or (2, 1, 0) / (3, 1, 2, 0), which
    the builder's outer-axes transpose runs as one instruction (dst exactly src's shape permuted)."""
    op = "dma_transpose"
    for v, n in ((dst, "dst"), (src, "src")):
        if not isinstance(v, NkiTensor):
            raise NkiError(f"{op}: {n} must be an NKI tensor, got {type(v).__name__}")
    if dst.st.space != SBUF:
        raise NkiError(f"{op}: dst must be in SBUF")
    outer = len(axes) > 2 and math.prod(src.shape[1:-1]) > 1  # (middle dims all 1: the 2-D swap)
    if outer:
        want = [src.shape[a] for a in axes]
        if list(dst.shape) != want:
            raise NkiError(f"{op}: dst {list(dst.shape)} must be src {list(src.shape)} permuted by axes "
                           f"{tuple(axes)}: {want}")
    elif len(src.shape) < 2 or dst.partitions != src.shape[-1] or dst.free_size * dst.partitions != src.size:
        raise NkiError(f"{op}: dst {list(dst.shape)} must be the transpose of src {list(src.shape)}")
    if dge_mode == "hwdge" and (src.shape[0] != 16 or src.shape[-1] % 128):
        # nki.isa.dma_transpose: a hardware-DGE transpose needs src.shape[0] == 16, src.shape[-1] % 128 == 0
        # and a 2-byte dtype (the dtype: the builder's rule check, for C++ kernels too).
        raise NkiError(f"{op}: dge_mode=hwdge needs src.shape[0] == 16 and src.shape[-1] a multiple of 128 "
                       f"(nki.isa.dma_transpose), got src {list(src.shape)}")
    o = record(op, {"dst": dst, "src": src}, [src], [dst],
               {"engine": engine, "dge_mode": dge_mode, "axes": tuple(axes) if outer else ()}, loc)
    o.load = src.st.space == HBM
    return o


def core_barrier(data, engine=None, loc=None):
    t = _trace.current()
    if t.target.num_programs_hw != 2:
        raise NkiError("core_barrier needs an LNC2 launch (two physical cores: lnc 2)")
    return record("core_barrier", {"data": data}, [data], [data], {"engine": engine or "POOL"}, loc)


def sendrecv(src, dst, engine=None, loc=None):
    t = _trace.current()
    if t.target.num_programs_hw != 2:
        raise NkiError("sendrecv needs an LNC2 launch (two physical cores: lnc 2)")
    tile(src, "src", "sendrecv")
    tile(dst, "dst", "sendrecv")
    return record("sendrecv", {"src": src, "dst": dst}, [src, dst], [dst], {"engine": engine}, loc)


def as_np_dtype(d):
    return modelled(as_dtype(d))
