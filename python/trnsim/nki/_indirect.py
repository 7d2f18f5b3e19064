"""Tensor Indirection (NeuronCore-v4, `t.indirect(idx, num_elem=n)`), lowered onto instructions trnsim models.

The view [P, n] stands for columns of an SBUF tile t [P, F] at uint16 offsets read when the kernel runs: in the
partition group of partitions 16g .. 16g + 15, column i is t's column idx[16g + i % 16, i // 16] (NKI's tensor
indirection tutorial). An instruction reading the view reads a dense [P, n] temporary the lowering fills first
(a gather); an instruction writing it writes a dense temporary the lowering then writes into t's columns (a
scatter). The lowering, on the instruction's kernel line:
  offsets: one DMA per partition p (SBUF to SBUF) copies its group's [16, K] block of idx into row p of a [P, 16K]
           uint16 tile, column i = k * 16 + r; a Vector tensor_copy widens it to uint32;
  gather:  GpSimd nc_n_gather(dense, t, offsets) (an offset >= F is the simulator's run-time error);
  scatter: the same nc_n_gather into a scratch tile (only its range check is wanted), a GpSimd iota of column
           numbers, then for each i in order a Vector tensor_scalar (column == offset[p, i]) and a Vector select
           writing dense[:, i] to the matching column: a repeated offset keeps the last i's value.
"""

from . import _ops
from ._dtypes import as_dtype
from ._errors import NkiError, unsupported
from ._tensor import SBUF, NkiTensor

CALL = "nki.language.NkiTensor.indirect"
GROUP = 16

# The instruction (op name, as _ops records it) whose dst is an indirect view, and the scatter to run once that
# instruction is recorded (_ops.record calls flush()).
pending = None
_busy = False
# The instructions recorded otherwise than by _ops.record, which flushes a scatter: no indirect dst.
_NOT_RECORDED = ("nc_matmul", "nc_matmul_mx", "memset")


class IndirectView:
    """`t.indirect(idx, num_elem=n)`: a [P, n] operand of one instruction (see the module's docstring)."""

    def __init__(self, data, index, num_elem):
        self.data, self.index, self.num_elem = data, index, num_elem
        self.shape = (data.shape[0], num_elem)
        self.dtype = data.dtype
        self.ndim = 2

    def is_indirect(self):
        return True

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        _misuse(f"`.{name}` of it")

    def __getitem__(self, idx):
        _misuse("a slice or index of it")

    def __setitem__(self, idx, value):
        _misuse("an assignment into it")

    def _operator(self, *_):
        _misuse("an operator on it (`+`, `<`, ...)")

    for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
                  "rshift"):
        locals()[f"__{_name}__"] = locals()[f"__r{_name}__"] = _operator
    __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __pos__ = __abs__ = __invert__ = _operator
    del _name

    def operand(self, what, op):
        """The dense tile instruction `op` reads (a gather, emitted now) or writes (`what` 'dst': a scatter,
        emitted when `op` is recorded)."""
        global pending, _busy
        if what == "dst" and pending is not None:
            raise NkiError(f"{CALL}: {op} has two indirect dsts; trnsim lowers one per instruction")
        if what == "dst" and op in _NOT_RECORDED:
            unsupported(f"{CALL} as the dst of {op}", "an indirect dst is lowered for the elementwise "
                        "instructions only; write a dense tile and nisa.tensor_copy it to the indirect view")
        dense = _ops.new_tile(self.shape, self.dtype, SBUF, "indirect")
        _busy = True
        try:
            offsets = self._offsets()
            if what == "dst":
                # The range check of the offsets the device makes; the scratch values are not used.
                _ops.nc_n_gather(_ops.new_tile(self.shape, self.dtype, SBUF, "indirect_check"), self._staged(),
                                 offsets)
                pending = (op, self, dense, offsets)
            else:
                _ops.nc_n_gather(dense, self._staged(), offsets)
        finally:
            _busy = False
        return dense

    def _staged(self):
        """The data view, or, when its first partition is no start an engine instruction over its partitions may
        have (_lower._legal_from: [16, 32) or [48, 64)), an SBUF-to-SBUF DMA copy of it from partition 0."""
        from ._lower import _legal_from

        P, F = self.data.shape
        if _legal_from(self.data.p0, P) == self.data.p0:
            return self.data
        copy = _ops.new_tile((P, F), self.dtype, SBUF, "indirect_staged")
        _ops.dma_copy(copy, self.data)
        return copy

    def _offsets(self):
        """uint32 [P, n]: row p holds its group's offsets in column order."""
        P, k = self.data.shape[0], self.index.shape[1]
        u16 = _ops.new_tile((P, GROUP * k), as_dtype("uint16"), SBUF, "indirect_offsets")
        for p in range(P):
            g = p - p % GROUP
            row = u16[p:p + 1, :].reshape([1, k, GROUP]).permute((0, 2, 1))  # element (r, k) at k * 16 + r
            _ops.dma_copy(row, self.index[g:g + GROUP, :])
        u32 = _ops.new_tile((P, self.num_elem), as_dtype("uint32"), SBUF, "indirect_offsets32")
        _ops.tensor_copy(u32, u16[:, 0:self.num_elem], engine="DVE")
        return u32

    def scatter(self, dense, offsets):
        P, F = self.data.shape
        col = _ops.new_tile((P, F), as_dtype("float32"), SBUF, "indirect_columns")
        _ops.iota(col, [1], 0, 0)
        mask = _ops.new_tile((P, F), as_dtype("uint8"), SBUF, "indirect_mask")
        t = self._staged()
        for i in range(self.num_elem):
            _ops.tensor_scalar(mask, col, "equal", offsets[:, i:i + 1], engine="DVE")
            _ops.select(t, mask, dense[:, i:i + 1].broadcast(1, F), t, engine="DVE")
        if t is not self.data:
            _ops.dma_copy(self.data, t)


def _misuse(what):
    raise NkiError(f"{CALL}: an indirect view is only an operand or the dst of one instruction (nisa.*, nl.*); "
                   f"{what} is not modelled: copy it into a tile with nisa.tensor_copy and use that tile "
                   f"(its .shape and .dtype may be read)")


def flush(name):
    """After instruction `name` is recorded: the scatter its indirect dst waits for."""
    global pending, _busy
    if _busy or pending is None or pending[0] != name:
        return
    _, view, dense, offsets = pending
    pending = None
    _busy = True
    try:
        view.scatter(dense, offsets)
    finally:
        _busy = False


def make(data, index, num_elem):
    """`data.indirect(index, num_elem)` after its checks (NkiError / NkiUnsupported naming the rule)."""
    global pending
    pending = None  # (left by an instruction that failed before it was recorded)
    if _ops._target().generation != "trn3":
        unsupported(CALL, "Tensor Indirection is a NeuronCore-v4 feature (trn3); run the kernel with "
                          "hardware=\"trn3\"")
    if data.st.space != SBUF:
        if data.st.space == "hbm":
            unsupported(CALL, "the data tensor is an HBM tensor; Tensor Indirection reads an on-chip tensor: the "
                              "data tensor must be in SBUF (nl.load it into an SBUF tile first)")
        unsupported(CALL, "the data tensor is a PSUM tile; trnsim lowers indirection of an SBUF tile only (its "
                          "gather is GpSimd's nc_n_gather, which cannot access PSUM)")
    if data.ndim != 2 or data.pd != 0 or data.dims[1][0] != 1:
        unsupported(CALL, f"the data view {list(data.shape)} must be a [partitions, columns] SBUF view with "
                          "consecutive columns (an offset counts elements along the free dim)")
    if not isinstance(index, NkiTensor) or index.st.space != SBUF or index.dtype.name != "uint16":
        raise NkiError(f"{CALL}: the index tensor must be an SBUF tile of uint16 offsets, got "
                       f"{_describe(index)}")
    P = data.shape[0]
    if P % GROUP or data.p0 % GROUP:
        raise NkiError(f"{CALL}: the data view covers partitions [{data.p0}, {data.p0 + P}); Tensor Indirection "
                       f"works on whole groups of {GROUP} partitions (a multiple of {GROUP}, from one)")
    if index.ndim != 2 or index.shape[0] != P:
        raise NkiError(f"{CALL}: the index tile {list(index.shape)} must be [{P}, K]: the data's {P} partitions, "
                       f"each group of {GROUP} holding its {GROUP} * K offsets")
    most = GROUP * index.shape[1]
    n = most if num_elem is None else num_elem
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= most:
        raise NkiError(f"{CALL}: num_elem is {num_elem!r}; it must be an int in [1, {most}] (16 offsets per "
                       f"column of the index tile {list(index.shape)})")
    return IndirectView(data, index, n)


def _describe(x):
    if isinstance(x, NkiTensor):
        return f"a {x.st.space} {x.dtype.name} tensor {list(x.shape)}"
    return type(x).__name__
