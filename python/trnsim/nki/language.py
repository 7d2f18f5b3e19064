"""nki.language on the simulator: tensors (nl.ndarray and friends), buffers, dtypes, tile sizes, loops, SPMD
program ids, index expressions, and the math / memory conveniences, each lowered to nki.isa instructions
(_lower.py names the documented lowering of each).
"""

import functools as _functools
import math as _math
import numbers as _numbers

from . import _direct, _index, _lower, _ops, _print, _schedule, _trace, _void
from ._dtypes import BY_NAME as _DT
from ._dtypes import DType as _DType
from ._finfo import finfo as _finfo
from ._dtypes import as_dtype as _as_dtype
from ._dtypes import modelled as _modelled
from ._errors import Loc, NkiError, ignored_kwargs, unsupported_name, caller_loc, unsupported
from ._tensor import HBM, PSUM, SBUF, BlockTensor, Buffer, NkiTensor, Storage

arange = _index.arange  # index expressions (_index.py)
mgrid = _index.mgrid

# ---- buffers
sbuf = Buffer("sbuf", SBUF)
psum = Buffer("psum", PSUM)
shared_hbm = Buffer("shared_hbm", HBM)
private_hbm = Buffer("private_hbm", HBM, private=True)
hbm = Buffer("hbm", HBM, private=True)  # NKI: "Alias of private_hbm" (each core its own; nki.language.hbm)


def _buffer_arg(buffer, call):
    if not isinstance(buffer, Buffer):
        raise NkiError(f"nl.{call}({buffer!r}): expected a buffer (nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm, "
                       "nl.private_hbm, or a tensor's .buffer)")
    return buffer.space


def is_sbuf(buffer):
    """nl.is_sbuf(buffer): whether the buffer is SBUF (nki.language.is_sbuf)."""
    return _buffer_arg(buffer, "is_sbuf") == SBUF


def is_psum(buffer):
    """nl.is_psum(buffer): whether the buffer is PSUM (nki.language.is_psum)."""
    return _buffer_arg(buffer, "is_psum") == PSUM


def is_hbm(buffer):
    """nl.is_hbm(buffer): whether the buffer is in HBM: nl.hbm, nl.shared_hbm, nl.private_hbm
    (nki.language.is_hbm)."""
    return _buffer_arg(buffer, "is_hbm") == HBM


def is_on_chip(buffer):
    """nl.is_on_chip(buffer): whether the buffer is SBUF or PSUM (nki.language.is_on_chip)."""
    return _buffer_arg(buffer, "is_on_chip") in (SBUF, PSUM)

# ---- dtypes
float32 = _DT["float32"]
bfloat16 = _DT["bfloat16"]
float16 = _DT["float16"]
tfloat32 = _DT["tfloat32"]


class fp32:
    """nki.language.fp32: FP32 constants; fp32.min is the most negative finite float32."""

    min = -3.4028234663852886e38  # noqa: A003
float8_e4m3 = _DT["float8_e4m3"]
float8_e4m3fn = _DT["float8_e4m3fn"]
float8_e5m2 = _DT["float8_e5m2"]
float8_e8m0fnu = _DT["float8_e8m0fnu"]
float8_e4m3fn_x4 = _DT["float8_e4m3fn_x4"]
float8_e5m2_x4 = _DT["float8_e5m2_x4"]
float4_e2m1fn_x4 = _DT["float4_e2m1fn_x4"]
int32 = _DT["int32"]
uint32 = _DT["uint32"]
int16 = _DT["int16"]
uint16 = _DT["uint16"]
int8 = _DT["int8"]
uint8 = _DT["uint8"]
bool_ = _DT["bool_"]

# NKI's type name for tensors (annotations, isinstance checks).
tensor = NkiTensor
tile = NkiTensor


class _TileSize:
    """nl.tile_size: the hardware's tile limits of the run's hardware generation (pmax, psum_fmax =
    psum_bank_fmax, psum_num_banks, sbuf_size_bytes, total_available_sbuf_size, the gemm and bn_stats
    limits, psum_min_align = 4 and sbuf_min_align = 1 bytes); any other name is NkiUnsupported."""

    @property
    def pmax(self):
        from ._backend import target

        return target().partitions

    @property
    def psum_fmax(self):
        from ._backend import target

        return target().psum_bank_bytes // 4

    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512

    @property
    def psum_partition_bytes(self):
        from ._backend import target

        return target().psum_bytes

    @property
    def total_available_sbuf_size(self):
        from ._backend import target

        return target().sbuf_bytes

    # NKI 2.30-2.33's further constants, from the same hardware facts (docs/facts/trainium-hardware.md §1.4).
    psum_bank_fmax = psum_fmax  # FP32 elements per PSUM bank per partition

    @property
    def psum_bank_fmax_bytes(self):
        from ._backend import target

        return target().psum_bank_bytes

    psum_fmax_bytes = psum_bank_fmax_bytes

    @property
    def psum_num_banks(self):
        from ._backend import target

        t = target()
        return t.psum_bytes // t.psum_bank_bytes

    @property
    def sbuf_size_bytes(self):
        from ._backend import target

        t = target()
        return t.partitions * t.sbuf_bytes

    sbuf_fmax_bytes = total_available_sbuf_size  # the largest tile trnsim allocates: one partition's SBUF

    @property
    def sbuf_fmax(self):
        return self.sbuf_fmax_bytes // 4

    # Address alignment of an instruction's free dim (KLR, docs/facts/trainium-hardware.md §1.4 [S27]); trnsim's
    # allocator aligns tiles more (64 B in SBUF, whole banks in PSUM), which satisfies both.
    psum_min_align = 4
    sbuf_min_align = 1

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"'tile_size' has no attribute '{name}'")
        raise unsupported_name("nki.language.tile_size", name)


tile_size = _TileSize()


class par_dim(int):
    """nl.par_dim(n): marks the partition dim in an on-chip tensor's shape (the dims before it are block
    dims: (B..., par_dim(P), F...) is P partitions of B... x F... elements)."""

    def __new__(cls, n):
        # An integer size, as nl.ndarray's shape checks ask (int() truncated 1.5 to 1).
        if isinstance(n, bool) or not hasattr(n, "__index__"):
            raise NkiError(f"nl.par_dim: size {n!r:.40} is not an integer")
        return int.__new__(cls, n.__index__())


class NKIObject:
    """The base class of user classes a kernel uses or takes as a parameter (NKI Language Guide,
    "Classes"; dataclasses too). trnsim runs the kernel as Python, so it is a plain base class: an instance
    passed to simulate_kernel reaches the kernel as the object passed. Its constructor takes keywords only
    (NKI's signature `__init__(self, **kwargs)`), each set as an attribute: `Params(scale=2.0)`. A
    `@dataclass` subclass has the __init__ dataclass makes of its annotated fields; a class attribute without
    an annotation is no field (Python's rule; NKI's pages do not say NKIObject makes it one), so nki-library's
    attention_cte, whose `@dataclass class SectionParams(nl.NKIObject)` has only unannotated attributes and
    is built with keywords, is a TypeError at that call."""

    def __init__(self, **kwargs):
        for name, value in kwargs.items():
            setattr(self, name, value)


DType = _DType  # the type of the dtype objects (annotations `dtype: nl.DType`, isinstance)
finfo = _finfo


# ---- creation


def _buffer(buffer):
    if buffer is None:
        return sbuf
    if isinstance(buffer, Buffer):
        return buffer
    raise NkiError(f"buffer must be nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm, got {buffer!r}")


_MAX_TENSOR_BYTES = 1 << 48  # 256 TiB: more than a device's HBM, far below 64-bit sizes


def ndarray(shape, dtype, buffer=None, name="", **kwargs):
    """A new tensor (uninitialised) of `shape` and `dtype` in `buffer` (nl.sbuf by default)."""
    return new_tensor(shape, dtype, buffer, name, kwargs, "nl.ndarray")


def new_tensor(shape, dtype, buffer, name, kwargs, call):
    """nl.ndarray's work for `call` (the creation call the kernel wrote: nl.ndarray, nl.zeros, ...), the
    name its errors give."""
    t = _trace.current(call)
    if isinstance(shape, int):
        shape = (shape,)
    shape = tuple(shape)
    for s in shape:  # sizes are integers (a float such as 512.0 was truncated by int())
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise NkiError(f"{call}: shape {shape!r:.80}: size {s!r:.40} is not an integer")
    if name is not None and not isinstance(name, str):  # (name=123 ended in a pybind11 argument error)
        raise NkiError(f"{call}: name={name!r}: a tensor's name is a string")
    b = _buffer(buffer)
    if not shape and b.space != HBM:  # (shape[0] below: an IndexError)
        raise NkiError(f"{call}: shape () has no partition dim: an on-chip tile's shape starts with its partition "
                       f"dim, e.g. (1, 1) for one element")
    d = _modelled(_as_dtype(dtype))
    if name:
        t.user_names.add(name)  # (messages name its tiles by it: Storage.label)
    nbytes = _math.prod(int(s) for s in shape) * d.itemsize
    if nbytes >= _MAX_TENSOR_BYTES:  # past any memory (and the 64-bit sizes the allocator takes)
        raise NkiError(f"{call}: shape {list(shape)!s:.80} {d.name}: {nbytes:.3e} bytes, more than any memory "
                       f"of the device holds")
    if kwargs and any(k != "address" for k in kwargs):
        ignored_kwargs(call, [k for k in kwargs if k != "address"])
    if kwargs.get("address") is not None:  # a fixed place: a direct allocation of its one tile (_direct.py)
        b = _direct.at_address(b, kwargs["address"], call)
    if b.space == HBM:
        loc = caller_loc()
        dims = tuple(int(s) for s in shape)
        if any(s <= 0 for s in dims):
            raise NkiError(f"{call}: shape {list(dims)} has a dim that is not positive")
        seq = getattr(t, "hbm_seq", None)
        if seq is not None and t.hbm_pos < len(seq):
            # Another program of the launch grid on this core: the same HBM tensor as the first program's.
            st = seq[t.hbm_pos]
            t.hbm_pos += 1
            if st.shape != dims or st.dtype != d:
                raise NkiError(f"{call}: program {t.program_id} declares HBM tensor {t.hbm_pos} as "
                               f"{list(dims)} {d.name}, the first program as {list(st.shape)} {st.dtype.name}")
            return NkiTensor.whole(st)
        st = Storage(t, name or "", HBM, d, dims, private=b.private, role="scratch", loc=loc)
        st.name = name or None  # named when emitted (outputs: 'out', 'out_1', ...)
        if seq is not None:
            seq.append(st)
            t.hbm_pos += 1
        return NkiTensor.whole(st)
    pdim = 0
    if type(shape[0]) is not int or par_dim in map(type, shape):
        pdims = [i for i, s in enumerate(shape) if isinstance(s, par_dim)]
        if len(pdims) > 1:
            raise NkiError(f"{call}: more than one nl.par_dim in the shape")
        pdim = pdims[0] if pdims else 0
    dims = tuple(s if type(s) is int else int(s) for s in shape)
    _ops.check_tile_shape(dims, pdim, b.space, d, call)
    site = t.call_stack()
    loc = Loc(site[-1]) if site else caller_loc()
    direct = b if isinstance(b, _direct.DirectBuffer) else None
    if direct is not None and (t.options or {}).get("force_auto_alloc"):  # nki.compiler.force_auto_alloc
        b, direct = (sbuf if b.space == SBUF else psum), None
    if direct is not None:  # the kernel's places for its blocks, checked now (_direct.py)
        t.direct_decls += 1
        if t.scope:  # in a loop body NKI traces once: the allocator of the body's first trace (_direct.py)
            direct = b = _direct.traced_once(t, direct, dims, d, site, call, loc)
        np_ = dims[pdim]
        fdim = _math.prod(dims[pdim + 1:]) * d.itemsize
        direct.check_all(dims, pdim, np_, fdim, name, loc)
    if pdim > 0 and (b.space == PSUM or direct is not None):
        return BlockTensor(t, name or "tile", d, dims, pdim, loc, site, b.space, direct)
    st = Storage(t, name or "tile", b.space, d, dims, pdim, loc=loc)
    st.site = site
    if direct is not None:
        st.direct = direct.place((), st, _direct.Decl(direct, loc, dims))
    return NkiTensor.whole(st)


def zeros(shape, dtype, buffer=None, name="", **kwargs):
    """nl.ndarray then nisa.memset(0) (GpSimd; Vector for PSUM) (nki.language.zeros)."""
    return _lower.full(shape, 0.0, dtype, buffer, name, kwargs, "nl.zeros")


def ones(shape, dtype, buffer=None, name="", **kwargs):
    """nl.ndarray then nisa.memset(1) (nki.language.ones)."""
    return _lower.full(shape, 1.0, dtype, buffer, name, kwargs, "nl.ones")


def full(shape, fill_value, dtype, buffer=None, name="", **kwargs):
    """nl.ndarray then nisa.memset(fill_value) (nki.language.full)."""
    return _lower.full(shape, fill_value, dtype, buffer, name, kwargs, "nl.full")


no_reorder = _schedule.no_reorder  # (`with nl.no_reorder():`: a concern of the schedule, _schedule.py)


def device_print(print_prefix, tensor, *, mask=None, **kwargs):
    """print(print_prefix, values) of an SBUF tile or HBM tensor at this point of the kernel, to stdout after the
    run (one DMA of it to an extra HBM output, `device_print_<n>`: _print.py)."""
    _print.device_print(print_prefix, tensor, mask=mask, **kwargs)


def _shape_of(a):
    """a's shape as nl.ndarray takes it: block dims before an nl.par_dim kept as such ((2, par_dim(128), 512)
    for a PSUM tensor with block dims; its plain .shape would make dim 0 the partition dim)."""
    pdim = a.pdim if isinstance(a, BlockTensor) else getattr(a, "pd", 0)  # (an HBM tensor's: -1)
    shape = tuple(a.shape)
    return shape[:pdim] + (par_dim(shape[pdim]),) + shape[pdim + 1:] if pdim > 0 else shape


def empty_like(a, dtype=None, buffer=None, name="", **kwargs):
    """nl.ndarray of a's shape (and dtype, buffer unless given); no instruction."""
    return new_tensor(_shape_of(a), dtype or a.dtype, buffer or a.buffer, name, kwargs, "nl.empty_like")


def ndarray_like(a, dtype=None, buffer=None, name="", **kwargs):
    """As nl.empty_like."""
    return empty_like(a, dtype, buffer, name)


def zeros_like(a, dtype=None, buffer=None, name="", **kwargs):
    """nl.zeros of a's shape."""
    return _lower.full(_shape_of(a), 0.0, dtype or a.dtype, buffer or a.buffer, name, kwargs, "nl.zeros_like")


def ones_like(a, dtype=None, buffer=None, name="", **kwargs):
    """nl.ones of a's shape."""
    return _lower.full(_shape_of(a), 1.0, dtype or a.dtype, buffer or a.buffer, name, kwargs, "nl.ones_like")


def shared_identity_matrix(n, dtype="uint8", dst=None, **kwargs):
    """An [n, n] identity matrix in SBUF (nki.language.shared_identity_matrix); into dst when given. The
    compiler preloads one per dtype and shares it (no public source says how); trnsim makes it where it is
    called: a memset of 1 and an affine_select keeping the diagonal (partition == column), on GpSimd."""
    call = "nl.shared_identity_matrix"
    if dst is None:
        dst = new_tensor((n, n), dtype, sbuf, "", kwargs, call)
    elif not isinstance(dst, NkiTensor) or tuple(dst.shape) != (n, n) or dst.st.space != SBUF:
        raise NkiError(f"{call}: dst must be an [{n}, {n}] SBUF tile, got {dst!r}")
    _ops.memset(dst, 1.0)
    _ops.affine_select(dst, [-1], 0, 1, dst, 0.0, "equal")
    return dst


def shared_constant(constant, dtype=None, **kwargs):
    """An HBM tensor holding `constant` (a NumPy array or a .npy file path), converted to `dtype` (the
    array's own when not given) as a given input is; it is an input of the kernel, in HBM before the kernel
    runs. The same values and dtype give the same tensor."""
    from . import _constants

    if kwargs:
        ignored_kwargs("nl.shared_constant", list(kwargs))
    return _constants.shared_constant(constant, dtype)


# ---- loops and SPMD


def affine_range(*args, **kwargs):
    """A loop whose iterations carry no dependency (the compiler may pipeline it)."""
    return _trace.make_range("affine_range", *args, **kwargs)


def sequential_range(*args, **kwargs):
    """A loop whose iterations depend on each other (kept in order)."""
    return _trace.make_range("sequential_range", *args, **kwargs)


def static_range(*args, **kwargs):
    """A loop unrolled while the kernel is traced."""
    return _trace.make_range("static_range", *args, **kwargs)


def program_id(axis=0):
    """This program's index along `axis` of the launch grid (under LNC2 with kernel[2]: the physical core)."""
    t = _trace.current("nl.program_id")
    return t.program_id[_grid_axis(f"nl.program_id({axis!r})", axis, len(t.program_id))]


# Where a grid's dims come from (tester23ae F6: a workload's kernel run on nl.program_id(1) said only the first part).
_GRID_HOW = ("; a kernel runs on a launch grid as kernel[2, 2](...), and a workload runs it so when its "
             "kernel.function names a module-level kernel[2, 2] (`k22 = kernel[2, 2]`) or a function launching it")


def _grid_axis(call, axis, ndim):
    """`axis` as a dim of a launch grid of `ndim` dims, else the NkiError of `call` saying what is wrong."""
    a = _index._const(axis)
    if a is None:
        raise NkiError(f"{call}: axis {axis!r} is not an integer (a dim of the launch grid)")
    if not 0 <= a < ndim:
        raise NkiError(f"{call}: the launch grid has {ndim} dims{_GRID_HOW}")
    return a


def num_programs(axes=None):
    """Programs of the launch grid (along `axes`)."""
    t = _trace.current("nl.num_programs")
    if axes is None:
        return _math.prod(t.num_programs) if len(t.num_programs) != 1 else t.num_programs[0]

    def one(a):
        return t.num_programs[_grid_axis(f"nl.num_programs({axes!r})", a, len(t.num_programs))]

    if _index._const(axes) is not None:
        return one(axes)
    if not isinstance(axes, (tuple, list)):
        raise NkiError(f"nl.num_programs({axes!r}): axes must be an integer or a tuple of them")
    return tuple(one(a) for a in axes)


def program_ndim():
    """Dims of the launch grid."""
    return len(_trace.current("nl.program_ndim").program_id)


class nc:
    """A launch-grid dim spread over n physical cores (`kernel[nl.nc(2)]`); `nl.nc(2) * 2` and `2 * nl.nc(2)`
    are nl.spmd_dim(nl.nc(2), 2) and nl.spmd_dim(2, nl.nc(2))."""

    def __init__(self, n):
        self.n = int(n)

    def __repr__(self):
        return f"nl.nc({self.n})"

    def __int__(self):
        return self.n

    def __index__(self):
        return self.n

    def __mul__(self, other):
        return spmd_dim(self, other)

    def __rmul__(self, other):
        return spmd_dim(other, self)


class spmd_dim:
    """A launch-grid dim of sub-dims (nl.spmd_dim(nl.nc(2), 2)): as many programs as their product, numbered
    row-major over them; the nl.nc sub-dim's index is the core: nl.spmd_dim(nl.nc(2), 2) gives core 0
    programs 0-1 and core 1 programs 2-3, nl.spmd_dim(2, nl.nc(2)) alternates (nki.language.spmd_dim)."""

    def __init__(self, *dims):
        import math

        sizes = [int(d) for d in dims]
        self.size = math.prod(sizes)
        cores = [i for i, d in enumerate(dims) if isinstance(d, nc)]
        self.nc = sizes[cores[0]] if cores else 1
        # Programs in a row on one core: the sub-dims after the nl.nc one.
        self.block = math.prod(sizes[cores[0] + 1:]) if cores else 1
        self.dims = dims

    def __repr__(self):
        return "nl.spmd_dim(" + ", ".join(f"nl.nc({d.n})" if isinstance(d, nc) else repr(d) for d in self.dims) + ")"

    def __int__(self):
        return self.size

    def __index__(self):
        return self.size


def ds(start, size):
    """A dynamic slice `start:start + size` (the start known while tracing: a loop index)."""
    for what, v in (("start", start), ("size", size)):
        if (_index._const(v) is None and isinstance(v, _numbers.Real)  # a fraction (NumPy's too): was truncated
                and not (_math.isfinite(v) and v == int(v))):
            raise NkiError(f"nl.ds({start!r}, {size!r}): {what} {v!r} is not an integer: a slice's start and "
                           f"size count elements")
    try:
        start, size = int(start), int(size)
    except (TypeError, ValueError):
        unsupported("nl.ds with a start computed on the device", "dynamic offsets")
    return slice(start, start + size)


def _names_errors(fn):
    """nl.<fn>, whose errors about the instructions its lowering makes name the nl call first (by_call)."""

    return _functools.wraps(fn)(_void.wrapper(fn, f"nl.{fn.__name__}"))


# ---- math: each function object is also the operator NKI passes as `op=` (its .alu / .act name).


class _NlFunc(_functools.partial):
    """An nl.* function that is also an operator (`op=nl.add`: its .alu / .act name). A partial of the shared
    call wrapper (_void.wrapper), so calling it adds no Python frame of its own."""

    def __new__(cls, name, impl, alu=None, act=None, doc=""):
        self = super().__new__(cls, _void.wrapper(impl, f"nl.{name}", calls=name))
        self.__name__ = name
        self.alu = alu
        self.act = act
        self.__doc__ = doc
        return self

    def __repr__(self):
        return f"nl.{self.__name__}"


def _binary(name, alu):
    def f(x, y, dtype=None, mask=None, out=None, **kwargs):
        if kwargs:
            ignored_kwargs(f"nl.{name}", kwargs)
        if out is None or mask is not None:
            (x, y), box = _lower.operand_region(mask, (x, y))
        else:  # (`t += masked`: t's part too)
            (x, y, out), box = _lower.operand_region(None, (x, y, out))
        return _lower.boxed(_lower.elementwise(name, alu, x, y, dtype, out), box if out is None else None)

    # nki.isa.tensor_tensor runs nl.power on GpSimd (_ops.tensor_tensor).
    two = "nisa.tensor_tensor for two tiles (on GpSimd)" if alu == "power" else "nisa.tensor_tensor for two tiles"
    return _NlFunc(name, f, alu=alu, doc=f"Elementwise {alu}: {two}, nisa.tensor_scalar for a tile and a number or a "
                                          "[P, 1] tile, on Vector (nki.language."
                                          f"{name}); also the ALU operator `op=nl.{name}`")


def _unary(name, act):
    def f(x, dtype=None, mask=None, **kwargs):
        if kwargs:
            ignored_kwargs(f"nl.{name}", kwargs)
        (x,), box = _lower.operand_region(mask, (x,))
        return _lower.boxed(_lower.unary(name, act, x, dtype), box)

    return _NlFunc(name, f, act=act, doc=f"One nisa.activation({act}) on Scalar into a new SBUF tile "
                                         f"(nki.language.{name}); also the activation `op=nl.{name}`")


for _name, _alu in (("add", "add"), ("subtract", "subtract"), ("multiply", "multiply"), ("divide", "divide"),
                    ("maximum", "maximum"), ("minimum", "minimum"), ("power", "power"), ("equal", "equal"),
                    ("not_equal", "not_equal"), ("greater", "greater"), ("greater_equal", "greater_equal"),
                    ("less", "less"), ("less_equal", "less_equal"), ("logical_and", "logical_and"),
                    ("logical_or", "logical_or"), ("bitwise_and", "bitwise_and"), ("bitwise_or", "bitwise_or"),
                    ("bitwise_xor", "bitwise_xor"), ("left_shift", "left_shift"),
                    ("right_shift", "right_shift"), ("abs_max", "abs_max")):
    globals()[_name] = _binary(_name, _alu)

bypass = _NlFunc("bypass", lambda *a, **k: unsupported("calling nl.bypass"), alu="bypass")

for _name, _act in (("exp", "exp"), ("log", "log"), ("tanh", "tanh"), ("sigmoid", "sigmoid"), ("relu", "relu"),
                    ("silu", "silu"), ("gelu", "gelu"), ("gelu_apprx_tanh", "gelu_apprx_tanh"), ("sqrt", "sqrt"),
                    ("rsqrt", "rsqrt"), ("reciprocal", "reciprocal"), ("square", "square"), ("abs", "abs"),
                    ("sign", "sign"), ("identity", "identity"), ("sin", "sin"), ("cos", "cos"),
                    ("arctan", "arctan"), ("erf", "erf"), ("erf_dx", "erf_dx"), ("softplus", "softplus"),
                    ("mish", "mish"), ("gelu_dx", "gelu_dx"), ("silu_dx", "silu_dx"), ("floor", "floor"),
                    ("ceil", "ceil"), ("trunc", "trunc")):
    globals()[_name] = _unary(_name, _act)
# nl.abs is also an ALU operator (NKI's math operator table: Absolute, Vector/Scalar; nki-library passes
# op0=nl.abs, operand0=0.0 to tensor_scalar_reduce for a row's absmax).
globals()["abs"].alu = "abs"
globals()["abs"].__doc__ += "; also the ALU operator `op0=nl.abs` (the absolute value of data, the operand unread)"

gelu_apprx_tanh_ = globals()["gelu_apprx_tanh"]


def _own_dtype(x, dtype):
    """dtype, else the input tile's (a unary call's default: the number its lowering adds is no operand)."""
    return dtype if dtype is not None or not isinstance(x, NkiTensor) else x.dtype


def _negative(x, dtype=None, mask=None, **kwargs):
    if kwargs:
        ignored_kwargs("nl.negative", kwargs)
    (x,), box = _lower.operand_region(mask, (x,))
    # (the -1 is the lowering's, not an operand of the kernel's: the result keeps x's dtype, as the page says)
    return _lower.boxed(_lower.elementwise("negative", "multiply", x, -1.0, _own_dtype(x, dtype)), box)


negative = _NlFunc("negative", _negative, doc="nisa.tensor_scalar(x, multiply, -1) on Vector (nki.language.negative)")


def _copy(x, dtype=None, mask=None, **kwargs):
    if kwargs:
        ignored_kwargs("nl.copy", kwargs)
    return _lower.copy(x, dtype, mask)


copy = _NlFunc("copy", _copy, act="copy", doc="One nisa.tensor_copy into a new SBUF tile (nki.language.copy); also "
                                           "the activation `op=nl.copy`")


def _reduced(result, x, axis, keepdims, box):
    """A masked reduction's result marked with the region it holds (_lower.result_box)."""
    if box is None or not isinstance(result, NkiTensor):
        return result
    ax = tuple(range(1, x.ndim)) if axis is None else axis
    return _lower.boxed(result, _lower.result_box(box, result.shape, _lower.reduced_dims(x.ndim, ax, keepdims)))


def _reduction(name, alu):
    def f(x, axis=None, dtype=None, keepdims=False, mask=None, **kwargs):
        if kwargs:
            ignored_kwargs(f"nl.{name}", kwargs)
        (x,), box = _lower.operand_region(mask, (x,))
        return _reduced(_lower.reduce(name, alu, x, axis, dtype, keepdims, mask=mask), x, axis, keepdims, box)

    return _NlFunc(name, f, alu=alu, doc=f"One nisa.tensor_reduce({alu}) over the free axes on Vector "
                                          f"(nki.language.{name})")


sum = _reduction("sum", "add")  # noqa: A001
max = _reduction("max", "maximum")  # noqa: A001
min = _reduction("min", "minimum")  # noqa: A001
prod = _reduction("prod", "multiply")


@_names_errors
def mean(x, axis=None, dtype=None, keepdims=False, mask=None, **kwargs):
    """nisa.tensor_reduce(add) then nisa.tensor_scalar(multiply, 1/n) on Vector (nki.language.mean); the
    result in float32 for an integer tile unless dtype= says otherwise (the page of this signature: float32
    return values for integer inputs, as numpy.mean; 2.33's page of another form keeps the input's dtype)."""
    if kwargs:
        ignored_kwargs("nl.mean", kwargs)
    (x,), box = _lower.operand_region(mask, (x,))
    if dtype is None and not _as_dtype(x.dtype).is_float:
        dtype = float32
    s = _lower.reduce("mean", "add", x, axis, dtype, keepdims, mask=mask)
    ax = tuple(range(1, x.ndim)) if axis is None else ((axis,) if isinstance(axis, int) else tuple(axis))
    n = _math.prod(x.shape[a] for a in ax)
    _lower.elementwise("mean", "multiply", s, 1.0 / n, out=s)
    return _reduced(s, x, axis, keepdims, box)


@_names_errors
def loop_reduce(x, op, loop_indices, *, dtype=None, mask=None, **kwargs):
    """A reduction across loop iterations: `acc[...] = nl.loop_reduce(x, op, loop_indices=[i])`, or the page's
    `acc = nl.loop_reduce(...)`, is one nisa.tensor_tensor(acc, acc, x, op) (nki.language.loop_reduce;
    lowering in _loop_reduce.py)."""
    from . import _loop_reduce

    extra = [k for k in kwargs if k != "name"]
    if extra:
        ignored_kwargs("nl.loop_reduce", extra)
    return _loop_reduce.loop_reduce(x, op, loop_indices, dtype, mask)


def _per_partition(t, axis, alu, name, mask=None):
    """tensor_reduce(alu) of the FP32 tile t over `axis` (the last free dims), keeping t's rank
    ([P, 4, 1] for [P, 4, 16] over axis 2): the elementwise steps broadcast it over the reduced dims. `mask`:
    the kernel's call's own."""
    return _lower.reduce(name, alu, t, axis, float32, True, mask=mask)


def _last_axes(x, axis, name):
    """`axis` of nl.softmax / nl.rms_norm: free dims ending at the last one (NKI: "can only be the last
    contiguous dim(s) of the tile")."""
    ax = _ops.reduce_axes(x, axis)
    if ax != list(range(ax[0], x.ndim)):
        raise NkiError(f"nl.{name}: axis {axis} must be the last contiguous free dims of the {list(x.shape)} tile "
                       f"(e.g. axis={x.ndim - 1})")
    return tuple(ax)


@_names_errors
def softmax(x, axis=-1, *, dtype=None, compute_dtype=None, mask=None, **kwargs):
    """exp(x - max) / sum(exp(x - max)) over `axis`, in FP32: tensor_reduce(maximum) and tensor_scalar(subtract)
    on Vector, activation(exp) on Scalar, tensor_reduce(add), 1 / sum and the product (tensor_scalar) on Vector;
    the product written in dtype (compute_dtype, else x's) (nki.language.softmax)."""
    if kwargs:
        ignored_kwargs("nl.softmax", kwargs)
    (x,), box = _lower.operand_region(mask, (x,))
    x = _lower.load_if_hbm(x, "softmax")
    ax = _last_axes(x, axis, "softmax")
    m = _per_partition(x, ax, "maximum", "softmax", mask)
    e = _lower.unary("softmax", "exp", _lower.elementwise("softmax", "subtract", x, m, float32), float32)
    r = _lower.elementwise("softmax", "divide", 1.0, _per_partition(e, ax, "add", "softmax", mask), float32)
    out = _lower.elementwise("softmax", "multiply", e, r, dtype if dtype is not None else compute_dtype or x.dtype)
    return _lower.boxed(out, box)


@_names_errors
def rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype=None, compute_dtype=None, mask=None, **kwargs):
    """x / sqrt(sum(x * x) / n + epsilon) * w over `axis`, in FP32: x * x and tensor_reduce(add), the divide by
    n and + epsilon (tensor_scalar) on Vector, activation(rsqrt) on Scalar, x times it (tensor_scalar) and
    times w (tensor_tensor) on Vector, the last written in dtype (compute_dtype, else x's)
    (nki.language.rms_norm: "x / RMS(x) * w", n the count of values the RMS averages)."""
    if kwargs:
        ignored_kwargs("nl.rms_norm", kwargs)
    (x, w), box = _lower.operand_region(mask, (x, w))
    x = _lower.load_if_hbm(x, "rms_norm")
    ax = _last_axes(x, axis, "rms_norm")
    # The sum reduces x * x, a new tile: the warning of x's partly held dims is x's (tester23ai F8).
    _lower.warn_partial_reduction("tensor_reduce", x, ax, mask)
    s = _per_partition(_lower.elementwise("rms_norm", "multiply", x, x, float32), ax, "add", "rms_norm", mask)
    ms = _lower.elementwise("rms_norm", "add", _lower.elementwise("rms_norm", "divide", s, float(n), float32),
                            float(epsilon), float32)
    y = _lower.elementwise("rms_norm", "multiply", x, _lower.unary("rms_norm", "rsqrt", ms, float32), float32)
    out = _lower.elementwise("rms_norm", "multiply", y, w, dtype if dtype is not None else compute_dtype or x.dtype)
    return _lower.boxed(out, box)


@_names_errors
def var(x, axis, *, dtype=None, mask=None, **kwargs):
    """The population variance (numpy.var's ddof=0) over `axis`, in FP32: the sum (tensor_reduce) divided by n
    is the mean, then x - mean, its square, their sum (tensor_reduce) and the divide by n on Vector; the
    result in dtype (x's by default, an integer tile's too: the page has no float32 clause, unlike nl.mean's)
    with the axes removed (nki.language.var)."""
    if kwargs:
        ignored_kwargs("nl.var", kwargs)
    (x,), box = _lower.operand_region(mask, (x,))
    x = _lower.load_if_hbm(x, "var")
    ax = _last_axes(x, axis, "var")
    n = float(_math.prod(x.shape[a] for a in ax))
    m = _lower.elementwise("var", "divide", _per_partition(x, ax, "add", "var", mask), n, float32)
    d = _lower.elementwise("var", "subtract", x, m, float32)
    ss = _per_partition(_lower.elementwise("var", "multiply", d, d, float32), ax, "add", "var", mask)
    v = _lower.elementwise("var", "divide", ss, n, dtype if dtype is not None else x.dtype)
    return _reduced(v.reshape(_lower.reduced_shape(x, ax, False)), x, ax, False, box)


def _mod(x, y, dtype=None, mask=None, **kwargs):
    if kwargs:
        ignored_kwargs("nl.mod", kwargs)
    (x, y), box = _lower.operand_region(mask, (x, y))
    q = _lower.unary("mod", "floor", _lower.elementwise("mod", "divide", x, y, float32), float32)
    out = _lower.elementwise("mod", "subtract", x, _lower.elementwise("mod", "multiply", q, y, float32),
                             dtype if dtype is not None else _lower.promote(x, y))
    return _lower.boxed(out, box)


mod = _NlFunc("mod", _mod, doc="x - y * floor(x / y) in FP32 (numpy.mod: the sign of y): the divide on Vector, "
                               "activation(floor) on Scalar, the product and the difference on Vector, the last "
                               "written in dtype (the inputs' by default); exact for integer values below 2^24 "
                               "(nki.language.mod: integer mod)")


def _logical_not(x, dtype=None, mask=None, **kwargs):
    if kwargs:
        ignored_kwargs("nl.logical_not", kwargs)
    (x,), box = _lower.operand_region(mask, (x,))
    return _lower.boxed(_lower.elementwise("logical_not", "equal", x, 0.0, _own_dtype(x, dtype)), box)


logical_not = _NlFunc("logical_not", _logical_not, doc="nisa.tensor_scalar(x, equal, 0) on Vector: 1 where x is 0, "
                                                      "else 0 (nki.language.logical_not)")


# ---- memory and matmul


@_names_errors
def load(src, *, mask=None, dtype=None, **kwargs):
    """One nisa.dma_copy from HBM into a new SBUF tile (nki.language.load); dtype casts on the DMA."""
    if kwargs:
        ignored_kwargs("nl.load", kwargs)
    return _lower.load(src, mask, dtype)


@_names_errors
def store(dst, value, *, mask=None, **kwargs):
    """One nisa.dma_copy from SBUF into HBM; a PSUM value is first copied to SBUF with nisa.tensor_copy, as
    the page says (from the nearest partition an engine instruction may start at: rows before the value's are
    copied, not stored); a number is first set into a new SBUF tile with nisa.memset (nki.language.store)."""
    if kwargs:
        ignored_kwargs("nl.store", kwargs)
    return _lower.store(dst, value, mask)


@_names_errors
def load_transpose2d(src, *, mask=None, dtype=None, **kwargs):
    """nl.load_transpose2d: one nisa.dma_transpose from HBM into a new SBUF tile (with dtype=: then a
    nisa.tensor_copy casting it; the DMA transpose moves its dtype unchanged); a 2-D src (another is
    NkiUnsupported)."""
    if kwargs:
        ignored_kwargs("nl.load_transpose2d", kwargs)
    shape = getattr(src, "shape", None)
    if shape is not None and len(shape) != 2:  # (nisa.dma_transpose would permute a 3-D or 4-D src NKI's way)
        unsupported(f"nl.load_transpose2d of a {len(shape)}-D src {list(shape)}",
                    "its 2-D transpose is modelled for a 2-D src only")
    from . import isa

    # (isa's own call, unwrapped: its errors are named nl.load_transpose2d's, not nisa.dma_transpose's)
    return isa.dma_transpose.__wrapped__(src, mask=mask, dtype=dtype)


@_names_errors
def matmul(x, y, transpose_x=False, *, mask=None, **kwargs):
    """nisa.nc_matmul(stationary=x, moving=y) into a new PSUM tile; without transpose_x the documented extra
    transpose first: nisa.nc_transpose of x on the Tensor engine and a tensor_copy to SBUF
    (nki.language.matmul); an operand in PSUM is first copied to SBUF with nisa.tensor_copy (the Tensor engine
    reads SBUF; trnsim's lowering)."""
    if kwargs:
        ignored_kwargs("nl.matmul", kwargs)
    return _lower.matmul(x, y, transpose_x, mask)


@_names_errors
def transpose(x, *, dtype=None, mask=None, **kwargs):
    """nisa.nc_transpose on the Tensor engine into a new PSUM tile (Vector engine into SBUF for tiles of at
    most 32 x 32) (nki.language.transpose; nki.isa.nc_transpose's engine limits), a PSUM x first copied to SBUF
    with nisa.tensor_copy for the Tensor engine (which reads SBUF; trnsim's lowering); with dtype=, a tensor_copy
    casting it into a tile of that dtype in the same buffer (the transpose keeps its dtype)."""
    if kwargs:
        ignored_kwargs("nl.transpose", kwargs)
    return _lower.transpose(x, dtype, mask)


@_names_errors
def broadcast_to(src, shape, **kwargs):
    """Along the size-1 free dims a stride-0 view (no instruction); along the partition dim a new SBUF tile: a
    [1, F] tile by the Tensor engine (a ones-row nc_matmul per 512 columns, then tensor_copy), an HBM row
    [1, F] by one DMA reading it once per partition (nki.language.broadcast_to; docs/nki.md "Partition
    broadcast")."""
    if kwargs:
        ignored_kwargs("nl.broadcast_to", kwargs)
    shape = tuple(shape)
    if src.st.space == HBM and len(shape) >= 2 and src.ndim == len(shape) and src.shape[0] == 1 != shape[0]:
        src = _lower.partition_broadcast(src, shape[0], "broadcast_to")
    else:
        src = _lower.load_if_hbm(src, "broadcast_to")
    return src.broadcast_to(shape)


def expand_dims(data, axis):
    """A view of `data` with size-1 dims inserted at `axis` (an int or a tuple of them, positions in the
    result; free dims only, never the partition dim 0); no instruction (nki.language.expand_dims)."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    rank = len(data.shape) + len(axes)
    norm = sorted(a + rank if a < 0 else a for a in axes)
    if len(set(norm)) != len(norm) or any(a < 1 or a >= rank for a in norm):
        raise NkiError(f"nl.expand_dims: axis {axis} for a {list(data.shape)} tile: each must be a free dim "
                       f"position in 1..{rank - 1} of the result (dim 0 is the partition dim), once")
    shape = list(data.shape)
    for a in norm:
        shape.insert(a, 1)
    return data.reshape(tuple(shape))


@_names_errors
def where(condition, x, y, *, dtype=None, mask=None, **kwargs):
    """One select (dst = condition ? x : y; y a tile or a number) on Vector (nki.language.where)."""
    if kwargs:
        ignored_kwargs("nl.where", kwargs)
    (condition, x, y), box = _lower.operand_region(mask, (condition, x, y))
    # A [1, F] row of values against [P, F] tiles repeats on the P partitions, as in nl arithmetic.
    parts = 1
    for v in (condition, x, y):
        if isinstance(v, NkiTensor) and v.partitions > parts:  # (max is nl.max here)
            parts = v.partitions
    if isinstance(x, NkiTensor) and x.partitions == 1 < parts:
        x = _lower.partition_broadcast(x, parts, "where")
    if isinstance(y, NkiTensor) and y.partitions == 1 < parts:
        y = _lower.partition_broadcast(y, parts, "where")
    out = _ops.new_tile(x.shape, _lower.dt(dtype, x.dtype), SBUF, "where")
    _ops.select(out, condition, x, y)
    return _lower.boxed(_lower.fresh(out), box)


# ---- what NKI has and trnsim does not model: calling any raises NkiUnsupported naming the line.

UNSUPPORTED = {
    "layer_norm": "", "exp2": "", "dropout": "random numbers",
    "rand": "random numbers",
    "random_seed": "random numbers",
    "atomic_rmw": "", "gather_flattened": "",
    "all_reduce": "collectives", "all_gather": "collectives", "reduce_scatter": "collectives",
    "invert": "", "logical_xor": "", "all": "",
    "fori_loop": "dynamic loops", "dynamic_range": "dynamic loops", "alloc_tiles": "", "alloc_stream_buffers": "",
    "abs_min": "", "fmod": "", "tan": "", "prelu": "", "gelu_apprx_sigmoid": "",
    "gelu_apprx_sigmoid_dx": "", "while_loop": "dynamic loops",
}


def _make_unsupported(name, why):
    def f(*args, **kwargs):
        unsupported(f"nki.language.{name}", why)

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Not modelled by trnsim: calling it raises NkiUnsupported. {why}".strip()
    f.__trnsim_unsupported__ = True
    return f


for _n, _why in UNSUPPORTED.items():
    globals()[_n] = _make_unsupported(_n, _why)

SUPPORTED = ["ndarray", "zeros", "ones", "full", "empty_like", "ndarray_like", "zeros_like", "ones_like",
             "par_dim", "arange", "mgrid", "affine_range", "sequential_range", "static_range", "program_id",
             "num_programs", "program_ndim", "nc", "spmd_dim", "ds", "load", "store", "load_transpose2d", "copy",
             "matmul", "transpose", "broadcast_to", "where", "add", "subtract", "multiply", "divide", "maximum",
             "minimum", "power", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
             "logical_and", "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",
             "right_shift", "abs_max", "exp", "log", "tanh", "sigmoid", "relu", "silu", "gelu",
             "gelu_apprx_tanh", "sqrt", "rsqrt", "reciprocal", "square", "abs", "sign", "identity", "sin", "cos",
             "arctan", "erf", "erf_dx", "softplus", "mish", "gelu_dx", "silu_dx", "floor", "ceil", "trunc",
             "negative", "logical_not", "softmax", "rms_norm", "var", "mod",
             "sum", "max", "min", "prod", "mean", "tile_size", "expand_dims", "fp32", "is_sbuf", "is_psum", "is_hbm",
             "is_on_chip", "shared_identity_matrix", "shared_constant", "loop_reduce", "NKIObject", "device_print",
             "no_reorder", "finfo"]


def __getattr__(name):
    """Any other public name: NkiUnsupported naming it and the kernel line that asked for it (an
    AttributeError too, so hasattr() stays False), never a bare AttributeError."""
    if name.startswith("_"):
        raise AttributeError(f"module 'nki.language' has no attribute '{name}'")
    raise unsupported_name("nki.language", name)
