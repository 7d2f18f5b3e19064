"""Index expressions of NKI's older indexing style: nl.arange / nl.mgrid produce affine expressions of index
variables, which kernels combine with integers (`k * 128 + i_p`) and use as tensor indices; comparisons of
them make masks.

An index variable is one dimension of the broadcast index space: `nl.arange(n)[:, None]` is a variable of
size n on axis 0 of a 2-D index space. An IndexExpr is const + sum(coef * var). Indexing a tensor with such
expressions gives a view whose dims are the variables (in axis order), each with the stride its coefficients
give: strided, split or permuted access with no copy.
"""

from ._errors import NkiError


class IndexVar:
    __slots__ = ("size", "axis", "ndim", "start", "grid")

    def __init__(self, size, axis, ndim, start=0, grid=None):
        self.size = size
        self.axis = axis  # position in the broadcast index space (of `ndim` axes)
        self.ndim = ndim
        self.start = start
        # nl.mgrid's: the whole grid's shape, of whose axes each of its expressions names one (an index of
        # them has a dim per axis it uses: _tensor._grid_dims); an nl.arange's: None (its shape is 1 on every
        # axis but its own, NumPy's open grid)
        self.grid = grid

    def __repr__(self):
        return f"i{self.axis}[{self.size}]"


def _const(x):
    if isinstance(x, bool):
        return int(x)
    if isinstance(x, int):
        return x
    try:
        import numpy as np

        if isinstance(x, np.integer):
            return int(x)
    except ImportError:  # pragma: no cover
        pass
    return None


class IndexExpr:
    """const + sum(coef * var): the value of an index at each point of the index space."""

    __slots__ = ("terms", "const", "zero")

    def __init__(self, terms, const=0, zero=()):
        self.terms = terms  # {IndexVar: int coefficient}
        self.const = const
        # Variables whose coefficient is 0 (`i_p + 0 * i_f`): no term, but an axis of the expression's shape, as
        # NumPy's broadcast keeps it (tester23ad F5: nisa.iota(i_p + 0 * i_f) is [128, 8])
        self.zero = zero

    def _vars(self):
        return list(self.terms) + [v for v in self.zero if v not in self.terms]

    @property
    def ndim(self):
        return max((v.ndim for v in self._vars()), default=0)

    @property
    def shape(self):
        n = self.ndim
        s = [1] * n
        for v in self._vars():
            s[v.axis + (n - v.ndim)] = v.size
        return tuple(s)

    def __getitem__(self, idx):
        # x[:, None] / x[None, :]: place a 1-D expression on an axis of a 2-D index space.
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(self.terms) != 1 or self.ndim != 1:
            raise NkiError("only a 1-D nl.arange can be given new axes ([:, None] or [None, :])")
        (v, c), = self.terms.items()
        ndim = len(idx)
        axes = [i for i, s in enumerate(idx) if isinstance(s, slice)]
        if len(axes) != 1 or any(s is not None for s in idx if not isinstance(s, slice)):
            raise NkiError(f"unsupported index-expression subscript {idx!r}")
        nv = IndexVar(v.size, axes[0], ndim, v.start)
        return IndexExpr({nv: c}, self.const)

    # Affine arithmetic with integers.
    def _combine(self, other, sign):
        c = _const(other)
        if c is not None:
            return IndexExpr(dict(self.terms), self.const + sign * c, self.zero)
        if isinstance(other, IndexExpr):
            terms = dict(self.terms)
            for v, k in other.terms.items():
                terms[v] = terms.get(v, 0) + sign * k
            zero = self.zero + other.zero + tuple(v for v, k in terms.items() if not k)
            return IndexExpr({v: k for v, k in terms.items() if k}, self.const + sign * other.const, zero)
        return NotImplemented

    def __add__(self, other):
        return self._combine(other, 1)

    __radd__ = __add__

    def __sub__(self, other):
        return self._combine(other, -1)

    def __rsub__(self, other):
        neg = IndexExpr({v: -k for v, k in self.terms.items()}, -self.const, self.zero)
        return neg._combine(other, 1)

    def __neg__(self):
        return IndexExpr({v: -k for v, k in self.terms.items()}, -self.const, self.zero)

    def __mul__(self, other):
        c = _const(other)
        if c is None:
            raise NkiError("index expressions can only be multiplied by integers (affine indexing)")
        zero = self.zero + (tuple(self.terms) if not c else ())
        return IndexExpr({v: k * c for v, k in self.terms.items() if k * c}, self.const * c, zero)

    __rmul__ = __mul__

    def _nonaffine(self, *_):
        raise NkiError("index expressions support +, - and * by integers only (affine indexing); "
                       "// and % of nl.arange are not modelled")

    __floordiv__ = __mod__ = __truediv__ = __rfloordiv__ = __rmod__ = _nonaffine

    # Comparisons make masks (nki masking: a compile-time predicate on index expressions).
    def _cmp(self, other, op):
        c = _const(other)
        if isinstance(other, IndexExpr):
            return AffinePredicate(self - other, op)  # `i_q >= i_k`: nisa.affine_select's earlier `pred`
        if c is None:
            raise NkiError(f"a mask compares an index expression with an integer, got {other!r} (a comparison of "
                           "two index expressions, a triangular mask, is not modelled)")
        if len(self.terms) > 1:
            p = AffinePredicate(self - c, op)  # `i_q - i_k >= 0`: the same predicate written around 0
            r = p.rectangle()
            return p if r is None else r
        return Mask.of(self, op, c)

    def __lt__(self, o):
        return self._cmp(o, "<")

    def __le__(self, o):
        return self._cmp(o, "<=")

    def __gt__(self, o):
        return self._cmp(o, ">")

    def __ge__(self, o):
        return self._cmp(o, ">=")

    def __eq__(self, o):
        if _const(o) is None and not isinstance(o, IndexExpr):
            return NotImplemented
        raise NkiError("a mask compares an index expression with <, <=, > or >= (== and != are not modelled)")

    __ne__ = __eq__

    def __hash__(self):
        return id(self)

    def __repr__(self):
        # e.g. "-i1[16] + 15" for 15 - i_f, "2*i0[64] + 128" (a variable is named by its axis and size)
        out = ""
        for v, k in self.terms.items():
            mag = "" if abs(k) == 1 else f"{abs(k)}*"
            out += (f"{'-' if k < 0 else ''}{mag}{v}" if not out else f" {'-' if k < 0 else '+'} {mag}{v}")
        if self.const or not out:
            out = f"{self.const}" if not out else f"{out} {'-' if self.const < 0 else '+'} {abs(self.const)}"
        return out

    def value_range(self):
        lo = hi = self.const
        for v, k in self.terms.items():
            a, b = k * v.start, k * (v.start + v.size - 1)
            lo += min(a, b)
            hi += max(a, b)
        return lo, hi


def arange(*args):
    """nl.arange(stop) / nl.arange(start, stop): a 1-D index variable."""
    if len(args) == 1:
        start, stop = 0, args[0]
    elif len(args) == 2:
        start, stop = args
    else:
        raise NkiError("nl.arange takes (stop) or (start, stop)")
    start, stop = _const(start), _const(stop)
    if start is None or stop is None or stop <= start:
        raise NkiError(f"nl.arange needs integer bounds with start < stop, got {args!r}")
    v = IndexVar(stop - start, 0, 1, 0)
    return IndexExpr({v: 1}, start)


class _MGrid:
    """nl.mgrid[0:128, 0:512]: one index expression per axis of the grid, unpacked (`i_p, i_f = nl.mgrid[...]`)
    or named: grid.p, grid.x, grid.y, grid.z are axes 0, 1, 2, 3."""

    def __getitem__(self, idx):
        if not isinstance(idx, tuple):
            idx = (idx,)
        n = len(idx)
        out = []
        for axis, s in enumerate(idx):
            if not isinstance(s, slice) or s.stop is None or (s.step not in (None, 1)):
                raise NkiError("nl.mgrid takes start:stop slices with step 1")
            start = 0 if s.start is None else _const(s.start)
            stop = _const(s.stop)
            if start is None or stop is None:
                bad = s.start if start is None else s.stop
                raise NkiError(f"nl.mgrid: bound {bad!r} of axis {axis} ({s.start if s.start is not None else ''}:"
                               f"{s.stop}) is not an integer: a grid's slices have integer bounds")
            if stop <= start:
                raise NkiError(f"nl.mgrid: empty range {start}:{stop}")
            out.append((stop - start, start))
        grid = tuple(size for size, _ in out) if n > 1 else None
        out = [IndexExpr({IndexVar(size, axis, n, 0, grid): 1}, start) for axis, (size, start) in enumerate(out)]
        return out[0] if n == 1 else _Grid(out)


class _Grid(tuple):
    """nl.mgrid's result: one index expression per axis, unpacked (`i_p, i_f = nl.mgrid[...]`) or named as
    NKI's kernels do: p, x, y, z are axes 0, 1, 2, 3 (nki-samples' vision kernels use all four names)."""

    __slots__ = ()

    _NAMES = "pxyz"

    def __getattr__(self, name):
        axis = self._NAMES.find(name) if len(name) == 1 else -1
        if axis < 0:
            if name.startswith("_"):
                raise AttributeError(name)
            raise GridAxisError(f"nl.mgrid: a grid's axes are named p, x, y, z (axes 0-3), not '{name}'")
        if axis >= len(self):
            raise GridAxisError(f"nl.mgrid: grid.{name} is axis {axis}, but this grid has {len(self)} axes "
                                f"({', '.join(self._NAMES[:len(self)])})")
        return self[axis]


class GridAxisError(NkiError, AttributeError):
    """An axis name a grid does not have: NkiError at the kernel line, and an AttributeError for hasattr()."""


mgrid = _MGrid()


class AffinePredicate:
    """`expr <op> 0` from comparing two index expressions (`i_q >= i_k`): the predicate of nisa.affine_select's
    earlier calling style, evaluated per element by the instruction. It is not a mask (masks bound one
    variable at a time)."""

    __slots__ = ("expr", "op")

    def __init__(self, expr, op):
        self.expr = expr
        self.op = op

    def _why(self):
        return (f"a mask bound of several nl.arange index variables must hold on a rectangle of them (everywhere, "
                f"nowhere, or as a bound on one variable, e.g. i_p < n), got {self.expr!r} {self.op} 0: only "
                "rectangular masks (a range per variable) are modelled; a comparison of several index variables "
                "that cuts a triangle is nisa.affine_select's predicate")

    def mask_error(self):
        return NkiError(f"mask: {self._why()}")

    @staticmethod
    def constant(holds, over=()):
        """A predicate true everywhere (`-1 < 0`) or nowhere (`0 < 0`): affine_select's pred when it is constant
        over the tile (a Python bool, or a comparison true for every index or none); `over`: the index variables
        it compared, of coefficient 0 (their axes still have to match the tile's)."""
        return AffinePredicate(IndexExpr({}, -1 if holds else 0, tuple(over)), "<")

    def rectangle(self):
        """The predicate as a mask when it is one, evaluated over the variables' whole ranges (they are known
        while tracing): True where it holds everywhere (nki-samples' MaxPool2D without padding: `2*i1 + i3 >=
        0`), False where nowhere, a bound on one variable x where, for every value of x, it holds for all values
        of the others or for none (`512*ix + iy < n` with iy over [0, 512) and n a multiple of 512: whole rows
        of ix); else None (a triangular predicate: nisa.affine_select's). Integers: `e <op> 0` as `f < 0`."""
        e = self.expr
        f = {"<": e, "<=": e - 1, ">": -e, ">=": -e - 1}[self.op]
        lo, hi = f.value_range()
        if hi < 0:
            return True
        if lo >= 0:
            return False
        for v, k in f.terms.items():
            rest = IndexExpr({w: c for w, c in f.terms.items() if w is not v}, f.const)
            rlo, rhi = rest.value_range()
            allowed = []
            for pos in range(v.size):
                x = k * (v.start + pos)
                if x + rhi < 0:
                    allowed.append(pos)
                elif x + rlo < 0:
                    break  # holds for some values of the others only
            else:
                if allowed and allowed[-1] - allowed[0] + 1 == len(allowed):
                    return Mask({v: (allowed[0], allowed[-1] + 1)})
        return None

    def __and__(self, other):
        # Combined into a mask (MaxPool2D's padding bounds `(2*i1 + i3 >= 0) & (...)`, where they cut the
        # window): the call given it as mask= names itself and this bound; affine_select's pred, one comparison,
        # refuses it.
        return UnmodelledMask(self._why())

    __rand__ = __or__ = __ror__ = __and__


class UnmodelledMask:
    """A mask trnsim does not model (`(i_p < n) | (i_f < m)`): the call given it as mask= raises `why`."""

    __slots__ = ("why",)

    def __init__(self, why):
        self.why = why

    def error(self):
        return NkiError(f"mask: {self.why}")

    def __and__(self, other):
        return self

    __rand__ = __or__ = __ror__ = __and__


def _is_bool(x):
    if isinstance(x, bool):
        return True
    try:
        import numpy as np

        return isinstance(x, np.bool_)
    except ImportError:  # pragma: no cover
        return False


class Mask:
    """A conjunction of bounds on index variables: `(i_p < n) & (i_f >= 4)`. Applied to an instruction it
    restricts each variable to the range the bounds allow (the instruction works on a smaller region)."""

    __slots__ = ("bounds",)

    def __init__(self, bounds):
        self.bounds = bounds  # {IndexVar: (lo, hi)} of allowed variable values, hi exclusive

    @staticmethod
    def of(expr, op, c):
        if len(expr.terms) != 1:
            raise NkiError(f"a mask bound must involve one nl.arange index variable (e.g. i_p < n), got "
                           f"{expr!r} {op} {c}: only rectangular masks (a range per variable) are modelled")
        (v, k), = expr.terms.items()
        # k * v + const <op> c, in integers, as k' * v < u
        u = c - expr.const
        if op == "<":
            kk, u = k, u
        elif op == "<=":
            kk, u = k, u + 1
        elif op == ">":
            kk, u = -k, -u
        else:  # ">="
            kk, u = -k, -u + 1
        lo, hi = 0, v.size
        if kk > 0:
            hi = min(hi, -(-u // kk))
        else:
            lo = max(lo, u // kk + 1)
        return Mask({v: (lo, hi)})

    def as_predicate(self):
        """The mask of one comparison of one variable (`i_q > 5`, `i * 128 + i_p < n`) as affine_select's
        predicate, constant (AffinePredicate.constant) where it holds for every value of the variable or for
        none (a full tile, or one past the end, of a tail-padding loop); bounds on several variables, or two
        on one, are an error: NKI's pred is one comparison, not masks combined with &."""
        if self.empty():
            return AffinePredicate.constant(False, self.bounds)
        if len(self.bounds) == 1:
            (v, (lo, hi)), = self.bounds.items()
            e = IndexExpr({v: 1}, 0)
            if lo <= 0 and hi >= v.size:
                return AffinePredicate.constant(True, self.bounds)
            if lo > 0 and hi >= v.size:
                return AffinePredicate(e - lo, ">=")
            if lo <= 0 and hi < v.size:
                return AffinePredicate(e - hi, "<")
        raise NkiError(f"affine_select: pred must be one comparison of nl.arange expressions (NKI does not combine "
                       f"them with & or |), got a mask bounding {self._described()}")

    def _described(self):
        return ", ".join(f"{v!r} to [{max(lo, 0)}, {min(hi, v.size)})" for v, (lo, hi) in self.bounds.items())

    def empty(self):
        """True if some variable has no allowed value: NKI skips the instruction."""
        return any(hi <= lo for lo, hi in self.bounds.values())

    def __and__(self, other):
        if isinstance(other, (UnmodelledMask, AffinePredicate)):
            return other & self
        if _is_bool(other):
            # A bound on loop indices alone (`(i * 128 < S)`, nl.program_id too) is a Python bool while
            # tracing: True bounds nothing, False leaves no allowed value (the call makes no instruction).
            if other:
                return self
            b = dict(self.bounds)
            v = next(iter(b))
            b[v] = (b[v][0], b[v][0])
            return Mask(b)
        if not isinstance(other, Mask):
            raise NkiError(f"masks combine with & only: the other operand of & is {type(other).__name__} "
                           f"{other!r}, not a comparison of an index expression with an integer")
        b = dict(self.bounds)
        for v, (lo, hi) in other.bounds.items():
            if v in b:
                lo, hi = max(lo, b[v][0]), min(hi, b[v][1])
            b[v] = (lo, hi)
        return Mask(b)

    __rand__ = __and__

    def __bool__(self):
        raise NkiError("a mask is not a Python truth value: combine predicates with & (e.g. (i_p < n) & (i_f < m)), "
                       "not `and` or a chained comparison (0 <= i_p < n)")

    def __or__(self, other):
        # An error when a call applies it (which then names the call), not where the mask= argument is built.
        return UnmodelledMask("masks with | are not modelled (only conjunctions of bounds, combined with &)")

    __ror__ = __or__

    def __invert__(self):
        # NKI's masks are comparisons combined with & ("NKI API Masking"): no negation.
        raise NkiError("a mask cannot be negated with ~ (NKI's masks are comparisons of index expressions "
                       "combined with &): write the opposite comparison instead, e.g. (i_p >= 5) for ~(i_p < 5)")
