"""nl.loop_reduce: a reduction across loop iterations whose destination tile is also an input of the op.

NKI's page (nki.language.loop_reduce) gives its meaning as code: `b = nl.loop_reduce(a, op, ...)` in a loop is
`b = nisa.tensor_tensor(data1=b, data2=a, op=op, dtype=...)`. A trace cannot see which tile `b` was before a
Python rebinding, so trnsim takes the destination from the assignment `dst[...] = nl.loop_reduce(x, ...)` and
lowers it to that one instruction: tensor_tensor(dst, data1=dst, data2=x, op) (Vector engine; GpSimd for
int32 arithmetic, as nki.isa.tensor_tensor's default). `loop_indices` is the compiler's loop-optimisation hint:
checked, no effect. The call's result is a pending reduction that only an assignment into a tile completes."""

from . import _lower, _ops, _trace
from ._errors import NkiError, caller_loc
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
        (dst, x), box = _lower.operand_region(self.mask, (dst, self.x))
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
    _trace.current(CALL).__dict__.setdefault("_loop_reduces", []).append(r)
    return r


def check_assigned(trace):
    """After the kernel returned: NkiError for a loop_reduce whose result no assignment took (its reduction
    would be lost)."""
    for r in trace.__dict__.pop("_loop_reduces", ()):
        if not r.done:
            raise r.unassigned()
