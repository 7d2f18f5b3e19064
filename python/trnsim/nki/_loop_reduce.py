"""nl.loop_reduce: a reduction across loop iterations whose destination tile is also an input of the op.

NKI's page (nki.language.loop_reduce) gives its meaning as code: `b = nl.loop_reduce(a, op, ...)` in a loop is
`b = nisa.tensor_tensor(data1=b, data2=a, op=op, dtype=...)`. Both forms lower to that one instruction,
tensor_tensor(dst, data1=dst, data2=x, op) (Vector engine; GpSimd for int32 arithmetic, as
nki.isa.tensor_tensor's default): the page's rebinding form `b = nl.loop_reduce(x, ...)` takes as dst the tile
the name `b` holds when the call runs (read from the kernel's frame, the statement's target names) and
returns it; `dst[...] = nl.loop_reduce(x, ...)` is a pending reduction that the assignment completes.
`loop_indices` is the compiler's loop-optimisation hint: checked, no effect."""

from . import _lower, _ops, _trace
from ._errors import NkiError, caller_loc, user_frame
from ._tensor import HBM, SBUF, NkiTensor

CALL = "nl.loop_reduce"


class LoopReduce:
    """What `nl.loop_reduce(x, ...)` returns: done by `dst[...] = it` (_lower.assign calls into())."""

    __slots__ = ("x", "alu", "dtype", "mask", "loc", "done")

    def __init__(self, x, alu, dtype, mask, loc):
        self.x, self.alu, self.dtype, self.mask, self.loc = x, alu, dtype, mask, loc
        self.done = False

    def into(self, dst):
        self.done = True
        if dst.st.space == HBM:
            raise NkiError(f"{CALL}: its destination {dst.st.label(at=False)} is in HBM; the reduction runs on "
                           f"an engine: accumulate into an SBUF tile and store that", self.loc)
        if self.mask is not None:
            views = _lower.apply_mask(self.mask, (dst, self.x), skip=True)
            if views is None:
                return  # (the mask selects nothing: no instruction, dst keeps its value)
            dst, x = views
        else:
            (dst, x), _ = _lower.operand_region(None, (dst, self.x))
        if tuple(dst.shape) != tuple(x.shape):
            raise NkiError(f"{CALL}: x {list(x.shape)} and its destination {list(dst.shape)} differ in shape",
                           self.loc)
        if self.dtype is None or self.dtype == dst.dtype:
            op = _ops.tensor_tensor(dst, dst, x, self.alu, loc=self.loc)
        else:
            # dtype= other than the destination's: the op's result in dtype, then the assignment's copy.
            tmp = _ops.new_tile(x.shape, self.dtype, SBUF, "loop_reduce")
            op = _ops.tensor_tensor(tmp, dst, x, self.alu, loc=self.loc)
            _ops.tensor_copy(dst, tmp, loc=self.loc)
        # Its read of dst carries a value across the loop's iterations, as the call declares (_loops._exempt).
        op.attrs["loop_reduce"] = dst.st

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise self.unassigned()

    def unassigned(self):
        return NkiError(f"{CALL}: its result must be assigned into the tile that accumulates (the destination "
                        f"is also the op's input): `acc[...] = nl.loop_reduce(x, op, loop_indices=[i])`, acc set "
                        f"before the loop", self.loc)


def _check_indices(loop_indices):
    items = loop_indices if isinstance(loop_indices, (list, tuple)) else [loop_indices]
    for i in items:
        if isinstance(i, bool) or not hasattr(i, "__index__"):
            raise NkiError(f"{CALL}: loop_indices holds {i!r:.40}; it takes loop indices (of nl.affine_range "
                           f"and the other ranges) or integers")


def loop_reduce(x, op, loop_indices, dtype, mask):
    from ._dtypes import as_dtype

    loc = caller_loc()
    if not isinstance(x, NkiTensor) or x.st.space == HBM:
        raise NkiError(f"{CALL}: x must be an SBUF or PSUM tile, got {x!r:.80}", loc)
    _check_indices(loop_indices)
    alu = _lower.alu_name(op, "nl.loop_reduce")
    r = LoopReduce(x, alu, None if dtype is None else as_dtype(dtype), mask, loc)
    names = _rebound_names(loc, r)
    if names:
        # The page's form: `b = nl.loop_reduce(x, ...)` reduces into the tile b holds now and gives it back.
        acc = _accumulator(names, loc)
        r.into(acc)
        return acc
    _trace.current(CALL).__dict__.setdefault("_loop_reduces", []).append(r)
    return r


def _accumulator(names, loc):
    """The tile the names of `b = nl.loop_reduce(...)` (`c = b = ...` too) hold when the call runs: one tile,
    which some of them may not hold yet (c on the first iteration)."""
    frame = user_frame()
    held = [frame.f_locals.get(n, frame.f_globals.get(n)) if frame is not None else None for n in names]
    tiles = {id(storage): t for t in held if isinstance(t, NkiTensor) for storage in [t.st]}
    name = names[-1]
    if len(tiles) == 1:
        return next(iter(tiles.values()))
    if len(tiles) > 1:
        raise NkiError(f"{CALL}: `{' = '.join(names)} = nl.loop_reduce(...)` reduces into the tile its names hold "
                       f"when the call runs, but they hold different tiles: assign it to one name", loc)
    acc = held[-1]
    raise NkiError(f"{CALL}: `{name} = nl.loop_reduce(...)` reduces into the tile `{name}` holds when the "
                   f"call runs, but `{name}` holds {'no value' if acc is None else type(acc).__name__}: "
                   f"set it to the accumulating tile before the loop (the page: `{name} = nl.zeros(...)`), "
                   f"or assign into a tile: `acc[...] = nl.loop_reduce(x, op, loop_indices=[i])`", loc)


def _rebound_names(loc, r):
    """The names `b` (`c`, ...) when the kernel's statement at `loc` is `b = nl.loop_reduce(...)`, `b: T =
    nl.loop_reduce(...)` or `c = b = nl.loop_reduce(...)`; None for `acc[...] = nl.loop_reduce(...)` of a
    tile acc (the assignment completes it) or when the statement cannot be read; r.unassigned() for any other
    use of the result, which would reach a later call as a value that is not a tile."""
    import ast

    from ._tensor import _statement_at

    st = _statement_at(loc[0], loc[1]) if loc else None
    if st is None:
        return None
    if isinstance(st, ast.Assign):
        targets = st.targets
    elif isinstance(st, ast.AnnAssign) and st.value is not None:
        targets = [st.target]
    else:
        targets = None
    f = st.value.func if targets and isinstance(st.value, ast.Call) else None
    if getattr(f, "attr", getattr(f, "id", None)) != "loop_reduce":
        raise r.unassigned()
    if all(isinstance(t, ast.Name) for t in targets):
        return [t.id for t in targets]
    if all(isinstance(t, ast.Subscript) and _holds_tile(t.value) for t in targets):
        return None
    raise r.unassigned()


def _holds_tile(node):
    """Whether the subscripted expression of `node[...] = nl.loop_reduce(...)` is a tile or a tensor with block
    dims whose item is one (a list item's assignment would store the pending reduction, not do it); True when
    it is not a plain name."""
    import ast

    from ._tensor import BlockTensor

    if not isinstance(node, ast.Name):
        return True
    frame = user_frame()
    if frame is None:
        return True
    v = frame.f_locals.get(node.id, frame.f_globals.get(node.id))
    return isinstance(v, (NkiTensor, BlockTensor))


def check_assigned(trace):
    """After the kernel returned: NkiError for a loop_reduce whose result no assignment took (its reduction
    would be lost)."""
    for r in trace.__dict__.pop("_loop_reduces", ()):
        if not r.done:
            raise r.unassigned()
