"""NKI's dtypes: the objects nl.float32, nl.bfloat16, ... and the conversion of what kernels pass as a dtype
(these objects, NumPy dtypes and types, their names) to one of them.

`isa` is the simulator's name of the dtype (sim/isa/names.cpp, NKI's spelling), None for a dtype NKI has but
the simulator does not model (using it in a tensor is an NkiUnsupported error naming the line).
"""

import numpy as np

from ._errors import NkiError, unsupported


class DType:
    """The type of NKI's dtype objects (nl.float32, nl.bfloat16, ...): what nki.dtype and nl.DType name in
    parameter annotations (`dtype: nki.dtype = nl.bfloat16`) and isinstance()."""

    __slots__ = ("name", "itemsize", "isa", "kind", "np", "note")

    def __init__(self, name, itemsize, isa, kind, np_dtype=None, note=""):
        self.name = name
        self.itemsize = itemsize  # bytes per element (x4 types: one packed 32-bit element)
        self.isa = isa
        self.kind = kind  # 'f' float, 'i' signed, 'u' unsigned, 'x4' packed MX
        self.np = np_dtype  # the NumPy dtype host arrays of it use (raw bits for bf16 / fp8)
        self.note = note

    def __repr__(self):
        return f"nl.{self.name}"

    def __str__(self):
        """NKI's name of the dtype, as str() of NKI's dtype objects (NumPy dtypes, 2.21-2.26) gives it and
        nki-library compares it ('bfloat16', 'float32', 'bool'); repr() and trnsim's messages say nl.<name>."""
        return "bool" if self.name == "bool_" else self.name

    @property
    def dtype(self):
        """What np.dtype(nl.X) gives (NKI 2.21-2.26 define nl.float32 and the others as NumPy dtypes): NumPy's
        own dtype where it has the type; for those it lacks (bfloat16, the FP8 types, the packed x4 ones) raw
        bytes of the dtype's size (void, "V2" for bfloat16), so .itemsize is right and no array of it passes
        as an input of values, marked with the NKI dtype (metadata {"nki": name}) so that a kernel may pass it
        back as a dtype (trnsim's dtypes without numerics, tfloat32 and float4_e2m1fn_x4, too)."""
        if self.np is not None and self.np.name == str(self):
            return self.np
        return np.dtype(f"V{self.itemsize}", metadata={"nki": self.name})

    def __eq__(self, other):
        if isinstance(other, DType):
            return self.name == other.name
        try:
            return as_dtype(other) is self
        except (NkiError, TypeError):
            return False

    def __hash__(self):
        return hash(self.name)

    @property
    def is_float(self):
        return self.kind == "f"


_ALL = [
    DType("float32", 4, "float32", "f", np.dtype(np.float32)),
    DType("bfloat16", 2, "bfloat16", "f", np.dtype(np.uint16), "host arrays hold raw bits (uint16)"),
    DType("float16", 2, "float16", "f", np.dtype(np.float16)),
    DType("float8_e4m3fn", 1, "float8_e4m3fn", "f", np.dtype(np.uint8), "OCP E4M3FN; raw bits (uint8)"),
    DType("float8_e5m2", 1, "float8_e5m2", "f", np.dtype(np.uint8), "raw bits (uint8)"),
    DType("float8_e8m0fnu", 1, "float8_e8m0fnu", "u", np.dtype(np.uint8), "E8M0 scales; raw bits"),
    DType("float8_e4m3fn_x4", 4, "float8_e4m3fn_x4", "x4", np.dtype(np.uint32), "4 packed E4M3FN"),
    DType("float8_e5m2_x4", 4, "float8_e5m2_x4", "x4", np.dtype(np.uint32), "4 packed E5M2"),
    DType("int32", 4, "int32", "i", np.dtype(np.int32)),
    DType("uint32", 4, "uint32", "u", np.dtype(np.uint32)),
    DType("int16", 2, "int16", "i", np.dtype(np.int16)),
    DType("uint16", 2, "uint16", "u", np.dtype(np.uint16)),
    DType("int8", 1, "int8", "i", np.dtype(np.int8)),
    DType("uint8", 1, "uint8", "u", np.dtype(np.uint8)),
    DType("float8_e4m3", 1, "float8_e4m3", "f", np.dtype(np.uint8),
          "IEEE-style E4M3 (Inf, NaN, maximum 240), not OCP's E4M3FN; raw bits (uint8)"),
    # NKI dtypes the simulator has no numerics for.
    DType("float4_e2m1fn_x4", 2, None, "x4", None, "MXFP4"),
    DType("tfloat32", 4, None, "f", None, "TF32 matmul inputs"),
    DType("bool_", 1, "uint8", "u", np.dtype(np.bool_), "stored as uint8"),
    DType("int64", 8, None, "i", np.dtype(np.int64), ""),
    DType("float64", 8, None, "f", np.dtype(np.float64), ""),
]

BY_NAME = {d.name: d for d in _ALL}
ALIASES = {"float8_e4m3fn_x4": "float8_e4m3fn_x4", "bool": "bool_", "fp32": "float32", "bf16": "bfloat16",
           "fp16": "float16", "float8e4": "float8_e4m3", "float8e5": "float8_e5m2", "float8_e8m0": "float8_e8m0fnu"}

_FROM_NP = {
    np.dtype(np.float32): "float32",
    np.dtype(np.float16): "float16",
    np.dtype(np.int32): "int32",
    np.dtype(np.uint32): "uint32",
    np.dtype(np.int16): "int16",
    np.dtype(np.uint16): "uint16",
    np.dtype(np.int8): "int8",
    np.dtype(np.uint8): "uint8",
    np.dtype(np.bool_): "bool_",
    np.dtype(np.int64): "int64",
    np.dtype(np.float64): "float64",
}


def as_dtype(x):
    """The DType of a dtype-like value (a DType, a NumPy dtype or type, or a name); NkiError otherwise."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        name = ALIASES.get(x, x)
        if name not in BY_NAME and x.startswith("nl."):  # the name `trnsim list` shows a dtype default by
            name = ALIASES.get(x[3:], x[3:])
        if name in BY_NAME:
            return BY_NAME[name]
        raise NkiError(f"unknown dtype {x!r}")
    try:
        d = np.dtype(x)
    except TypeError:
        raise NkiError(f"{x!r} is not a dtype") from None
    if d.metadata and d.metadata.get("nki") in BY_NAME:  # np.dtype(nl.bfloat16) and the like (DType.dtype)
        return BY_NAME[d.metadata["nki"]]
    name = _FROM_NP.get(d) or ALIASES.get(d.name, d.name)
    if name in BY_NAME:
        return BY_NAME[name]
    raise NkiError(f"dtype {d} has no NKI counterpart")


def modelled(d, what="tensor"):
    """`d` if the simulator has its numerics, else NkiUnsupported naming it."""
    if d.isa is None:
        unsupported(f"dtype nl.{d.name} (as the dtype of a {what})", d.note)
    return d


def weak_dtype(x):
    """The dtype a number operand takes in NKI's type promotion ("Weakly Typed Scalar Type Inference"): a
    Python bool, int or float is weakly typed and taken as the widest the hardware has of its kind (uint8,
    int32, float32); a NumPy number has its own dtype (np.int8(2) is int8, np.float16(2) float16), except
    that np.float64 (a Python float) and the 64-bit integers, which NKI has no engine dtype for, are weak too."""
    if isinstance(x, (bool, np.bool_)):
        return BY_NAME["uint8"]
    if isinstance(x, np.number) and x.dtype.itemsize < 8:
        return as_dtype(x.dtype)
    if isinstance(x, (float, np.floating)):
        return BY_NAME["float32"]
    return BY_NAME["uint32" if isinstance(x, np.unsignedinteger) else "int32"]  # (np.uint64: uint32)


def result_dtype(*dtypes):
    """The dtype an elementwise nl.* op returns when none is given, by NKI's type promotion rules (a number
    operand's dtype from weak_dtype): a float with integers is the float; two floats the wider, or the type
    widened to hold both ranges (float16 and bfloat16 give float32, float8_e4m3 and float8_e5m2 bfloat16);
    integers only: the smallest integer dtype holding every input's values, whatever their order (int8 and
    uint8: int16), and float32 where none does (int32 and uint32: NKI has no int64)."""
    ds = [d for d in dtypes if d is not None]
    if not ds:
        return BY_NAME["float32"]
    first = ds[0]
    if all(d is first for d in ds):
        return first
    floats = [d for d in ds if d.is_float]
    if floats:
        if len({d.itemsize for d in floats}) > 1 or len({d.name for d in floats}) == 1:
            return max(floats, key=lambda d: d.itemsize)
        # Two formats of one size: the type widened to hold both ranges (NKI Type Promotion: float16 and
        # bfloat16 give float32, float8_e4m3 and float8_e5m2 bfloat16).
        return BY_NAME["bfloat16" if floats[0].itemsize == 1 else "float32"]
    unsigned = max((d.itemsize for d in ds if d.kind == "u"), default=0)
    signed = max((d.itemsize for d in ds if d.kind == "i"), default=0)
    if not signed or not unsigned:
        return max(ds, key=lambda d: d.itemsize)  # (one signedness: the widest)
    size = signed if signed > unsigned else 2 * unsigned  # a signed type wider than every unsigned one
    return BY_NAME.get({1: "int8", 2: "int16", 4: "int32"}.get(size, ""), BY_NAME["float32"])
