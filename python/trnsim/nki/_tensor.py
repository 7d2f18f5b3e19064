"""Tensors of a traced kernel: Storage (one nl.ndarray, a kernel argument or an instruction's new result) and
NkiTensor (a view of one: what kernels index, reshape and pass to instructions).

A view is a byte offset into its storage plus dims (stride in elements of the view's dtype, size), outermost
first, as NKI numbers them. On-chip storages (SBUF, PSUM) have a partition dim: NKI's shape (B..., P, F...)
with P marked by nl.par_dim (dim 0 by default) is laid out as P partitions of B... x F... elements each; a
view keeps which of its dims is the partition dim (`pd`, -1 once an integer index dropped it) and its first
partition (`p0`). HBM storages are flat, row-major.

Views never copy. Errors (NkiError, naming the kernel line): out-of-bounds indices and slices, too many
indices, a partition step other than 1, reshapes the strides do not allow, bitcasts of a non-contiguous
innermost dim.
"""

import math
import os
import sys

from ._dtypes import as_dtype
from ._errors import NkiError, _in_package, caller_loc, host_loc
from ._index import IndexExpr, _const

SBUF, PSUM, HBM = "sbuf", "psum", "hbm"
_new = object.__new__


class Buffer:
    """nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, nl.private_hbm."""

    __slots__ = ("name", "space", "private")

    def __init__(self, name, space, private=False):
        self.name, self.space, self.private = name, space, private

    def __repr__(self):
        return f"nl.{self.name}"

    def __call__(self, *args, **kwargs):
        raise NkiError(f"nl.{self.name} is a buffer kind, not a function (pass buffer=nl.{self.name})")


_ALL = slice(None)

class Storage:
    __slots__ = ("uid", "name", "space", "private", "dtype", "shape", "pdim", "pbytes", "site", "role",
                 "loc", "first", "last", "phys", "trace", "hbm_rows_bytes", "outer", "scope", "moved_to", "direct")

    def __init__(self, trace, name, space, dtype, shape, pdim=0, private=False, role=None, loc=None):
        self.trace = trace
        self.uid = len(trace.storages)
        trace.storages.append(self)
        self.name = name
        self.space = space
        self.private = private
        self.dtype = dtype
        self.shape = shape = shape if type(shape) is tuple else tuple(shape)
        n = math.prod(shape)
        if space == HBM:
            self.pdim = -1
            self.pbytes = n * dtype.itemsize
        else:
            self.pdim = pdim
            self.pbytes = (n // shape[pdim]) * dtype.itemsize  # bytes per partition
        self.site = None  # on-chip: the allocation site (the trace's allocator)
        self.role = role  # HBM: 'input', 'output', 'scratch'
        self.loc = loc
        self.first = -1  # first and last op (program order) that access it
        self.last = -1
        self.moved_to = None  # the op that made it was retargeted to write another tensor (_lower._retarget)
        self.phys = None  # set by allocation (on-chip: (pool, buffer index))
        self.direct = None  # a direct allocation's place for it (_direct.Place), else None: the plan's choice
        self.outer = trace.outer  # the outermost loop iteration it was declared in
        self.scope = trace.scope  # the loop iterations it was declared in (Trace.iters records)

    @property
    def partitions(self):
        return self.shape[self.pdim] if self.space != HBM else 0

    def __repr__(self):
        return self.label()

    def shown_name(self):
        """The name the builder, traces and stats.json "allocations" give the tensor: its name= if the kernel
        gave one, else the kernel's variable naming it (var_name), else the call's (new_tile's: 'load', 'exp',
        'tile', ...)."""
        if self.name and (self.space == HBM or self.name in getattr(self.trace, "user_names", ())):
            return self.name
        return var_name(self.trace, self) or self.name.split(".")[0]

    def label(self, at=True):
        """How messages name the tensor: by its name= if the kernel gave one; else by the kernel's variable
        naming it (var_name), and where it was allocated (`at`). (An HBM tensor allocated without name= is
        named 'out', 'out_1', ... only when emitted, a scratch one '<var>' for the builder alone (kernels/api
        hbm_label); an on-chip one after the call that made it, 'load', 'tile', ..., not the user's name.)"""
        if self.name and (self.space == HBM or self.name in getattr(self.trace, "user_names", ())):
            return f"{self.space} '{self.name}'{list(self.shape)} {self.dtype.name}"
        var = var_name(self.trace, self)
        where = f" allocated at {self.loc}" if at and self.loc else ""
        kind = "tensor" if self.space == HBM else "tile"
        return f"{self.space} {kind} {var + ' ' if var else ''}{list(self.shape)} {self.dtype.name}{where}"


def _grid_dims(idx, var_strides, int_partition):
    """The advanced dims of an index holding nl.mgrid expressions: one per index variable the expressions
    use, each of its variable's size: those of size 1 where the index tuple names them, the others in those
    places in grid axis order (`x[g.p, g.y, g.x]` swaps x's free axes, as NumPy's dense grid does); an axis of the grid that no expression of the index uses is no dim, and an integer
    beside the expressions is none either. Not NumPy's dense grid, whose every axis would be a dim: NKI's
    RMSNorm tutorial reads `a[i * 128 + ix, iy]` with `ix, iw, iy = nl.mgrid[0:128, 0:1, 0:F]` as a
    [128, F] tile (it sums axis 1 and scales the tile by the [128] result) and `g.reshape((1, F))[iw, iy]`
    as [1, F] (it broadcast_to's it to (128, F)); its LayerNorm tutorial reads
    `gamma.reshape((1, F))[i_p_param, i_f_io]` with `i_p_io, i_f_io, i_p_param = nl.mgrid[0:128, 0:F, 0:1]`
    as [1, F] too (grid axis 2 named first, so first). `var_strides`: {IndexVar: [stride, is_partition]};
    `int_partition`: an integer picked an on-chip tile's partition, which stays a dim of size 1 (`t[0, i_f]`
    is [1, F], as with nl.arange expressions)."""
    out = [(0, 1, True, None)] if int_partition else []
    for e in idx:
        if isinstance(e, IndexExpr):
            for v in sorted(e.terms, key=lambda v: v.axis - v.ndim):
                if v in var_strides and all(o[3] is not v for o in out):
                    st, isp = var_strides[v]
                    out.append((st, v.size, isp, v))
    # The grid's axes place the dims that carry data, as NumPy's dense grid does: `x[g.p, g.y, g.x]` is x
    # with its free axes swapped (dims x then y); a size-1 variable keeps its slot, as above.
    nmax = max((o[3].ndim for o in out if o[3] is not None), default=0)
    slots = [i for i, o in enumerate(out) if o[3] is not None and o[1] > 1]
    ordered = sorted((out[i] for i in slots), key=lambda o: o[3].axis + nmax - o[3].ndim)
    for i, o in zip(slots, ordered):
        out[i] = o
    return out


def _spread_between_slices(out, adv, adv_pos, idx):
    """`out` (the slices' dims) with the advanced dims `adv` put where their expressions stand when slices
    separate them: each index position is that dim of the result (NKI's "Tensor Indexing" page), so
    `x[i_p, 0:4, i_a]` of a [128, 4, 8] tensor is [128, 4, 8], not NumPy's [128, 8, 4] (separated index arrays
    go first). An expression takes as many of adv's dims, in adv's order, as the variables it is the first to
    use; a dim of no variable (an integer's partition) goes with the first expression."""
    exprs = [e for e in idx if isinstance(e, IndexExpr)]
    seen, counts = set(), []
    for e in exprs:
        new = {v for v in e.terms if v not in seen}
        seen |= new
        counts.append(len(new))
    counts[0] += len(adv) - sum(counts)
    res, k, prev = [], 0, 0
    for pos, n in zip(adv_pos, counts):
        res += out[prev:pos] + adv[k:k + n]
        prev, k = pos, k + n
    return res + out[prev:]


def _broadcast_axes(adv, nmax, int_partition):
    """The advanced dims of an index of nl.arange expressions and integers only, with the shape NumPy gives:
    the broadcast shape of the index arrays (an integer is one more, of shape ()), where an axis no
    expression varies along is a dim of size 1: `t[i_p, 0]` with `i_p = nl.arange(128)[:, None]` is
    [128, 1], as in NKI's err_1d_arange_not_supported example (`tmp[i, 0]`), and `x[i0, i2]` with 3-D
    expressions of axes 0 and 2 is [P, 1, F]. `int_partition`: an integer picked the partition, so the first
    such dim is the tile's one partition (`t[0, i_f]` is [1, F]). `adv`: (stride, size, is_partition, var)
    of the index's variables in axis order."""
    out = []
    for a in range(nmax):
        here = [e for e in adv if e[3].axis + nmax - e[3].ndim == a]
        if not here:
            here = [(0, 1, int_partition, None)]
            int_partition = False
        out += here
    return out


def var_name(trace, st):
    """The kernel's variable naming storage `st`: the one naming it when the kernel returned (its input
    parameter's name for an input), else the one its allocation line assigns it to (assigned_name), or
    None."""
    for name, v in (getattr(trace, "return_locals", None) or {}).items():
        if isinstance(v, NkiTensor) and storage_of(v) is st:
            return name
    return assigned_name(st)


# What the kernel calls to make a tile that nl.ndarray's work names 'tile' (language.new_tensor).
_CREATORS = {"ndarray", "zeros", "ones", "full", "empty_like", "ndarray_like", "zeros_like", "ones_like",
             "full_like"}
# The nl.* lowering (its new tile's name) of a tile operator (NkiTensor._bin, __neg__).
_OPERATORS = {"Add": "add", "Sub": "subtract", "Mult": "multiply", "Div": "divide", "Pow": "power",
              "Mod": "mod", "BitAnd": "bitwise_and", "BitOr": "bitwise_or", "BitXor": "bitwise_xor",
              "LShift": "left_shift", "RShift": "right_shift", "USub": "negative", "MatMult": "matmul"}


def assigned_name(st):
    """The variable the kernel line that allocated `st` assigns it to, read from the kernel's source: the
    statement `name = <call>(...)` (or an operator) whose outermost call made st (st's default name is the
    call's), so that `y = nl.exp(nl.multiply(x, 2))` names exp's tile y and not multiply's; or None."""
    import ast

    loc = getattr(st, "loc", None)
    node = _statement_at(loc[0], loc[1]) if loc and st.name else None
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target = node.target
    else:
        return None
    if not isinstance(target, ast.Name):
        return None
    value = node.value
    if isinstance(value, ast.Call):
        f = value.func
        made = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        ok = made == st.name or st.name == "tile" and made in _CREATORS
    elif isinstance(value, (ast.BinOp, ast.UnaryOp)):
        ok = _OPERATORS.get(type(value.op).__name__) == st.name
    else:
        ok = False
    return target.id if ok else None


_statements = {}  # path -> {line: the simple statements spanning it, in source order}


def _statement_at(path, line):
    """The simple statement (not a block) of the file `path` that spans `line`, or None."""
    found = _statements_at(path, line)
    return found[0] if found else None


def _statements_at(path, line):
    """The simple statements (not blocks) of the file `path` that span `line`, in source order (`a = f(x); g(a)`
    is two), or ()."""
    lines = _statements.get(path)
    if lines is None:
        import ast
        import linecache

        lines = _statements[path] = {}
        try:
            tree = ast.parse("".join(linecache.getlines(path)))
        except (SyntaxError, ValueError):
            return ()
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and not hasattr(node, "body"):
                for i in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    lines.setdefault(i, []).append(node)
        for found in lines.values():
            found.sort(key=lambda n: (n.lineno, n.col_offset))
    return lines.get(line, ())


_WHOLE = {}  # (hbm, shape, pdim, itemsize) -> (dims, rect) of the whole-tensor view
_lower_mod = None


def _lower():
    """The _lower module (it imports this one)."""
    global _lower_mod
    if _lower_mod is None:
        from . import _lower as m

        _lower_mod = m
    return _lower_mod


def _rect_of(dims, boff, isz, pd, p0, hbm):
    """NkiTensor.rect of a view with these fields."""
    lo = hi = boff
    i = 0
    for s, n in dims:
        if i != pd and n > 1:
            ext = s * (n - 1) * isz
            if ext < 0:
                lo += ext
            else:
                hi += ext
        i += 1
    if hbm:
        return (0, 1, lo, hi + isz)
    return (p0, p0 + (dims[pd][1] if pd >= 0 else 1), lo, hi + isz)


def _row_major(shape):
    strides, s = [], 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return tuple(reversed(strides))


def _hbm_view(t, boff, dims, lo, hi, isz):
    """NkiTensor(t.st, t.dtype, boff, dims, -1, t.p0) with its rectangle (lo, hi: its extent in elements of
    stride around its first element), its fields set here: a class call with __init__ costs as much again
    (python/tests/test_nki_fast_paths.py checks the fields)."""
    v = _new(NkiTensor)
    v.st = t.st
    v.dtype = t.dtype
    v.boff = boff
    v.dims = dims
    v.pd = -1
    v.p0 = t.p0
    v.vars = None
    v._rect = (0, 1, boff + lo * isz, boff + hi * isz + isz)
    v._bv = None
    return v


class NkiTensor:
    """A view of a storage (see the module docstring)."""

    # `_sub`, set only on a view the kernel's own index made of a masked call's result (index()): that view's
    # indices are its own, not the call's index space again. Unset elsewhere (getattr(v, "_sub", False)).
    __slots__ = ("st", "dtype", "boff", "dims", "pd", "p0", "vars", "_rect", "_bv", "_sub", "__weakref__")

    def __init__(self, st, dtype, boff, dims, pd, p0, vars=None):  # noqa: A002
        self.st = st
        self.dtype = dtype
        self.boff = boff
        self.dims = dims
        self.pd = pd
        self.p0 = p0
        self.vars = vars  # per dim: the nl.arange variable that indexed it (masks), or None
        self._rect = None  # (p0, p1, byte lo, byte hi), computed once (scheduling, PSUM groups)
        self._bv = None  # the builder view, made once when the trace is emitted (_emit)

    @staticmethod
    def whole(st):
        hbm = st.space == HBM
        key = (hbm, st.shape, st.pdim, st.dtype.itemsize)
        w = _WHOLE.get(key)
        if w is not None:  # (dims, rect) of the whole-tensor view
            v = NkiTensor(st, st.dtype, 0, w[0], -1 if hbm else st.pdim, 0)
            v._rect = w[1]
            return v
        v = NkiTensor._whole(st)
        _WHOLE[key] = (v.dims, v.rect())
        return v

    @staticmethod
    def _whole(st):
        if st.space == HBM:
            strides = _row_major(st.shape)
            return NkiTensor(st, st.dtype, 0, tuple(zip(strides, st.shape)), -1, 0)
        shape = st.shape
        b, f = shape[: st.pdim], shape[st.pdim + 1:]
        free_strides = _row_major(tuple(b) + tuple(f))
        dims = []
        for i, n in enumerate(b):
            dims.append((free_strides[i], n))
        dims.append((0, shape[st.pdim]))
        for i, n in enumerate(f):
            dims.append((free_strides[len(b) + i], n))
        return NkiTensor(st, st.dtype, 0, tuple(dims), st.pdim, 0)

    # ---- NKI's attributes
    @property
    def shape(self):
        return tuple([d[1] for d in self.dims])

    @property
    def ndim(self):
        return len(self.dims)

    @property
    def size(self):
        n = 1
        for d in self.dims:
            n *= d[1]
        return n

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def buffer(self):
        from . import language as nl

        if self.st.space == SBUF:
            return nl.sbuf
        if self.st.space == PSUM:
            return nl.psum
        return nl.private_hbm if self.st.private else nl.shared_hbm

    @property
    def name(self):
        return self.st.name

    @property
    def strides(self):
        return tuple(s for s, _ in self.dims)

    @property
    def offset(self):
        return self.boff // self.dtype.itemsize

    @property
    def on_chip(self):
        return self.st.space != HBM

    @property
    def partitions(self):
        """Partitions (on-chip) or rows (HBM: the size of dim 0) an instruction sees."""
        pd = self.pd
        if pd == 0:  # on chip, partition dim first: the common case
            return self.dims[0][1]
        if self.st.space == HBM:
            return self.dims[0][1] if self.dims else 1
        return self.dims[pd][1] if pd >= 0 else 1

    @property
    def free_size(self):
        """Elements per partition (on-chip) or per row (HBM)."""
        dims = self.dims
        skip = self.pd
        if skip != 0 and self.st.space == HBM:
            skip = 0
        n = 1
        i = 0
        for d in dims:
            if i != skip:
                n *= d[1]
            i += 1
        return n

    def __repr__(self):
        return f"NkiTensor({self.st.name}, shape={list(self.shape)}, dtype={self.dtype.name}, {self.st.space})"

    def __len__(self):
        if not self.dims:
            raise TypeError("len() of a 0-d tensor")
        return self.dims[0][1]

    def __iter__(self):
        raise NkiError("NKI tensors are not iterable; index them (t[i]) or loop with nl.affine_range")

    def __bool__(self):
        raise NkiError("the truth value of an NKI tensor is not known while the kernel is traced "
                       "(its values exist only on the device)")

    # ---- indexing
    def __getitem__(self, idx):
        if self.pd < 0 and type(idx) is tuple and self.st.space == HBM:  # a DMA's side, in short
            dims = self.dims
            if len(idx) == 2:
                # Two slices: the view an earlier identical slicing of this view gave, if any (views are never
                # changed once made; the entry holds this view, so its id names no other while it is there).
                e0, e1 = idx
                tr = self.st.trace  # (None once its kernel returned: record() says so)
                if type(e0) is slice and type(e1) is slice and tr is not None:
                    key = (id(self), e0.start, e0.stop, e0.step, e1.start, e1.stop, e1.step)
                    cache = tr.hbm_slices
                    try:
                        hit = cache.get(key)
                    except TypeError:  # an unhashable bound: the general path says what it is
                        return self.index(idx, True)
                    if hit is not None:
                        return hit[1]
                    r = self._index_hbm(idx, dims, self.dtype.itemsize, self.boff) if len(dims) >= 2 else None
                    if r is None:
                        return self.index(idx, True)
                    cache[key] = (self, r)
                    return r
            r = self._index_hbm(idx, dims, self.dtype.itemsize, self.boff) if len(idx) <= len(dims) else None
            return r if r is not None else self.index(idx, True)
        r = self._index_basic(idx if type(idx) is tuple else (idx,))
        return r if r is not None else self.index(idx, True)

    def __setitem__(self, idx, value):
        dst = self.index(idx, True)
        if type(self) is LoadPart and dst.dims == self.dims and dst.boff == self.boff and dst.p0 == self.p0:
            # `t[...] = v` of a masked call's result names its whole tile (its .shape), as NKI's does
            w = _lower().whole_of(self)
            dst = dst if w is None else w
        _lower().assign(dst, value)
        if type(self) is LoadPart and (isinstance(value, (int, float)) or (
                isinstance(value, NkiTensor) and _lower().box_of(value) is None)):
            _lower().mark_filled(dst)  # (all of its tile written: the kernel's view holds it all now)

    def index(self, idx, user=False):
        """The view `self[idx]`; `user`: the kernel's own index (`t[...]`), which on a masked call's result
        addresses the call's whole index space; the package's own calls index the view as it is."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        r = self._index_basic(idx)
        if r is not None:
            return r
        nd = len(self.dims)
        if any(e is Ellipsis for e in idx):
            k = idx.index(Ellipsis)
            rest = idx[k + 1:]
            if any(e is Ellipsis for e in rest):
                raise NkiError("an index can have one ... only")
            fill = nd - (len(idx) - 1)
            if fill < 0:
                raise NkiError(f"too many indices ({len(idx) - 1}) for a tensor of {nd} dims {list(self.shape)}")
            idx = idx[:k] + (slice(None),) * fill + rest
        if len(idx) > nd:
            raise NkiError(f"too many indices ({len(idx)}) for a tensor of {nd} dims {list(self.shape)}")
        idx = idx + (slice(None),) * (nd - len(idx))
        # A masked call's result holds only its masked-in part of the call's index space; an index addresses
        # that whole space (NKI's tile is the whole, defined where the mask was true): integers, slices (`:`
        # too) and expressions are shifted to the held part, and reaching past it is the looser-mask error
        # (an expression's under this call's mask: Unbounded.bounded). `t[...]`, `t[:, :]` is t as it is.
        # A view such an index made is a tile of its own shape: its indices are its own (`e[:, 20:30][:, 0:3]`
        # is columns 20-22 of the space), not the call's index space again.
        own = None
        if user and self.st.uid in _lower()._boxes() and any(not isinstance(e, slice) or e != _ALL for e in idx) \
                and not getattr(self, "_sub", False):
            own = _lower().box_of(self)
        if own is not None:
            if self._whole_space(own):
                # Its tile has the whole space's shape (a masked nl.load's, memset's, iota's): the index reads
                # it there, its masked-out part undefined as in NKI (the LayerNorm tutorial's tail tile reads
                # all 128 rows; its masked store keeps the defined ones).
                r = NkiTensor.whole(self.st).index(idx)
                r._sub = True
                return r
            idx, past = self._held_index(idx, own)
        else:
            past = None
        isz = self.dtype.itemsize
        boff, p0, pd = self.boff, self.p0, -1
        int_p = None  # where an integer partition index of an on-chip tile was (_PARTITION_KEPT)
        out = []  # (stride, size, is_partition) of basic dims, None placeholder where advanced dims go
        adv_pos = []
        var_strides = {}  # IndexVar -> [stride, is_partition]
        unbounded = []  # (dim, index expression, dim size) of expressions reaching outside the dim
        for d, e in enumerate(idx):
            stride, size = self.dims[d]
            is_p = d == self.pd
            c = _const(e)
            if c is not None:
                if c < 0:
                    c += size
                if not 0 <= c < size:
                    raise NkiError(f"index {e} is out of bounds for dim {d} of size {size} "
                                   f"(tensor {list(self.shape)})")
                if is_p:
                    p0 += c
                    if self.st.space != HBM:
                        int_p = len(out)  # `t[3, :]`: a size-1 partition dim here, unless expressions index it
                else:
                    boff += c * stride * isz
            elif isinstance(e, slice):
                try:
                    start, stop, step = _check_slice(e, size, d, self.shape)
                except NkiError as err:
                    # A slice of an HBM tensor past its end (`x[t * 128:(t + 1) * 128, :]` on the tail tile of a
                    # [200, 8] x) names a tile of its own length, as an index expression does: legal where the
                    # call's mask keeps it inside (_lower.apply_mask), the error at any other use (tester23ag F4).
                    past_end = _past_end(e, size) if user and self.st.space == HBM else None
                    if past_end is None:
                        raise
                    start, stop, step = past_end
                    unbounded.append((len(out), _SlicePast(err, start, size), size, None))
                n = len(range(start, stop, step))
                if n == 0:
                    raise NkiError(f"slice {_fmt_slice(e)} of dim {d} (size {size}) is empty")
                if is_p:
                    if step != 1:
                        raise NkiError("the partition dim can only be sliced with step 1")
                    p0 += start
                    out.append((0, n, True))
                else:
                    boff += start * stride * isz
                    out.append((stride * step, n, False))
            elif isinstance(e, IndexExpr):
                flat = [v for v in e.terms if v.ndim == 1 and v.grid is None]
                if user and flat and self.st.space != HBM:
                    raise NkiError(f"dim {d} of {self.st.label(at=False)} is indexed with a 1-D nl.arange of "
                                   f"{flat[0].size} values: an on-chip tile's index needs at least 2 dims (NKI's "
                                   "err_1d_arange_not_supported); give the arange its axis (nl.arange(n)[:, None]) "
                                   "or use a slice")
                held = None
                if own is not None and (own[1][d] or own[0][d] != size):
                    held = (own[1][d], own[2])
                    e = e - own[1][d]
                lo, hi = e.value_range()
                if lo < 0 or hi >= size:
                    # Legal if a mask bounds it (NKI's tail tiles): checked when the call's mask is applied.
                    unbounded.append((d, e, size, held))
                adv_pos.append(len(out))
                if is_p:
                    if len(e.terms) > 1 or any(k != 1 for k in e.terms.values()):
                        raise NkiError(f"the partition index must be a single nl.arange variable (plus a constant) "
                                       f"with step 1, got {e!r} on dim {d}: an instruction's partitions are "
                                       f"contiguous and ascending (no partition stride)")
                    p0 += e.const
                    for v in e.terms:
                        var_strides.setdefault(v, [0, False])[1] = True
                else:
                    boff += e.const * stride * isz
                    for v, k in e.terms.items():
                        var_strides.setdefault(v, [0, False])[0] += k * stride
            elif isinstance(e, NkiTensor):
                return self._index_by_tile(d, e, idx)
            else:
                raise NkiError(f"unsupported index {e!r} (integers, slices, nl.arange expressions and, on dim 0 of "
                               f"an HBM tensor, a tile of row indices are)")
        if var_strides:
            nmax = max(v.ndim for v in var_strides)
            vars_sorted = sorted(var_strides, key=lambda v: v.axis + (nmax - v.ndim))
            adv = [(var_strides[v][0], v.size, var_strides[v][1], v) for v in vars_sorted]
            int_partition = 0 <= self.pd < len(idx) and _const(idx[self.pd]) is not None
            if any(v.grid is not None for v in var_strides):
                adv = _grid_dims(idx, var_strides, int_partition)
            elif len(adv) < nmax and not any(isinstance(e, slice) for e in idx):
                # (A slice beside index expressions is the index space's axis of its own, as NKI's tiles take
                # it: `t[i_p, 0:1]` stays [128, 1], a per-partition operand, where NumPy gives [128, 1, 1].)
                adv = _broadcast_axes(adv, nmax, int_partition)
            first = adv_pos[0]
            if all(p == first for p in adv_pos):
                out = out[:first] + adv + out[first:]  # adjacent expressions: their dims in their place
            else:
                out = _spread_between_slices(out, adv, adv_pos, idx)
        if not var_strides and int_p is not None:
            out.insert(int_p, (0, 1, True))  # `t[3, :]`: [1, 64] (_PARTITION_KEPT)
        if not var_strides and len(out) == 1 and out[0][2] and self.st.space != HBM:
            kept = [self.dims[d][0] for d, e in enumerate(idx) if d != self.pd and _const(e) is not None]
            if kept:
                out.append((kept[-1], 1, False))  # `t[0:64, 0]`: [64, 1] (_FREE_KEPT)
        dims, vs = [], []
        for i, e in enumerate(out):
            s, n, isp = e[0], e[1], e[2]
            if isp:
                pd = i
            dims.append((s, n))
            vs.append(e[3] if len(e) > 3 else None)
        if self.st.space == HBM:
            pd = -1
        if past is not None:
            # An integer or slice past the held part: the looser-mask error, unless the call this view is given
            # to has a mask that selects nothing (no instruction reads it: a carry's last iteration).
            unbounded.insert(0, (past[0], _HeldPast(past[1]), self.dims[past[0]][1], None))
        if unbounded:
            if var_strides and any(type(u[1]) is _SlicePast for u in unbounded):
                raise next(u[1] for u in unbounded if type(u[1]) is _SlicePast).error
            r = Unbounded.of(self, boff, tuple(dims), pd, p0, tuple(vs) if var_strides else None, unbounded)
        else:
            r = NkiTensor(self.st, self.dtype, boff, tuple(dims), pd, p0, tuple(vs) if var_strides else None)
        if own is not None:
            r._sub = True
        return r

    def _held_index(self, idx, own):
        """Integers and slices (`:` too) of a masked call's result address the call's whole index space, as
        index expressions do (NKI's tile is the whole, defined where the mask held): shifted to the part this
        view holds, [own start, own start + its size) per dim; reaching past it is the looser-mask error. Returns
        (index, past): past is None, or (dim, that error) for the first integer or slice past the held part, which
        the index then takes inside it (the view is checked when a call applies its mask: Unbounded)."""
        out = list(idx)
        past = None
        for d, e in enumerate(idx):
            a, size, whole = own[1][d], self.dims[d][1], own[0][d]
            if not a and whole == size:
                continue
            c = _const(e)
            if c is not None:
                c = c + whole if c < 0 else c
                if not a <= c < a + size:
                    if past is None:
                        past = (d, _lower().held_only(self, d, c, c + 1, a, size, own[2], f"index {e} reads"))
                    c = a
                out[d] = c - a
            elif isinstance(e, slice):
                start, stop, step = e.indices(whole)
                r = range(start, stop, step)
                if len(r) and not (a <= min(r[0], r[-1]) and max(r[0], r[-1]) < a + size):
                    if past is None:
                        past = (d, _lower().held_only(self, d, min(r[0], r[-1]), max(r[0], r[-1]) + 1, a, size,
                                                      own[2], f"slice {_fmt_slice(e)} reads"))
                    out[d] = slice(None)
                    continue
                stop = stop - a if stop - a >= 0 else None
                out[d] = slice(start - a, stop, step)
        return tuple(out), past

    def _whole_space(self, own):
        """Whether this view's tile, a masked call's result holding the region `own` (box_of), is allocated at
        the shape of the call's whole index space, holding it from index 0 (the view is then a part of it)."""
        box = _lower()._boxes().get(self.st.uid)
        return box is not None and tuple(self.st.shape) == own[0] and not any(box[1]) and (
            any(own[1]) or tuple(self.shape) != own[0])

    def _index_by_tile(self, d, index, idx):
        """`x[idx_tile, ...]`: the rows of HBM tensor x that the int32/uint32 [P, 1] SBUF tile idx_tile holds,
        read when the DMA runs (an indirect DMA: a gather as a load's source, a scatter as a store's
        destination; nki.isa.dma_copy's vector_offset)."""
        from ._errors import unsupported

        if self.st.space != HBM:
            unsupported("indexing an on-chip tensor by a tile of indices",
                        "run-time row indices pick rows of an HBM tensor (an indirect DMA)")
        if d != 0 and all(_const(e) is not None for e in idx[:d]):
            # `x[b, idx_tile, i_f]`: the integers select the sub-tensor x[b], whose rows the tile picks (tester23ag
            # F5: nki-samples' resize_nearest_fixed_dma_kernel)
            return self.index(idx[:d])[tuple(idx[d:])]
        if d != 0:
            unsupported(f"a tile of indices on dim {d} after a non-integer index",
                        "run-time indices pick rows (dim 0) of an HBM tensor, or of the sub-tensor integers before "
                        "them select (x[b, idx_tile, i_f] is x[b][idx_tile, i_f])")
        first = self.index((slice(0, 1),) + tuple(idx[1:]))
        return indexed_rows(first, index)

    def _index_basic(self, idx):
        """The common case: integers and slices only, at most one per dim (no Ellipsis, no expressions)."""
        dims = self.dims
        if len(idx) > len(dims):
            return None
        if self.st.uid in (_lower_mod or _lower())._boxes():
            return None  # a masked call's result: index() addresses its call's whole index space
        isz = self.dtype.itemsize
        boff, p0, pdim = self.boff, self.p0, self.pd
        if pdim < 0 and self.st.space == HBM:
            return self._index_hbm(idx, dims, isz, boff)
        out = []
        pd = -1
        kept = None  # the stride of the last free dim an integer took
        for d, e in enumerate(idx):
            stride, size = dims[d]
            te = type(e)
            if te is int:
                if e < 0:
                    e += size
                if not 0 <= e < size:
                    return None  # the general path reports it
                if d == pdim:
                    p0 += e
                    if self.st.space != HBM:  # `t[3, :]`: [1, 64], one partition (_PARTITION_KEPT)
                        pd = len(out)
                        out.append((0, 1))
                else:
                    boff += e * stride * isz
                    kept = stride
            elif te is slice:
                st, sp, step = e.start, e.stop, e.step
                if (st is not None and type(st) is not int) or (sp is not None and type(sp) is not int) or (
                        step is not None and step != 1):
                    return None
                st = 0 if st is None else st
                sp = size if sp is None else sp
                if st < 0 or sp > size or st >= sp:
                    return None
                if d == pdim:
                    p0 += st
                    pd = len(out)
                    out.append((0, sp - st))
                else:
                    boff += st * stride * isz
                    out.append((stride, sp - st))
            else:
                return None
        for d in range(len(idx), len(dims)):
            if d == pdim:
                pd = len(out)
            out.append(dims[d])
        if pd == 0 and len(out) == 1 and kept is not None and self.st.space != HBM:
            out.append((kept, 1))  # `t[0:64, 0]`: [64, 1], an on-chip tile's partitions and a free dim (_FREE_KEPT)
        if self.st.space == HBM:  # a DMA's side, whose rectangle the schedule reads: made now
            v = NkiTensor(self.st, self.dtype, boff, tuple(out), -1, p0)
            v._rect = _rect_of(v.dims, boff, isz, -1, p0, True)
            return v
        return NkiTensor(self.st, self.dtype, boff, tuple(out), pd, p0)

    def _index_hbm(self, idx, dims, isz, boff):
        """_index_basic on an HBM view (a DMA's side, usually two slices): the view with its rectangle, as
        _rect_of makes it, from the same loop."""
        if len(idx) == 2 and len(dims) == 2:
            # Two slices of a 2-D tensor without steps (a tile's rows and columns): the loop below, unrolled.
            e0, e1 = idx
            if type(e0) is slice and type(e1) is slice and e0.step is None and e1.step is None:
                (s0, n0), (s1, n1) = dims
                a0, b0, a1, b1 = e0.start, e0.stop, e1.start, e1.stop
                if a0 is None:
                    a0 = 0
                if b0 is None:
                    b0 = n0
                if a1 is None:
                    a1 = 0
                if b1 is None:
                    b1 = n1
                if (type(a0) is int and type(b0) is int and type(a1) is int and type(b1) is int
                        and 0 <= a0 < b0 <= n0 and 0 <= a1 < b1 <= n1):
                    boff += a0 * s0 * isz + a1 * s1 * isz
                    m0, m1 = b0 - a0, b1 - a1
                    lo = hi = 0
                    if m0 > 1:
                        if s0 < 0:
                            lo = s0 * (m0 - 1)
                        else:
                            hi = s0 * (m0 - 1)
                    if m1 > 1:
                        if s1 < 0:
                            lo += s1 * (m1 - 1)
                        else:
                            hi += s1 * (m1 - 1)
                    return _hbm_view(self, boff, ((s0, m0), (s1, m1)), lo, hi, isz)
        out = []
        lo = hi = 0  # the view's extent in elements of stride around its first element
        d = 0
        for e in idx:
            stride, size = dims[d]
            d += 1
            te = type(e)
            if te is slice:
                a, b, step = e.start, e.stop, e.step
                if step is not None and step != 1:
                    return None
                if a is None:
                    a = 0
                elif type(a) is not int:
                    return None
                if b is None:
                    b = size
                elif type(b) is not int:
                    return None
                if a < 0 or b > size or a >= b:
                    return None  # the general path reports it
                boff += a * stride * isz
                n = b - a
                out.append((stride, n))
            elif te is int:
                if e < 0:
                    e += size
                if not 0 <= e < size:
                    return None
                boff += e * stride * isz
                continue
            else:
                return None
            if n > 1:
                if stride < 0:
                    lo += stride * (n - 1)
                else:
                    hi += stride * (n - 1)
        for k in range(d, len(dims)) if d < len(dims) else ():
            dk = dims[k]
            out.append(dk)
            stride, n = dk
            if n > 1:
                if stride < 0:
                    lo += stride * (n - 1)
                else:
                    hi += stride * (n - 1)
        return _hbm_view(self, boff, tuple(out), lo, hi, isz)

    # ---- view operations
    def reshape(self, *dims, shape=None):
        """t.reshape(shape): the same elements in a new shape without a copy (on chip: the partition dim kept
        first); NkiError if the layout needs a copy. The shape as one argument (also by its name, `shape=`, as
        nki-samples pass it) or as several. Of a masked call's result (its held part), the kernel's reshape is of
        the whole tile its .shape gives."""
        if not _in_package(sys._getframe(1).f_code.co_filename):
            w = _lower().whole_of(self)
            if w is not None:
                return w.reshape(*dims, shape=shape)
        if shape is not None:
            if dims:
                raise NkiError(f"reshape: give the shape once, got {dims!r} and shape={shape!r}")
            dims = (shape,)
        shape = dims
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        shape = tuple(int(s) for s in shape)
        total = self.size
        if shape.count(-1) > 1:
            raise NkiError("reshape: only one dim can be -1")
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            if known == 0 or total % known:
                raise NkiError(f"reshape: cannot infer -1 for {list(self.shape)} -> {list(shape)}")
            shape = tuple(total // known if s == -1 else s for s in shape)
        if math.prod(shape) != total or any(s <= 0 for s in shape):
            raise NkiError(f"reshape: {list(self.shape)} ({total} elements) cannot become {list(shape)}")
        if self.st.space != HBM and self.pd >= 0:
            if self.pd != 0 or not shape or shape[0] != self.dims[0][1]:
                raise NkiError(f"reshape of an on-chip tensor must keep its partition dim first "
                               f"({list(self.shape)} -> {list(shape)})")
            free = _reshape_dims(self.dims[1:], shape[1:], self.shape, shape)
            return NkiTensor(self.st, self.dtype, self.boff, ((0, shape[0]),) + free, 0, self.p0)
        dims = _reshape_dims(self.dims, shape, self.shape, shape)
        return NkiTensor(self.st, self.dtype, self.boff, dims, -1, self.p0)

    def view(self, dtype):
        """Bitcast: the same bytes as another dtype (NKI's tensor.view(dtype)). Of a masked call's result, the
        kernel's view is of the whole tile its .shape gives, as .reshape's is."""
        if not _in_package(sys._getframe(1).f_code.co_filename):
            # (tester23ah F10: it had the held part's [128, 40] of a [128, 64] tile, so a pad through it was
            # 'slice 40:64 is out of bounds')
            w = _lower().whole_of(self)
            if w is not None:
                return w.view(dtype)
        d = as_dtype(dtype)
        a, b = self.dtype.itemsize, d.itemsize
        if a == b:
            return NkiTensor(self.st, d, self.boff, self.dims, self.pd, self.p0)
        dims = list(self.dims)
        last = len(dims) - 1
        if last < 0 or last == self.pd:
            raise NkiError(f"view({d.name}): a bitcast to another element size needs a free innermost dim")
        s, n = dims[last]
        if s != 1 and n != 1:
            raise NkiError(f"view({d.name}): the innermost dim must be contiguous to change the element size")
        if (n * a) % b:
            raise NkiError(f"view({d.name}): innermost dim of {n} x {a} bytes is not a multiple of {b} bytes")
        dims[last] = (1, n * a // b)
        for i in range(last):
            if i == self.pd:
                continue
            st, sz = dims[i]
            if (st * a) % b:
                raise NkiError(f"view({d.name}): dim {i} stride {st * a} bytes is not a multiple of {b}")
            dims[i] = (st * a // b, sz)
        return NkiTensor(self.st, d, self.boff, tuple(dims), self.pd, self.p0)

    bitcast = view
    reinterpret_cast = view

    def permute(self, *order):
        """t.permute(dims): the dims reordered (on chip: the partition dim stays first)."""
        if len(order) == 1 and isinstance(order[0], (tuple, list)):
            order = tuple(order[0])
        if sorted(order) != list(range(len(self.dims))):
            raise NkiError(f"permute: {list(order)} is not a permutation of {len(self.dims)} dims")
        if self.on_chip and self.pd >= 0 and order[0] != self.pd:
            raise NkiError("permute of an on-chip tensor must keep the partition dim first")
        dims = tuple(self.dims[i] for i in order)
        pd = order.index(self.pd) if self.pd >= 0 else -1
        return NkiTensor(self.st, self.dtype, self.boff, dims, pd, self.p0)

    def broadcast(self, dim, size):
        """t.broadcast(dim, size): the size-1 dim `dim` repeated `size` times: a stride-0 view of a free dim
        (or of an HBM tensor's dim); along a tile's partition dim, a new SBUF tile (_lower.partition_broadcast:
        the Tensor engine's partition broadcast)."""
        s, n = self.dims[dim]
        if n != 1:
            raise NkiError(f"broadcast: dim {dim} has size {n}, not 1")
        if dim == self.pd:
            return (_lower_mod or _lower()).partition_broadcast(self, size, "broadcast")
        dims = list(self.dims)
        dims[dim] = (0, size)
        return NkiTensor(self.st, self.dtype, self.boff, tuple(dims), self.pd, self.p0)

    def broadcast_to(self, shape):
        """t.broadcast_to(shape): broadcast along the size-1 dims that differ (earlier nki.tensor): a tile's
        partition dim first (a new tile: see broadcast), the others as stride-0 views; a [P] tile (a reduction's
        result) to [P, F, ...] along new trailing free dims."""
        shape = tuple(shape)
        n = len(self.dims)
        if len(shape) > n and self.st.space != HBM and self.pd == 0 and shape[:n] == tuple(self.shape):
            # A tile's values per partition ([P], as tensor_reduce leaves them) broadcast along new trailing free
            # dims: the partition dim stays first (NKI's SD attention tutorial: (1.0 / sum_res).broadcast_to((P, D))).
            t = self
            while t.ndim < len(shape):
                t = t.expand_dims(t.ndim)
            return t.broadcast_to(shape)
        if len(shape) != n:
            raise NkiError(f"broadcast_to: {list(self.shape)} -> {list(shape)} must keep the number of dims")
        for d, (n, m) in enumerate(zip(self.shape, shape)):
            if n != m and n != 1:
                raise NkiError(f"broadcast_to: {list(self.shape)} -> {list(shape)}: dim {d} has size {n}, not 1")
        t = self
        if self.pd >= 0 and self.shape[self.pd] != shape[self.pd]:
            t = t.broadcast(self.pd, shape[self.pd])
        for d, (n, m) in enumerate(zip(t.shape, shape)):
            if n != m:
                t = t.broadcast(d, m)
        return t

    def expand_dims(self, axis):
        """t.expand_dim(dim) / expand_dims(axis): a size-1 dim inserted at `dim`."""
        dims = list(self.dims)
        if axis < 0:
            axis += len(dims) + 1
        dims.insert(axis, (0, 1))
        pd = self.pd + (1 if self.pd >= axis else 0) if self.pd >= 0 else -1
        return NkiTensor(self.st, self.dtype, self.boff, tuple(dims), pd, self.p0)

    expand_dim = expand_dims

    # ---- NKI 2.33's view methods of nki.language.NkiTensor (no instruction; errors at the kernel line)
    def _dim(self, dim, what):
        n = len(self.dims)
        d = int(dim)
        if d < 0:
            d += n
        if not 0 <= d < n:
            raise NkiError(f"{what}: dim {dim} is outside the tensor's {n} dims {list(self.shape)}")
        return d

    def _free(self, d, what):
        if self.on_chip and d == self.pd:
            raise NkiError(f"{what}: dim {d} is the partition dim of an on-chip tensor {list(self.shape)}, which "
                           "this view operation cannot change")

    def slice(self, dim, start, end, step=1):
        """t.slice(dim, start, end, step): t[..., start:end:step, ...] on `dim` (0 <= start < end <= size,
        step >= 1)."""
        d = self._dim(dim, "slice")
        size = self.dims[d][1]
        if not (0 <= start < end <= size) or step < 1:
            raise NkiError(f"slice(dim={dim}, start={start}, end={end}, step={step}): needs 0 <= start < end <= "
                           f"{size} and step >= 1 (tensor {list(self.shape)})")
        return self.index((slice(None),) * d + (slice(start, end, step),))

    def select(self, dim, index):
        """t.select(dim, i): t[..., i, ...], the dim removed; with an SBUF [1, 1] int32 tile as `index` (an HBM
        tensor's dim 0), the element the tile holds when the DMA runs (dma_copy's scalar_offset)."""
        d = self._dim(dim, "select")
        if isinstance(index, NkiTensor):
            from ._lower import _Indirect

            if self.st.space != HBM or d != 0 or self.dims[0][0] != _row_major(self.st.shape)[0]:
                from ._errors import unsupported

                unsupported("NkiTensor.select with a run-time index other than on dim 0 of an HBM tensor",
                            "dma_copy's scalar_offset moves whole rows of the tensor's dim 0")
            return _Indirect(self.index((0,)), scalar_offset=index)
        return self.index((slice(None),) * d + (int(index),))

    def vector_select(self, dim, vector_offset):
        """t.vector_select(0, idx): rows idx[i, 0] of HBM tensor t, read when the DMA runs (an indirect DMA:
        dma_copy's vector_offset), as t[idx, ...]."""
        d = self._dim(dim, "vector_select")
        if d != 0 or self.st.space != HBM:
            raise NkiError(f"vector_select: dim must be 0 of an HBM tensor, got dim {dim} of {self.st!r}")
        return indexed_rows(self.index((slice(0, 1),)), vector_offset)

    def squeeze_dim(self, dim):
        """t.squeeze_dim(dim): the size-1 dim `dim` removed."""
        d = self._dim(dim, "squeeze_dim")
        if self.dims[d][1] != 1:
            raise NkiError(f"squeeze_dim({dim}): dim {d} has size {self.dims[d][1]}, not 1 "
                           f"(tensor {list(self.shape)})")
        self._free(d, "squeeze_dim")
        dims = self.dims[:d] + self.dims[d + 1:]
        pd = self.pd - 1 if self.pd > d else self.pd
        return NkiTensor(self.st, self.dtype, self.boff, dims, pd, self.p0)

    def reshape_dim(self, dim, shape):
        """t.reshape_dim(dim, (a, b, ...)): dim `dim` split into dims of sizes a, b, ... (one may be -1)."""
        d = self._dim(dim, "reshape_dim")
        stride, n = self.dims[d]
        shape = tuple(int(x) for x in shape)
        if shape.count(-1) == 1:
            known = math.prod(x for x in shape if x != -1)
            if known > 0 and n % known == 0:
                shape = tuple(n // known if x == -1 else x for x in shape)
        if math.prod(shape) != n or any(x < 1 for x in shape):
            raise NkiError(f"reshape_dim({dim}, {shape}): the sizes' product must be dim {d}'s size {n}")
        if self.on_chip and d == self.pd and len(shape) != 1:
            self._free(d, f"reshape_dim({dim}, {shape})")
        new, inner = [], stride
        for x in reversed(shape):
            new.append((inner, x))
            inner *= x
        dims = self.dims[:d] + tuple(reversed(new)) + self.dims[d + 1:]
        pd = self.pd + len(shape) - 1 if self.pd > d else self.pd
        return NkiTensor(self.st, self.dtype, self.boff, dims, pd, self.p0)

    def flatten_dims(self, start_dim, end_dim):
        """t.flatten_dims(a, b): dims a..b (inclusive) merged into one; they must be contiguous in memory."""
        a, b = self._dim(start_dim, "flatten_dims"), self._dim(end_dim, "flatten_dims")
        if a > b:
            raise NkiError(f"flatten_dims({start_dim}, {end_dim}): start_dim must not be after end_dim")
        if self.on_chip and a <= self.pd <= b and a != b:
            self._free(self.pd, f"flatten_dims({start_dim}, {end_dim})")
        run = [x for x in self.dims[a:b + 1] if x[1] != 1] or [self.dims[b]]
        for (s0, _), (s1, n1) in zip(run, run[1:]):
            if s0 != s1 * n1:
                raise NkiError(f"flatten_dims({start_dim}, {end_dim}): dims {a}..{b} of {list(self.shape)} are not "
                               "contiguous in memory (a permute or a strided slice between them)")
        merged = (run[-1][0], math.prod(x[1] for x in self.dims[a:b + 1]))
        dims = self.dims[:a] + (merged,) + self.dims[b + 1:]
        pd = self.pd - (b - a) if self.pd > b else self.pd
        return NkiTensor(self.st, self.dtype, self.boff, dims, pd, self.p0)

    def rearrange(self, src_pattern, dst_pattern, fixed_sizes=None):
        """einops-style: t.rearrange(('b', ('h', 'w')), ('b', 'w', 'h'), {'h': 4}) splits the grouped source
        dims (reshape_dim), reorders (permute) and merges the grouped destination dims (flatten_dims)."""
        fixed = dict(fixed_sizes or {})
        src, dst = tuple(src_pattern), tuple(dst_pattern)
        if len(src) != len(self.dims):
            raise NkiError(f"rearrange: source pattern {src!r} names {len(src)} dims, the tensor has "
                           f"{len(self.dims)} {list(self.shape)}")
        t, names = self, []
        for d in reversed(range(len(src))):
            group = src[d] if isinstance(src[d], tuple) else (src[d],)
            if len(group) > 1:
                t = t.reshape_dim(d, tuple(fixed.get(g, -1) for g in group))
            names[:0] = list(group)
        flat = [g for e in dst for g in (e if isinstance(e, tuple) else (e,))]
        if sorted(flat) != sorted(names) or len(set(names)) != len(names):
            raise NkiError(f"rearrange: destination pattern {dst!r} must name the source's dims {names} once each")
        t = t.permute(tuple(names.index(g) for g in flat))
        at = []
        for e in dst:
            at.append(len(e) if isinstance(e, tuple) else 1)
        pos = sum(at)
        for k in reversed(at):
            pos -= k
            if k > 1:
                t = t.flatten_dims(pos, pos + k - 1)
        return t

    def get_pattern(self):
        """[[stride, count], ...] per dim, in shape order (an on-chip partition dim's stride: the elements of one
        partition, as NKI writes it)."""
        isz = self.dtype.itemsize
        return [[self.st.pbytes // isz if self.on_chip and i == self.pd else s, n]
                for i, (s, n) in enumerate(self.dims)]

    def is_contiguous(self):
        """True if each dim of size > 1 (on chip: each free dim) steps by the elements of the dims inside it."""
        inner = 1
        for i in reversed(range(len(self.dims))):
            s, n = self.dims[i]
            if self.on_chip and i == self.pd:
                continue
            if n != 1 and s != inner:
                return False
            inner *= n
        return True

    def is_indirect(self):
        """False: a view indexed at run time (select / vector_select / .ap with an offset tile) is another
        object, whose is_indirect() is True."""
        return False

    def is_identity(self):
        """True for the whole tensor as declared (no slice, .ap or view applied; NKI 2.30)."""
        w = NkiTensor.whole(self.st)
        return self.boff == 0 and self.p0 == 0 and self.dtype is self.st.dtype and self.dims == w.dims

    def indirect(self, index, num_elem=None):
        """Tensor Indirection (NeuronCore-v4): this SBUF tile's columns at the uint16 offsets of SBUF tile
        `index`, one list per group of 16 partitions, as one instruction's operand (_indirect: the lowering)."""
        from . import _indirect

        return _indirect.make(self, index, num_elem)

    def astype(self, dtype):
        """t.astype(dtype) of the earlier nki.tensor: a copy cast to dtype (nl.copy(t, dtype=dtype))."""
        from . import language as nl

        return nl.copy(self, dtype=dtype)

    def assert_shape(self, shape):
        """t.assert_shape(shape) of the earlier nki.tensor: NkiError unless t has that shape; returns t."""
        if tuple(int(x) for x in shape) != self.shape:
            raise NkiError(f"assert_shape: the tensor's shape is {list(self.shape)}, not {list(shape)}")
        return self

    def __getattr__(self, name):
        # Only names the class does not define reach here: NkiUnsupported naming the NKI attribute and the
        # kernel line (an AttributeError too, so hasattr() answers False), never a bare AttributeError.
        from ._errors import unsupported_attribute

        raise unsupported_attribute(type(self), name)

    def ap(self, pattern, offset=0, scalar_offset=None, vector_offset=None, indirect_dim=0, dtype=None):
        """NKI's access pattern: [[step, num], ...], the first pair the partition (on-chip) or row (HBM) dim,
        `offset` elements from this view's start (on-chip: row-major over [partitions, free]). A view reaching
        outside its tensor is an NkiError where an instruction or DMA uses it (its line, naming the line that
        made the view), none where nothing uses it (a loop's view its `if` then skips); a plain slice out of
        the tensor's shape is an error where it is written, but for a slice of an HBM tensor running past its
        end, a tile of the slice's length that a call's mask must keep inside (docs/nki.md "Masks"). With
        `scalar_offset=` / `vector_offset=` (an SBUF int32 tile read when the DMA runs): the offset moves whole
        rows of the HBM tensor's dim 0 (Indirect DMA below); with `scalar_offset=` and `indirect_dim=k` > 0, the
        whole access moves by the value times dim k's stride (nki-library's cross_entropy: one element of each
        row at its target index), an access moved past the tensor's end being the DMA's bounds error (its
        elements, not dim k, are checked: a move along dim k may run into the next row). `vector_offset=` with
        `indirect_dim` > 0 is NkiUnsupported (the indirect DMA picks whole rows)."""
        from . import _lower

        if scalar_offset is not None or vector_offset is not None:
            return _lower.dynamic_ap(self, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype)
        t = self.view(dtype) if dtype is not None else self
        try:
            pattern = [tuple(_whole(x, ".ap: pattern", pattern) for x in p) for p in pattern]
        except TypeError:
            raise NkiError(f".ap: pattern must be a list of [step, num] pairs, got {pattern!r}") from None
        offset = _whole(offset, ".ap: offset", offset)
        if not pattern or any(len(p) != 2 for p in pattern):
            raise NkiError(f".ap: pattern must be a list of [step, num] pairs, got {pattern!r}")
        if t.on_chip and pattern[0][0] < 0 and pattern[0][1] > 1:
            raise NkiError(f".ap: partition step {pattern[0][0]}: an instruction's partitions are contiguous and "
                           "ascending (no partition stride)")
        # A masked call's result (not a view the kernel's index made of it): the pattern addresses the call's
        # whole index space, with dtype= or without (in the new dtype's elements).
        own = None
        if self.on_chip and self.st.uid in _lower._boxes() and not getattr(self, "_sub", False):
            own = _lower.box_of(self)
        if own is not None:
            if self._whole_space(own):  # its tile is the whole index space: the pattern reads it there
                w = NkiTensor.whole(self.st)
                return (w.view(dtype) if dtype is not None else w)._ap(pattern, offset)
            return t._held_ap(pattern, offset, own if t is self else self._bitcast_box(own, t))
        return t._ap(pattern, offset)

    def _bitcast_box(self, own, t):
        """The region `own` (box_of) of this masked result's view, as its bitcast `t` (view(dtype)) holds it:
        the innermost dim counted in t's elements."""
        a, b = self.dtype.itemsize, t.dtype.itemsize
        last = len(own[0]) - 1
        full, start = own[0][last] * a, own[1][last] * a
        if full % b or start % b:
            raise NkiError(f".ap(dtype={t.dtype.name}): the part this result holds starts at element {own[1][last]} "
                           f"of its {own[0][last]} {self.dtype.name} elements on dim {last}, not on a "
                           f"{t.dtype.name} element")
        return (own[0][:last] + (full // b,), own[1][:last] + (start // b,), own[2])

    def _held_ap(self, pattern, offset, own):
        """.ap of a masked call's result: like its indices, the pattern addresses the call's whole index space
        (row-major over [partitions, free] from index 0), here mapped onto the part this view holds; reaching
        past that part is the looser-mask error."""
        import numpy as np

        full, starts, pd = own[0], own[1], self.pd
        free = [d for d in range(len(full)) if d != pd]
        per_part = math.prod(full[d] for d in free)
        p_add, f_add = divmod(int(offset), per_part) if per_part else (0, 0)
        (_, pnum), steps = pattern[0], pattern[1:]
        # Every free position the pattern reads, as whole-space multi-indices per free dim.
        lin = np.full((1,), f_add, dtype=np.int64)
        for s, n in steps:
            lin = (lin[:, None] + s * np.arange(n, dtype=np.int64)[None, :]).reshape(-1)
        at = {pd: (np.array([p_add, p_add + max(pnum, 1) - 1]))}
        rest = lin
        for d in reversed(free):
            rest, at[d] = np.divmod(rest, full[d]) if full[d] else (rest, rest * 0)
        reach = {d: (int(v.min()), int(v.max()) + 1) for d, v in at.items()}
        if free and len(lin) and rest.any():  # past the last free position of a partition
            reach[free[0]] = (reach[free[0]][0], full[free[0]] + 1)
        for d in range(len(full)):
            lo, hi = reach[d]
            a, n = starts[d], self.dims[d][1]
            if lo < a or hi > a + n:
                pat = [list(p) for p in pattern]
                raise _lower().held_only(self, d, lo, hi, a, n, own[2], f".ap({pat}, offset={offset}) reads")
        # The held part's element offsets of those positions, which must step as a pattern again.
        held = sum((at[d] - starts[d]) * self.dims[d][0] for d in free) if free else lin * 0
        base = int(held[0]) if len(held) else 0
        new, stride = [], 1
        for s, n in reversed(steps):
            new.append((int(held[stride] - held[0]) if n > 1 else 1, n))
            stride *= n
        new.reverse()
        idx = np.zeros((1,), dtype=np.int64)
        for s, n in new:
            idx = (idx[:, None] + s * np.arange(n, dtype=np.int64)[None, :]).reshape(-1)
        if len(held) and not np.array_equal(base + idx, held):
            from ._errors import unsupported

            unsupported(f".ap({[list(p) for p in pattern]}) of a masked result",
                        "the part it holds is laid out as its own tile, which this pattern does not step through "
                        "evenly: index the result, or mask that call as widely")
        dims = ((0, pnum),) + tuple(new)
        v = NkiTensor(self.st, self.dtype, self.boff + base * self.dtype.itemsize, dims, 0,
                      self.p0 + p_add - starts[pd])
        v.check_bounds()
        return v

    def _ap(self, pattern, offset):
        t = self
        isz = t.dtype.itemsize
        if t.on_chip:
            (pstep, pnum), free = pattern[0], pattern[1:]
            if pstep not in (0, 1) and pnum > 1:
                pass
            per_part = t.st.pbytes // isz
            p_add, f_add = divmod(int(offset), per_part) if per_part else (0, 0)
            p0 = t.p0 + p_add
            dims = ((0, pnum),) + tuple((s, n) for s, n in free)
            v = NkiTensor(t.st, t.dtype, t.boff + f_add * isz, dims, 0, p0)
            bad = f".ap: partitions [{p0}, {p0 + pnum}) outside the tensor's {t.st.partitions}" \
                if p0 + pnum > t.st.partitions else v.bounds_error()
        else:
            dims = tuple((s, n) for s, n in pattern)
            v = NkiTensor(t.st, t.dtype, t.boff + int(offset) * isz, dims, -1, 0)
            bad = v.bounds_error()
        if bad is not None:
            # NKI's views are consumed by the instructions: a view outside its tensor is an error where an
            # instruction (or DMA) reads or writes it (Trace.record), naming this line too; one that none uses
            # (a kernel's loop making a view its `if` then skips) is no error.
            tr = t.st.trace
            if tr.bad_ap is None:
                tr.bad_ap = {}
            tr.bad_ap.setdefault(t.st.uid, {})[id(v)] = (v, bad, caller_loc())
        return v

    def bounds_error(self):
        """The message of check_bounds' error, or None for a view inside its storage."""
        lo, hi = self.byte_range()
        limit = self.st.pbytes
        if lo < 0 or hi > limit:
            return (f"access pattern covers bytes [{lo}, {hi}) outside {self.st!r} ({limit} bytes"
                    f"{' per partition' if self.on_chip else ''})")
        return None

    def check_bounds(self):
        lo, hi = self.byte_range()
        limit = self.st.pbytes
        if lo < 0 or hi > limit:
            raise NkiError(f"access pattern covers bytes [{lo}, {hi}) outside {self.st!r} ({limit} bytes"
                           f"{' per partition' if self.on_chip else ''})")

    def byte_range(self):
        """[lo, hi) bytes of the storage (per partition on-chip) the view touches."""
        r = self._rect
        if r is None:
            r = self.rect()
        return r[2], r[3]

    def rect(self):
        """(first partition, end partition, first byte, end byte): partitions x bytes-per-partition on chip,
        (0, 1, bytes) in HBM."""
        r = self._rect
        if r is None:
            r = self._rect = _rect_of(self.dims, self.boff, self.dtype.itemsize, self.pd, self.p0,
                                      self.st.space == HBM)
        return r

    def part_range(self):
        return self.p0, self.p0 + self.partitions

    # Arithmetic operators on tiles lower like the nl.* functions (NKI's tile operators).
    def _bin(self, other, fn, reverse=False):
        from . import language as nl

        f = getattr(nl, fn)
        return f(other, self) if reverse else f(self, other)

    def __add__(self, o):
        return self._bin(o, "add")

    def __radd__(self, o):
        return self._bin(o, "add", True)

    def __sub__(self, o):
        return self._bin(o, "subtract")

    def __rsub__(self, o):
        return self._bin(o, "subtract", True)

    def __mul__(self, o):
        return self._bin(o, "multiply")

    def __rmul__(self, o):
        return self._bin(o, "multiply", True)

    def __truediv__(self, o):
        return self._bin(o, "divide")

    def __rtruediv__(self, o):
        return self._bin(o, "divide", True)

    # The other operators NumPy defines on arrays, each as the nl function NKI documents "similar to" NumPy's
    # ufunc behind it (nki.language.power ~ numpy.power, bitwise_xor ~ numpy.bitwise_xor, abs ~ numpy.abs).
    def __pow__(self, o):
        return self._bin(o, "power")

    def __rpow__(self, o):
        return self._bin(o, "power", True)

    def __and__(self, o):
        return self._bin(o, "bitwise_and")

    def __rand__(self, o):
        return self._bin(o, "bitwise_and", True)

    def __or__(self, o):
        return self._bin(o, "bitwise_or")

    def __ror__(self, o):
        return self._bin(o, "bitwise_or", True)

    def __xor__(self, o):
        return self._bin(o, "bitwise_xor")

    def __rxor__(self, o):
        return self._bin(o, "bitwise_xor", True)

    def __lshift__(self, o):
        return self._bin(o, "left_shift")

    def __rlshift__(self, o):
        return self._bin(o, "left_shift", True)

    def __rshift__(self, o):
        return self._bin(o, "right_shift")

    def __rrshift__(self, o):
        return self._bin(o, "right_shift", True)

    def __mod__(self, o):
        return self._bin(o, "mod")

    def __rmod__(self, o):
        return self._bin(o, "mod", True)

    def __abs__(self):
        from . import language as nl

        return nl.abs(self)

    # NumPy's ufuncs and functions (np.exp(t), np.sum(t)) compute on host arrays, not on tiles: an NkiError at
    # the kernel line naming the nl call. A NumPy number with an arithmetic operator (np.float32(2) * t) comes
    # here too (NumPy's operators are its ufuncs): it is the tile operator.
    _UFUNC_OPERATORS = {"add": "add", "subtract": "subtract", "multiply": "multiply", "true_divide": "divide"}

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        import numpy as np

        fn = self._UFUNC_OPERATORS.get(ufunc.__name__)
        if fn is not None and method == "__call__" and not kwargs and len(inputs) == 2 and all(
                isinstance(v, (NkiTensor, int, float, np.number)) for v in inputs):
            from . import language as nl

            return getattr(nl, fn)(*(v.item() if isinstance(v, np.number) else v for v in inputs))
        raise _numpy_on_tile(ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}")

    def __array_function__(self, func, types, args, kwargs):
        raise _numpy_on_tile(func.__name__)

    def __pos__(self):
        raise NkiError("unary + of a tile is not an NKI tile operator (NKI's tiles have +, -, *, / and the other "
                       "NumPy operators with an nl function): use the tile itself, or nl.copy(t) for a copy",
                       host_loc())

    def _no_value(self, call):
        raise NkiError(f"{call} of a tile: the tile has no Python value while the kernel is traced (its values "
                       "exist only when the simulated kernel runs); compute on tiles with nl.* / nisa.* calls "
                       "(e.g. nl.floor, nl.ceil, nl.sum), and pass numbers as the kernel's arguments",
                       host_loc())

    def __float__(self):
        self._no_value("float()")

    def __int__(self):
        self._no_value("int()")

    def __complex__(self):
        self._no_value("complex()")

    def __round__(self, ndigits=None):
        self._no_value("round()")

    # NumPy operators whose nl function trnsim does not model: NkiUnsupported naming what computes each.
    def _no_operator(self, op, why):
        from ._errors import unsupported

        unsupported(f"the tile operator {op}", why)

    def __floordiv__(self, o):
        self._no_operator("//", "NKI has no floor_divide; compute nl.floor(nl.divide(a, b))")

    __rfloordiv__ = __floordiv__

    def __invert__(self):
        self._no_operator("~", "it is nl.invert (numpy.invert), which trnsim does not model; "
                          "nl.bitwise_xor(t, -1) inverts the bits of an int32 tile")

    def _compare(self, fn):
        from ._errors import unsupported

        unsupported("a comparison (<, <=, >, >=, ==, !=) of a tile", "trnsim models the tile operators +, -, *, /, "
                    "**, %, abs(), unary -, &, |, ^, <<, >> and @ (each its nl function), no comparison; call "
                    f"nl.{fn}(a, b): a tile of 1 where it holds, else 0")

    def __gt__(self, o):
        self._compare("greater")

    def __ge__(self, o):
        self._compare("greater_equal")

    def __lt__(self, o):
        self._compare("less")

    def __le__(self, o):
        self._compare("less_equal")

    # == and != stay Python's identity for the package's own code (it compares tensors by identity) and against
    # None (`has_bias = bias != None`, host Python as in nki-library's conv1d); from a kernel, against a tile or
    # a number they would give a Python bool silently (`nl.add(t, t == 0.0)` returned t), so they are refused.
    def __eq__(self, o):
        if o is not None and not sys._getframe(1).f_globals.get("__name__", "").startswith("trnsim."):
            self._compare("equal")
        return self is o

    def __ne__(self, o):
        if o is not None and not sys._getframe(1).f_globals.get("__name__", "").startswith("trnsim."):
            self._compare("not_equal")
        return self is not o

    __hash__ = object.__hash__

    def __iadd__(self, o):
        return (_lower_mod or _lower()).iadd(self, o)

    def __isub__(self, o):
        from . import language as nl

        (_lower_mod or _lower()).psum_matmul_update("-=", self, o)
        return nl.subtract(self, o, out=self)

    def __imul__(self, o):
        from . import language as nl

        (_lower_mod or _lower()).psum_matmul_update("*=", self, o)
        return nl.multiply(self, o, out=self)

    def __neg__(self):
        from . import language as nl

        return nl.negative(self)

    def __matmul__(self, o):
        from . import language as nl

        return nl.matmul(self, o)



def indexed_rows(first, index):
    """The indexed HBM side of an indirect DMA: `first` (an HBM view whose dim 0 is one row) over as many rows
    as `index` (an int32/uint32 [P, 1] SBUF tile, the vector_offset) holds, row i being the row index[i]
    of the tensor, read when the DMA runs. Its rows may lie anywhere in the tensor (even past its end: the
    DMA's oob_mode decides), so its rectangle, which orders it against other accesses, is the whole tensor.
    Returns the lowering's _Indirect."""
    from ._lower import _Indirect, whole_of

    if not isinstance(index, NkiTensor) or index.st.space != SBUF:
        raise NkiError(f"row indices must be an SBUF tile, got {index!r}")
    if index.dtype.name not in ("int32", "uint32") or index.free_size != 1:
        raise NkiError(f"row indices must be an int32 or uint32 [P, 1] tile (one row index per partition), got "
                       f"{index.dtype.name} {list(index.shape)}")
    # A masked call's result passed whole is its whole tile, as NKI's (docs/nki.md "Masks"): as many rows as that
    # tile has partitions, those outside its held part unwritten (_lower.held_indices refuses them).
    whole = whole_of(index)
    (stride, _), rest = first.dims[0], first.dims[1:]
    rows = (index if whole is None else whole).partitions
    v = NkiTensor(first.st, first.dtype, first.boff, ((stride, rows),) + rest, -1, 0)
    v._rect = NkiTensor.whole(first.st).rect()
    return _Indirect(v, vector_offset=index)


def _numpy_on_tile(name):
    from . import language as nl

    alt = {"true_divide": "divide", "amax": "max", "amin": "min"}.get(name, name)
    use = (f"use nl.{alt}" if callable(getattr(nl, alt, None)) and not alt.startswith("_")
           else "use the nl.* / nisa.* call that computes it (docs/nki.md lists them)")
    return NkiError(f"np.{name} on a tile: NumPy functions compute on host arrays and do not run on NKI tiles; "
                    f"{use}", host_loc())


# NKI's tensor methods (nki.language.NkiTensor of 2.33, nki.tensor of the earlier releases) trnsim has, and
# those it has not (docs/nki.md's table, _doc.py).
NKI_METHODS = ["slice", "select", "vector_select", "squeeze_dim", "reshape_dim", "flatten_dims", "rearrange",
               "reshape", "permute", "broadcast", "broadcast_to", "expand_dims", "view", "ap", "get_pattern",
               "is_contiguous", "is_indirect", "indirect", "is_identity", "astype", "assert_shape"]
NKI_UNMODELLED = ["sim_value", "device_value"]

_ST = NkiTensor.__dict__["st"]  # the slot NkiTensor.st, read and set past Unbounded's property


def storage_of(v):
    """`v.st`, without an Unbounded view's out-of-bounds error: for the package's scans of the kernel's
    variables (a view kept in one is checked where the kernel uses it, under that call's mask)."""
    return _ST.__get__(v)


class Unbounded(NkiTensor):
    """A view whose nl.arange index expression reaches outside its dim (`x[t * 128 + i_p, i_f]` on the tail
    tile of a [200, 64] tensor): legal only under a mask that bounds it (NKI's tile masking). A call's mask
    makes the bounded view of it (bounded(), _lower.apply_mask); any other use of it reads `.st` and is the
    out-of-bounds error at that kernel line."""

    __slots__ = ("unbounded", "expr_loc")

    @staticmethod
    def of(base, boff, dims, pd, p0, vars, unbounded):  # noqa: A002
        v = object.__new__(Unbounded)
        _ST.__set__(v, base.st)
        v.dtype, v.boff, v.dims, v.pd, v.p0, v.vars = base.dtype, boff, dims, pd, p0, vars
        v._rect = v._bv = None
        v.unbounded = unbounded
        v.expr_loc = caller_loc()
        return v

    def _error(self):
        d, e, size, held = self.unbounded[0]
        if type(e) is _HeldPast or type(e) is _SlicePast:
            return e.error
        lo, hi = e.value_range()
        st = _ST.__get__(self)
        at = f" (the index at {self.expr_loc})" if self.expr_loc and self.expr_loc != caller_loc() else ""
        if held is not None:
            a, loc = held
            return _lower().held_only(NkiTensor.whole(st), d, lo + a, hi + a + 1, a, size, loc,
                                      f"index expression{at} reads", "mask this call to keep it inside, or that "
                                      "call as widely")
        return NkiError(f"index expression on dim {d} covers [{lo}, {hi}], outside [0, {size}) ("
                        f"{_tensor_words(st)}){at}: a mask= on this call that keeps it inside "
                        f"(e.g. mask=(index < {size})) is NKI's way to access a partial tile")

    @property
    def st(self):
        raise self._error()

    def slices_past(self):
        """Whether every entry is a slice past an HBM tensor's end (_SlicePast): the view is then a tile for a
        mask's cut (_lower.apply_mask), checked inside the tensor after it."""
        return all(type(u[1]) is _SlicePast for u in self.unbounded)

    def unchecked(self):
        """The view as an ordinary one, for a call whose mask selects nothing (it records no instruction)."""
        return NkiTensor(_ST.__get__(self), self.dtype, self.boff, self.dims, self.pd, self.p0, self.vars)

    def __repr__(self):
        return f"<unbounded view of {_ST.__get__(self)!r}>"

    def bounded(self, bounds):
        """The view under the mask `bounds` ({IndexVar: (lo, hi)}, hi exclusive, each non-empty): its dims
        cut to the masked-in ranges; NkiError if an index is still outside its dim there."""
        for d, e, size, held in self.unbounded:
            if type(e) is _HeldPast or type(e) is _SlicePast:
                raise e.error  # an integer or slice: no mask variable bounds it
            lo = hi = e.const
            for var, k in e.terms.items():
                a, b = bounds.get(var, (0, var.size))
                a, b = k * (var.start + a), k * (var.start + b - 1)
                lo += min(a, b)
                hi += max(a, b)
            if (lo < 0 or hi >= size) and held is not None:
                whole = NkiTensor.whole(_ST.__get__(self))
                raise _lower().held_only(whole, d, lo + held[0], hi + held[0] + 1, held[0], size, held[1])
            if lo < 0 or hi >= size:
                raise NkiError(f"index expression on dim {d} covers [{lo}, {hi}] under the mask, outside "
                               f"[0, {size}) ({_tensor_words(_ST.__get__(self))})")
        plain = NkiTensor(_ST.__get__(self), self.dtype, self.boff, self.dims, self.pd, self.p0, self.vars)
        idx = tuple(slice(*bounds[var]) if var is not None and var in bounds else slice(None)
                    for var in self.vars)
        return plain.index(idx)


def _tensor_words(st):
    """The tensor an out-of-bounds index expression names: an HBM tensor by its name (`tensor 'x' [200, 64]`);
    one without (a direct allocation's, an on-chip tile) as messages name tiles (label), not 'None'."""
    if st.space == HBM and st.name:
        return f"tensor {st.name!r} {list(st.shape)}"
    return st.label()


# _FREE_KEPT: an on-chip tile indexed with a slice of partitions and an integer on each free dim (`t[0:64, 0]`,
# flash attention's `l_buffer[:, i]` of a (par_dim(128), n) tile) keeps a size-1 free dim: [64, 1], as the
# arange form `t[nl.arange(64)[:, None], 0]` is. NKI's tiles have a partition dim and at least one free dim
# (err_1d_arange_not_supported gives the two forms as the same tile). An integer on a free dim beside a free
# slice drops its dim as in NumPy (`t[:, 0, :]` of [P, A, B] is [P, B]); HBM views keep NumPy's rule.


# _PARTITION_KEPT: an on-chip tile indexed with an integer on its partition dim (`t[3, :]`, no index expressions)
# keeps a partition dim of size 1: [1, 64], the tile of one partition that `t[3, i_f]` is (NKI's
# err_1d_arange_not_supported: a tile's index has at least two dims, to match SBUF / PSUM). An engine call reads
# it as that one partition; a DMA copies it to or from a 1-D HBM region of as many elements (same_layout).


def _whole(v, what, shown):
    """v as an int: an integer (NumPy's too) or a float of an integral value; NkiError for any other number (a
    step, count or offset of 1.5 was truncated to 1, silently). TypeError for what is no number."""
    c = _const(v)
    if c is not None:
        return c
    if isinstance(v, (list, tuple, str)) or v is None:
        raise TypeError(v)
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise TypeError(v) from None
    if not math.isfinite(f) or f != int(f):
        head = f"{what} {shown!r}: {v!r}" if shown is not v else f"{what} {v!r}"
        raise NkiError(f"{head} is not an integer (steps, counts and offsets count elements)")
    return int(f)


def _past_end(e, size):
    """(start, stop, 1) of a slice `e` with step 1 that starts inside a dim of `size` and stops past its end;
    None for any other slice."""
    step = 1 if e.step is None else _const(e.step)
    start = 0 if e.start is None else _const(e.start)
    stop = None if e.stop is None else _const(e.stop)
    if step == 1 and start is not None and stop is not None and 0 <= start < size < stop:
        return start, stop, 1
    return None


class _SlicePast:
    """An Unbounded view's entry for a slice of an HBM tensor past its end (_past_end): `error`, the slice's
    out-of-bounds error, raised by any use of the view but a call whose mask keeps it inside; `start` and `size`,
    the slice's first index and its dim's size (_lower.apply_mask checks the masked-in cut)."""

    __slots__ = ("error", "start", "size")

    def __init__(self, error, start, size):
        self.error, self.start, self.size = error, start, size


class _HeldPast:
    """An Unbounded view's entry for an integer or slice index past the part a masked call's result holds
    (_held_index): `error`, the looser-mask error, raised by any use of the view but a call whose mask selects
    nothing."""

    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


def _fmt_slice(e):
    return f"{'' if e.start is None else e.start}:{'' if e.stop is None else e.stop}" + (
        "" if e.step is None else f":{e.step}")


def _check_slice(e, size, d, shape):
    """(start, stop, step) of slice e of a dim of `size`, NumPy's negative indices counted from the end; a
    negative step walks from start (default: the last element) down to stop (exclusive; default: past the
    first). NkiError for bounds outside the dim (NumPy would clip them: a kernel's slice outside its tensor
    is a bug here)."""
    step = 1 if e.step is None else _const(e.step)
    start = e.start if e.start is None else _const(e.start)
    stop = e.stop if e.stop is None else _const(e.stop)
    if step is None or (e.start is not None and start is None) or (e.stop is not None and stop is None):
        raise NkiError(f"slice {e!r} of dim {d}: bounds must be integers")
    if step == 0:
        raise NkiError(f"slice {_fmt_slice(e)} of dim {d}: step cannot be zero")
    if start is not None and start < 0:
        start += size
    if stop is not None and stop < 0:
        stop += size
    if step > 0:
        start = 0 if start is None else start
        stop = size if stop is None else stop
        ok = 0 <= start <= size and 0 <= stop <= size
    else:
        start = size - 1 if start is None else start
        stop = -1 if stop is None else stop
        ok = 0 <= start < size and -1 <= stop < size
    if not ok:
        raise NkiError(f"slice {_fmt_slice(e)} is out of bounds for dim {d} of size {size} "
                       f"(tensor {list(shape)})")
    return start, stop, step


def _reshape_dims(dims, new_shape, old_full, new_full):
    """NumPy's no-copy reshape over strided dims: groups of old dims whose product matches a group of new dims
    must be contiguous among themselves; NkiError otherwise."""
    old = [(s, n) for s, n in dims if n != 1]
    out = []
    i = j = 0
    new_shape = list(new_shape)
    while j < len(new_shape):
        if new_shape[j] == 1:
            out.append((0, 1))
            j += 1
            continue
        if i >= len(old):
            raise NkiError(f"reshape: {list(old_full)} -> {list(new_full)} is not possible without a copy")
        # Gather old dims and new dims until the products match.
        ob, nb = [old[i]], [new_shape[j]]
        po, pn = old[i][1], new_shape[j]
        i += 1
        j += 1
        while po != pn:
            if po < pn:
                if i >= len(old):
                    raise NkiError(f"reshape: {list(old_full)} -> {list(new_full)} is not possible")
                ob.append(old[i])
                po *= old[i][1]
                i += 1
            else:
                if j >= len(new_shape):
                    raise NkiError(f"reshape: {list(old_full)} -> {list(new_full)} is not possible")
                nb.append(new_shape[j])
                pn *= new_shape[j]
                j += 1
        for k in range(len(ob) - 1):
            if ob[k][0] != ob[k + 1][0] * ob[k + 1][1]:
                raise NkiError(f"reshape: {list(old_full)} -> {list(new_full)} needs a copy (the dims it merges "
                               "are not contiguous)")
        inner = ob[-1][0]
        strides = []
        s = inner
        for n in reversed(nb):
            strides.append(s)
            s *= n
        for n, st in zip(nb, reversed(strides)):
            out.append((st, n))
    # Trailing 1-sized new dims were handled in the loop; leftover old dims must not exist.
    if i != len(old):
        raise NkiError(f"reshape: {list(old_full)} -> {list(new_full)} is not possible")
    return tuple(out)


class LoadPart(NkiTensor):
    """A masked nl.load's result: the view of the masked-in part of its tile, which has the index's shape
    `space`. The kernel sees that shape, as NKI's tile has it (so a tile it sizes from `.shape` matches what
    its indices address: the rotary tutorial's tail tile); the package's own code works on the part."""

    __slots__ = ("space",)

    @staticmethod
    def of(v, space):
        p = LoadPart(v.st, v.dtype, v.boff, v.dims, v.pd, v.p0, v.vars)
        p.space = space
        return p

    @property
    def shape(self):
        if _in_package(sys._getframe(1).f_code.co_filename):
            return tuple([d[1] for d in self.dims])
        return self.space


def _called():
    """The nl.* / nisa.* call the kernel made that is running now (the outermost package frame), as the kernel
    wrote it."""
    from . import _trace

    f, call = sys._getframe(1), None
    while f is not None and _in_package(f.f_code.co_filename):
        if f.f_code is _trace.WRAPPER_CODE:  # (nl's and nisa's wrapper, _void.wrapper: it names the call)
            call = f.f_locals["call"]
        else:
            mod, name = os.path.basename(f.f_code.co_filename), f.f_code.co_name
            call = {"language.py": "nl.", "isa.py": "nisa."}.get(mod, "nki ") + name
        f = f.f_back
    return call


class BlockTensor:
    """A PSUM tensor with block dims before its partition dim, (B..., P, F...): each block is a tile of its
    own (at most one 2 KiB bank per partition), allocated by itself as the compiler does, so blocks alive at
    different times share banks. Index it by its block indices first: t[i, j] (or t[i, j, :, :]) is one
    block's tile. An SBUF tensor with block dims declared with a direct allocator (`direct`,
    nki.compiler.sbuf.mod_alloc) is one too: each block at the place the allocator gives it (_direct.py)."""

    def __init__(self, trace, name, dtype, shape, pdim, loc, site, space=PSUM, direct=None):
        self.trace, self.name, self.dtype, self.shape, self.pdim = trace, name, dtype, tuple(shape), pdim
        self.loc, self.site = loc, site
        self.space, self.direct = space, direct
        self.outer = getattr(trace, "outer", None)  # declared there: its blocks' scope iteration
        self.scope = getattr(trace, "scope", ())
        self.blocks = {}

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def buffer(self):
        from . import language as nl

        return self.direct if self.direct is not None else nl.psum

    def _block(self, key):
        st = self.blocks.get(key)
        if st is None:
            st = Storage(self.trace, self.name, self.space, self.dtype, self.shape[self.pdim:], 0, loc=self.loc)
            st.site = self.site
            if self.direct is not None:
                st.direct = self.direct.place(key, st, self)
            st.outer = self.outer
            st.scope = self.scope
            st.role = "block"  # (one declaration's tiles: _alloc splits no runs of them)
            self.blocks[key] = st
        return NkiTensor.whole(st)

    def __getitem__(self, idx):
        if not isinstance(idx, tuple):
            idx = (idx,)
        b = []
        for d in range(self.pdim):
            e = idx[d] if d < len(idx) else slice(None)
            if isinstance(e, slice):
                r = range(*e.indices(self.shape[d]))
                if len(r) != 1:
                    from ._errors import unsupported

                    unsupported(f"a view across several blocks of a {self.space.upper()} tensor",
                                "each block is its own tile; index one block at a time")
                e = r[0]
            try:
                e = int(e)
            except TypeError:
                raise NkiError(f"{self.space.upper()} block index {e!r} must be an integer") from None
            if e < 0:
                e += self.shape[d]
            if not 0 <= e < self.shape[d]:
                raise NkiError(f"block index {e} out of bounds for dim {d} of size {self.shape[d]}")
            b.append(e)
        v = self._block(tuple(b))
        rest = idx[self.pdim:]
        return v.index(rest) if rest else v

    def __setitem__(self, idx, value):
        from . import _lower

        _lower.assign(self[idx], value)

    def __getattr__(self, name):
        from ._errors import unsupported_attribute

        if name.startswith("_"):
            raise unsupported_attribute(type(self), name)
        if _in_package(sys._getframe(1).f_code.co_filename):
            raise self.whole_error()  # a call given the tensor, asking for what a tile has
        raise self.whole_error(f"nki.language.NkiTensor.{name} of")

    def whole_error(self, what=None):
        """NkiUnsupported for the call the kernel is making (or `what`) given this whole tensor, not a block."""
        from ._errors import UnsupportedName

        what = what or f"{_called()}: the whole of"
        return UnsupportedName(f"{what} a {self.space.upper()} tensor with block dims {list(self.shape)} is not modelled by "
                               "trnsim: each block is a tile of its own; index one (t[i]) first")

    def __repr__(self):
        return f"BlockTensor({self.name}, shape={list(self.shape)}, dtype={self.dtype.name}, {self.space})"
