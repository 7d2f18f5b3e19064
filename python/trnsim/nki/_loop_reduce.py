"""nl.loop_reduce: a reduction across loop iterations whose destination tile is also an input of the op.

NKI's page (nki.language.loop_reduce) gives its meaning as code: `b = nl.loop_reduce(a, op, ...)` in a loop is
`b = nisa.tensor_tensor(data1=b, data2=a, op=op, dtype=...)`. Both forms lower to that one instruction,
tensor_tensor(dst, data1=dst, data2=x, op) (Vector engine; GpSimd for int32 arithmetic, as
nki.isa.tensor_tensor's default): the page's rebinding form `b = nl.loop_reduce(x, ...)` takes as dst the tile
the name `b` holds when the call runs (read from the kernel's frame, the statement's one target name) and
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
    name = _rebound_name(loc)
    if name is not None:
        # The page's form: `b = nl.loop_reduce(x, ...)` reduces into the tile b holds now and gives it back.
        frame = user_frame()
        acc = frame.f_locals.get(name, frame.f_globals.get(name)) if frame is not None else None
        if not isinstance(acc, NkiTensor):
            raise NkiError(f"{CALL}: `{name} = nl.loop_reduce(...)` reduces into the tile `{name}` holds when the "
                           f"call runs, but `{name}` holds {'no value' if acc is None else type(acc).__name__}: "
                           f"set it to the accumulating tile before the loop (the page: `{name} = nl.zeros(...)`), "
                           f"or assign into a tile: `acc[...] = nl.loop_reduce(x, op, loop_indices=[i])`", loc)
        r.into(acc)
        return acc
    _trace.current(CALL).__dict__.setdefault("_loop_reduces", []).append(r)
    return r


def _rebound_name(loc):
    """The name `b` when the kernel's statement at `loc` is `b = nl.loop_reduce(...)` (one plain name assigned
    the call's value), else None."""
    import ast

    from ._tensor import _statement_at

    st = _statement_at(loc[0], loc[1]) if loc else None
    if not isinstance(st, ast.Assign) or len(st.targets) != 1 or not isinstance(st.targets[0], ast.Name):
        return None
    f = st.value.func if isinstance(st.value, ast.Call) else None
    if getattr(f, "attr", getattr(f, "id", None)) != "loop_reduce":
        return None
    return st.targets[0].id


def check_assigned(trace):
    """After the kernel returned: NkiError for a loop_reduce whose result no assignment took (its reduction
    would be lost)."""
    for r in trace.__dict__.pop("_loop_reduces", ()):
        if not r.done:
            raise r.unassigned()
