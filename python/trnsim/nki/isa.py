"""nki.isa on the simulator: every instruction trnsim models, in both calling styles NKI has had.

Current style (Neuron 2.27 and later): outputs are arguments, `nisa.tensor_copy(dst=t, src=s)`.
Earlier style (neuronxcc.nki, Neuron 2.21 - 2.26): the instruction returns a new tile,
`t = nisa.tensor_copy(s)`, with `mask=` and `dtype=` keyword arguments.
A call is in the current style when it passes `dst=` or its leading positional arguments are the current
style's tensors; each style then binds its arguments with NKI's own signature and defaults (a wrong argument
is Python's TypeError naming the call). Calls NKI has that trnsim does not model raise NkiUnsupported naming
the call and the kernel line (UNSUPPORTED below; docs/nki.md lists both).
"""

import enum
import functools
import math

from . import _lower
from . import _ops
from . import _trace
from . import _void
from ._dtypes import as_dtype
from ._errors import NkiError, ignored_kwargs, unsupported_name, unsupported, warn_at
from ._index import AffinePredicate, IndexExpr, Mask, UnmodelledMask, _is_bool
from ._tensor import PSUM, SBUF, NkiTensor, _whole
from ._indirect import IndirectView


def _named(name):
    def deco(f):
        f.__name__ = f.__qualname__ = name
        f.__module__ = "nki.isa"
        return f

    return deco


def _public(f):
    """A public nki.isa call: a TypeError binding its arguments (an unknown keyword of a form whose NKI
    signature has no **kwargs, a missing argument) is an NkiError naming the argument and the kernel line;
    an error about its mask= or an instruction its lowering made names the call first, as an nl call's do
    (by_call: `nisa.tensor_tensor: mask: ...`)."""
    import functools

    return functools.wraps(f)(_void.wrapper(f, "nisa." + f.__name__, bind="nki.isa." + f.__name__))


class engine(enum.Enum):
    """nki.isa.engine: where an instruction runs (`unknown`: the compiler picks, see _ops.DEFAULT_ENGINE)."""

    tensor = "PE"
    vector = "DVE"
    scalar = "ACT"
    gpsimd = "POOL"
    dma = "DMA"
    sync = "SP"
    unknown = None


# The earlier spellings.
tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
unknown_engine = engine.unknown
sync_engine = engine.sync


class dma_engine(enum.Enum):
    """nki.isa.dma_engine: the DMA that moves nki.isa.sendrecv's data: dma (the shared DMA queues, the default)
    or gpsimd_dma (GpSimd's internal DMA for low-latency SBUF swaps under LNC2: not modelled)."""

    dma = "dma"
    gpsimd_dma = "gpsimd_dma"


class dge_mode(enum.Enum):
    unknown = "unknown"
    swdge = "swdge"
    hwdge = "hwdge"
    none = "none"


class oob_mode(enum.Enum):
    error = "error"
    skip = "skip"


class reduce_cmd(enum.Enum):
    idle = "idle"
    reset = "reset"
    reduce = "reduce"
    reset_reduce = "reset_reduce"
    load_reduce = "load_reduce"


class matmul_perf_mode(enum.Enum):
    none = "none"
    double_row = "double_row"


class nc_version(enum.IntEnum):
    gen2 = 2
    gen3 = 3
    gen4 = 4


class dependency(enum.Enum):
    runtime = "runtime"
    schedule = "schedule"


@_public
def get_nc_version():
    """NeuronCore-v2 on Trn1, v3 on Trn2, v4 on Trn3 (the run's hardware)."""
    from ._backend import target

    return {"trn1": nc_version.gen2, "trn3": nc_version.gen4}.get(target().generation, nc_version.gen3)


def _engine_name(e, call):
    if e is None or e is engine.unknown:
        return None
    if isinstance(e, engine):
        if e is engine.dma:
            raise NkiError(f"{call}: engine=nki.isa.engine.dma is not a compute engine")
        return e.value
    if isinstance(e, str):
        for m in engine:
            if e in (m.name, m.value):
                return m.value
    raise NkiError(f"{call}: unknown engine {e!r}")


def _enum_value(x, cls, call, what):
    if isinstance(x, cls):
        return x.value
    if isinstance(x, str) and x in cls.__members__:
        return cls[x].value
    members = list(cls)
    if cls is dge_mode and isinstance(x, int) and not isinstance(x, bool):
        # nki-library passes dge_mode's integer value (`_DGE_MODE_NONE = 3`): the members in the page's order.
        if 0 <= x < len(members):
            return members[x].value
        raise NkiError(f"{call}: {what} must be an nki.isa.{cls.__name__} or its integer value 0-{len(members) - 1} "
                       f"({', '.join(m.name for m in members)}), got {x!r}")
    raise NkiError(f"{call}: {what} must be an nki.isa.{cls.__name__}, got {x!r}")


def _t(x):
    return isinstance(x, (NkiTensor, IndirectView))


@functools.lru_cache(maxsize=None)
def _old_positionals(call):
    """The positional parameter names of nki.isa.<call>'s earlier style (`_<call>_old`): () if it takes keywords
    only, None if the call has no such function."""
    import inspect

    old = globals().get(f"_{call}_old")
    if old is None:
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return tuple(p.name for p in inspect.signature(old).parameters.values() if p.kind in kinds)


def _current(args, kwargs, n_leading):
    """Whether a call uses the current style: dst= given, or its first n_leading positionals are tensors.
    NkiError for mask= on a current-style call: NKI's dst= signatures (2.27 and later) have no mask."""
    import sys

    call = sys._getframe(1).f_code.co_name  # the dispatcher: nki.isa's name of the call
    cur = "dst" in kwargs or (len(args) >= n_leading and all(_t(a) for a in args[:n_leading]))
    if not cur and args and kwargs:
        # dst positional and the operands by keyword (`nisa.tensor_copy(d, src=t)`): a keyword naming one of the
        # earlier style's leading positionals that the given positionals already fill cannot be that style.
        # An earlier style taking keywords only (scalar_tensor_tensor's) cannot take a positional at all.
        old = _old_positionals(call)
        cur = old is not None and (not old or any(n in kwargs for n in old[:len(args)]))
    if cur and "mask" in kwargs:
        raise NkiError(f"nki.isa.{call}: the dst= form (NKI 2.27 and later) takes no mask=; index dst and the "
                       f"operands to the masked-in region instead (e.g. dst=t[0:n, :], with the same [0:n, :] "
                       f"of each operand), or use the earlier form that returns a new tile, which takes mask=")
    return cur


def _result(shape, dtype, space, call):
    return _ops.new_tile(shape, dtype, space, call)


def _apply_mask(mask, *views):
    return _lower.apply_mask(mask, views) if mask is not None else views


def _region(*views):
    """A dst= call's operands. The call is one instruction over all of its dst, as NKI's dst= call is: an operand
    that is an earlier masked call's result holding part of a dst-shaped tile (`nisa.activation(dst=buf,
    data=t)` with t from nl.load(..., mask=...)) is read whole (_lower.whole_of), its unwritten rest with the
    simulator's warning, and the call writes all of dst (tester23ah F4: a fresh or whole-loaded dst kept its old
    columns there, silently, while a masked result's was written whole). Operands of another shape are cut to
    the part such an operand holds (_lower.operand_region). A dst that is itself such a result is its whole
    tile (_whole_dst)."""
    dst = _whole_dst(views[0])
    wide = _lower.dst_wide(dst, views[1:])
    if wide is not None:
        if dst is not views[0]:
            _lower.mark_filled(dst)
        return (dst,) + wide
    out = _lower.operand_region(None, (dst,) + views[1:])[0]
    if dst is not views[0] and out[0] is dst:
        _lower.mark_filled(dst)  # (written whole: no operand's held part cut it)
    return out


def _whole_dst(dst):
    """The dst= of a current-style call as the kernel named it: a masked call's result passed whole is its whole
    tile (_lower.whole_of), which the call writes, as NKI's dst= call writes all of the tile it is given; the
    masked call only decided what the tile held before (tester23ag F6: `nisa.memset(dst=t, value=1.0)` of a
    masked load's t wrote only the columns the load held)."""
    w = _lower.whole_of(dst)
    return dst if w is None else w


def _positional(v):
    """The operand of a call whose result depends on where along its tile each element lies (nc_n_gather's and
    nc_find_index8's data, nc_match_replace8's, whose indices count from the tile's first element): a masked
    call's result passed whole is its whole tile (_lower.whole_of), as NKI's one instruction indexes the tile it
    is given, the part no instruction wrote read with the simulator's warning; the held part alone would count
    from its own first element (tester23ai F9 / F10: indices 8 too low for a tile holding columns 8-39)."""
    w = _lower.whole_of(v)
    return v if w is None else w


def _masked(mask, *views):
    """_apply_mask for a call whose new tile has its first operand's shape: (views, the region of the call's
    index space the tile holds, for _lower.boxed)."""
    return _lower.operand_region(mask, views)


# ---------------------------------------------------------------------------------------------- nc_matmul


# NKI's earlier name of the FP8 double-row mode (its neuronxcc nc_matmul example: perf_mode="double_row_gen3" on
# trn2, [K, 2, F] operands summed over K and both rows): the same mechanism as double_row.
_PERF_NAMES = {"double_row_gen3": "double_row"}


def _perf(perf_mode, call):
    if isinstance(perf_mode, str) and perf_mode in _PERF_NAMES:
        return _PERF_NAMES[perf_mode]
    try:
        return _enum_value(perf_mode, matmul_perf_mode, call, "perf_mode")
    except NkiError:
        raise NkiError(f"{call}: perf_mode must be an nki.isa.matmul_perf_mode (none, double_row; 'double_row_gen3' "
                       f"is double_row's earlier name), got {perf_mode!r}") from None


def _whole_array(tile_position, tile_size):
    """Tile position (0, 0) of size (128, 128): the whole PE array, i.e. no tiling (nki-library's router_topk
    passes it when its column tiling is off)."""
    return tuple(tile_position or ()) == (0, 0) and tuple(tile_size or ()) == (128, 128)


def _tile_pos(tile_position, tile_size, call):
    if (tile_position not in ((), None) or tile_size not in ((), None)) and not _whole_array(tile_position,
                                                                                               tile_size):
        # The simulator runs every matmul on the whole array: row/column tiling (several small matmuls in
        # parallel) is not modelled, so its timing would be wrong.
        unsupported(f"{call}(tile_position=..., tile_size=...)", "PE row/column tiling")


@_named("nc_matmul")
def _nc_matmul_new(dst, stationary, moving, is_stationary_onezero=False, is_moving_onezero=False,
                   is_transpose=False, accumulate=None, tile_position=(), tile_size=(),
                   perf_mode=matmul_perf_mode.none, name=None):
    _tile_pos(tile_position, tile_size, "nki.isa.nc_matmul")
    perf = _perf(perf_mode, "nc_matmul")
    if perf == "none" and not is_transpose:
        stationary, moving = _lower.whole_contraction(stationary, moving, 0)
        stationary, moving = _lower.legal_rows(_lower.legal_rows(stationary), 1), _lower.legal_rows(moving)
        dst = _held_dst(dst, (stationary, 1), (moving, 1))
        _product_dst(dst, stationary, moving)
    return _ops.nc_matmul(dst, stationary, moving, accumulate, perf, is_transpose)


def _product_dst(dst, stationary, moving):
    """NkiError for a dst= that is an earlier masked matmul's product (trnsim keeps it at the part it holds, not
    NKI's whole tile: docs/nki.md "Masks") where this call writes the whole (tester23ag F6 addendum 2: it was
    'dst [96, 256] must be [128, 256]', a shape the kernel never has)."""
    box = _lower.box_of(dst) if isinstance(dst, NkiTensor) and dst.st.space == PSUM else None
    whole = (stationary.free_size, moving.free_size) if isinstance(stationary, NkiTensor) and isinstance(
        moving, NkiTensor) else None
    if box is None or tuple(box[0]) != whole or tuple(dst.shape) == whole or any(box[1]):
        return
    raise NkiError(f"nc_matmul: dst, {_lower._operand(dst)}, is the product of the matmul that "
                   f"{_lower._mask_words(box[2], 'a mask')} at {box[2]} cut, which trnsim keeps at the "
                   f"{list(dst.shape)} it holds of the {list(whole)} this call writes (NKI's tile is the whole): "
                   f"give this call a PSUM tile of its own (nl.ndarray({whole}, nl.float32, buffer=nl.psum))")


def _held_dst(dst, *operands):
    """A dst= call's dst of the whole index-space shape of tail operands (a masked nl.load's tile: box_of),
    where the call's own rule wants the held part's shape: the same rows/columns of dst (docs/nki.md
    "Masks"), the rest of dst untouched. `operands`: (operand, the dim of it each dst dim comes from). dst as
    given otherwise (its shape matches, or the call's own check names it)."""
    if not isinstance(dst, NkiTensor) or dst.ndim != len(operands) or not all(
            isinstance(v, NkiTensor) and v.ndim == 2 for v, _ in operands):
        return dst
    if tuple(dst.shape) == tuple(v.shape[d] for v, d in operands):
        return dst
    bs, full, starts = _held_region(operands)
    if all(b is None for b in bs) or tuple(dst.shape) != full:
        return dst
    return dst.index(tuple(slice(a, a + v.shape[d]) for a, (v, d) in zip(starts, operands)))


def _held_region(operands):
    """(box_of of each operand, the whole index-space size and the first index of each (operand, dim) pair):
    where an operand is part of an earlier masked call's result (a masked nl.load's tail tile), its box's;
    otherwise its own size and 0."""
    bs = [_lower.box_of(v) for v, _ in operands]
    full = tuple(b[0][d] if b is not None else v.shape[d] for (v, d), b in zip(operands, bs))
    starts = tuple(b[1][d] if b is not None else 0 for (v, d), b in zip(operands, bs))
    return bs, full, starts


@_named("nc_matmul")
def _nc_matmul_old(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False,
                   is_transpose=False, tile_position=(), tile_size=(), mask=None,
                   perf_mode=matmul_perf_mode.none, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.nc_matmul", kwargs)
    _tile_pos(tile_position, tile_size, "nki.isa.nc_matmul")
    if mask is None and not is_transpose:
        stationary, moving = _lower.whole_contraction(stationary, moving, 0)
    given = (stationary, moving)
    if mask is not None:
        stationary, moving = _lower.matmul_mask(mask, stationary, moving, 1, "nki.isa.nc_matmul")
    _check_masked_contraction(given, (stationary, moving), mask)
    from ._dtypes import BY_NAME

    perf = _perf(perf_mode, "nc_matmul")
    if is_transpose:
        shape, dt = (moving.free_size, stationary.partitions), stationary.dtype
    else:
        # double_row's operands are [K, 2, F]: one [F_st, F_mv] result of both rows' products (the checker
        # names an operand of another layout).
        r = 2 if perf == "double_row" and stationary.free_size % 2 == 0 == moving.free_size % 2 else 1
        shape, dt = (stationary.free_size // r, moving.free_size // r), BY_NAME["float32"]
    # An operand in PSUM (an earlier-style nc_transpose's result, as nki-samples' fft1d passes on): the Tensor
    # engine reads SBUF, so it is copied there first (tensor_copy), as for nl.matmul (docs/nki.md "Lowerings").
    stationary, moving = _lower.to_sbuf(stationary, "nc_matmul"), _lower.to_sbuf(moving, "nc_matmul")
    dst = _result(shape, dt, PSUM, "nc_matmul")
    _ops.nc_matmul(dst, stationary, moving, None, perf, is_transpose)
    box = _matmul_box(mask, given, (stationary, moving), is_transpose)
    return _outer_tail(_lower.boxed(_lower.fresh(dst), box), mask, box, given, 1)


def _outer_tail(result, mask, box, given, x_dim):
    """A masked matmul's `result` (its `box` from _matmul_box) of tail operands (box_of: a masked nl.load's
    tile), marked with the region of their whole index space it holds, for a `+=` into an accumulator of that
    whole shape (_lower.outer_part), where the masked product's own shape does not fit. `x_dim`: the dim of
    given[0] the result's rows come from."""
    if mask is None or box is None:
        return result
    # (box[0] is the given operands' own sizes, _matmul_box's masked case; box[1] where the mask starts them)
    bs, full, held = _held_region(tuple(zip(given, (x_dim, 1))))
    if any(b is not None for b in bs) and full != tuple(box[0]):
        _lower.outer_box(result, full, tuple(h + a for h, a in zip(held, box[1])), box[2])
    return result


def _matmul_box(mask, given, masked, is_transpose, x_dim=1):
    """The region of [stationary's free, moving's free] a masked nc_matmul's result holds (for boxed: `ps[...]
    = nisa.nc_matmul(..., mask=...)` writes it): each result dim's first index is where the mask starts the
    free dim of the operand it comes from (a 2-D operand's; a transpose's result: not marked). `x_dim`: the
    dim of given[0] the result's rows come from (0 for nl.matmul's x [M, K] without transpose_x)."""
    if is_transpose or not all(isinstance(v, NkiTensor) and v.ndim == 2 for v in given + masked):
        return None
    if mask is None:
        # Operands holding part of an earlier masked call's index space (a masked nl.load's tail tile): the
        # product holds the rows and columns their free dims hold, so `acc += nl.matmul(x, y)` accumulates
        # into that part of acc (docs/nki.md "Masks").
        bs, full, starts = _held_region(tuple(zip(given, (x_dim, 1))))
        if bs[0] is None and bs[1] is None or full == (given[0].shape[x_dim], given[1].shape[1]):
            return None
        return full, starts, (bs[0] or bs[1])[2]
    full = (given[0].shape[x_dim], given[1].shape[1])
    # Tiles (no variables): the variable of axis 1 bounds both free dims (_lower.matmul_mask).
    free = [b for var, b in mask.bounds.items() if var.ndim == 2 and var.axis == 1] if isinstance(mask, Mask) else []
    starts = []
    for v, d in zip(given, (x_dim, 1)):
        if v.vars:
            var = v.vars[d]
            starts.append(mask.bounds[var][0] if isinstance(mask, Mask) and var in mask.bounds else 0)
        else:
            starts.append(free[0][0] if free and not any(w.vars for w in given) else 0)
    return full, tuple(starts), _lower.caller_loc()


def _check_masked_contraction(given, masked, mask):
    """NkiError naming the operand whose contraction dim (partitions) the mask cut and the one it left, when
    they agreed before the mask (else _ops.nc_matmul's shape message says what the kernel passed)."""
    (st0, mv0), (st, mv) = given, masked
    if not all(isinstance(v, NkiTensor) for v in given + masked):
        return
    if st0.partitions != mv0.partitions or st.partitions == mv.partitions:
        return
    cut, kept = ("moving", "stationary") if mv.partitions != mv0.partitions else ("stationary", "moving")
    n_cut, n_kept = (mv, st) if cut == "moving" else (st, mv)
    cut0, kept0 = (mv0, st0) if cut == "moving" else (st0, mv0)
    lo, hi = 0, n_cut.partitions
    var = cut0.vars[cut0.pd] if cut0.vars and cut0.pd >= 0 else None
    if var is not None and var in getattr(mask, "bounds", {}):
        lo, hi = mask.bounds[var]
    name, const = _index_name(kept0.vars[kept0.pd] if kept0.vars and kept0.pd >= 0 else None)
    lo, hi = lo + const, hi + const
    bound = (f"`& ({name} >= {lo}) & ({name} < {hi})`" if lo else f"`& ({name} < {hi})`") if name else None
    raise NkiError(f"nc_matmul: the mask cuts {cut}'s partitions (the contraction dim) to {n_cut.partitions} but "
                   f"leaves {kept}'s at {n_kept.partitions}: a mask bounds only the operand axes its nl.arange "
                   f"variables index, and both operands' partitions are contracted together: "
                   + (f"bound {name}, which indexes {kept}'s partitions, too ({bound})" if name else
                      f"bound the variable indexing {kept}'s partitions too")
                   + ", or index both operands' partitions with the same variable")


def _index_name(var):
    """(name, constant) of the kernel's variable holding nl.arange variable `var` plus a constant (`i_k =
    nl.arange(128)[:, None]`, `t * 128 + i_k`): a local of the kernel frame that called into nki; (None, 0)
    if there is none."""
    import sys

    from ._errors import _in_package
    from ._index import IndexExpr

    f = sys._getframe(1)
    while f is not None and _in_package(f.f_code.co_filename):
        f = f.f_back
    if var is None or f is None:
        return None, 0
    for name, value in f.f_locals.items():
        if isinstance(value, IndexExpr) and list(value.terms) == [var] and value.terms[var] == 1:
            return name, value.const
    return None, 0


@_public
def nc_matmul(*args, **kwargs):
    """dst[M, N] = stationary[K, M].T @ moving[K, N] on the Tensor engine (SBUF -> PSUM); perf_mode=double_row
    (or its earlier name 'double_row_gen3'): float8 stationary[K, 2, M] and moving[K, 2, N], both rows' products
    summed into dst[M, N]. The Tensor engine reads both operands from SBUF (NKI's page): an earlier-style call
    given a PSUM operand (an earlier-style nc_transpose's result, as nki-samples' fft1d, validated on hardware,
    passes on) copies it to SBUF first with a tensor_copy, as nl.matmul does; the current style (`dst=`) is one
    instruction, and a PSUM operand there is an NkiError naming it and the copy to write."""
    if _current(args, kwargs, 3):
        return _nc_matmul_new(*args, **kwargs)
    return _nc_matmul_old(*args, **kwargs)


@_public
@_named("nc_matmul_mx")
def nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, tile_position=None, tile_size=None,
                 accumulate=None, name=None):
    """MX matmul with dequantisation (NeuronCore-v4): x4-packed FP8 operands and their E8M0 scales."""
    _tile_pos(tile_position, tile_size, "nki.isa.nc_matmul_mx")
    return _ops.nc_matmul_mx(dst, stationary, moving, stationary_scale, moving_scale, accumulate)


@_public
@_named("quantize_mx")
def quantize_mx(dst, src, dst_scale, name=None):
    """BF16/FP16 src -> x4-packed FP8 dst and E8M0 dst_scale on the Vector engine (NeuronCore-v4)."""
    return _ops.quantize_mx(dst, src, dst_scale)


# -------------------------------------------------------------------------------------------- nc_transpose


@_named("nc_transpose")
def _nc_transpose_new(dst, data, engine=engine.unknown, name=None):
    data = _lower.legal_rows(_lower.legal_rows(data), 1)
    dst = _held_dst(dst, (data, 1), (data, 0))
    return _ops.nc_transpose(dst, data, _engine_name(engine, "nc_transpose"))


@_named("nc_transpose")
def _nc_transpose_old(data, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.nc_transpose", kwargs)
    if mask is None:
        data = _lower.legal_rows(_lower.legal_rows(data), 1)  # (its free dim is dst's partitions)
    (data,), box = _masked(mask, data)
    e = _engine_name(engine, "nc_transpose") or ("PE" if data.partitions > 32 or data.free_size > 32 else "PE")
    space = PSUM if e == "PE" else SBUF
    if e == "PE":  # (the Tensor engine reads SBUF: a PSUM tile is copied there first, as for nl.transpose)
        data = _lower.to_sbuf(data, "nc_transpose")
    dst = _result((data.free_size, data.partitions), _lower.dt(dtype, data.dtype), space, "nc_transpose")
    _ops.nc_transpose(dst, data, e)
    return _lower.boxed(_lower.fresh(dst), _lower.result_box(box, dst.shape, (1, 0)))


@_public
def nc_transpose(*args, **kwargs):
    """dst[F, P] = data[P, F]: Tensor engine (up to 128 x 128, into PSUM) or Vector engine (up to 32 x 32). On the
    Tensor engine, which reads SBUF, an earlier-style call copies a PSUM data to SBUF first (tensor_copy), as
    nl.transpose does; the current style (`dst=`) refuses it."""
    if _current(args, kwargs, 2):
        return _nc_transpose_new(*args, **kwargs)
    return _nc_transpose_old(*args, **kwargs)


# ---------------------------------------------------------------------------------------------- activation


def _reduce(reduce_op, reduce_res, reduce_cmd_, call, op="add", why="the Scalar engine sums"):
    """reduce_res of a call with a fused per-partition reduction, its reduce_cmd and reduce_op checked: this
    instruction's reduction only (reduce_cmd idle or reset_reduce), by `op` alone."""
    cmd = _enum_value(reduce_cmd_, reduce_cmd, call, "reduce_cmd")
    if reduce_res is None:
        if cmd not in ("idle",):
            unsupported(f"{call}(reduce_cmd={cmd}) without reduce_res", "the Scalar engine's reduce registers")
        return None
    if cmd not in ("idle", "reset_reduce"):
        unsupported(f"{call}(reduce_cmd={cmd})", "accumulating in the reduce registers across instructions")
    if reduce_op is not None and _lower.alu_name(reduce_op, call) != op:
        raise NkiError(f"{call}: reduce_op must be nl.{op} ({why})")
    return reduce_res


@_named("activation")
def _activation_new(dst, op, data, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
                    reduce_cmd=reduce_cmd.idle, engine=engine.unknown, name=None):
    rr = _reduce(reduce_op, reduce_res, reduce_cmd, "nki.isa.activation")
    dst, data, bias, scale, rr = _region(dst, data, bias, scale, rr)
    return _ops.activation(dst, _lower.act_name(op, "activation"), data, bias, scale, rr,
                           _engine_name(engine, "activation"))


@_named("activation")
def _activation_old(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None,
                    reduce_cmd=reduce_cmd.idle, mask=None, dtype=None, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.activation", kwargs)
    rr = _reduce(reduce_op, reduce_res, reduce_cmd, "nki.isa.activation")
    (data, bias, scale, rr), box = _masked(mask, data, bias, scale, rr)  # ([P, 1] tiles: their partitions)
    dst = _result(data.shape, _lower.dt(dtype, data.dtype), SBUF, "activation")
    _ops.activation(dst, _lower.act_name(op, "activation"), data, bias, scale, rr, mask=mask)
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def activation(*args, **kwargs):
    """dst = op(data * scale + bias) on the Scalar engine, optionally sum-reduced per partition into
    reduce_res; reduce_cmd other than idle and reset_reduce, or other than idle without reduce_res (e.g.
    reset_reduce alone), is NkiUnsupported (the reduce registers across instructions)."""
    if _current(args, kwargs, 1):
        return _activation_new(*args, **kwargs)
    return _activation_old(*args, **kwargs)


@_named("activation_reduce")
def _activation_reduce_new(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0, name=None):
    return _activation_new(dst, op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                           reduce_cmd=reduce_cmd.reset_reduce)


@_named("activation_reduce")
def _activation_reduce_old(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None,
                           **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.activation_reduce", kwargs)
    return _activation_old(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res,
                           reduce_cmd=reduce_cmd.reset_reduce, mask=mask, dtype=dtype)


@_public
def activation_reduce(*args, **kwargs):
    """nisa.activation with reduce_cmd=reset_reduce: also sums each partition's results into reduce_res."""
    if _current(args, kwargs, 1):
        return _activation_reduce_new(*args, **kwargs)
    return _activation_reduce_old(*args, **kwargs)


# ------------------------------------------------------------------------------------------- tensor_tensor


@_named("tensor_tensor")
def _tensor_tensor_new(dst, data1, data2, op, engine=engine.unknown, name=None):
    dst, data1, data2 = _region(dst, data1, data2)
    return _ops.tensor_tensor(dst, data1, data2, _lower.alu_name(op, "tensor_tensor"),
                              _engine_name(engine, "tensor_tensor"))


@_named("tensor_tensor")
def _tensor_tensor_old(data1, data2, op, *, dtype=None, mask=None, engine=engine.unknown, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.tensor_tensor", kwargs)
    (data1, data2), box = _masked(mask, data1, data2)
    dst = _result(data1.shape, _lower.dt(dtype, _lower.promote(data1, data2)), SBUF, "tensor_tensor")
    _ops.tensor_tensor(dst, data1, data2, _lower.alu_name(op, "tensor_tensor"),
                       _engine_name(engine, "tensor_tensor"))
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def tensor_tensor(*args, **kwargs):
    """dst = data1 op data2, elementwise (Vector or GpSimd engine)."""
    if _current(args, kwargs, 3):
        return _tensor_tensor_new(*args, **kwargs)
    return _tensor_tensor_old(*args, **kwargs)


# ------------------------------------------------------------------------------------------- tensor_scalar


def _ts_ops(op0, op1, call):
    return _lower.alu_name(op0, call), (None if op1 is None else _lower.alu_name(op1, call))


@_named("tensor_scalar")
def _tensor_scalar_new(dst, data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False,
                       engine=engine.unknown, name=None):
    a, b = _ts_ops(op0, op1, "tensor_scalar")
    dst, data, operand0, operand1 = _region(dst, data, operand0, operand1)
    return _ops.tensor_scalar(dst, data, a, operand0, reverse0, b, operand1, reverse1,
                              _engine_name(engine, "tensor_scalar"))


@_named("tensor_scalar")
def _tensor_scalar_old(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *,
                       dtype=None, mask=None, engine=engine.unknown, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.tensor_scalar", kwargs)
    (data, operand0, operand1), box = _masked(mask, data, operand0, operand1)  # ([P, 1] operands: partitions)
    a, b = _ts_ops(op0, op1, "tensor_scalar")
    dst = _result(data.shape, _lower.dt(dtype, data.dtype), SBUF, "tensor_scalar")
    _ops.tensor_scalar(dst, data, a, operand0, reverse0, b, operand1, reverse1,
                       _engine_name(engine, "tensor_scalar"))
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def tensor_scalar(*args, **kwargs):
    """dst = (data op0 operand0) op1 operand1; operands are numbers or [P, 1] per-partition vectors."""
    if _current(args, kwargs, 2):
        return _tensor_scalar_new(*args, **kwargs)
    return _tensor_scalar_old(*args, **kwargs)


# ------------------------------------------------------------------------------------ tensor_scalar_reduce

_ACCUMULATOR = "the Vector engine's accumulator registers across instructions (reduce_cmd other than reset_reduce, " \
               "reduce_init)"


@_named("tensor_scalar_reduce")
def _tensor_scalar_reduce_new(dst, data, op0, operand0, reduce_op, reduce_res=None, reverse0=False,
                              reduce_cmd=reduce_cmd.reset_reduce, reduce_init=None, reduce_res_negate=False,
                              name=None):
    call = "tensor_scalar_reduce"
    if _enum_value(reduce_cmd, globals()["reduce_cmd"], call, "reduce_cmd") != "reset_reduce" or \
            reduce_init is not None:
        unsupported(f"nki.isa.{call}(reduce_cmd={reduce_cmd}, reduce_init={reduce_init!r})", _ACCUMULATOR)
    if reduce_res is None:  # NKI 2.33: no reduction, a tensor_scalar
        dst, data, operand0 = _region(dst, data, operand0)
        return _ops.tensor_scalar(dst, data, _lower.alu_name(op0, call), operand0, reverse0, engine="DVE")
    dst, data, operand0, reduce_res = _region(dst, data, operand0, reduce_res)
    return _ops.tensor_scalar_reduce(dst, data, _lower.alu_name(op0, call), operand0,
                                     _lower.alu_name(reduce_op, call), reduce_res, reverse0, reduce_res_negate)


@_named("tensor_scalar_reduce")
def _tensor_scalar_reduce_old(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None,
                              **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.tensor_scalar_reduce", kwargs)
    call = "tensor_scalar_reduce"
    (data, operand0, reduce_res), box = _masked(mask, data, operand0, reduce_res)
    dst = _result(data.shape, _lower.dt(dtype, data.dtype), SBUF, call)
    _ops.tensor_scalar_reduce(dst, data, _lower.alu_name(op0, call), operand0, _lower.alu_name(reduce_op, call),
                              reduce_res, reverse0, mask=mask)
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def tensor_scalar_reduce(*args, **kwargs):
    """dst = data op0 operand0 (one arithmetic operator; operand0 a number or a [P, 1] vector) and reduce_res
    [P, 1] = reduce_op (add, subtract, multiply, maximum, minimum) over each partition's results as dst holds
    them (rounded to its dtype: the page reduces dst), folded in FP32 on the Vector engine; reduce_res_negate
    negates it; reduce_cmd other than reset_reduce, and reduce_init=, are NkiUnsupported (the accumulator
    registers across instructions)."""
    if _current(args, kwargs, 1):  # the earlier style takes keywords only
        return _tensor_scalar_reduce_new(*args, **kwargs)
    return _tensor_scalar_reduce_old(*args, **kwargs)


# ------------------------------------------------------------------------------------------- tensor_reduce


@_named("tensor_reduce")
def _tensor_reduce_new(dst, op, data, axis, negate=False, keepdims=False, name=None):
    dst, data = _region(dst, data)
    return _ops.tensor_reduce(dst, _lower.alu_name(op, "tensor_reduce"), data, axis, negate, keepdims)


@_named("tensor_reduce")
def _tensor_reduce_old(op, data, axis, *, dtype=None, mask=None, negate=False, keepdims=False, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.tensor_reduce", kwargs)
    (data,), box = _masked(mask, data)
    axis = _ops.reduce_axes(data, axis)  # (an axis that is no integer named before the result's shape needs it)
    dims = _lower.reduced_dims(data.ndim, axis, keepdims)
    dst = _result(_lower.reduced_shape(data, axis, keepdims), _lower.dt(dtype, data.dtype), SBUF, "tensor_reduce")
    _ops.tensor_reduce(dst, _lower.alu_name(op, "tensor_reduce"), data, axis, negate, keepdims, mask=mask)
    return _lower.boxed(_lower.fresh(dst), _lower.result_box(box, dst.shape, dims))


@_public
def tensor_reduce(*args, **kwargs):
    """Reduces data over its innermost free axes with an ALU op on the Vector engine."""
    if _current(args, kwargs, 1):
        return _tensor_reduce_new(*args, **kwargs)
    return _tensor_reduce_old(*args, **kwargs)


# ---------------------------------------------------------------------------------------------- tensor_copy


@_named("tensor_copy")
def _tensor_copy_new(dst, src, engine=engine.unknown, name=None, dtype=None):
    # `dtype=` is accepted as the published tutorials pass it (nki-samples' matmul tutorial, beta 2, passes the
    # output's dtype with a float32 dst): the copy casts to dst's dtype (nki.isa.tensor_copy), so another
    # dtype is ignored, with a warning.
    if dtype is not None and _lower.dt(dtype, dst.dtype) != dst.dtype:
        warn_at(f"nisa.tensor_copy: dtype={_lower.dt(dtype, dst.dtype).name} is ignored: the copy writes dst's "
                f"{dst.dtype.name} (nki.isa.tensor_copy casts to dst.dtype; its dst= signature has no dtype=)",
                RuntimeWarning)
    dst, src = _region(dst, src)
    return _ops.tensor_copy(dst, src, _engine_name(engine, "tensor_copy"))


@_named("tensor_copy")
def _tensor_copy_old(src, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.tensor_copy", kwargs)
    (src,), box = _masked(mask, src)
    dst = _result(src.shape, _lower.dt(dtype, src.dtype), SBUF, "tensor_copy")
    _ops.tensor_copy(dst, src, _engine_name(engine, "tensor_copy"))
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def tensor_copy(*args, **kwargs):
    """dst = src with a dtype cast (Vector, Scalar or GpSimd engine)."""
    if _current(args, kwargs, 2):
        return _tensor_copy_new(*args, **kwargs)
    return _tensor_copy_old(*args, **kwargs)


# -------------------------------------------------------------------------------------------------- memset


@_named("memset")
def _memset_new(dst, value, engine=engine.unknown, name=None):
    dst = _whole_dst(dst)
    _lower.mark_filled(dst)
    return _ops.memset(dst, value, _engine_name(engine, "memset"))


@_named("memset")
def _memset_old(shape, value, dtype, *, mask=None, engine=engine.unknown, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.memset", kwargs)
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    for s in shape:  # (a size 'a' was int()'s "invalid literal" from trnsim's code)
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise NkiError(f"nki.isa.memset: shape {shape!r:.80}: size {s!r:.40} is not an integer")
    dst = _result(tuple(shape), _lower.dt(dtype, None), SBUF, "memset")
    if mask is None:
        _ops.memset(dst, value, _engine_name(engine, "memset"))
        return _lower.fresh(dst)
    # The new tile is the masked-in part, marked with its region (as tensor_copy's): `t[...] = memset(...)`
    # writes that region of t only.
    (d,), box = _lower.apply_mask(mask, (dst,), box=True)
    _ops.memset(d, value, _engine_name(engine, "memset"))
    return _lower.boxed_part(dst, d, box)


@_public
def memset(*args, **kwargs):
    """Fills dst with a constant."""
    if _current(args, kwargs, 1):
        return _memset_new(*args, **kwargs)
    return _memset_old(*args, **kwargs)


# ---------------------------------------------------------------------------------------------------- iota


@_named("iota")
def _iota_new(dst, pattern, offset=0, channel_multiplier=0, name=None):
    def whole(v):  # (a step of 1.5 was truncated to 1)
        return _whole(v, "iota: pattern", pattern)

    pairs = [(whole(p[0]), whole(p[1])) if isinstance(p, (list, tuple)) else (whole(p), None) for p in pattern]
    steps, nums = [s for s, _ in pairs], [n for _, n in pairs]
    dst = _whole_dst(dst)
    _lower.mark_filled(dst)
    if isinstance(dst, NkiTensor) and pairs and None not in nums:
        # nki.isa.iota: the pattern's [step, num] dims walk dst's free elements in order; dst may have any free
        # shape holding num_w * ... * num_x elements per partition.
        free = list(dst.shape[1:])
        if math.prod(nums) != math.prod(free):
            raise NkiError(f"iota: pattern {[list(p) for p in pairs]} makes {math.prod(nums)} values per "
                           f"partition but dst {list(dst.shape)} holds {math.prod(free)}")
        if nums != free:
            dst = dst.reshape([dst.shape[0]] + nums)
    return _ops.iota(dst, steps, offset, channel_multiplier)


@_named("iota")
def _iota_old(expr, dtype, *, mask=None, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.iota", kwargs)
    return _lower.iota_expr(expr, dtype, mask)


@_public
def iota(*args, **kwargs):
    """dst[p, i...] = offset + channel_multiplier * p + sum(step * i) on GpSimd (earlier style: the value
    of an affine nl.arange expression); an integer dst's offset is exact past 2^24 (the ISA splits it, as
    memset's fill), its channel_multiplier is one FP32 immediate: one FP32 does not hold is an NkiError;
    values are 32-bit integer math (past INT32_MAX they wrap), cast to a 16- or 8-bit integer dst saturating,
    as memset and every engine's integer write do."""
    if _current(args, kwargs, 1):
        return _iota_new(*args, **kwargs)
    return _iota_old(*args, **kwargs)


# ------------------------------------------------------------------------------------------------ dma_copy


_DMA_DEFAULTS = dict(oob_mode="error", dge_mode="unknown", engine=None, accumulate=False)


def _dma_common(call, dst_rmw_op, oob_mode_, dge_mode_, engine_):
    if dst_rmw_op is None and oob_mode_ is oob_mode.error and dge_mode_ is dge_mode.unknown and (
            engine_ is engine.unknown or engine_ is None):
        return _DMA_DEFAULTS
    acc = False
    if dst_rmw_op is not None:
        if _lower.alu_name(dst_rmw_op, call) != "add":
            unsupported(f"{call}(dst_rmw_op={dst_rmw_op})", "only nl.add (a DMA-side add) is modelled")
        acc = True
    return dict(oob_mode=_enum_value(oob_mode_, oob_mode, call, "oob_mode"),
                dge_mode=_enum_value(dge_mode_, dge_mode, call, "dge_mode"),
                engine=_engine_name(engine_, call), accumulate=acc)


@_public
@_named("dma_copy")
def dma_copy(dst=None, src=None, *, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error,
             dge_mode=dge_mode.unknown, engine=engine.unknown, unique_indices=True, name=None):
    """Copies (with a dtype cast) between HBM, SBUF and PSUM on a DMA queue; dge_mode= also takes its integer
    value (0-3: unknown, swdge, hwdge, none), as nki-library passes it."""
    if dst is None or src is None:
        raise TypeError("nki.isa.dma_copy() needs dst and src")
    given = None
    if mask is not None:
        given = (dst, src)
        views = _lower.apply_mask(mask, given, skip=True, dma=True)
        if views is None:
            return None  # nothing masked in: NKI emits no instruction
        dst, src = views
    elif isinstance(dst, NkiTensor):
        dst = _whole_dst(dst)
        _lower.mark_filled(dst)
        wide = _lower.dst_wide(dst, (src,))  # (on chip, a src holding part is read whole, as by _region)
        src = src if wide is None else wide[0]
    if isinstance(dst, NkiTensor) and isinstance(src, NkiTensor):
        _lower.same_layout("nki.isa.dma_copy", dst, src,
                           given if given is not None and all(isinstance(v, NkiTensor) for v in given) else None)
    else:
        _lower.held_indices("nki.isa.dma_copy", dst if isinstance(dst, _lower._Indirect) else src)
        _lower.indirect_layout("nki.isa.dma_copy", dst, src)
    opts = _dma_common("nki.isa.dma_copy", dst_rmw_op, oob_mode, dge_mode, engine)
    return _lower.dma(dst, src, **opts)


@_named("dma_transpose")
def _dma_transpose_new(dst, src, axes=None, dge_mode=dge_mode.unknown, engine=engine.unknown, name=None):
    dst = _held_dst(dst, (src, 1), (src, 0))
    return _ops.dma_transpose(dst, src, _engine_name(engine, "dma_transpose"),
                              _enum_value(dge_mode, globals()["dge_mode"], "dma_transpose", "dge_mode"),
                              axes=_dma_axes(axes, src))


@_named("dma_transpose")
def _dma_transpose_old(src, *, axes=None, mask=None, dtype=None, dge_mode=dge_mode.unknown, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.dma_transpose", kwargs)
    (src,), box = _lower.apply_mask(mask, (src,), box=True, dma=True) if mask is not None else ((src,), None)
    perm = _dma_axes(axes, src)
    shape = tuple(src.shape[a] for a in perm)
    dst = _result(shape, src.dtype, SBUF, "dma_transpose")
    _ops.dma_transpose(dst, src, None, _enum_value(dge_mode, globals()["dge_mode"], "dma_transpose",
                                                   "dge_mode"), axes=perm)
    out_dtype = _lower.dt(dtype, src.dtype)
    if out_dtype != src.dtype:
        # The DMA transpose moves its dtype unchanged; the cast NKI's dtype= asks for is a tensor_copy after it.
        cast = _result(shape, out_dtype, SBUF, "dma_transpose")
        _ops.tensor_copy(cast, dst)
        dst = cast
    return _lower.boxed(_lower.fresh(dst), _lower.result_box(box, dst.shape, (1, 0)) if src.ndim == 2 else None)


# NKI's dma_transpose permutation of a src of n dims (nki.isa.dma_transpose, 2.21-2.33): the partition dim and
# the last dim swap, the dims between them stay; `axes` may only name the one of src's dims.
_DMA_PERMUTATIONS = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def _dma_axes(axes, src):
    """The permutation dma_transpose applies to `src`; NkiError for a src of another rank or axes NKI does
    not take for it."""
    n = len(src.shape)
    perm = _DMA_PERMUTATIONS.get(n)
    given = None if axes is None else tuple(axes)
    if perm is None:
        raise NkiError(f"dma_transpose: src {list(src.shape)} has {n} dims: NKI's dma_transpose permutes a 2-, "
                       "3- or 4-D src ((1, 0), (2, 1, 0), (3, 1, 2, 0))")
    if given is not None and given != perm:
        raise NkiError(f"dma_transpose: axes={given} for a {n}-D src {list(src.shape)}: NKI's dma_transpose "
                       f"takes axes {perm} for it (supported: (1, 0), (2, 1, 0), (3, 1, 2, 0))")
    return perm


@_public
def dma_transpose(*args, **kwargs):
    """dst[F, P] = src[P, F] on the DMA into SBUF, dtype unchanged: 2- or 4-byte dtypes (bit-accurate for
    both: Trainium2 arch guide); with dge_mode=hwdge 2-byte only, src.shape[0] == 16 and src.shape[-1] a
    multiple of 128 (nki.isa.dma_transpose). A 3-D src [A, B, C] gives dst [C, B, A] and a 4-D src [A, B, C,
    D] dst [D, B, C, A] (NKI's permutations (2, 1, 0) and (3, 1, 2, 0), the only axes= taken): one
    DmaTranspose, timed by the 2-D one's rule."""
    if _current(args, kwargs, 2):
        return _dma_transpose_new(*args, **kwargs)
    return _dma_transpose_old(*args, **kwargs)


# ---------------------------------------------------------------------------------------------------- LNC2


@_public
@_named("core_barrier")
def core_barrier(data, cores=(0, 1), engine=engine.unknown, name=None):
    """LNC2 barrier between the two physical cores: waits for this core's earlier accesses to `data`."""
    if tuple(cores) != (0, 1):
        raise NkiError(f"core_barrier: cores must be (0, 1) on an LNC2 pair, got {tuple(cores)}")
    return _ops.core_barrier(data, _engine_name(engine, "core_barrier"))


@_public
@_named("sendrecv")
def sendrecv(src, dst, send_to_rank=None, recv_from_rank=None, pipe_id=0, dma_engine=None, name=None):
    """LNC2 SBUF exchange: this core's src goes to the peer's dst, the peer's src to this core's dst (the two
    cores' n-th calls pair up: a RuleError naming both lines unless each src has as many elements as the
    peer's dst; a call whose own src and dst differ in element count, which NKI's page rules out (same shape),
    is a RuleError at that call alone, before any pairing); a masked call's result passed whole as src is sent
    whole, or its held part into a dst of that part's element count; on the shared DMA queues (dma_engine.dma;
    GpSimd's internal gpsimd_dma is NkiUnsupported)."""
    from . import language as nl

    me = nl.program_id(0)
    peer = 1 - me
    for what, r in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if r is not None and int(r) != peer:
            unsupported(f"nki.isa.sendrecv({what}={r})", "only the exchange with the peer core of the LNC2 pair")
    e = None
    if dma_engine is globals()["dma_engine"].gpsimd_dma:
        unsupported("nki.isa.sendrecv(dma_engine=nki.isa.dma_engine.gpsimd_dma)",
                    "GpSimd's internal DMA for low-latency SBUF swaps; the default dma_engine.dma is")
    if dma_engine is not None and dma_engine is not globals()["dma_engine"].dma:
        e = _engine_name(dma_engine, "sendrecv")
    if isinstance(dst, NkiTensor):
        dst = _whole_dst(dst)
        _lower.mark_filled(dst)
    # A masked call's result passed whole as src is its whole tile (NKI's), sent whole, the part no instruction
    # wrote read with the simulator's warning, unless dst has its held part's element count: that part is sent
    # (tester23ai F13: a [128, 64] tile holding 40 rows into a [128, 64] dst was "src has 2560 elements, dst has
    # 8192")
    whole = _lower.whole_of(src)
    if whole is not None and not (isinstance(dst, NkiTensor) and dst.size == src.size):
        src = whole
    return _ops.sendrecv(src, dst, e)


# ---------------------------------------------------------------------------------------------- reciprocal


@_named("reciprocal")
def _reciprocal_new(dst, data, engine=engine.unknown, name=None):
    dst, data = _region(dst, data)
    return _ops.tensor_scalar(dst, data, "divide", 1.0, True, None, None, False,
                              _engine_name(engine, "reciprocal") or "DVE")


@_named("reciprocal")
def _reciprocal_old(data, *, dtype=None, mask=None, engine=engine.unknown, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.reciprocal", kwargs)
    (data,), box = _masked(mask, data)
    dst = _result(data.shape, _lower.dt(dtype, data.dtype), SBUF, "reciprocal")
    _reciprocal_new(dst, data, engine)
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def reciprocal(*args, **kwargs):
    """1 / data on the Vector engine, as tensor_scalar(divide, 1.0, reverse0=True): an FP32 division."""
    if _current(args, kwargs, 2):
        return _reciprocal_new(*args, **kwargs)
    return _reciprocal_old(*args, **kwargs)


# ------------------------------------------------------------------------------------------------- select


@_public
@_named("select_reduce")
def select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=None, reverse_pred=False, name=None):
    """dst = predicate ? on_true : on_false; on_false a number or a [P, 1] vector (the page's rule: one value per
    partition, read by the select through a stride-0 view of dst's shape, which its cost does not count; another
    shape is an NkiError); with reduce_res, also its maximum per partition (NKI's NumPy form: np.max(result,
    axis=1, keepdims=True)) by a tensor_reduce(maximum) of dst on Vector after the select (the fused instruction
    is timed as the two). reverse_pred=True (the page's ~predicate, a logical not: on_true where the predicate
    is 0) is the same select with on_true and on_false swapped, exact for every predicate value as the select's
    test (predicate != 0, NaN included) is unchanged; the select reads its on_true from memory, so a number
    on_false is first written to a [P, 1] float32 SBUF tile by a memset (one more instruction, 4 bytes per
    partition; the select's immediate is a float32 too) and read as the vector. reduce_cmd other than idle
    and reset_reduce (or other than idle without reduce_res) is NkiUnsupported. The page's dtype rules (an 8- or
    16-bit integer predicate, on_true no 32-bit integer, a float reduce_res) are NkiErrors."""
    rr = _reduce(reduce_op, reduce_res, reduce_cmd, "nki.isa.select_reduce", "maximum",
                 "NKI: reduce_op only supports max")
    dst, predicate, on_true, on_false, rr = _region(dst, predicate, on_true, on_false, rr)
    _select_reduce_dtypes(predicate, on_true, rr)
    if reverse_pred and not isinstance(on_false, NkiTensor) and isinstance(on_true, NkiTensor):
        on_false = _number_tile(on_false, on_true.shape[0])
    on_false = _on_false_vector(on_false, on_true, dst)
    if reverse_pred:  # predicate == 0 -> on_true: the select of predicate != 0 with the two sides swapped
        on_true, on_false = on_false, on_true
    r = _ops.select(dst, predicate, on_true, on_false)
    if rr is not None:
        _ops.tensor_reduce(rr, "maximum", dst, tuple(range(1, dst.ndim)), keepdims=True)
    return r


def _number_tile(value, partitions):
    """A number select_reduce(reverse_pred=True) takes as on_false, as a [partitions, 1] float32 SBUF tile a memset
    fills (trnsim's select tests predicate != 0 and reads its on_true from memory, so the inverted select is the
    select with the two sides swapped, which needs on_false in memory)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise NkiError(f"nki.isa.select_reduce: on_false is {value!r}; it must be a number or a vector of shape "
                       f"[{partitions}, 1]") from None
    t = _ops.new_tile((partitions, 1), as_dtype("float32"), SBUF, "on_false")
    _ops.memset(t, value)
    return t


def _select_reduce_dtypes(predicate, on_true, reduce_res):
    """select_reduce's dtype rules (its NKI page, "Shape and data type constraints"): the predicate an 8- or
    16-bit integer, on_true any dtype but a 32-bit integer, reduce_res a float dtype. NkiError otherwise."""
    call = "nki.isa.select_reduce"
    if isinstance(predicate, NkiTensor) and predicate.dtype.name not in ("int8", "uint8", "int16", "uint16"):
        raise NkiError(f"{call}: predicate is {predicate.dtype.name}; its dtype must be int8, uint8, int16 or uint16 "
                       f"(NKI's select_reduce page)")
    if isinstance(on_true, NkiTensor) and on_true.dtype.name in ("int32", "uint32"):
        raise NkiError(f"{call}: on_true is {on_true.dtype.name}; any dtype but int32, uint32 and tfloat32 "
                       f"(NKI's select_reduce page)")
    if reduce_res is not None and not reduce_res.dtype.name.startswith(("float", "bfloat")):
        raise NkiError(f"{call}: reduce_res is {reduce_res.dtype.name}; its dtype must be a float type "
                       f"(NKI's select_reduce page)")


def _on_false_vector(on_false, on_true, dst):
    """select_reduce's on_false as the select reads it. The page allows a number or a vector of shape
    (on_true.shape[0], 1), broadcast along the free dims as np.where does: the select reads the vector through a
    stride-0 view of dst's shape, so each partition's one value is read for every element (the cost, the
    copy_predicated rule, does not depend on on_false). A tile of on_true's shape is read element by element."""
    if not isinstance(on_false, NkiTensor) or tuple(on_false.shape) == tuple(on_true.shape):
        return on_false
    p = on_true.shape[0]
    if tuple(on_false.shape) != (p, 1):
        raise NkiError(f"nki.isa.select_reduce: on_false is {list(on_false.shape)}; it must be a number or a "
                       f"vector of shape [{p}, 1] (on_true.shape[0], 1): one value per partition, used for every "
                       f"element of that partition")
    v = on_false
    while v.ndim < dst.ndim:
        v = v.expand_dims(v.ndim)
    return v.broadcast_to(tuple(dst.shape))


@_named("tensor_copy_predicated")
def tensor_copy_predicated(*args, **kwargs):
    unsupported("nki.isa.tensor_copy_predicated")


# ------------------------------------------------------------------------------------ scalar_tensor_tensor


# Why NKI 2.33's fused reduction is refused: the API reference pages (2.21-2.33, the search corpus) give its
# arguments in the signature only; the call's description covers the elementwise part.
_STT_REDUCE = ("NKI 2.33 adds reduce_cmd / reduce_op / reduce_res to this call, but its API reference does not "
               "define the reduction (what reduce_res receives, its dtype, reduce_op's default, shown as `...`), so "
               "trnsim does not guess it; reduce dst afterwards with nisa.tensor_reduce(dst=res, op=..., data=dst, "
               "axis=...), which trnsim models")


@_named("scalar_tensor_tensor")
def _scalar_tensor_tensor_new(dst, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False,
                              reduce_cmd=reduce_cmd.reset_reduce, reduce_op=None, reduce_res=None, name=None):
    if reduce_res is not None:
        unsupported("nki.isa.scalar_tensor_tensor(reduce_res=...)", _STT_REDUCE)
    call = "scalar_tensor_tensor"
    dst, data, operand0, operand1 = _region(dst, data, operand0, operand1)
    return _ops.scalar_tensor_tensor(dst, data, _lower.alu_name(op0, call), operand0, _lower.alu_name(op1, call),
                                     operand1, reverse0, reverse1)


@_named("scalar_tensor_tensor")
def _scalar_tensor_tensor_old(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                              mask=None, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.scalar_tensor_tensor", kwargs)
    call = "scalar_tensor_tensor"
    (data, operand0, operand1), box = _masked(mask, data, operand0, operand1)
    dst = _result(data.shape, _lower.dt(dtype, _lower.promote(data, operand1)), SBUF, call)
    _ops.scalar_tensor_tensor(dst, data, _lower.alu_name(op0, call), operand0, _lower.alu_name(op1, call),
                              operand1, reverse0, reverse1)
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def scalar_tensor_tensor(*args, **kwargs):
    """dst = (data op0 operand0) op1 operand1 on the Vector engine: operand0 a number or a [P, 1] vector,
    operand1 a tile of data's shape; arithmetic operators only; timed as tensor_tensor; NKI 2.33's
    reduce_res= is NkiUnsupported (its reference does not define the reduction)."""
    if _current(args, kwargs, 2):
        return _scalar_tensor_tensor_new(*args, **kwargs)
    return _scalar_tensor_tensor_old(*args, **kwargs)


# ------------------------------------------------------------------------------------- bn_stats / bn_aggr


def _bn(call, rec, width, args, kwargs):
    if _current(args, kwargs, 2):

        def new(dst, data, name=None):
            dst, data = _region(dst, _lower.whole_free(data, dst))
            return rec(dst, data)

        return _named(call)(new)(*args, **kwargs)

    def old(data, *, mask=None, dtype=None, **kw):
        if kw:
            ignored_kwargs(f"nki.isa.{call}", kw)
        (data,), box = _masked(mask, data if mask is not None else _lower.whole_free(data))
        dst = _result((data.shape[0], width), _lower.dt(dtype, data.dtype), SBUF, call)
        rec(dst, data, mask=mask)
        return _lower.boxed(_lower.fresh(dst), _lower.result_box(box, dst.shape, (0, None)))

    return _named(call)(old)(*args, **kwargs)


@_public
def bn_stats(*args, **kwargs):
    """dst [P, 6]: count, mean and variance * count of data's even and of its odd elements per partition, in
    FP32 on the Vector engine (data at most 512 elements per partition, nl.tile_size.bn_stats_fmax)."""
    return _bn("bn_stats", _ops.bn_stats, 6, args, kwargs)


@_public
def bn_aggr(*args, **kwargs):
    """dst [P, 2]: the mean and (population) variance per partition of data's (count, mean, variance * count)
    triples, from one or more bn_stats, in FP32 on the Vector engine."""
    return _bn("bn_aggr", _ops.bn_aggr, 2, args, kwargs)


# ------------------------------------------------------------------------------------- tensor_tensor_scan


@_named("tensor_tensor_scan")
def _tensor_tensor_scan_new(dst, data0, data1, initial, op0, op1, reverse0=False, reverse1=False, name=None):
    call = "tensor_tensor_scan"
    if _t(initial):
        dst, data0, data1, initial = _region(dst, data0, data1, initial)
    else:
        dst, data0, data1 = _region(dst, data0, data1)
    return _ops.tensor_tensor_scan(dst, data0, data1, initial, _lower.alu_name(op0, call),
                                   _lower.alu_name(op1, call), reverse0, reverse1)


@_named("tensor_tensor_scan")
def _tensor_tensor_scan_old(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None,
                            mask=None, **kwargs):
    call = "tensor_tensor_scan"
    if kwargs:
        ignored_kwargs(f"nki.isa.{call}", kwargs)
    if mask is None:
        data0, data1 = _lower.whole_free(data0), _lower.whole_free(data1)
    if _t(initial):
        (data0, data1, initial), box = _masked(mask, data0, data1, initial)
    else:
        (data0, data1), box = _masked(mask, data0, data1)
    dst = _result(data0.shape, _lower.dt(dtype, _lower.promote(data0, data1)), SBUF, call)
    _ops.tensor_tensor_scan(dst, data0, data1, initial, _lower.alu_name(op0, call), _lower.alu_name(op1, call),
                            reverse0, reverse1, mask=mask)
    return _lower.boxed(_lower.fresh(dst), box)


def _scan_current(args, kwargs):
    """The dst= form: dst given, or a tile (or number) more before op0 than the earlier form's data0, data1,
    initial (its initial may be a tile too, so the tiles alone cannot tell)."""
    if "dst" in kwargs:
        return _current(args, kwargs, 1)
    k = 0
    while k < len(args) and (_t(args[k]) or isinstance(args[k], (int, float))):
        k += 1
    return _current(args, kwargs, 1) if k >= (3 if "initial" in kwargs else 4) else False


@_public
def tensor_tensor_scan(*args, **kwargs):
    """Per partition along the free elements: r = (data0[i] op0 r) op1 data1[i] from r = initial (a number or
    a [P, 1] tile), dst[i] = r, in FP32 on the Vector engine (reverse0: r op0 data0[i]; reverse1: data1[i] op1
    ...)."""
    if _scan_current(args, kwargs):
        return _tensor_tensor_scan_new(*args, **kwargs)
    return _tensor_tensor_scan_old(*args, **kwargs)


# -------------------------------------------------------------------------------- tensor_partition_reduce


def _partition_op(op, call):
    if getattr(op, "__name__", None) == "mean" or op in ("mean", "average"):
        unsupported(f"nki.isa.{call}(op=nl.mean)", "the mean across partitions (NKI 2.32-2.33); op=nl.add and a "
                    "multiply by 1/P compute it")
    return _lower.alu_name(op, call)


@_named("tensor_partition_reduce")
def _tensor_partition_reduce_new(dst, op, data, name=None):
    dst, data = _region(dst, data)
    return _ops.tensor_partition_reduce(dst, _partition_op(op, "tensor_partition_reduce"), data)


@_named("tensor_partition_reduce")
def _tensor_partition_reduce_old(op, data, *, mask=None, dtype=None, **kwargs):
    call = "tensor_partition_reduce"
    if kwargs:
        ignored_kwargs(f"nki.isa.{call}", kwargs)
    (data,), box = _masked(mask, data)
    dst = _result((1,) + tuple(data.shape[1:]), _lower.dt(dtype, data.dtype), SBUF, call)
    _ops.tensor_partition_reduce(dst, _partition_op(op, call), data, mask=mask)
    dims = (None,) + tuple(range(1, len(dst.shape)))
    return _lower.boxed(_lower.fresh(dst), _lower.result_box(box, dst.shape, dims))


@_public
def tensor_partition_reduce(*args, **kwargs):
    """dst [1, F...] = data [P, F...] reduced across its partitions (0, 1, ... in order) with op (nl.add,
    nl.maximum in FP32; nl.bitwise_or / and / xor on integer bit patterns) on the GpSimd engine; earlier
    style: `tensor_partition_reduce(op, data)` returns it (dtype= data's by default)."""
    if _current(args, kwargs, 1):
        return _tensor_partition_reduce_new(*args, **kwargs)
    return _tensor_partition_reduce_old(*args, **kwargs)


# ------------------------------------------------------------------------------------------- nc_n_gather


@_public
def nc_n_gather(dst, data, indices, name=None):
    """dst[p, j] = data[p, indices[p, j]]: a gather within each partition over data's free elements flattened,
    uint32 indices, dst of data's dtype, all in SBUF, on the GpSimd engine (an index out of range is an error)."""
    dst, data, indices = _region(dst, _positional(data), indices)
    return _ops.nc_n_gather(dst, data, indices)


# ------------------------------------------------------------------------------------ nonzero_with_count


@_public
def nonzero_with_count(dst, src, index_offset=0, padding_val=-1):
    """On partitions 0, 16, ..., 112 only (one per GpSimd core): dst [P, N + 1] int32 = index_offset + the
    positions of src [P, N]'s nonzero elements (float32 or int32), then padding_val up to N, then their count;
    int32 immediates, exact; GpSimd, SBUF, Trn2 and newer. dst's other partitions are not written."""
    dst, src = _region(dst, src)
    return _ops.nonzero_with_count(dst, src, index_offset, padding_val)


# ------------------------------------------------------------------------------------- nc_stream_shuffle


@_named("nc_stream_shuffle")
def _nc_stream_shuffle_new(dst, src, shuffle_mask, name=None):
    dst, src = _region(dst, src)
    return _ops.nc_stream_shuffle(dst, src, shuffle_mask)


@_named("nc_stream_shuffle")
def _nc_stream_shuffle_old(src, dst, shuffle_mask, *, dtype=None, mask=None, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.nc_stream_shuffle", kwargs)
    if dtype is not None and _lower.dt(dtype, dst.dtype) != dst.dtype:
        raise NkiError(f"nc_stream_shuffle: dtype= {_lower.dt(dtype, dst.dtype).name} is not dst's "
                       f"{dst.dtype.name} (the shuffle moves elements, no cast)")
    dst, src = _apply_mask(mask, dst, src)
    return _ops.nc_stream_shuffle(dst, src, shuffle_mask)


@_public
def nc_stream_shuffle(*args, **kwargs):
    """In each 32-partition quadrant, dst partition i = src partition shuffle_mask[i] of that quadrant (32
    ints; 255 leaves dst's partition unmodified), bytes moved on the Vector engine; in place allowed. Earlier
    style `nc_stream_shuffle(src, dst, shuffle_mask, mask=)`: used when mask= or dtype= is given (positional
    src, dst cannot be told from the current dst, src otherwise)."""
    if "mask" in kwargs or "dtype" in kwargs:
        return _nc_stream_shuffle_old(*args, **kwargs)
    return _nc_stream_shuffle_new(*args, **kwargs)


# ---------------------------------------------------------------- max8 / nc_find_index8 / nc_match_replace8


def _idx_dtype(dtype, call):
    """The earlier style's index dtype= (uint32 by default; uint16 or uint32, NKI's pages)."""
    from ._dtypes import BY_NAME

    t = _lower.dt(dtype, BY_NAME["uint32"])
    if t.name not in ("uint16", "uint32"):
        raise NkiError(f"{call}: dtype must be nl.uint16 or nl.uint32 (indices), got {t.name}")
    return t


@_named("max8")
def _max8_new(dst, src, name=None):
    dst, src = _region(dst, _lower.whole_free(src, dst))
    return _ops.max8(dst, src)


@_named("max8")
def _max8_old(*, src, mask=None, dtype=None, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.max8", kwargs)
    (src,), box = _masked(mask, src if mask is not None else _lower.whole_free(src))
    dst = _result((src.shape[0], 8), _lower.dt(dtype, src.dtype), SBUF, "max8")
    _ops.max8(dst, src, mask=mask)
    return _lower.boxed(_lower.fresh(dst), _lower.result_box(box, dst.shape, (0, None)))


@_public
def max8(*args, **kwargs):
    """dst [P, 8] = the 8 largest values of each partition of src (8 to 16,384 of them) in descending order,
    compared as FP32, on the Vector engine; earlier style: `max8(src=t)` returns them in src's dtype (dtype=)."""
    if _current(args, kwargs, 1):  # the earlier style takes keywords only
        return _max8_new(*args, **kwargs)
    return _max8_old(*args, **kwargs)


@_named("nc_find_index8")
def _nc_find_index8_new(dst, data, vals, name=None):
    dst, data, vals = _region(dst, _positional(data), vals)
    return _ops.nc_find_index8(dst, data, vals)


@_named("nc_find_index8")
def _nc_find_index8_old(*, data, vals, mask=None, dtype=None, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.nc_find_index8", kwargs)
    # The mask applies to data only (NKI's page); vals from an earlier masked max8 is the part it holds.
    (data,), box = _masked(mask, data if mask is not None else _positional(data))
    (vals,) = _region(vals)
    dst = _result((data.shape[0], 8), _idx_dtype(dtype, "nc_find_index8"), SBUF, "nc_find_index8")
    first = _first_position(box, data) if mask is not None else 0
    _ops.nc_find_index8(dst, data, vals, mask=mask)
    if first:
        # The instruction counts from the masked part's first element; the kernel's index counts from its
        # operand's: add that element's position (an FP32 add, exact up to 2^24; the all-ones "not found"
        # saturates and stays all ones).
        _ops.tensor_scalar(dst, dst, "add", float(first), engine="DVE")
    return _lower.boxed(_lower.fresh(dst), _lower.result_box(box, dst.shape, (0, None)))


def _first_position(box, data):
    """The position, among the free elements of nc_find_index8's data as the kernel gave it (the call's index
    space, row-major), of the first element its mask keeps (`box`: the region the mask keeps, apply_mask):
    the instruction indexes the masked part, NKI's index counts from the operand's first element (docs/nki.md
    "What differs"). NkiUnsupported when the masked part is no run of consecutive positions (an inner free dim
    cut inside a longer outer one): its indices would be no offset of the instruction's."""
    if box is None or len(box[0]) != data.ndim:
        return 0
    full, starts = box[0], box[1]
    free = [d for d in range(data.ndim) if d != data.pd]
    first, stride, inner_whole = 0, 1, True
    for d in reversed(free):
        if data.shape[d] > 1 and not inner_whole:
            unsupported("nki.isa.nc_find_index8(mask=...) keeping part of an inner free dim of data "
                        f"{list(full)} (dims {', '.join(f'[{a}, {a + n})' for a, n in zip(starts, data.shape))})",
                        "the masked elements are no run of the operand's positions, so their indices are no offset "
                        "of those the instruction counts; mask whole inner dims, or give data as a view of the "
                        "masked part")
        first += starts[d] * stride
        stride *= full[d]
        inner_whole = inner_whole and data.shape[d] == full[d]
    return first


@_public
def nc_find_index8(*args, **kwargs):
    """dst [P, 8] (uint16 / uint32, default uint32) = per partition, the index in data (its free elements in
    order) of the first occurrence of each of the 8 vals, compared as FP32 on the Vector engine; a repeated
    val takes the next occurrence; all ones where none (NKI 2.32)."""
    if _current(args, kwargs, 1):
        return _nc_find_index8_new(*args, **kwargs)
    return _nc_find_index8_old(*args, **kwargs)


@_named("nc_match_replace8")
def _nc_match_replace8_new(dst, data, vals, imm, dst_idx=None, name=None):
    if dst_idx is None:
        dst, data, vals = _region(dst, _positional(data), vals)
    else:
        dst, data, vals, dst_idx = _region(dst, _positional(data), vals, dst_idx)
    return _ops.nc_match_replace8(dst, data, vals, imm, dst_idx)


@_named("nc_match_replace8")
def _nc_match_replace8_old(*, data, vals, imm, dst_idx=None, mask=None, dtype=None, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.nc_match_replace8", kwargs)
    (data,), box = _masked(mask, data if mask is not None else _positional(data))
    (vals,) = _region(vals)
    dst = _result(data.shape, _lower.dt(dtype, data.dtype), SBUF, "nc_match_replace8")
    _ops.nc_match_replace8(dst, data, vals, imm, dst_idx, mask=mask)
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def nc_match_replace8(*args, **kwargs):
    """dst = data with the first occurrence of each of the 8 vals per partition replaced by imm (compared as
    FP32 on the Vector engine; vals taken from the last, so a repeated val's first occurrence goes to its
    highest slot), their indices into dst_idx when given (all ones where none); dst may be data."""
    if _current(args, kwargs, 1):
        return _nc_match_replace8_new(*args, **kwargs)
    return _nc_match_replace8_old(*args, **kwargs)


# ------------------------------------------------------------------------------------------- affine_select


def _pattern_steps(pattern, dst, call):
    """NKI's [[step, num], ...] pattern (padded with size-1 dims up to 4) as one step per free dim of dst."""
    pairs = [tuple(p) if isinstance(p, (list, tuple)) else (p, None) for p in pattern]
    free = list(dst.shape[1:]) or [1]
    while len(pairs) > len(free) and pairs[0][1] == 1:
        pairs.pop(0)
    if len(pairs) > len(free) or any(n is not None and int(n) != f for (_, n), f in zip(pairs, free)):
        raise NkiError(f"{call}: pattern {pattern} does not match dst's free dims {free} (trnsim takes one "
                       "[step, num] per free dim of dst, num equal to that dim)")
    return [int(p) for p, _ in pairs]


_PRED_OPS = {"<": "less", "<=": "less_equal", ">": "greater", ">=": "greater_equal"}


@_named("affine_select")
def _affine_select_new(dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value, cmp_op=None,
                       name=None):
    cmp = "equal" if cmp_op is None else _lower.alu_name(cmp_op, "affine_select")
    given, given_true = dst, on_true_tile
    dst, on_true_tile = _region(dst, on_true_tile)
    nums = [p[1] if isinstance(p, (list, tuple)) and len(p) == 2 else None for p in pattern]
    if nums and None not in nums and isinstance(dst, NkiTensor) and isinstance(given, NkiTensor):
        whole = _lower.whole_of(on_true_tile)
        n, free = math.prod(int(n) for n in nums), lambda v: math.prod(v.shape[1:])
        if whole is not None and n != free(dst) and n == free(_whole_dst(given)):
            # The pattern walks the whole dst (the kernel's, as its .shape gives) though on_true_tile, a masked
            # call's result, holds part of it: the select on the whole tiles, as NKI's one instruction, reading
            # the unwritten rest of on_true_tile with the warning (the predicate may leave that rest out:
            # padding a tail tile; tester23ag F6 addendum 4)
            dst, on_true_tile = _region(given, whole)
    # As nki.isa.iota's (the page: "similar to nisa.iota"), the pattern's [step, num] dims may walk dst's free
    # elements in another shape holding as many: dst and on_true_tile are then viewed in the pattern's shape.
    nums = [p[1] if isinstance(p, (list, tuple)) and len(p) == 2 else None for p in pattern]
    if nums and None not in nums and isinstance(dst, NkiTensor):
        nums = [int(n) for n in nums]
        free = list(dst.shape[1:])
        if nums != free and math.prod(nums) == math.prod(free):
            shape = [dst.shape[0]] + nums
            dst = dst.reshape(shape)
            if isinstance(on_true_tile, NkiTensor):
                on_true_tile = on_true_tile.reshape(shape)
    steps = _pattern_steps(pattern, dst, "affine_select")
    if isinstance(dst, NkiTensor) and _ops.kept_box(tuple(dst.shape), steps, offset, channel_multiplier,
                                                    cmp) == []:
        _void.unread(_trace.current())  # (reads none of on_true_tile: a void one, a tile past the end, is no matter)
    return _ops.affine_select(dst, steps, offset, channel_multiplier, on_true_tile, on_false_value, cmp,
                              held=_lower.held_in(given_true, on_true_tile))


@_named("affine_select")
def _affine_select_newest(dst, pattern, channel_multiplier, on_true_tile, on_false_value, cmp_op=None, offset=0,
                          name=None):
    """NKI's latest signature (the NKI library's HEAD calls it so): offset last, 0 by default."""
    return _affine_select_new(dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value, cmp_op)


@_named("affine_select")
def _affine_select_old(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kwargs):
    if kwargs:
        ignored_kwargs("nki.isa.affine_select", kwargs)
    if _is_bool(pred):
        # A comparison of loop indices alone (`i * 128 < n`) is a Python bool while tracing, as in a mask: a
        # predicate constant over the tile (NKI's pred is one resolved at compile time), on_true_tile everywhere
        # or on_false_value everywhere (tester23ah F2)
        pred = AffinePredicate.constant(bool(pred))
    elif isinstance(pred, Mask):
        pred = pred.as_predicate()  # `i_q > 5`: one bound of one variable, which made a mask
    if isinstance(pred, UnmodelledMask):
        raise NkiError("affine_select: pred is one comparison of nl.arange expressions; NKI does not combine "
                       "them with & or |")
    if not isinstance(pred, AffinePredicate):
        got = f"the index expression {pred!r}, not a comparison" if isinstance(pred, IndexExpr) else (
            type(pred).__name__)
        raise NkiError(f"affine_select: pred must be one comparison of nl.arange expressions (e.g. i_q >= i_k, "
                       f"i_q - 2 * i_k > -7), affine in the partition and free indices, or a bool, got {got}")
    expr = pred.expr
    given_true = on_true_tile
    if mask is None:
        # A masked call's result passed whole is its whole tile, as t.shape says and as t[i_p, i_f] reads it
        # (tester23ai F7: it was "pred's index variable i1[64] spans 64, on_true_tile's axis 1 is 40").
        on_true_tile = _whole_dst(on_true_tile)
    shape = tuple(on_true_tile.shape)
    n = len(shape)
    if expr.ndim > n:
        raise NkiError(f"affine_select: pred has {expr.ndim} index axes, on_true_tile {list(shape)} has {n}")
    coef, offset = [0] * n, expr.const
    for v in expr._vars():  # (a variable a constant predicate compared too: expr.zero)
        ax = v.axis + (n - v.ndim)
        if v.size != shape[ax]:
            raise NkiError(f"affine_select: pred's index variable {v!r} spans {v.size}, on_true_tile's axis {ax} "
                           f"is {shape[ax]}")
    for v, k in expr.terms.items():
        coef[v.axis + (n - v.ndim)] += k
        offset += k * v.start
    # mask= (NKI's tile masking, as for every call that takes it): the instruction for the masked-in region of
    # on_true_tile's index space, its predicate taken at the region's indices (the affine value at the region's
    # first element adds each coefficient times the region's first index).
    (on_true_tile,), box = _masked(mask, on_true_tile) if mask is not None else ((on_true_tile,), None)
    if box is not None and len(box[1]) == n:
        offset += sum(c * a for c, a in zip(coef, box[1]))
    if _ops.kept_box(tuple(on_true_tile.shape), coef[1:], offset, coef[0], _PRED_OPS[pred.op]) == []:
        # The predicate keeps no element (a tile past the end of a tail-padding loop): the select reads none of
        # on_true_tile, so a void one (its load's mask selected nothing) still gives on_false_value everywhere
        _void.unread(_trace.current())
    dst = _result(tuple(on_true_tile.shape), _lower.dt(dtype, on_true_tile.dtype), SBUF, "affine_select")
    # GpSimd cannot read PSUM, yet NKI's Stable Diffusion attention tutorial passes a PSUM on_true_tile to
    # this style: the compiler's copy to SBUF first, as for nl.* calls (docs/nki.md; the dst= style refuses).
    on_true_tile = _lower.to_sbuf(on_true_tile, "affine_select")
    _ops.affine_select(dst, coef[1:], offset, coef[0], on_true_tile, on_false_value, _PRED_OPS[pred.op],
                       held=_lower.held_in(given_true, on_true_tile) if mask is None else None)
    return _lower.boxed(_lower.fresh(dst), box)


@_public
def affine_select(*args, **kwargs):
    """dst = on_true_tile where cmp_op(offset + channel_multiplier * partition + sum of pattern steps * free
    indices, 0) holds, else on_false_value, on GpSimd (cmp_op defaults to nl.equal; offset may come last, 0 by
    default, as NKI's latest signature has it); earlier style: the predicate a comparison of nl.arange
    expressions (`i_q >= i_k`), the new tile returned, mask= as any call's; a predicate constant over the tile (a
    Python bool such as `i * 128 < n`, or a comparison that holds for every index or for none: a full tile of a
    tail-padding loop, a causal tile pair off the diagonal) keeps on_true_tile everywhere or nowhere. An integer
    dst's on_false_value is exact past 2^24 (split as memset's fill)."""
    if _current(args, kwargs, 1):
        if (len(args) > 3 and _t(args[3])) or (len(args) < 3 and "offset" not in kwargs):
            return _affine_select_newest(*args, **kwargs)
        return _affine_select_new(*args, **kwargs)
    return _affine_select_old(*args, **kwargs)


# ------------------------------------------------------------------------------------------------ constants


def _constants_module():
    """nki.isa.constants: the enums above under the module NKI's library imports them from (`from
    nki.isa.constants import oob_mode, dge_mode`, `nisa.constants.engine.tensor`), registered in sys.modules
    so that import finds it."""
    import importlib.machinery
    import sys
    import types

    name = __name__ + ".constants"
    m = types.ModuleType(name, "nki.isa's enums: engine, dma_engine, dge_mode, oob_mode, reduce_cmd, "
                               "matmul_perf_mode, nc_version, dependency")
    for n in ("engine", "dma_engine", "dge_mode", "oob_mode", "reduce_cmd", "matmul_perf_mode", "nc_version",
              "dependency"):
        setattr(m, n, globals()[n])
    m.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = m
    globals()["__path__"] = []  # a package with no folder: `import nki.isa.constants` looks in sys.modules
    return m


constants = _constants_module()


# ---------------------------------------------------------------------------- calls trnsim does not model

UNSUPPORTED = {
    "tensor_scalar_cumulative": "",
    "activate2": "",
    "exponential": "",
    "topk": "",
    "sequence_bounds": "",
    "local_gather": "",
    "dropout": "random numbers",
    "rng": "random numbers",
    "rand2": "random numbers",
    "set_rng_seed": "random numbers",
    "rand_set_state": "random numbers",
    "rand_get_state": "random numbers",
    "range_select": "",
    "dma_compute": "",
    "register_alloc": "engine registers and dynamic control flow",
    "register_move": "engine registers and dynamic control flow",
    "register_load": "engine registers and dynamic control flow",
    "register_store": "engine registers and dynamic control flow",
    "tensor_copy_dynamic_src": "dynamic on-chip offsets",
    "tensor_copy_dynamic_dst": "dynamic on-chip offsets",
    "iota_dynamic": "",
    "builtin_custom_op": "",
    "nc_match_replace": "",
    "NkiInstruction": "", "VirtualRegister": "engine registers and dynamic control flow",
}


def _make_unsupported(name, why):
    def f(*args, **kwargs):
        unsupported(f"nki.isa.{name}", why)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Not modelled by trnsim: calling it raises NkiUnsupported. {why}".strip()
    f.__trnsim_unsupported__ = True
    return f


for _n, _why in UNSUPPORTED.items():
    globals()[_n] = _make_unsupported(_n, _why)

SUPPORTED = ["nc_matmul", "nc_matmul_mx", "quantize_mx", "nc_transpose", "activation", "activation_reduce",
             "tensor_tensor", "tensor_scalar", "tensor_reduce", "tensor_copy", "memset", "iota", "dma_copy",
             "dma_transpose", "core_barrier", "sendrecv", "select_reduce", "reciprocal", "get_nc_version",
             "scalar_tensor_tensor", "bn_stats", "bn_aggr", "affine_select", "max8", "nc_find_index8",
             "nc_match_replace8", "tensor_scalar_reduce", "tensor_tensor_scan", "tensor_partition_reduce",
             "nc_n_gather", "nonzero_with_count", "nc_stream_shuffle"]


def __getattr__(name):
    """Any other public name: NkiUnsupported naming it and the kernel line (see nki.language.__getattr__)."""
    if name.startswith("_"):
        raise AttributeError(f"module 'nki.isa' has no attribute '{name}'")
    raise unsupported_name("nki.isa", name)
