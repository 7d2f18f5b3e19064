"""Emission of a traced, allocated and ordered kernel into the builder (trnsim._core): one builder call per
instruction, each with its operands as builder views and the kernel line it came from."""

from . import _alloc, _schedule
from ._errors import NkiError, lowered
from ._ops import _LOAD_ATTRS
from ._tensor import HBM, PSUM, SBUF

_core = None


def core():
    global _core
    if _core is None:
        from .. import _core as c

        _core = c
    return _core


_ENGINES = {"PE": "PE", "DVE": "DVE", "ACT": "ACT", "POOL": "POOL", "SP": "SP"}
_DGE = {"unknown": "Unknown", "none": "None_", "hwdge": "Hwdge", "swdge": "Swdge"}


class Emitter:
    def __init__(self, k, trace, plan):
        self.k = k
        self.c = core()
        self.trace = trace
        self.plan = plan
        self.buffers = {}  # (pool uid, index) -> whole-buffer builder view
        self.whole = {}  # (pool uid, index) -> the dims of a view of the whole buffer, ((0, P), (1, F))
        self.arenas = {}  # directly placed tiles (_direct.py): SBUF, (PSUM, bank offset) -> the arena view
        # (pool uid, index) -> on-chip views whose builder view is cached (NkiTensor._bv): a builder view holds
        # its buffer, so they are dropped with the buffer, when the builder may give the space away, and every
        # one when the emission ends (a view a kernel keeps must not carry this build's builder view into
        # another). HBM views are not cached.
        self.cached = {}
        self.dt_cache = {}
        self.eng_cache = {None: None}
        self.has_pattern = hasattr(self.c.View, "pattern")
        c = self.c
        # The bindings' enum values, looked up once (an attribute of a pybind11 enum class is a slow lookup).
        self.oob = {"skip": c.OobMode.Skip, "error": c.OobMode.Error}
        self.dge = {k: getattr(c.DgeMode, v) for k, v in _DGE.items()}
        self.perf = {"double_row": c.PerfMode.DoubleRow, "none": c.PerfMode.None_}
        self.alu_cache = {}
        self.act_cache = {}
        self.nki = c.nki

    # ---- enums
    def dtype(self, d):
        e = self.dt_cache.get(d.name)
        if e is None:
            e = self.c.parse_dtype(d.isa)
            if e is None:
                raise NkiError(f"dtype {d.name} is not modelled")
            self.dt_cache[d.name] = e
        return e

    def engine(self, name):
        try:
            return self.eng_cache[name]
        except KeyError:
            e = self.eng_cache[name] = getattr(self.c.Engine, _ENGINES[name])
            return e

    def alu(self, name):
        a = self.alu_cache.get(name)
        if a is None:
            a = self.c.parse_alu(name)
            if a is None:
                raise NkiError(f"ALU operator {name!r} is not modelled")
            self.alu_cache[name] = a
        return a

    def act(self, name):
        a = self.act_cache.get(name)
        if a is None:
            a = self.c.parse_act(name)
            if a is None:
                raise NkiError(f"activation function {name!r} is not modelled")
            self.act_cache[name] = a
        return a

    def release(self, buf):
        """Drops on-chip buffer `buf` ((pool uid, index)) after its last instruction: its builder view and the
        views cached on it (a builder view holds its buffer)."""
        self.buffers.pop(buf, None)
        for v in self.cached.pop(buf, ()):
            v._bv = None

    # ---- views
    def base(self, st):
        if st.space == HBM:
            return st.phys
        b = self.buffers.get(st.phys)
        if b is None and st.direct is not None:
            b = self.buffers[st.phys] = self.direct_base(st)
        elif b is None:
            # Each buffer at the byte offset the plan gave it (kernels/api/alloc_rule.h plan_pools): the
            # builder's allocator in program order, as the C++ pools are made.
            pool = self.plan.pools[st.phys[0]]
            free = st.pbytes // st.dtype.itemsize
            shape = [pool.partitions, free]
            name = st.shown_name()
            if pool.pool_size > 1:
                name = f"{name}[{st.phys[1]}]"
            space = self.c.MemSpace.SBUF if st.space == SBUF else self.c.MemSpace.PSUM
            b = self.k.tile_at(space, pool.offsets[st.phys[1]], shape, self.dtype(st.dtype), name,
                               loc=tuple(st.loc) if st.loc else None)
            self.buffers[st.phys] = b
            self.whole[st.phys] = ((0, pool.partitions), (1, free))
        return b

    def direct_base(self, st):
        """A directly placed tile (_direct.py): a view of the arena covering its memory (SBUF; PSUM: its bank)
        at its partition and bytes, so the builder tracks its accesses by address as placed."""
        c, d, tg = self.c, st.direct, self.trace.target
        free = st.pbytes // st.dtype.itemsize
        self.whole[st.phys] = ((0, st.partitions), (1, free))
        if st.space == SBUF:
            key, at, size, space = SBUF, 0, tg.sbuf_bytes, c.MemSpace.SBUF
        else:
            at = d.offset - d.offset % tg.psum_bank_bytes
            key, size, space = (PSUM, at), tg.psum_bank_bytes, c.MemSpace.PSUM
        arena = self.arenas.get(key)
        if arena is None:
            name = "sbuf" if st.space == SBUF else f"psum bank {at // tg.psum_bank_bytes}"
            arena = self.arenas[key] = self.k.tile_at(space, at, [tg.partitions, size], c.parse_dtype("uint8"),
                                                      f"direct {name}")
        return arena.pattern(self.dtype(st.dtype), d.offset - at, ((0, st.partitions), (1, free)), d.partition)

    def indexed_rows(self, v):
        """The indexed HBM side of an indirect DMA (_tensor.indexed_rows): its first row's pattern over the
        index's rows (View.index_rows: they may lie outside the pattern's tensor rows)."""
        (stride, rows), rest = v.dims[0], v.dims[1:]
        dims = ((stride, 1),) + (rest or ((1, 1),))
        return v.st.phys.pattern(self.dtype(v.dtype), v.boff, dims, 0).index_rows(rows)

    def view(self, v):
        if v is None:
            return None
        b = v._bv  # an operand used by several instructions (a tile, a PSUM accumulator) is made once
        if b is not None:
            return b
        st = v.st
        if st.space == HBM:
            # Not cached: an HBM view is usually one instruction's operand (a load's source, a store's
            # destination), and a pattern made twice is the same builder view.
            dims = v.dims
            if len(dims) < 2:
                dims = (((1, 1), (1, 1)) if not dims else (dims[0], (1, 1)))
            dt = self.dt_cache.get(v.dtype.name)
            if dt is None:
                dt = self.dtype(v.dtype)
            return st.phys.pattern(dt, v.boff, dims, 0)
        phys = st.phys
        base = self.buffers.get(phys) or self.base(st)
        c = self.cached.get(phys)
        if c is None:
            c = self.cached[phys] = []
        c.append(v)
        pd = v.pd
        if pd == 0:
            dims = v.dims
            if v.boff == 0 and v.p0 == 0 and v.dtype is st.dtype and dims == self.whole[phys]:
                v._bv = base  # the whole buffer (a new tile's usual operand): the buffer's own view
                return base
        elif pd == -1:
            dims = ((0, 1),) + v.dims
        else:
            raise NkiError(f"an operand {list(v.shape)} has its partition dim at position {pd}")
        p0 = v.p0
        if not self.has_pattern:
            return _fallback_view(base, v, dims, p0, self.dtype(v.dtype))
        dt = self.dt_cache.get(v.dtype.name)
        if dt is None:
            dt = self.dtype(v.dtype)
        b = v._bv = base.pattern(dt, v.boff, dims, p0)
        return b


def _fallback_view(base, v, dims, p0, dtype):
    raise NkiError("trnsim._core.View.pattern is missing: this build's bindings predate the nki front end")


def emit(k, trace, mode, bufs_override=None):
    plan = _alloc.plan(trace, bufs_override, k.limits())
    ops = _schedule.order(trace, mode, plan.after)
    em = Emitter(k, trace, plan)
    _record_sites(k, plan)
    # The loop runs in the bindings (trnsim._core.nki_emit_ops): each op by the builder call its EMIT function
    # makes (the usual ones made there directly), and a buffer released (Emitter.release) after its last
    # instruction in emission order, so the builder's allocator can give its space to the buffer the plan put
    # there next (whose first access the schedule put after it). Builder errors name the op's kernel line.
    em.failed_op = None
    try:
        em.c.nki_emit_ops(em, ops, EMIT, _LOAD_ATTRS, HBM)
    except (em.c.RuleError, em.c.InputError) as e:
        err = _by_kernel_call(e, em.failed_op, trace) or _at_kernel_line(e, em.failed_op, trace)
        if err is None:
            raise
        raise err from None
    finally:
        for views in em.cached.values():
            for v in views:
                v._bv = None
    return plan


def _at_kernel_line(e, op, trace):
    """A builder error that names no line (an operand's access pattern it cannot make) as one naming the
    kernel's line and call; an access of more than 4 free dims after merging is NkiUnsupported (NKI's compiler
    splits it into several instructions; trnsim does not). None if it names a line already."""
    import re

    from ._errors import NkiUnsupported
    from ._loops import user_call

    if op is None or not op.loc or re.match(r"[^\s:]+:\d+: ", str(e)):
        return None
    call = user_call(op, trace) or op.name
    if "free dims after merging; access patterns have at most 4" in str(e):
        return NkiUnsupported(f"{call}: {e}: an access of more than 4 free dims (after merging) is not modelled "
                              "by trnsim; split it (a loop over one of its axes)", loc=op.loc)
    return type(e)(f"{op.loc}: {call}: {e}")


def _by_kernel_call(e, op, trace):
    """A builder error "k.py:12: tensor_copy on ACT: <rule>" about an instruction a lowering made for the
    kernel's call (nl.add's partition broadcast) as the same error naming that call first ("k.py:12: nl.add:
    its tensor_copy on ACT (made by trnsim's lowering of nl.add): <rule>"); None if the kernel made it."""
    import re

    from ._loops import user_call

    m = re.match(r"([^\s:]+:\d+): (\w+)( on \w+)?: ", str(e)) if op is not None else None
    if m is None or m.group(2) != op.name:
        return None
    call = user_call(op, trace)
    if call is None:
        return None
    return type(e)(f"{m.group(1)}: " + lowered(call, op.name + (m.group(3) or ""), str(e)[m.end():]))


def _record_sites(k, plan):
    """Each site's allocation in the builder's record (stats.json "allocations"), as a C++ pool's: its
    declarations are its placements (a pool made again when another site took its space)."""
    rec = getattr(k, "record_allocation", None)
    if rec is None:
        return
    c = core()
    for s in plan.sites:
        if s.pool_size <= 1 and s.trip <= 1 and s.scope == "kernel":
            continue  # a tile declared once: not a pool
        rec(name=s.storages[0].shown_name(), source=str(s.loc) if s.loc else "?",
            space=c.MemSpace.SBUF if s.space == SBUF else c.MemSpace.PSUM,
            bytes_per_partition=s.unit, tiles=s.live, trip_count=s.trip, bufs=s.bufs,
            by_rule=s.reason != "explicit bufs", reason=s.reason, declarations=s.placements, scope=s.scope)
    for d in plan.report_direct() if plan.direct else ():  # the kernel's own placements: its physical tiles
        n = len(d["physical_tiles"])
        rec(name=d["tensor"], source=d["line"], space=c.MemSpace.SBUF if d["space"] == SBUF else c.MemSpace.PSUM,
            bytes_per_partition=d["bytes_per_partition"], tiles=1, trip_count=d["logical_tiles"], bufs=n,
            by_rule=False, reason=f"direct allocation: {d['allocator']}", declarations=1, scope="kernel")


def _loc(op):
    return op.loc or None  # a Loc is a (file, line) tuple, as the bindings take it


def _operand(em, x_view, imm):
    return em.view(x_view) if x_view is not None else imm


def _nc_matmul(em, op):
    a, t, view = op.args, op.attrs, em.view
    if t["perf_mode"] != "double_row" and not t["is_transpose"]:
        # The lean entry point; operands already made (a tile's builder view, _bv) are taken as they are.
        d, s, m = a["dst"], a["stationary"], a["moving"]
        em.nki.emit_nc_matmul(d._bv or view(d), s._bv or view(s), m._bv or view(m), t["accumulate"],
                              op.loc or None)
        return
    pm = em.perf["double_row" if t["perf_mode"] == "double_row" else "none"]
    em.c.nki.nc_matmul(view(a["dst"]), view(a["stationary"]), view(a["moving"]), accumulate=t["accumulate"],
                       perf_mode=pm, is_transpose=t["is_transpose"], loc=op.loc or None)


def _nc_matmul_mx(em, op):
    a = op.args
    em.c.nki.nc_matmul_mx(em.view(a["dst"]), em.view(a["stationary"]), em.view(a["moving"]),
                          em.view(a["stationary_scale"]), em.view(a["moving_scale"]),
                          accumulate=op.attrs["accumulate"], stationary_scale_offset=op.attrs["st_off"],
                          moving_scale_offset=op.attrs["mv_off"], loc=_loc(op))


def _quantize_mx(em, op):
    a = op.args
    em.c.nki.quantize_mx(em.view(a["dst"]), em.view(a["src"]), em.view(a["dst_scale"]),
                         scale_offset=op.attrs["scale_offset"], loc=_loc(op))


def _nc_transpose(em, op):
    a = op.args
    em.c.nki.nc_transpose(em.view(a["dst"]), em.view(a["data"]), engine=em.engine(op.attrs["engine"]),
                          loc=_loc(op))


def _activation(em, op):
    a, t = op.args, op.attrs
    kw = {}
    if a["reduce_res"] is not None:
        kw["reduce_res"] = em.view(a["reduce_res"])
    em.c.nki.activation(em.view(a["dst"]), em.act(t["func"]), em.view(a["data"]),
                        bias=_operand(em, a["bias"], t["bias"]), scale=_operand(em, a["scale"], t["scale"]),
                        engine=em.engine(t["engine"]), loc=_loc(op), **kw)


def _tensor_tensor(em, op):
    a = op.args
    em.c.nki.tensor_tensor(em.view(a["dst"]), em.view(a["data1"]), em.view(a["data2"]), em.alu(op.attrs["op"]),
                           engine=em.engine(op.attrs["engine"]), loc=_loc(op))


def _tensor_scalar(em, op):
    a, t = op.args, op.attrs
    em.c.nki.tensor_scalar(em.view(a["dst"]), em.view(a["data"]), em.alu(t["op0"]),
                           _operand(em, a["operand0"], t["imm0"]), reverse0=t["reverse0"], op1=em.alu(t["op1"]),
                           operand1=_operand(em, a["operand1"], t["imm1"]), reverse1=t["reverse1"],
                           engine=em.engine(t["engine"]), loc=_loc(op))


def _tensor_scalar_reduce(em, op):
    a, t = op.args, op.attrs
    em.c.nki.tensor_scalar_reduce(em.view(a["dst"]), em.view(a["data"]), em.alu(t["op0"]),
                                  _operand(em, a["operand0"], t["imm0"]), em.alu(t["reduce_op"]),
                                  em.view(a["reduce_res"]), reverse0=t["reverse0"], negate=t["negate"], loc=_loc(op))


def _tensor_reduce(em, op):
    a, t = op.args, op.attrs
    data = a["data"]
    axis = list(t["axis"])
    # The builder counts dims of the operand as emitted: a dropped partition dim is re-added first.
    if data.pd == -1:
        axis = [x + 1 for x in axis]
    em.c.nki.tensor_reduce(em.view(a["dst"]), em.alu(t["op"]), em.view(data), axis, negate=t["negate"],
                           engine=em.engine(t["engine"]), loc=_loc(op))


def _tensor_copy(em, op):
    a = op.args
    em.c.nki.emit_tensor_copy(em.view(a["dst"]), em.view(a["src"]), em.engine(op.attrs["engine"]), _loc(op))


def _memset(em, op):
    em.c.nki.memset(em.view(op.args["dst"]), op.attrs["value"], engine=em.engine(op.attrs["engine"]),
                    loc=_loc(op))


def _iota(em, op):
    t = op.attrs
    em.c.nki.iota(em.view(op.args["dst"]), t["pattern"], offset=t["offset"],
                  channel_multiplier=t["channel_multiplier"], engine=em.engine(t["engine"]), loc=_loc(op))


def _select(em, op):
    a, t = op.args, op.attrs
    em.c.nki.select(em.view(a["dst"]), em.view(a["predicate"]), em.view(a["on_true"]),
                    _operand(em, a["on_false"], t["on_false"]), engine=em.engine(t["engine"]), loc=_loc(op))


def _scalar_tensor_tensor(em, op):
    a, t = op.args, op.attrs
    em.c.nki.scalar_tensor_tensor(em.view(a["dst"]), em.view(a["data"]), em.alu(t["op0"]),
                                  _operand(em, a["operand0"], t["imm0"]), em.alu(t["op1"]), em.view(a["operand1"]),
                                  reverse0=t["reverse0"], reverse1=t["reverse1"], engine=em.engine(t["engine"]),
                                  loc=_loc(op))


def _bn_stats(em, op):
    em.c.nki.bn_stats(em.view(op.args["dst"]), em.view(op.args["data"]), loc=_loc(op))


def _bn_aggr(em, op):
    em.c.nki.bn_aggr(em.view(op.args["dst"]), em.view(op.args["data"]), loc=_loc(op))


def _max8(em, op):
    em.c.nki.max8(em.view(op.args["dst"]), em.view(op.args["src"]), loc=_loc(op))


def _nc_find_index8(em, op):
    a = op.args
    em.c.nki.nc_find_index8(em.view(a["dst"]), em.view(a["data"]), em.view(a["vals"]), loc=_loc(op))


def _nc_match_replace8(em, op):
    a = op.args
    idx = em.view(a["dst_idx"]) if a["dst_idx"] is not None else None
    em.c.nki.nc_match_replace8(em.view(a["dst"]), em.view(a["data"]), em.view(a["vals"]), op.attrs["imm"],
                               dst_idx=idx, loc=_loc(op))


def _affine_select(em, op):
    a, t = op.args, op.attrs
    em.c.nki.affine_select(em.view(a["dst"]), t["pattern"], t["offset"], t["channel_multiplier"],
                           em.view(a["on_true_tile"]), t["on_false_value"], cmp_op=em.alu(t["cmp_op"]),
                           engine=em.engine(t["engine"]), loc=_loc(op))


def _dma_copy(em, op):
    a, t, c = op.args, op.attrs, em.c
    if t is _LOAD_ATTRS:  # nl.load's DMA (_lower.load): the binding's defaults, no offsets
        d, s = a["dst"], a["src"]
        dims = s.dims
        if len(dims) >= 2:  # the HBM source's pattern, as Emitter.view makes it
            dt = em.dt_cache.get(s.dtype.name)
            sv = s.st.phys.pattern(dt if dt is not None else em.dtype(s.dtype), s.boff, dims, 0)
        else:
            sv = em.view(s)
        em.nki.emit_dma_copy(d._bv or em.view(d), sv, op.loc or None)
        return
    vo, so = a["vector_offset"], a["scalar_offset"]
    if vo is None and so is None:
        view = em.view
        if (t["engine"] is None and t["dge_mode"] == "unknown" and t["oob_mode"] != "skip"
                and not t["accumulate"]):
            # The binding's defaults: the lean entry point (no keywords, no result).
            d, s = a["dst"], a["src"]
            em.nki.emit_dma_copy(d._bv or view(d), s._bv or view(s), op.loc or None)
            return
        c.nki.dma_copy(view(a["dst"]), view(a["src"]), oob_mode=em.oob["skip" if t["oob_mode"] == "skip" else "error"],
                       accumulate=t["accumulate"], dge_mode=em.dge[t["dge_mode"]], engine=em.engine(t["engine"]),
                       loc=op.loc or None)
        return
    oob = em.oob["skip" if t["oob_mode"] == "skip" else "error"]
    dge = em.dge[t["dge_mode"]]
    kw = dict(oob_mode=oob, accumulate=t["accumulate"], dge_mode=dge, engine=em.engine(t["engine"]), loc=_loc(op))
    dst = src = None
    if vo is not None:
        kw["vector_offset"] = em.view(vo)
        kw["indirect_dst"] = t["indirect_dst"]
        if t["indirect_dst"]:
            dst = em.indexed_rows(a["dst"])
        else:
            src = em.indexed_rows(a["src"])
    if so is not None:
        kw["scalar_offset"] = em.view(so)
        kw["scalar_offset_dst"] = t["scalar_offset_dst"]
        if t["scalar_offset_stride"]:
            kw["scalar_offset_stride"] = t["scalar_offset_stride"]
    c.nki.dma_copy(em.view(a["dst"]) if dst is None else dst, em.view(a["src"]) if src is None else src, **kw)


def _dma_transpose(em, op):
    a, t, c = op.args, op.attrs, em.c
    c.nki.dma_transpose(em.view(a["dst"]), em.view(a["src"]), engine=em.engine(t["engine"]),
                        dge_mode=em.dge[t["dge_mode"]], axes=list(t["axes"]), loc=_loc(op))


def _core_barrier(em, op):
    em.c.nki.core_barrier(em.view(op.args["data"]), engine=em.engine(op.attrs["engine"]), loc=_loc(op))


def _sendrecv(em, op):
    em.c.nki.sendrecv(em.view(op.args["src"]), em.view(op.args["dst"]), engine=em.engine(op.attrs["engine"]),
                      loc=_loc(op))



def _tensor_tensor_scan(em, op):
    a, t = op.args, op.attrs
    em.c.nki.tensor_tensor_scan(em.view(a["dst"]), em.view(a["data0"]), em.view(a["data1"]),
                                _operand(em, a["initial"], t["imm0"]), em.alu(t["op0"]), em.alu(t["op1"]),
                                reverse0=t["reverse0"], reverse1=t["reverse1"], loc=_loc(op))


def _tensor_partition_reduce(em, op):
    em.c.nki.tensor_partition_reduce(em.view(op.args["dst"]), em.alu(op.attrs["op"]), em.view(op.args["data"]),
                                     loc=_loc(op))


def _nc_n_gather(em, op):
    a = op.args
    em.c.nki.nc_n_gather(em.view(a["dst"]), em.view(a["data"]), em.view(a["indices"]), loc=_loc(op))

def _nonzero_with_count(em, op):
    t = op.attrs
    em.c.nki.nonzero_with_count(em.view(op.args["dst"]), em.view(op.args["src"]), index_offset=t["index_offset"],
                                padding_val=t["padding_val"], loc=_loc(op))


def _nc_stream_shuffle(em, op):
    em.c.nki.nc_stream_shuffle(em.view(op.args["dst"]), em.view(op.args["src"]), op.attrs["shuffle_mask"],
                               loc=_loc(op))


EMIT = {
    "nc_matmul": _nc_matmul, "nc_matmul_mx": _nc_matmul_mx, "quantize_mx": _quantize_mx,
    "nc_transpose": _nc_transpose, "activation": _activation, "tensor_tensor": _tensor_tensor,
    "tensor_scalar": _tensor_scalar, "tensor_reduce": _tensor_reduce, "tensor_copy": _tensor_copy,
    "memset": _memset, "iota": _iota, "select": _select, "dma_copy": _dma_copy, "dma_transpose": _dma_transpose,
    "core_barrier": _core_barrier, "sendrecv": _sendrecv, "scalar_tensor_tensor": _scalar_tensor_tensor,
    "bn_stats": _bn_stats, "bn_aggr": _bn_aggr, "affine_select": _affine_select, "max8": _max8,
    "nc_find_index8": _nc_find_index8, "nc_match_replace8": _nc_match_replace8,
    "tensor_scalar_reduce": _tensor_scalar_reduce, "tensor_tensor_scan": _tensor_tensor_scan,
    "tensor_partition_reduce": _tensor_partition_reduce, "nc_n_gather": _nc_n_gather,
    "nonzero_with_count": _nonzero_with_count, "nc_stream_shuffle": _nc_stream_shuffle,
}
